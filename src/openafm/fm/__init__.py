"""openafm.fm: the Foundation Models framework with the names of Apple's ``apple_fm_sdk`` (0.2.x).

Code written for the SDK runs after ``import openafm.fm as fm``. This module is a plain list of
imports: the typed half (errors, guides, generable types, schemas, generated content) is here;
the session, model and tool parts add their imports below.
"""

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
from openafm.fm.guide import GenerationGuide, GuideType, guide
from openafm.fm.schema import GenerationSchema, Property
from openafm.fm.content import GeneratedContent, GenerationID, parse_partial_json
from openafm.fm.generable import (
    ConvertibleFromGeneratedContent,
    ConvertibleToGeneratedContent,
    Generable,
    generable,
)
from openafm.fm.options import GenerationOptions, SamplingMode, SamplingModeType
from openafm.fm.model import (
    SystemLanguageModel,
    SystemLanguageModelGuardrails,
    SystemLanguageModelUnavailableReason,
    SystemLanguageModelUseCase,
    SystemLanguageModelVariant,
)
from openafm.fm.adapter import Adapter
from openafm.fm.transcript import Transcript
from openafm.fm.tool import Tool
from openafm.fm.session import LanguageModelSession
