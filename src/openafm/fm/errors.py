"""The error types of ``apple_fm_sdk``, with the same names and hierarchy.

Every class here is also an :class:`openafm.errors.OpenAFMError`, so one ``except OpenAFMError``
catches everything openafm raises on purpose. The hierarchy is the SDK's:

    FoundationModelsError
    ├── GenerationError
    │   ├── ExceededContextWindowSizeError, AssetsUnavailableError, GuardrailViolationError,
    │   ├── UnsupportedGuideError, UnsupportedLanguageOrLocaleError, DecodingFailureError,
    │   └── RateLimitedError, ConcurrentRequestsError, RefusalError
    ├── InvalidGenerationSchemaError
    │   └── GenerableDecoratorError
    └── ToolCallError
    PromptError (not a FoundationModelsError, as in the SDK)
    └── ImagePromptError

Three openafm additions refine SDK classes without changing what the SDK's ``except`` clauses
catch: :class:`GuideValueError` and :class:`ContentConversionError` are also ``ValueError`` (the
SDK raises a plain ``ValueError`` in those places).

>>> import openafm.fm as fm
>>> issubclass(fm.RefusalError, fm.GenerationError), issubclass(fm.ToolCallError, fm.GenerationError)
(True, False)
>>> from openafm.errors import OpenAFMError
>>> issubclass(fm.InvalidGenerationSchemaError, OpenAFMError)
True
>>> str(fm.ToolCallError("weather", KeyError("city")))
"Tool 'weather' failed: 'city'"
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from openafm.errors import OpenAFMError


class FoundationModelsError(OpenAFMError):
    """Base class of every Foundation Models error (``apple_fm_sdk.FoundationModelsError``)."""


class GenerationError(FoundationModelsError):
    """Base class of the errors a generation request can end with."""


class InvalidGenerationSchemaError(FoundationModelsError):
    """A generation schema cannot be built or cannot be enforced by the decoding engine.

    Raised by :meth:`GenerationSchema.to_json_schema` / ``Cls.generation_schema()`` for a field of
    an unsupported type or with contradictory guides (``minimum`` above ``maximum``, an empty
    ``anyOf`` after intersecting guides), and by :meth:`GenerationSchema.from_json_schema` for a
    raw JSON Schema using a keyword the engine (llguidance) does not enforce; the message names the
    field or keyword. Every message starts "invalid generation schema: " (as the SDK's say "Invalid generation
    schema provided: ...").

    >>> str(InvalidGenerationSchemaError("field 'Cat.born' has unsupported type date"))
    "invalid generation schema: field 'Cat.born' has unsupported type date"
    """

    PREFIX = "invalid generation schema: "

    def __init__(self, message: str = "", *args: Any):
        super().__init__(message if str(message).startswith(self.PREFIX) else self.PREFIX + str(message), *args)


class GenerableDecoratorError(InvalidGenerationSchemaError):
    """``@generable`` was applied to something it cannot make generable.

    Raised by :func:`generable` for a non-class, a class without annotated fields, a class the
    ``dataclass`` decorator rejects (for example a mutable default) or unresolvable type hints. Its message
    has no "invalid generation schema" prefix: it is about the decorator's use, not a schema.
    """

    PREFIX = ""


class GuideValueError(InvalidGenerationSchemaError, ValueError):
    """A guide was given a malformed value (openafm addition; the SDK raises ``ValueError``).

    Raised by :func:`guide` and the :class:`GenerationGuide` factories, for example for
    ``count=0``, ``anyOf="red"`` or ``range=(1, 2, 3)``; the message names the guide and the value (no
    "invalid generation schema" prefix: the SDK's message here is a plain ValueError's).
    """

    PREFIX = ""


class ExceededContextWindowSizeError(GenerationError):
    """The transcript plus the new prompt does not fit the model's context window.

    Raised by the session (``LanguageModelSession.respond`` / ``stream_response``) when the
    runtime reports :class:`openafm.errors.ContextWindowExceededError`.
    """


class AssetsUnavailableError(GenerationError):
    """The model's assets (weights, tokenizer, adapter) cannot be found or loaded.

    Raised by the model/session layer when the requested model or adapter is unavailable.
    """


class GuardrailViolationError(GenerationError):
    """A prompt or a response was blocked by the guardrails.

    Raised by the session when the guardrail check of the input or of the output fails.
    """


class UnsupportedGuideError(GenerationError):
    """A guide does not apply to the type of the field it is attached to.

    Raised when the schema of a generable type is built (``Cls.generation_schema()``, which
    ``respond(generating=Cls)`` calls), for example ``regex`` on an ``int``, ``count`` on a
    ``str`` or ``minimum`` on a ``list[int]``; the message names the field, the guide and the
    guides that would apply.
    """


class UnsupportedLanguageOrLocaleError(GenerationError):
    """The prompt's language or the requested locale is not supported by the model.

    Kept for compatibility; openafm does not raise it yet: it has no language check in front of the
    model (a prompt in any language reaches the model, which may answer poorly outside English).
    """


class DecodingFailureError(GenerationError):
    """Generated output could not be decoded into the requested structure.

    Raised by :meth:`GeneratedContent.value` / ``Cls._from_generated_content`` when content does
    not match the type (names the field), by :func:`parse_partial_json` for text that is not a
    prefix of a JSON document, and by the session when the engine's output is not valid JSON.
    """


class ContentConversionError(DecodingFailureError, ValueError):
    """A value in :class:`GeneratedContent` does not fit the field it is converted into.

    openafm addition: a :class:`DecodingFailureError` that is also a ``ValueError`` (the SDK
    raises ``ValueError`` from ``_from_generated_content``). Raised by
    :meth:`GeneratedContent.value`; the message names the field path, e.g. ``Cat.age.years``.
    """


class RateLimitedError(GenerationError):
    """The request was rate limited.

    Kept for compatibility; openafm runs models locally and never raises it (the SDK notes that
    the on-device model does not rate limit either).
    """


class ConcurrentRequestsError(GenerationError):
    """Too many requests are running on one model at once.

    Raised by the session when a request would start while ``SystemLanguageModel.max_concurrent_requests``
    requests (across all sessions using the same backing model and adapter) are already generating. A second
    request on the *same* session does not raise: it waits for the first, as in Apple's SDK.
    """


class RefusalError(GenerationError):
    """The model refused to produce the requested generable output.

    Kept for compatibility (``explanation_entries`` as in the SDK); openafm does not raise it yet. Apple's
    model has a trained refusal path inside guided generation; the open models here have none, and
    letting the grammar admit refusal text beside the schema would let a sentence that merely starts
    like a refusal ("I ...") be forced into one, so constrained output is always the schema's JSON.
    """

    def __init__(self, message: str, debug_description: str | None = None, explanation_entries: Any = None):
        super().__init__(message, debug_description)
        self.explanation_entries = explanation_entries or []


class ToolCallError(FoundationModelsError):
    """A tool's ``call`` raised; wraps the original exception.

    Raised by the session's tool-calling loop; ``tool_name`` and ``underlying_error`` say which
    tool failed and why.
    """

    def __init__(self, tool_name: str, underlying_error: BaseException):
        super().__init__(f"Tool '{tool_name}' failed: {underlying_error}")
        self.tool_name = tool_name
        self.underlying_error = underlying_error


class PromptError(OpenAFMError):
    """A prompt could not be built (``apple_fm_sdk.PromptError``; not a FoundationModelsError).

    Raised by ``respond`` / ``stream_response`` / ``token_count`` for a prompt that is not a str, an
    Attachment or a list of them; the message names the component and its position.
    """


class ImagePromptError(PromptError):
    """An image attachment could not be used (missing file, or a model without vision input).

    Raised by ``ImageAttachment(path)`` for a path that is not a file, and by ``respond`` /
    ``stream_response`` / ``token_count`` for a prompt holding an image while the model takes text only
    (every openafm model, until vision support); the message names the model and the image.
    """


class GenerationErrorCode(IntEnum):
    """Status codes of generation errors, as in the SDK (there they map C status codes)."""

    SUCCESS = 0
    EXCEEDED_CONTEXT_WINDOW_SIZE = 1
    ASSETS_UNAVAILABLE = 2
    GUARDRAIL_VIOLATION = 3
    UNSUPPORTED_GUIDE = 4
    UNSUPPORTED_LANGUAGE_OR_LOCALE = 5
    DECODING_FAILURE = 6
    RATE_LIMITED = 7
    CONCURRENT_REQUESTS = 8
    REFUSAL = 9
    INVALID_SCHEMA = 10
    UNKNOWN_ERROR = 255
