"""Supervised fine-tuning on chat examples (guided-generation SFT, task adapters) on the trainer.

Each example (data/chat.py: an optional system turn, a user turn and an assistant turn) is rendered with the
model's chat template, as a session renders a request: the system turn (when the example has one), the user turn
with the generation prompt, then the assistant turn up to and including its end-of-turn token. Only the
assistant's tokens (its content and the end-of-turn token) carry labels, so the model learns the answer and
where it ends, never the prompt. Examples are packed whole into rows of seq_len
(segment ids keep attention inside each example, positions restart at 0), the rest of a row padded.

    loader = SFTLoader(examples, tokenizer, seq_len=384, global_batch=8)
    trainer, fingerprint = build_sft_trainer(config, base=model, loader=loader, rank=16)
    trainer.run(); save_lora_adapter(trainer, "adapter.safetensors", fingerprint)

    trainer, fingerprint = build_sft_trainer(config, base=model, loader=loader, method=Method.FULL)
    trainer.run(); save_full_model(trainer, "sft-model/", tokenizer, fingerprint)    # a checkpoint directory

Method.LORA trains rank-r adapters on the frozen base; Method.FULL trains every weight and writes a native
checkpoint directory (model.safetensors, config.json, tokenizer) that `checkpoint.load.load_model` loads.

The loader is deterministic and resumable like the others: the stream of examples is a seeded permutation per
epoch, a row takes examples from the stream while they fit, and the position saved is the stream index.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from openafm.checkpoint.fingerprint import weights_fingerprint
from openafm.checkpoint.native import save_checkpoint
from openafm.data.batch import IGNORE_INDEX, Batch
from openafm.data.chat import ChatExample
from openafm.errors import ConfigError
from openafm.nn.lora import DEFAULT_TARGETS
from openafm.train.config import ObjectiveKind, TrainConfig
from openafm.train.loop import Trainer
from openafm.train.lora import LoRAHooks
from openafm.train.objective import LMObjective, at_least_fp32, forward_logits


class TooLong(str, enum.Enum):
    ERROR = "error"    # an example longer than seq_len raises, naming it
    SKIP = "skip"      # it is left out (counted: `skipped` in the loader's state)


class Method(str, enum.Enum):
    LORA = "lora"      # rank-r adapters on the frozen base (an adapter file)
    FULL = "full"      # every weight (a checkpoint directory)


class Order(str, enum.Enum):
    SHUFFLE = "shuffle"    # a seeded permutation of the examples per epoch
    IN_ORDER = "in-order"  # 0, 1, 2, ... each epoch (evaluation)


@dataclasses.dataclass(frozen=True)
class ChatTokens:
    ids: list[int]     # the conversation, up to and including the assistant's end-of-turn token
    start: int         # ids[start:] is the assistant turn: the tokens with a loss
    labeled: tuple[bool, ...] | None = None   # several assistant turns: which ids have a loss (overrides start)


def chat_tokens(tokenizer, example: ChatExample) -> ChatTokens:
    """The example as the session would feed it: the system turn (if any) and the user turn rendered with the
    generation prompt and tokenized as the session tokenizes it, then the assistant turn's tokens through the
    end-of-turn token."""
    messages = example.messages()
    prefix = tokenizer.apply_chat_template(messages[:-1], add_generation_prompt=True)
    full = tokenizer.apply_chat_template(messages, add_generation_prompt=False)
    if not full.startswith(prefix):
        raise ValueError(f"{example.where}: the chat template renders the user turn differently once an assistant "
                         f"turn follows, so the assistant's tokens cannot be told apart")
    head, tail = tokenizer.encode(prefix), tokenizer.encode(full[len(prefix):])
    ends = tokenizer.eos_token_ids
    end = next((i for i, t in enumerate(tail) if t in ends), None)
    if end is None:
        raise ValueError(f"{example.where}: the chat template writes no end-of-turn token (one of {sorted(ends)}) "
                         f"after the assistant turn; SFT needs one to teach the model where an answer ends")
    if example.response not in tokenizer.decode(tail[:end]):
        raise ValueError(f"{example.where}: the response contains an end-of-turn token; it would end the turn early")
    return ChatTokens(head + tail[:end + 1], len(head))


def pack_row(pieces: Sequence[ChatTokens], seq_len: int, pad_id: int) -> dict[str, torch.Tensor]:
    """One row of seq_len tokens from whole examples: {input_ids, labels, positions, segment_ids}, each [T].
    labels[t] = ids[t + 1] where that token is the assistant's, else IGNORE_INDEX; padding is its own segment."""
    ids, labels, positions, segments = [], [], [], []
    for s, piece in enumerate(pieces):
        n = len(piece.ids)
        ids += piece.ids
        has_loss = piece.labeled or [j >= piece.start for j in range(n)]
        labels += [piece.ids[j + 1] if has_loss[j + 1] else IGNORE_INDEX for j in range(n - 1)] + [IGNORE_INDEX]
        positions += range(n)
        segments += [s] * n
    if len(ids) > seq_len:
        raise ValueError(f"{len(ids)} tokens do not fit in a row of seq_len={seq_len}")
    pad = seq_len - len(ids)
    ids += [pad_id] * pad
    labels += [IGNORE_INDEX] * pad
    positions += range(pad)
    segments += [len(pieces)] * pad
    return {k: torch.tensor(v, dtype=torch.long) for k, v in
            (("input_ids", ids), ("labels", labels), ("positions", positions), ("segment_ids", segments))}


class SFTLoader:
    """Batches of packed chat examples: global micro-batch n holds the next rows of the example stream; each rank
    keeps its own rows of it (every rank builds the same global micro-batch)."""

    def __init__(self, examples: Sequence[ChatExample], tokenizer, *, seq_len: int, global_batch: int, seed: int = 0,
                 rank: int = 0, world_size: int = 1, too_long: TooLong = TooLong.ERROR,
                 order: Order = Order.SHUFFLE):
        if not len(examples):
            raise ConfigError("SFTLoader needs at least one example")
        if global_batch % world_size:
            raise ConfigError(f"global micro-batch of {global_batch} rows does not split over world_size={world_size}")
        if not 0 <= rank < world_size:
            raise ConfigError(f"rank={rank} is outside 0..{world_size - 1}")
        self.examples, self.tokenizer = examples, tokenizer
        self.seq_len, self.global_batch, self.seed = seq_len, global_batch, seed
        self.rank, self.world_size = rank, world_size
        self.too_long, self.order = TooLong(too_long), Order(order)
        pad = tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (tokenizer.eos_token_id or 0)
        self._next, self.skipped = 0, 0
        self._perm: tuple[int, np.ndarray] | None = None
        self._cache: dict[int, ChatTokens | None] = {}

    def piece(self, example) -> ChatTokens:
        """One example's tokens (a subclass reads other example types: train.adapter_toolkit's conversations)."""
        return chat_tokens(self.tokenizer, example)

    # --- the example stream ----------------------------------------------------------------------------------

    def example_index(self, k: int) -> int:
        """Which example stream position k holds."""
        n = len(self.examples)
        epoch, i = divmod(k, n)
        if self.order is Order.IN_ORDER:
            return i
        if self._perm is None or self._perm[0] != epoch:
            self._perm = (epoch, np.random.default_rng([self.seed, 0x5F7, epoch]).permutation(n))
        return int(self._perm[1][i])

    def tokens(self, k: int) -> ChatTokens | None:
        """Stream position k tokenized; None when it is too long and too_long is skip."""
        if k not in self._cache:
            if len(self._cache) > 4 * self.global_batch:
                self._cache.clear()
            example = self.examples[self.example_index(k)]
            piece = self.piece(example)
            if len(piece.ids) > self.seq_len:
                if self.too_long is TooLong.ERROR:
                    raise ValueError(f"{example.where}: {len(piece.ids)} tokens do not fit in seq_len={self.seq_len}; "
                                     f"raise the sequence length, shorten the example, or skip such examples")
                piece = None
            self._cache[k] = piece
        return self._cache[k]

    def check_lengths(self) -> int:
        """Tokenize every example now, so a too-long one raises before training (too_long error) -> how many fit."""
        fit = 0
        for i, example in enumerate(self.examples):
            n = len(self.piece(example).ids)
            if n > self.seq_len and self.too_long is TooLong.ERROR:
                raise ValueError(f"{example.where}: {n} tokens do not fit in seq_len={self.seq_len}; raise the "
                                 f"sequence length, shorten the example, or skip such examples")
            fit += n <= self.seq_len
        return fit

    def row(self, k: int, stop: int | None = None) -> tuple[dict[str, torch.Tensor], int, int]:
        """The row starting at stream position k (taking none from `stop` on) -> (row, next position, skipped)."""
        pieces, used, skipped, in_a_row = [], 0, 0, 0
        while stop is None or k < stop:
            piece = self.tokens(k)
            if piece is None:
                k, skipped, in_a_row = k + 1, skipped + 1, in_a_row + 1
                if in_a_row > len(self.examples):
                    raise ValueError(f"no example fits in seq_len={self.seq_len}")
                continue
            in_a_row = 0
            if used + len(piece.ids) > self.seq_len:
                break
            pieces.append(piece)
            used += len(piece.ids)
            k += 1
        return pack_row(pieces, self.seq_len, self.pad_id), k, skipped

    # --- the Loader protocol ---------------------------------------------------------------------------------

    def next_batch(self) -> Batch:
        rows = []
        for _ in range(self.global_batch):
            row, self._next, skipped = self.row(self._next)
            self.skipped += skipped
            rows.append(row)
        per_rank = self.global_batch // self.world_size
        mine = rows[self.rank * per_rank:(self.rank + 1) * per_rank]
        return Batch(**{key: torch.stack([r[key] for r in mine]) for key in mine[0]})

    def __iter__(self) -> Iterator[Batch]:
        while True:
            yield self.next_batch()

    def state_dict(self) -> dict[str, Any]:
        return {"next": self._next, "skipped": self.skipped, "examples": len(self.examples), "seed": self.seed,
                "seq_len": self.seq_len, "order": self.order.value}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        mine = self.state_dict()
        for key in ("examples", "seed", "seq_len", "order"):
            if state.get(key) != mine[key]:
                raise ConfigError(f"SFT loader state has {key}={state.get(key)!r}; this loader has {mine[key]!r}")
        self._next, self.skipped = int(state["next"]), int(state["skipped"])


@torch.no_grad()
def heldout_loss(model: nn.Module, examples: Sequence[ChatExample], tokenizer, *, seq_len: int, rows: int = 8,
                 too_long: TooLong = TooLong.ERROR, loader_class: type | None = None) -> dict[str, float]:
    """Mean cross-entropy over the assistant tokens of `examples` (each once, in order) ->
    {"loss", "tokens", "examples", "skipped"}. loader_class: an SFTLoader subclass for other example types."""
    loader = (loader_class or SFTLoader)(examples, tokenizer, seq_len=seq_len, global_batch=rows,
                                         order=Order.IN_ORDER, too_long=too_long)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, tokens, k = 0.0, 0, 0
    try:
        while k < len(examples):
            batch_rows = []
            while k < len(examples) and len(batch_rows) < rows:
                row, k, skipped = loader.row(k, stop=len(examples))
                loader.skipped += skipped
                batch_rows.append(row)
            batch = Batch(**{key: torch.stack([r[key] for r in batch_rows]).to(device) for key in batch_rows[0]})
            logits = at_least_fp32(forward_logits(model, batch))                          # [B, T, V]
            total += float(torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch.labels.flatten(),
                                                             ignore_index=IGNORE_INDEX, reduction="sum"))
            tokens += batch.n_targets
    finally:
        model.train(was_training)
    return {"loss": total / max(tokens, 1), "tokens": tokens, "examples": len(examples) - loader.skipped,
            "skipped": loader.skipped}


def build_sft_trainer(config: TrainConfig, *, base: nn.Module, loader: SFTLoader, rank: int | None = None,
                      alpha: float | None = None, targets=DEFAULT_TARGETS, method: Method = Method.LORA,
                      init_state: dict | None = None) -> tuple[Trainer, str]:
    """-> (a Trainer of LoRA adapters on the frozen `base` (Method.LORA, which needs `rank`; init_state: an
    adapter's tensors to continue from) or of every weight of `base` (Method.FULL, which takes no LoRA option), the
    base's weights fingerprint before training)."""
    method = Method(method)
    if config.objective.kind is not ObjectiveKind.LM:
        raise ConfigError(f"SFT trains on the assistant tokens' cross-entropy: objective.kind must be lm, "
                          f"got {config.objective.kind.value}")
    if method is Method.LORA and rank is None:
        raise ConfigError("LoRA SFT needs a rank")
    if method is Method.FULL and (rank is not None or alpha is not None or tuple(targets) != tuple(DEFAULT_TARGETS)
                                  or init_state is not None):
        raise ConfigError(f"full SFT trains every weight; rank={rank}, alpha={alpha}, targets={tuple(targets)} and an "
                          f"adapter to continue are LoRA options (use method lora, or leave them out)")
    fingerprint = weights_fingerprint(base)
    if method is Method.FULL:
        trainer = Trainer(config, model=base.requires_grad_(True), objective=LMObjective(), loader=loader)
    else:
        trainer = Trainer(config, model=base, objective=LMObjective(), loader=loader,
                          hooks=[LoRAHooks(rank=rank, alpha=alpha, targets=targets, init_state=init_state)])
    return trainer, fingerprint


def save_full_model(trainer: Trainer, directory, tokenizer, fingerprint: str, extra: dict | None = None):
    """A fully fine-tuned model as a native checkpoint directory (weights, config, tokenizer) -> its path; its
    config.json records the base fingerprint and the steps trained."""
    with trainer.eval_model() as model:
        return save_checkpoint(directory, trainer.model_config, model.state_dict(), tokenizer,
                               extra={"sft": {"method": Method.FULL.value, "base_fingerprint": fingerprint,
                                              "steps": trainer.step, **(extra or {})}})
