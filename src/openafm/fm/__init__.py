"""openafm.fm: the Foundation Models framework with the names of Apple's ``apple_fm_sdk`` (0.2.x).

Code written for the SDK runs after ``import openafm.fm as fm``. ``__all__`` holds exactly the SDK's public
names (``SDK_NAMES``) plus openafm's documented extensions (``EXTENSIONS``, a comment each).

openafm's extensions that are not names (the SDK has none of them; code written for the SDK never needs them):

    LanguageModelSession   tool_choice=; repeated_calls=; respond(include_schema_in_prompt=); stream_response of structured
                           output (generating= / schema= / json_schema=); prewarm(); last_prefill
    SystemLanguageModel    model= (which openafm model), adapter= (a file or an exported bundle), max_concurrent_requests=,
                           draft= (an fm.Draft: speculative decoding); resolution= (fm.Resolution: the image mode,
                           HIGH 720 / BALANCED 144 / RAPID 9 image tokens; default BALANCED); vision_tower();
                           unavailable_detail
    GenerationSchema       to_json_schema(), from_json_schema() (a raw JSON Schema, checked for the decoder; fit=,
                           narrowed_keywords, ignored_keywords, rewritten_keywords)
    GeneratedContent       from_partial_json() (streamed snapshots)
    Transcript             Transcript(entries), append(), entries, to_json(), len()
    ImageAttachment        a str path as well as a pathlib.Path; path and label properties
    Transcript (images)    a user entry with images holds one content per component; an image content is
                           {"type": "image", "id", "path", "label"}

Modules:

    model.py       SystemLanguageModel and its enums: the model a session runs on (loaded by openafm.checkpoint.load)
    session.py     LanguageModelSession: a conversation tied to a KV cache, respond / stream_response, tools
    generable.py   @generable: a class -> a GenerationSchema and back
    guide.py       guide() and GenerationGuide: per-field constraints (ranges, enums, regex, counts)
    schema.py      GenerationSchema: a type or a raw JSON Schema, checked for what the decoder can enforce
    jsonschema/    the JSON-Schema compiler: a raw schema -> what the engine enforces, every keyword accounted for
    content.py     GeneratedContent, GenerationID and the partial-JSON parser streaming uses
    options.py     GenerationOptions, SamplingMode
    prompt.py      Prompt, PromptComponent, Attachment, ImageAttachment: what respond takes, read as text + image markers
    images.py      image prompts in a session: attachments -> image tokens (the vision tower), transcript contents
    structured.py  StructuredDecoding: decoding-side remedies that make structured responses finish
    tool.py        Tool, the tool-call grammar and the tools prompt
    constraint.py  constraint_for: the one grammar policy of sessions and the server (tools, tool choice, schema)
    transcript.py  Transcript: a session's entries, to and from dictionaries
    adapter.py     SystemLanguageModel.Adapter: a LoRA adapter file (or exported bundle) tied to its base weights
    draft.py       Draft: a draft model directory for speculative decoding (openafm extension)
    errors.py      the SDK's error types (and openafm's few additions)
    guardrails/    the lexical safety filter behind SystemLanguageModelGuardrails
"""

from openafm.fm.adapter import Adapter
from openafm.fm.content import GeneratedContent, GenerationID, parse_partial_json
from openafm.fm.draft import Draft
from openafm.fm.errors import (
    AssetsUnavailableError,
    ConcurrentRequestsError,
    ContentConversionError,
    DecodingFailureError,
    ExceededContextWindowSizeError,
    FoundationModelsError,
    GenerableDecoratorError,
    GenerationError,
    GenerationErrorCode,
    GuardrailViolationError,
    GuideValueError,
    ImagePromptError,
    InvalidGenerationSchemaError,
    PromptError,
    RateLimitedError,
    RefusalError,
    ToolCallError,
    UnsupportedGuideError,
    UnsupportedLanguageOrLocaleError,
)
from openafm.fm.generable import ConvertibleFromGeneratedContent, ConvertibleToGeneratedContent, Generable, generable
from openafm.fm.guide import GenerationGuide, GuideType, guide
from openafm.fm.jsonschema.narrowing import SchemaFit
from openafm.fm.model import (
    SystemLanguageModel,
    SystemLanguageModelGuardrails,
    SystemLanguageModelUnavailableReason,
    SystemLanguageModelUseCase,
    SystemLanguageModelVariant,
)
from openafm.fm.options import GenerationOptions, SamplingMode, SamplingModeType
from openafm.fm.prompt import Attachment, ImageAttachment, Prompt, PromptComponent
from openafm.fm.schema import GenerationSchema, Property
from openafm.fm.session import LanguageModelSession
from openafm.fm.structured import StructuredDecoding
from openafm.fm.tool import RepeatedCalls, Tool
from openafm.fm.transcript import Transcript
from openafm.models.image_views import Resolution

SDK_NAMES = [
    "SystemLanguageModel", "LanguageModelSession", "Attachment", "ImageAttachment", "PromptComponent", "Prompt",
    "PromptError", "ImagePromptError", "Transcript",
    "SystemLanguageModelUseCase", "SystemLanguageModelGuardrails", "SystemLanguageModelUnavailableReason",
    "SystemLanguageModelVariant", "Tool", "FoundationModelsError", "GenerationError", "ExceededContextWindowSizeError",
    "AssetsUnavailableError", "GuardrailViolationError", "UnsupportedGuideError", "UnsupportedLanguageOrLocaleError",
    "InvalidGenerationSchemaError", "DecodingFailureError", "RateLimitedError", "ConcurrentRequestsError",
    "RefusalError", "ToolCallError", "GenerationErrorCode", "generable", "guide", "GenerationSchema",
    "GeneratedContent", "GenerationGuide", "GuideType", "GenerationOptions", "SamplingMode", "SamplingModeType",
    "GenerationID", "ConvertibleFromGeneratedContent", "ConvertibleToGeneratedContent", "Generable",
]
EXTENSIONS = [
    "Adapter",                  # also SystemLanguageModel.Adapter (Swift's name; the Python SDK has no adapters)
    "Draft",                    # SystemLanguageModel(draft=fm.Draft(dir)): speculative decoding with a draft model
    "ContentConversionError",   # a DecodingFailureError that is also a ValueError: content that does not fit a field
    "GenerableDecoratorError",  # @generable applied to something it cannot make generable
    "GuideValueError",          # a malformed guide value (the SDK raises a plain ValueError)
    "Property",                 # one field of a GenerationSchema, for building schemas by hand
    "parse_partial_json",       # the prefix-of-JSON parser behind streamed partial objects
    "StructuredDecoding",       # GenerationOptions(structured=...): remedies that make structured responses finish
    "SchemaFit",                # from_json_schema(fit=...): EXACT (default) or NARROWED (a subset where no exact rewrite)
    "Resolution",               # SystemLanguageModel(resolution=...): HIGH (720 image tokens), BALANCED (144), RAPID (9)
    "RepeatedCalls",            # LanguageModelSession(repeated_calls=...): REUSE (default) or CALL_AGAIN a repeated call
]
__all__ = SDK_NAMES + EXTENSIONS
