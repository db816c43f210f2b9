"""Image prompts in a session: attachments -> image tokens for the context, and their transcript contents.

An image attachment is read with Pillow (a missing, unreadable or unsupported file raises ImagePromptError
naming the file and the reason), cut into the views of the model's resolution mode and run through the
model's vision tower; the session splices the resulting tokens in where the prompt's image marker is.
"""

from __future__ import annotations

import torch

from openafm.fm.errors import ImagePromptError
from openafm.fm.prompt import Attachment
from openafm.fm.transcript import image_content, text_content
from openafm.models.image_views import ImageLoadError, Resolution, load_image


def check_vision(model, components: list) -> None:
    """Before a request: a prompt holding an image needs a model with a vision tower (ImagePromptError naming
    the model, the first image and its component index, and what to run, otherwise)."""
    for i, c in enumerate(components):
        if isinstance(c, Attachment):
            try:
                model.vision_tower()
            except ImagePromptError as e:
                raise ImagePromptError(f"{e} (the {c.kind} attachment {c!r} is component [{i}])") from None
            return


def embed_images(tower, attachments: list[Attachment], mode: Resolution) -> list[torch.Tensor]:
    """Each attachment's image tokens [tokens(mode), D] in the decoder's embedding space."""
    out = []
    for a in attachments:
        try:
            image = load_image(a.path)
        except ImageLoadError as e:
            raise ImagePromptError(f"Failed to add attachment to prompt: cannot read image {e.path}: "
                                   f"{e.reason}") from None
        with torch.inference_mode():
            out.append(tower.embed_image(image, mode))
    return out


def user_contents(components: list) -> list[dict]:
    """The transcript contents of a user prompt: its text (components joined, as the model reads them), or,
    with images, one content per component (an image content records the path and label)."""
    if not any(isinstance(c, Attachment) for c in components):
        return [text_content("\n".join(components))]
    return [image_content(c.path, c.label) if isinstance(c, Attachment) else text_content(c) for c in components]
