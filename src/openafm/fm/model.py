"""`SystemLanguageModel`: the model a session runs on (apple_fm_sdk names), backed by an openafm model.

On Linux there is no system model: `SystemLanguageModel(model=...)` names the openafm model to use
(default: the embedded SmolLM2-135M-Instruct). Models are loaded on first use and shared by every
`SystemLanguageModel` naming them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import threading

DEFAULT_MODEL = "smollm2-135m-instruct"
_LOADED: dict[str, object] = {}
_LOAD_LOCK = threading.Lock()


class SystemLanguageModelUnavailableReason(enum.IntEnum):
    APPLE_INTELLIGENCE_NOT_ENABLED = 0
    DEVICE_NOT_ELIGIBLE = 1
    MODEL_NOT_READY = 2
    UNKNOWN = 0xFF


class SystemLanguageModelUseCase(enum.IntEnum):
    GENERAL = 0
    CONTENT_TAGGING = 1


class SystemLanguageModelGuardrails(enum.IntEnum):
    """DEFAULT checks prompts and outputs; PERMISSIVE_CONTENT_TRANSFORMATIONS relaxes checks for material
    the user asks to transform (see openafm.fm.guardrails for exactly what it relaxes)."""

    DEFAULT = 0
    PERMISSIVE_CONTENT_TRANSFORMATIONS = 1


@dataclasses.dataclass(frozen=True)
class SystemLanguageModelVariant:
    display_name: str


class SystemLanguageModel:
    def __init__(self, use_case: SystemLanguageModelUseCase = SystemLanguageModelUseCase.GENERAL,
                 guardrails: SystemLanguageModelGuardrails = SystemLanguageModelGuardrails.DEFAULT, *,
                 model: str = DEFAULT_MODEL):
        if not isinstance(use_case, SystemLanguageModelUseCase):
            raise ValueError(f"use_case must be a SystemLanguageModelUseCase, got {use_case!r}")
        if not isinstance(guardrails, SystemLanguageModelGuardrails):
            raise ValueError(f"guardrails must be a SystemLanguageModelGuardrails, got {guardrails!r}")
        self.use_case, self.guardrails, self.model_name = use_case, guardrails, model
        self._unavailable: str | None = None

    def language_model(self):
        """The loaded openafm LanguageModel (loads on first use; shared across instances)."""
        with _LOAD_LOCK:
            if self.model_name not in _LOADED:
                import openafm
                lm = openafm.load(self.model_name)
                if lm.tokenizer is None:
                    raise ValueError(f"model {self.model_name!r} has no tokenizer; a session needs one")
                _LOADED[self.model_name] = lm
            return _LOADED[self.model_name]

    def is_available(self) -> tuple[bool, SystemLanguageModelUnavailableReason | None]:
        """(True, None) when the backing model loads; (False, MODEL_NOT_READY) when its files are missing."""
        from openafm.errors import OpenAFMError
        try:
            self.language_model()
        except (OpenAFMError, ValueError, ImportError) as e:
            self._unavailable = str(e)
            return False, SystemLanguageModelUnavailableReason.MODEL_NOT_READY
        return True, None

    @property
    def unavailable_detail(self) -> str | None:
        """Why the last is_available() said False (openafm extension)."""
        return self._unavailable

    @property
    def context_size(self) -> int:
        return self.language_model().context_window

    @property
    def variant(self) -> SystemLanguageModelVariant:
        return SystemLanguageModelVariant(display_name=f"openafm {self.model_name}")

    async def token_count(self, value=None, *, instructions: str | None = None) -> int:
        """Tokens a prompt, instructions, a GenerationSchema, a Transcript or a list of Tools would use."""
        from openafm.fm.schema import GenerationSchema
        from openafm.fm.transcript import Transcript, entry_text
        if (value is None) == (instructions is None):
            raise ValueError("token_count() takes either a value or instructions, not both or neither")
        if instructions is not None:
            text = instructions
        elif isinstance(value, str):
            text = value
        elif isinstance(value, GenerationSchema):
            import json
            text = json.dumps(value.to_json_schema())
        elif isinstance(value, Transcript):
            text = "".join(entry_text(e) for e in value.entries)
        elif isinstance(value, list):
            from openafm.fm.tool import tools_prompt
            text = tools_prompt(value)
        else:
            raise ValueError(f"token_count() cannot count a {type(value).__name__}")
        lm = await asyncio.to_thread(self.language_model)
        return len(lm.tokenizer.encode(text))
