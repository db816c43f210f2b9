"""Prompts (apple_fm_sdk names): a string, an attachment, or a list mixing strings and attachments.

    Prompt          = PromptComponent | list[PromptComponent]
    PromptComponent = str | Attachment
    Attachment      an abstract non-text component with an optional label; ImageAttachment is the one kind

`respond`, `stream_response` and `SystemLanguageModel.token_count` take any `Prompt`. The session reads it with
`prompt_text`: the text components, in order, each on its own line (Swift's PromptBuilder puts each component of
a composed prompt on a line of its own). An image attachment becomes an image marker in that text
(`prompt_parts`), where the session splices in the image's tokens (openafm.models.vlm); on a model without
vision weights it raises `ImagePromptError` naming the model, the image and what to run; it is never dropped.

>>> prompt_text(["Summarise:", "The cat sat on the mat."], model="smollm2")
'Summarise:\\nThe cat sat on the mat.'
>>> prompt_text(["Describe", 3], model="smollm2")
Traceback (most recent call last):
...
openafm.fm.errors.PromptError: unsupported prompt component at [1]: int 3; a prompt component is a str or an ...
>>> ImageAttachment("/nonexistent/cat.png")
Traceback (most recent call last):
...
openafm.fm.errors.ImagePromptError: Failed to add attachment to prompt: file does not exist at /nonexistent/cat.png
"""

from __future__ import annotations

import abc
import os
from pathlib import Path

from openafm.fm.errors import ImagePromptError, PromptError
from openafm.models.vlm import image_marker

LINE = "\n"       # between the components of a composed prompt


class Attachment(abc.ABC):
    """A non-text prompt component with an optional `label` the model can refer to it by.

    Abstract, as in the SDK: use a concrete kind (`ImageAttachment`)."""

    label: str | None

    @property
    @abc.abstractmethod
    def kind(self) -> str:
        """What the attachment holds ("image"), for messages (openafm: the SDK has no such property)."""


class ImageAttachment(Attachment):
    """An image file as a prompt component. The file must exist when the attachment is made (ImagePromptError
    otherwise, as in the SDK). openafm also accepts a str path where the SDK takes a `pathlib.Path`."""

    def __init__(self, path: Path | str, label: str | None = None):
        if not isinstance(path, (str, os.PathLike)):
            raise ImagePromptError(f"Failed to add attachment to prompt: path must be a pathlib.Path or str, got "
                                   f"{type(path).__name__} {path!r}")
        if label is not None and not isinstance(label, str):
            raise ImagePromptError(f"Failed to add attachment to prompt: label must be a str or None, got "
                                   f"{type(label).__name__} {label!r}")
        path = Path(path)
        if not path.is_file():
            raise ImagePromptError(f"Failed to add attachment to prompt: file does not exist at {path}")
        self._path, self._label = path, label

    @property
    def path(self) -> Path:
        return self._path

    @property
    def label(self) -> str | None:
        return self._label

    @property
    def kind(self) -> str:
        return "image"

    def __repr__(self) -> str:
        return f"ImageAttachment({str(self._path)!r}" + (f", label={self._label!r})" if self._label else ")")


PromptComponent = str | Attachment
Prompt = PromptComponent | list[PromptComponent]


def prompt_components(prompt: Prompt) -> list[PromptComponent]:
    """The components of a prompt, in order: a str or an Attachment is one; a list (or tuple) is its items.

    Anything else, or an item that is neither a str nor an Attachment, raises PromptError naming it."""
    if isinstance(prompt, (str, Attachment)):
        return [prompt]
    if not isinstance(prompt, (list, tuple)):
        raise PromptError(f"unsupported prompt: {type(prompt).__name__} {_brief(prompt)}; a prompt is a str, an "
                          f"Attachment, or a list of them")
    for i, component in enumerate(prompt):
        if not isinstance(component, (str, Attachment)):
            raise PromptError(f"unsupported prompt component at [{i}]: {type(component).__name__} "
                              f"{_brief(component)}; a prompt component is a str or an Attachment (ImageAttachment)")
    return list(prompt)


def prompt_text(prompt: Prompt, *, model: str) -> str:
    """The text the model reads for `prompt`, on `model` (a name, for messages), which takes text only.

    An attachment raises ImagePromptError: the model has no input for it."""
    components = prompt_components(prompt)
    for i, component in enumerate(components):
        if isinstance(component, Attachment):
            raise ImagePromptError(
                f"Failed to add attachment to prompt: model {model!r} takes text only, so the {component.kind} "
                f"attachment {component!r} (component [{i}]) cannot be read here; image input needs a model with vision "
                f"weights (a session reads images through prompt_parts and the model's vision tower)")
    return LINE.join(components)


def prompt_parts(prompt: Prompt, first_image: int = 0) -> tuple[str, list[Attachment]]:
    """-> (the prompt's text with an image marker for each attachment, the attachments in order). Markers are
    numbered from `first_image` (a session numbers its images across turns)."""
    components = prompt_components(prompt)
    attachments = [c for c in components if isinstance(c, Attachment)]
    pieces, n = [], first_image
    for c in components:
        if isinstance(c, Attachment):
            if c.kind != "image":
                raise ImagePromptError(f"Failed to add attachment to prompt: {c!r} is a {c.kind} attachment; "
                                       f"openafm reads image attachments only")
            pieces.append(image_marker(n))
            n += 1
        else:
            pieces.append(c)
    return LINE.join(pieces), attachments


def _brief(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
