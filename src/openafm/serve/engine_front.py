"""The engines the server runs (the model, and one per adapter) and the bridge from their threads to asyncio.

`Served` loads the model once (GGUF blocks kept as stored, as the front door does; float32 when adapters are
served, since adapter files are fingerprinted against the dequantized weights), attaches each
`--adapter NAME=FILE` to a copy that shares the base weights, and starts one `Engine` loop per model.
`events(engine, plan)` submits a plan's n choices as engine rows and yields `(choice, RowEvent)` pairs as
the engine thread produces them, or `None` every `tick` seconds with nothing new, so a caller can notice a
client that went away. Leaving the iteration early (a disconnect, an error) cancels every row it submitted:
the engine drops them before its next step and their rows are free again. A plan with images is first prefilled
through its last image in a worker thread (serve.images.prefill); its rows continue that cache.

What a request that sets no sampling gets is the `DefaultSampling` kind: the model's recommended sampling
(checkpoint/sampling.py; adapters take their base's), or OpenAI's defaults; `ServedModel.sampling` holds the one
applied.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import threading
from pathlib import Path
from typing import AsyncIterator

from openafm.api import DEFAULT_MODEL, load
from openafm.checkpoint.sampling import RecommendedSampling
from openafm.fm.adapter import Adapter
from openafm.fm.model import tower_for
from openafm.runtime.engine import Engine, EngineBusy, EngineConfig, RowEvent, RowRequest
from openafm.runtime.cancel import CancelToken
from openafm.runtime.draft import DraftModel
from openafm.runtime.constrained import ll_tokenizer
from openafm.serve.images import prefill
from openafm.serve.protocol import OPENAI_SAMPLING, Plan, RequestError


class DefaultSampling(enum.Enum):
    """What a request that leaves temperature / top_p unset gets."""

    MODEL = "model"       # the served model's recommended sampling, where it has one; else OpenAI's
    OPENAI = "openai"     # OpenAI's: temperature 1, no top-p cut (word salad from a tiny model)


@dataclasses.dataclass
class ServedModel:
    name: str
    engine: Engine
    tokenizer: object
    kind: str                  # "model" or "adapter"
    source: str
    sampling: RecommendedSampling = OPENAI_SAMPLING     # what a request that sets no sampling gets


class Served:
    """The models a server runs: a loaded LanguageModel (`openafm.load`) and adapters by name."""

    def __init__(self, lm, adapters: dict[str, str | Path] | None = None, config: EngineConfig = EngineConfig(),
                 draft: DraftModel | None = None, sampling: DefaultSampling = DefaultSampling.MODEL):
        """draft: the draft model `ProposerKind.DRAFT` rows guess with (every served model's engine holds it)."""
        if lm.tokenizer is None:
            raise ValueError(f"model {lm.name!r} has no tokenizer: the server needs one")
        self.config = config
        self.base = lm
        applied = lm.sampling if DefaultSampling(sampling) is DefaultSampling.MODEL and lm.sampling else OPENAI_SAMPLING
        self.models: dict[str, ServedModel] = {
            lm.name: ServedModel(lm.name, Engine(lm.model, lm.tokenizer, config, draft=draft), lm.tokenizer, "model",
                                 str(lm.source), applied)}
        for name, file in (adapters or {}).items():
            if name in self.models:
                raise ValueError(f"adapter name {name!r} is already served; give each adapter its own name")
            adapted = Adapter(file).attach(lm.model)
            self.models[name] = ServedModel(name, Engine(adapted, lm.tokenizer, config, draft=draft), lm.tokenizer,
                                            "adapter", str(file), applied)

    @classmethod
    def load(cls, model: str = DEFAULT_MODEL, adapters: dict[str, str | Path] | None = None,
             config: EngineConfig = EngineConfig(), weights: str = "auto") -> "Served":
        """weights="auto": a GGUF's blocks kept as stored, or float32 when adapters are given (an adapter file
        records the fingerprint of the dequantized weights it was trained on, so it attaches to those)."""
        return cls(load(model, weights=served_weights(weights, adapters)), adapters, config)

    def vision_tower(self):
        """The served model's vision tower, which its adapters read images with too (fm's, loaded once);
        ImagePromptError, saying what to run, where it has none."""
        return tower_for(self.base.name, self.base.model)

    @property
    def default(self) -> ServedModel:
        return next(iter(self.models.values()))

    def start(self, warm: bool = True) -> "Served":
        """Start every engine loop; warm=True runs one token through each first (the fused step and the
        grammar engine's tokenizer are built then, not on a client's first request)."""
        for m in self.models.values():
            m.engine.start()
            if warm:
                done = threading.Event()
                m.engine.submit(RowRequest(m.tokenizer.encode("Hello"), 2,
                                           lambda e: done.set() if e.finish is not None else None))
                ll_tokenizer(m.tokenizer)
                done.wait()
        return self

    def stop(self) -> None:
        for m in self.models.values():
            m.engine.stop()

    def get(self, name: str) -> ServedModel:
        if name not in self.models:
            raise RequestError(f"the model {name!r} does not exist; this server serves {sorted(self.models)}",
                               "model", status=404, code="model_not_found")
        return self.models[name]

    @property
    def waiting(self) -> int:
        return sum(m.engine.waiting for m in self.models.values())

    @property
    def running(self) -> int:
        return sum(m.engine.running for m in self.models.values())


def served_weights(weights: str, adapters: dict | None) -> str:
    return "float32" if weights == "auto" and adapters else weights


async def events(engine: Engine, plan: Plan, *, tick: float = 0.25
                 ) -> AsyncIterator[tuple[int, RowEvent] | None]:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    cancels = [CancelToken() for _ in range(plan.n)]
    if engine.waiting + plan.n > engine.config.max_queue:
        raise RequestError(f"the server is busy: {engine.waiting} requests are waiting (max_queue="
                           f"{engine.config.max_queue}); retry later", None, status=429, kind="rate_limit_error",
                           code="rate_limit_exceeded")
    prompt, caches, history = plan.prompt, [None] * plan.n, ()
    if plan.images:
        prefix = await asyncio.to_thread(prefill, engine, plan.prompt_text, plan.images, plan.tower, plan.n)
        prompt, caches, history = prefix.prompt, prefix.caches, prefix.history
    try:
        for i in range(plan.n):
            req = RowRequest(prompt, plan.max_tokens,
                             lambda e, i=i: loop.call_soon_threadsafe(queue.put_nowait, (i, e)),
                             sampling=plan.sampling[i], stop=plan.stop,
                             constraint=plan.constraint() if plan.constraint is not None else None,
                             logprobs=plan.logprobs, cancel=cancels[i], cache=caches[i], history=history)
            engine.submit(req)
    except EngineBusy as e:
        for c in cancels:
            c.cancel()
        raise RequestError(f"the server is busy: {e}; retry later", None, status=429, kind="rate_limit_error",
                           code="rate_limit_exceeded") from None
    left = plan.n
    try:
        while left:
            try:
                item = await asyncio.wait_for(queue.get(), tick)
            except asyncio.TimeoutError:
                yield None
                continue
            if item[1].finish is not None:
                left -= 1
            yield item
    finally:
        for c in cancels:
            c.cancel()
