"""The error types have the SDK's names and hierarchy (apple/python-apple-fm-sdk, src/apple_fm_sdk/errors.py
and prompt.py, v0.2.1), are OpenAFMErrors, and keep the SDK's constructor signatures."""

import pytest

import openafm.fm as fm
from openafm.errors import OpenAFMError

# Every error class the SDK exports, with its base class there.
SDK_PARENT = {
    "FoundationModelsError": Exception,
    "GenerationError": "FoundationModelsError",
    "InvalidGenerationSchemaError": "FoundationModelsError",
    "ExceededContextWindowSizeError": "GenerationError",
    "AssetsUnavailableError": "GenerationError",
    "GuardrailViolationError": "GenerationError",
    "UnsupportedGuideError": "GenerationError",
    "UnsupportedLanguageOrLocaleError": "GenerationError",
    "DecodingFailureError": "GenerationError",
    "RateLimitedError": "GenerationError",
    "ConcurrentRequestsError": "GenerationError",
    "RefusalError": "GenerationError",
    "ToolCallError": "FoundationModelsError",
    "PromptError": Exception,
    "ImagePromptError": "PromptError",
}


def sdk_ancestors(name: str) -> set[str]:
    parent = SDK_PARENT[name]
    return set() if parent is Exception else {parent} | sdk_ancestors(parent)


@pytest.mark.parametrize("name", sorted(SDK_PARENT))
def test_each_sdk_error_exists_with_the_sdk_ancestors_and_no_others(name):
    cls = getattr(fm, name)
    assert issubclass(cls, Exception) and issubclass(cls, OpenAFMError)
    ours = {other for other in SDK_PARENT if other != name and issubclass(cls, getattr(fm, other))}
    assert ours == sdk_ancestors(name)


def test_openafm_refinements_stay_catchable_as_the_sdk_raised_them():
    # the SDK raises ValueError from guide() and from _from_generated_content
    assert issubclass(fm.GuideValueError, fm.InvalidGenerationSchemaError) and issubclass(fm.GuideValueError, ValueError)
    assert issubclass(fm.ContentConversionError, fm.DecodingFailureError)
    assert issubclass(fm.ContentConversionError, ValueError)
    assert issubclass(fm.GenerableDecoratorError, fm.InvalidGenerationSchemaError)


def test_refusal_and_tool_call_errors_keep_the_sdk_constructors():
    refusal = fm.RefusalError("Model refused", "debug text", explanation_entries=["entry"])
    assert refusal.args == ("Model refused", "debug text") and refusal.explanation_entries == ["entry"]
    assert fm.RefusalError("no").explanation_entries == []
    cause = RuntimeError("timeout")
    err = fm.ToolCallError("getWeather", cause)
    assert (err.tool_name, err.underlying_error, str(err)) == ("getWeather", cause, "Tool 'getWeather' failed: timeout")


def test_generation_error_codes_match_the_sdk():
    codes = {c.name: c.value for c in fm.GenerationErrorCode}
    assert codes == {"SUCCESS": 0, "EXCEEDED_CONTEXT_WINDOW_SIZE": 1, "ASSETS_UNAVAILABLE": 2,
                     "GUARDRAIL_VIOLATION": 3, "UNSUPPORTED_GUIDE": 4, "UNSUPPORTED_LANGUAGE_OR_LOCALE": 5,
                     "DECODING_FAILURE": 6, "RATE_LIMITED": 7, "CONCURRENT_REQUESTS": 8, "REFUSAL": 9,
                     "INVALID_SCHEMA": 10, "UNKNOWN_ERROR": 255}


@pytest.mark.parametrize("name", sorted(SDK_PARENT))
def test_each_error_documents_what_raises_it(name):
    doc = getattr(fm, name).__doc__
    assert doc and len(doc.split()) >= 8, f"{name} needs a docstring saying when it is raised"
