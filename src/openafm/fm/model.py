"""`SystemLanguageModel`: the model a session runs on (apple_fm_sdk names), backed by an openafm model.

On Linux there is no system model: `SystemLanguageModel(model=...)` names the openafm model to use
(default: the embedded SmolLM2-135M-Instruct). Models are loaded on first use and shared by every
`SystemLanguageModel` naming them. An optional `adapter` (a LoRA adapter file, see `openafm.fm.adapter`)
is attached to a copy that shares the base weights, so adapted and plain sessions run side by side.

At most `max_concurrent_requests` requests generate at once on one backing model (plus adapter), across
sessions; one more raises `ConcurrentRequestsError` (Apple's "too many concurrent requests"). Sessions of one
backing model (and draft) decode through one engine (`engine()`, runtime.engine), so requests that run at the
same time share its batch: each decode step serves all of them.

Weights (openafm extension): `weights=` says how a GGUF model's blocks are held, as `openafm.load` takes it
("auto", the default: the blocks as stored with float32 activations; "native-int8": activations rounded to int8
per block as llama.cpp computes, faster and less exact; "float32"). Each choice loads its own copy.

Images (openafm extension): `resolution=` picks the mode an image prompt runs in ("high": 720 image tokens,
"balanced": 144, "rapid": 9, the default, where the shipped tower answers best; openafm.models.image_views). The
vision tower (encoder + adapter) of the default model ships in the package (openafm.checkpoint.vision); a model
without one raises ImagePromptError on an image prompt, saying so and what to run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import json
import threading
import warnings

from openafm.checkpoint.load import Weights, load_model, parse_weights
from openafm.checkpoint.packaged import DEFAULT_MODEL
from openafm.checkpoint.vision import TRAIN_HINT, packaged_tower, shipped_towers
from openafm.errors import OpenAFMError
from openafm.fm.adapter import Adapter
from openafm.fm.draft import Draft
from openafm.fm.errors import ConcurrentRequestsError, ImagePromptError
from openafm.fm.prompt import prompt_parts
from openafm.fm.schema import GenerationSchema
from openafm.fm.tool import Tool, tools_prompt
from openafm.fm.transcript import Transcript, entry_text
from openafm.models.image_views import DEFAULT_RESOLUTION, Resolution, resolution as as_resolution
from openafm.models.vlm import split_markers
from openafm.runtime.engine import Engine, EngineConfig
from openafm.runtime.language_model import LanguageModel

DEFAULT_MAX_CONCURRENT_REQUESTS = 4
_LOADED: dict[tuple, object] = {}        # (model name, weights, adapter key or None) -> LanguageModel
_TOWERS: dict[str, object] = {}          # model name -> its VisionTower (or None: it has none)
_LOAD_LOCK = threading.Lock()
_DRAFTS: dict[tuple, object] = {}        # (model key, draft key) -> runtime DraftModel
_ENGINES: dict[tuple, Engine] = {}       # (model key, draft key or None) -> the started engine sessions share
ENGINE_ROWS = 16                         # rows the shared engine decodes together (more requests wait for a row)
PREFIX_PROMPTS = 64                      # first-turn prompts whose K/V the shared engine keeps for sessions to share
_RUNNING: dict[tuple, int] = {}          # same keys -> requests generating now
_RUN_LOCK = threading.Lock()


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


def tower_for(model_name: str, decoder=None):
    """The vision tower of a backing model (loaded once, shared by its sessions and `openafm serve`);
    ImagePromptError, saying what to run, if it has none. decoder: the loaded model, whose token embeddings must be
    the ones the tower was trained for (checked when the tower first loads; CheckpointError otherwise)."""
    with _LOAD_LOCK:
        if model_name not in _TOWERS:
            _TOWERS[model_name] = packaged_tower(model_name, decoder)
        tower = _TOWERS[model_name]
    if tower is None:
        raise ImagePromptError(f"Failed to add attachment to prompt: model {model_name!r} has no vision "
                               f"weights, so it cannot read images. openafm ships them for "
                               f"{sorted(shipped_towers())} only; build them with: {TRAIN_HINT}")
    return tower


def _use_case(value) -> SystemLanguageModelUseCase:
    """A use case; an integer code the SDK does not know becomes GENERAL with a warning, as Apple's framework does
    ("Unknown SystemLanguageModel use case N, defaulting to .general"). Not an integer code: ValueError."""
    if isinstance(value, SystemLanguageModelUseCase):
        return value
    code = getattr(value, "value", value)                 # the SDK passes `use_case.value` to the framework
    if isinstance(code, bool) or not isinstance(code, int):
        raise ValueError(f"use_case must be a SystemLanguageModelUseCase, got {value!r}")
    if code in SystemLanguageModelUseCase._value2member_map_:
        return SystemLanguageModelUseCase(code)
    warnings.warn(f"Unknown SystemLanguageModel use case {value!r}, defaulting to GENERAL (known: "
                  f"{', '.join(f'{m.name}={m.value}' for m in SystemLanguageModelUseCase)})", stacklevel=3)
    return SystemLanguageModelUseCase.GENERAL


class SystemLanguageModel:
    Adapter = Adapter

    def __init__(self, use_case: SystemLanguageModelUseCase = SystemLanguageModelUseCase.GENERAL,
                 guardrails: SystemLanguageModelGuardrails = SystemLanguageModelGuardrails.DEFAULT,
                 adapter: Adapter | None = None, *, model: str = DEFAULT_MODEL,
                 max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS, draft: Draft | None = None,
                 resolution: Resolution | str = DEFAULT_RESOLUTION, weights: Weights | str = Weights.AUTO):
        use_case = _use_case(use_case)
        self.weights = parse_weights(weights)
        self.resolution = as_resolution(resolution)
        if draft is None and adapter is not None and adapter.draft_directory is not None:
            draft = Draft(adapter.draft_directory)              # an exported bundle brings its matched draft
        if draft is not None and not isinstance(draft, Draft):
            raise ValueError(f"draft must be an fm.Draft (a draft directory), got {type(draft).__name__}")
        self.draft = draft
        if not isinstance(guardrails, SystemLanguageModelGuardrails):
            raise ValueError(f"guardrails must be a SystemLanguageModelGuardrails, got {guardrails!r}")
        if adapter is not None and not isinstance(adapter, Adapter):
            raise ValueError(f"adapter must be a SystemLanguageModel.Adapter, got {type(adapter).__name__}")
        if not isinstance(max_concurrent_requests, int) or max_concurrent_requests < 1:
            raise ValueError(f"max_concurrent_requests must be a positive int, got {max_concurrent_requests!r}")
        self.use_case, self.guardrails, self.model_name = use_case, guardrails, model
        self.adapter, self.max_concurrent_requests = adapter, max_concurrent_requests
        self._unavailable: str | None = None

    @property
    def _key(self) -> tuple:
        return self.model_name, self.weights, self.adapter.key if self.adapter is not None else None

    def language_model(self):
        """The loaded openafm LanguageModel (loads on first use; shared across instances)."""
        with _LOAD_LOCK:
            base_key = (self.model_name, self.weights, None)
            if base_key not in _LOADED:
                lm = LanguageModel.of(load_model(self.model_name, weights=self.weights))   # "auto": as serve runs
                if lm.tokenizer is None:
                    raise ValueError(f"model {self.model_name!r} has no tokenizer; a session needs one")
                _LOADED[base_key] = lm
            if self._key not in _LOADED:
                base = _LOADED[base_key]
                _LOADED[self._key] = LanguageModel(self.adapter.attach(base.model), base.tokenizer,
                                                   name=f"{base.name}+adapter", source=str(self.adapter.file_url))
            return _LOADED[self._key]

    def draft_model(self):
        """The runtime draft beside the loaded model, or None (openafm extension: speculative decoding)."""
        if self.draft is None:
            return None
        lm = self.language_model()
        with _LOAD_LOCK:
            key = (self._key, self.draft.key)
            if key not in _DRAFTS:
                _DRAFTS[key] = self.draft.load(lm)
            return _DRAFTS[key]

    def engine(self) -> Engine:
        """The engine every session of this backing model (and draft) decodes on: started on first use, shared."""
        lm, draft = self.language_model(), self.draft_model()
        with _LOAD_LOCK:
            key = (self._key, self.draft.key if self.draft is not None else None)
            if key not in _ENGINES:
                config = EngineConfig(max_batch=ENGINE_ROWS, max_queue=1024, max_context=lm.model.kv_plan.max_seq_len,
                                      # a session's later turns continue its own cache; a first turn starts
                                      # from the K/V of instructions another session already prefilled
                                      prefix_cache=PREFIX_PROMPTS,
                                      draft_gamma=self.draft.gamma if self.draft is not None else 4)
                _ENGINES[key] = Engine(lm.model, lm.tokenizer, config, draft=draft).start()
            return _ENGINES[key]

    def vision_tower(self):
        """The model's vision tower (encoder + adapter; loaded once, shared); ImagePromptError if it has none."""
        return tower_for(self.model_name, self.language_model().model if self.model_name not in _TOWERS else None)

    @contextlib.contextmanager
    def admitted(self):
        """Count one generating request against max_concurrent_requests for the whole request."""
        key = self._key
        with _RUN_LOCK:
            running = _RUNNING.get(key, 0)
            if running >= self.max_concurrent_requests:
                raise ConcurrentRequestsError(
                    f"{running} requests are already generating on model {self.model_name!r}"
                    f"{' with its adapter' if self.adapter else ''} (max_concurrent_requests="
                    f"{self.max_concurrent_requests}); wait for one to finish or raise the limit")
            _RUNNING[key] = running + 1
        try:
            yield
        finally:
            with _RUN_LOCK:
                _RUNNING[key] -= 1

    def is_available(self) -> tuple[bool, SystemLanguageModelUnavailableReason | None]:
        """(True, None) when the backing model loads; (False, MODEL_NOT_READY) when its files are missing."""
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
        suffix = f" + adapter {self.adapter.file_url.name}" if self.adapter is not None else ""
        return SystemLanguageModelVariant(display_name=f"openafm {self.model_name}{suffix}")

    async def token_count(self, value=None, *, instructions: str | None = None) -> int:
        """Tokens a prompt (a str, an Attachment or a list of them), instructions, a GenerationSchema, a
        Transcript or a list of Tools would use. A list is Tools when every item is a Tool, else a prompt (as
        the SDK reads it), so a list mixing both raises PromptError naming the Tool."""
        if (value is None) == (instructions is None):
            raise ValueError("token_count() takes either a value or instructions, not both or neither")
        if instructions is not None:
            text = instructions
        elif isinstance(value, GenerationSchema):
            text = json.dumps(value.to_json_schema())
        elif isinstance(value, Transcript):
            text = "".join(entry_text(e) for e in value.entries)
        elif isinstance(value, list) and value and all(isinstance(t, Tool) for t in value):
            text = tools_prompt(value)
        else:
            text, images = prompt_parts(value)
            if images:                  # each image costs the tokens of this model's resolution mode
                tower = await asyncio.to_thread(self.vision_tower)
                lm = await asyncio.to_thread(self.language_model)
                return (len(images) * tower.tokens(self.resolution)
                        + sum(len(lm.tokenizer.encode(p)) for p in split_markers(text) if isinstance(p, str)))
        lm = await asyncio.to_thread(self.language_model)
        return len(lm.tokenizer.encode(text))
