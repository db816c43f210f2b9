"""An append-only conversation whose KV cache persists across turns.

The conversation is a token sequence; text is appended (tokenized on its own) and generation appends the
model's tokens. The KV cache always holds a prefix of the sequence, so each turn prefills only the tokens
added since the last one. A turn is one engine request (runtime.engine) that continues the cache: on the
conversation's own engine in this thread, or on an engine other conversations of the model share (fm sessions:
their turns decode in one batch), which hands the cache back when the turn ends. A cancelled generation (its
CancelToken, checked between steps) leaves the cache holding whole steps, and a rollback rewinds it, so the
next turn still prefills only its new tokens. If a generation fails part-way for another reason, the cache is
dropped, not trusted: the next turn rebuilds it from the token history, so no state is lost or corrupted.

Images join the sequence as spans of placeholder tokens with their embeddings (`append_image`, from
openafm.models.vlm's vision tower): they are prefilled once, through `Decoder.forward(embeds=)`, and then
sit in the KV cache like text; the text they stand for in `text` is whatever marker the caller gives.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch

from openafm.models.decoder import Logits
from openafm.models.vlm import IMAGE_PLACEHOLDER, ImageSpan, splice
from openafm.runtime.cancel import CancelToken
from openafm.runtime.draft import DraftModel
from openafm.runtime.engine import Engine, EngineConfig
from openafm.runtime.generate import Generation, GenerationStats, TokenEvent
from openafm.runtime.kv_cache import KVCache, Sliding
from openafm.runtime.proposers import ProposerKind
from openafm.runtime.request import CANCELLED, ERROR, Completion, RowRequest
from openafm.runtime.sampling import SamplingParams


@dataclasses.dataclass
class TurnCounters:
    prefilled_tokens: int = 0       # tokens run through prefill this turn (the new ones only)
    cached_tokens: int = 0          # tokens already in the KV cache when the turn started
    generated_tokens: int = 0


class Conversation:
    def __init__(self, model, tokenizer, *, engine: Engine | None = None, draft: DraftModel | None = None,
                 gamma: int = 4):
        """engine: the engine turns decode on (a started one shared with other conversations of `model`); None:
        the conversation's own, run in the calling thread. draft: turns speculate with this draft model's
        guesses (on the conversation's own engine; a shared engine brings its own draft)."""
        if engine is not None and engine.model is not model:
            raise ValueError("the engine runs another model than the conversation's")
        if engine is not None and draft is not None:
            raise ValueError("a shared engine brings its own draft: give the draft to the engine")
        self.model, self.tokenizer = model, tokenizer
        self.engine = engine if engine is not None else Engine(
            model, tokenizer, EngineConfig(max_batch=1, max_context=model.kv_plan.max_seq_len, prefix_cache=0,
                                           draft_gamma=gamma), draft=draft)
        self.speculate = ProposerKind.DRAFT if self.engine.draft is not None else None
        self.tokens: list[int] = []     # the whole conversation, in order
        self.text = ""                  # what those tokens stand for, as appended
        self.cache: KVCache | None = None
        self.images: list[ImageSpan] = []   # image spans of `tokens` (row 0), in order
        self.last_turn = TurnCounters()
        self.last_stats = GenerationStats()     # the last turn's figures (speculation's guesses among them)
        self.total_prefilled = 0

    @property
    def cached(self) -> int:
        return self.cache.steps if self.cache is not None else 0

    def append_text(self, text: str) -> list[int]:
        ids = self.tokenizer.encode(text)
        self.tokens += ids
        self.text += text
        return ids

    def append_image(self, embeds: torch.Tensor, marker: str) -> int:
        """Append an image: len(embeds) placeholder tokens whose inputs are `embeds` [n, D]; `marker` is the
        text it stands for in `text`. Returns the number of tokens."""
        self.images.append(ImageSpan(row=0, start=len(self.tokens), embeds=embeds.detach()))
        self.tokens += [IMAGE_PLACEHOLDER] * embeds.shape[0]
        self.text += marker
        return embeds.shape[0]

    def mark(self) -> tuple[int, int]:
        """A point to roll back to (tokens, text length)."""
        return len(self.tokens), len(self.text)

    def rollback(self, mark: tuple[int, int]) -> None:
        """Forget everything after `mark`; a cache holding any of it is rewound to the mark, or dropped (rebuilt
        next turn) where it cannot be (a sliding-window ring that wrapped)."""
        n_tokens, n_text = mark
        del self.tokens[n_tokens:]
        self.text = self.text[:n_text]
        self.images = [s for s in self.images if s.end <= n_tokens]
        self._trim_cache(n_tokens)

    def _trim_cache(self, n_tokens: int) -> None:
        """Keep the cache a prefix of the first n_tokens tokens: rewind it, or drop it where it cannot be."""
        if self.cache is not None and self.cache.steps > n_tokens:
            if self.cache.can_rewind(n_tokens):
                self.cache.rewind(n_tokens)
            else:
                self.cache = None

    def prefill(self) -> int:
        """Run the tokens not yet cached through the model (no generation); returns how many."""

        return self._prefill_to(len(self.tokens))

    def prefill_images(self) -> int:
        """Run the tokens up to the end of the last image into the cache, if they are not there yet (images go in as
        embeddings, through the model's forward pass here; a turn on the engine feeds token ids only, so the text
        after the last image is left to it) -> how many ran. ValueError if an image ends the conversation."""
        end = max((s.end for s in self.images), default=0)
        if end <= self.cached:
            return 0
        if end >= len(self.tokens):
            raise ValueError("an image must be followed by text before generating (the chat template's turn end)")
        return self._prefill_to(end)

    def _prefill_to(self, end: int) -> int:
        """Run tokens[cached:end] through the model into the cache (image spans as their embeddings)."""
        start = self.cached
        new = self.tokens[start:end]
        if not new:
            return 0
        window = self.model.kv_plan.max_seq_len
        need = end
        if self.cache is None:
            self.cache = self._new_cache(min(window, max(need, 512)))
        elif need > self.cache.capacity:
            self.cache = self.cache.grown(min(window, max(need, 2 * self.cache.capacity)))
        ids = torch.tensor([new], device=self.model.norm.weight.device)                  # [1, T]
        spans = [ImageSpan(0, max(s.start, start) - start, s.embeds[max(0, start - s.start):end - s.start])
                 for s in self.images if s.end > start and s.start < end]
        with torch.inference_mode():
            extra = {"embeds": splice(self.model.embed, ids, spans)} if spans else {}
            self.model(ids, cache=self.cache, logits=Logits.LAST, **extra)
        self.total_prefilled += len(new)
        return len(new)

    def generate(self, *, max_new_tokens: int, sampling: SamplingParams = SamplingParams(), constraint=None,
                 on_token: Callable[[TokenEvent], None] | None = None,
                 stats: GenerationStats | None = None, cancel: CancelToken | None = None) -> Generation:
        """Generate after everything appended so far; the generated tokens join the conversation.

        Cancelled through `cancel`: raises GenerationCancelled, nothing joins the conversation, and the cache
        (whole steps only) is rewound to the conversation, so the next turn prefills only what is new."""
        new = self.tokens[self.cached:]
        if not new:
            raise ValueError("nothing new to respond to: append text before generating")
        stats = stats if stats is not None else GenerationStats()
        counters = TurnCounters(prefilled_tokens=len(new), cached_tokens=self.cached)
        pre = self.prefill_images()             # images go in first, as embeddings; the text after them generates
        new = self.tokens[self.cached:]

        def on_event(event) -> None:
            if on_token is not None and (event.token_id >= 0 or event.text):
                on_token(TokenEvent(0, event.token_id, event.text))
        req = RowRequest(new, max_new_tokens, on_event, sampling=sampling, constraint=constraint,
                         cancel=cancel if cancel is not None else CancelToken(), speculate=self.speculate,
                         cache=self.cache if self.cache is not None else self._new_cache(len(new)),
                         history=tuple(self.tokens[:self.cached]))
        try:
            out = self.engine.complete(req)
        except BaseException:
            self.cache = None           # it may hold part of a failed turn: rebuild from tokens next time
            raise
        counters.prefilled_tokens -= out.cached_tokens     # a first turn may start from a shared prefix's K/V
        counters.cached_tokens += out.cached_tokens
        _fill(stats, out, self.engine)
        self.last_stats = stats
        if out.finish == CANCELLED and out.exception is None:
            self.cache = out.cache
            self._trim_cache(len(self.tokens))
            if out.prompt_tokens and out.prefill_seconds:      # the prefill ran: its tokens stay cached
                self.total_prefilled += counters.prefilled_tokens - pre
        elif out.finish in (CANCELLED, ERROR):
            self.cache = None           # it may hold part of a failed turn: rebuild from tokens next time
        out.raise_if_failed()
        self.cache = out.cache
        self.tokens += out.token_ids
        self.text += out.text
        counters.generated_tokens = len(out.token_ids)
        self.last_turn = counters
        self.total_prefilled += counters.prefilled_tokens - pre
        return Generation(out.token_ids, out.text, out.finish)

    def _new_cache(self, capacity: int) -> KVCache:
        w = self.model.norm.weight
        return KVCache(self.model.kv_plan, batch_size=1, capacity=max(1, capacity), dtype=w.dtype, device=w.device,
                       sliding=Sliding.FULL, storage=self.engine.config.kv_storage)     # as the engine's rows


def _fill(stats: GenerationStats, out: Completion, engine: Engine) -> None:
    """A turn's figures in the GenerationStats shape."""
    stats.prompt_tokens, stats.new_tokens = out.prompt_tokens, len(out.token_ids)
    stats.prefill_seconds, stats.time_to_first_token = out.prefill_seconds, out.first_token_at
    stats.decode_seconds, stats.decode_steps, stats.forced_tokens = out.decode_seconds, out.steps, out.forced
    stats.proposed, stats.accepted = out.proposed, out.accepted
    stats.cache, stats.step = out.cache, engine.step_kind
    stats.kv_cache_bytes = out.cache.nbytes() if out.cache is not None else 0
