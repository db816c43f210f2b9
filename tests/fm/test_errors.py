"""The error types have the SDK's names and hierarchy (apple/python-apple-fm-sdk, src/apple_fm_sdk/errors.py
and prompt.py, v0.2.1), are OpenAFMErrors, and keep the SDK's constructor signatures."""

import asyncio
import datetime
import enum
import warnings

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


# ---- errors raised where and as the SDK raises them (apple tests/test_error_handling.py and the SDK's source) ----

def test_json_schema_that_is_not_a_dict_or_not_json_raises_as_the_sdk():
    session = fm.LanguageModelSession()
    prompt = "Generate the date of my cat's birthday"
    with pytest.raises(TypeError, match=r"json_schema is not JSON serializable: json_schema\['unexpected_field'\]: "
                                        r"date 2024-02-29"):
        asyncio.run(session.respond(prompt, json_schema={"unexpected_field": datetime.date(2024, 2, 29)}))
    for text in ('{"key1": "value1", "key2": 42}', "Just a plain string, not JSON"):
        with pytest.raises(fm.GenerationError, match="json_schema has the wrong format: it must be a dict .* got str"):
            asyncio.run(session.respond(prompt, json_schema=text))
    assert len(session.transcript) == 0 and session._conversation is None


def test_an_unsupported_field_type_says_invalid_generation_schema():
    @fm.generable()
    class DateExample:
        date: datetime.date

    with pytest.raises(fm.InvalidGenerationSchemaError,
                       match="^invalid generation schema: field 'DateExample.date' has unsupported type date"):
        DateExample.generation_schema().to_dict()
    with pytest.raises(fm.InvalidGenerationSchemaError, match="^invalid generation schema: a JSON Schema must be"):
        fm.GenerationSchema.from_json_schema("{}")


def test_an_unknown_use_case_falls_back_to_general_with_a_warning():
    class Other(enum.IntEnum):
        SUMMARY = 7
        TAGS = 1

    with pytest.warns(UserWarning, match=r"Unknown SystemLanguageModel use case 7, defaulting to GENERAL"):
        assert fm.SystemLanguageModel(use_case=7).use_case is fm.SystemLanguageModelUseCase.GENERAL
    with pytest.warns(UserWarning, match=r"use case <Other.SUMMARY: 7>"):
        assert fm.SystemLanguageModel(use_case=Other.SUMMARY).use_case is fm.SystemLanguageModelUseCase.GENERAL
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # a code the framework knows: no warning
        assert fm.SystemLanguageModel(use_case=Other.TAGS).use_case is fm.SystemLanguageModelUseCase.CONTENT_TAGGING
        assert fm.SystemLanguageModel().use_case is fm.SystemLanguageModelUseCase.GENERAL
    with pytest.raises(ValueError, match="use_case must be a SystemLanguageModelUseCase, got 'general'"):
        fm.SystemLanguageModel(use_case="general")
