"""`openafm.fm.__all__` is exactly apple_fm_sdk's public names that openafm has, plus its documented extensions."""

import types

import openafm.fm as fm

# apple_fm_sdk's __all__ (src/apple_fm_sdk/__init__.py of apple/python-apple-fm-sdk), copied as the reference.
APPLE_ALL = [
    "SystemLanguageModel", "LanguageModelSession", "Attachment", "ImageAttachment", "PromptComponent", "Prompt",
    "PromptError", "ImagePromptError", "Transcript", "SystemLanguageModelUseCase", "SystemLanguageModelGuardrails",
    "SystemLanguageModelUnavailableReason", "SystemLanguageModelVariant", "Tool", "FoundationModelsError",
    "GenerationError", "ExceededContextWindowSizeError", "AssetsUnavailableError", "GuardrailViolationError",
    "UnsupportedGuideError", "UnsupportedLanguageOrLocaleError", "InvalidGenerationSchemaError",
    "DecodingFailureError", "RateLimitedError", "ConcurrentRequestsError", "RefusalError", "ToolCallError",
    "GenerationErrorCode", "generable", "guide", "GenerationSchema", "GeneratedContent", "GenerationGuide",
    "GuideType", "GenerationOptions", "SamplingMode", "SamplingModeType", "GenerationID",
    "ConvertibleFromGeneratedContent", "ConvertibleToGeneratedContent", "Generable",
]
NOT_YET: set[str] = set()    # SDK names openafm does not have yet: none


def test_all_is_the_sdk_names_plus_the_documented_extensions():
    assert set(fm.SDK_NAMES) == set(APPLE_ALL) - NOT_YET
    assert not set(fm.EXTENSIONS) & set(APPLE_ALL)
    assert sorted(fm.__all__) == sorted(fm.SDK_NAMES + fm.EXTENSIONS) and len(set(fm.__all__)) == len(fm.__all__)


def test_every_name_resolves_and_nothing_public_is_left_out():
    assert [n for n in fm.__all__ if not hasattr(fm, n)] == []
    public = {n for n, v in vars(fm).items() if not n.startswith("_") and not isinstance(v, types.ModuleType)}
    assert public - set(fm.__all__) == {"SDK_NAMES", "EXTENSIONS"}


def test_each_extension_is_documented_in_the_package_docstring_or_its_comment():
    source = open(fm.__file__, encoding="utf-8").read()
    for name in fm.EXTENSIONS:
        line = next(l for l in source.splitlines() if l.strip().startswith(f'"{name}",'))
        assert "#" in line and len(line.split("#", 1)[1].strip()) > 10, f"extension {name} has no comment saying what it is"
