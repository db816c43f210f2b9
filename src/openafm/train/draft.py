"""Distil a draft model from its target's own token distributions: the target answers chat prompts (greedy),
scores every answer position (the top-k of its next-token distribution), and a small draft learns to match.

What the draft must predict is what the target will say, so it learns from the target's outputs on prompts of
the kind it will serve (instruction prompts by default; an adapter's own training prompts with an adapter),
not from corpus text. The draft (runtime.draft.build_draft) starts from the target's first layers, its final
norm, its shared embedding and a head over the `vocab` most frequent tokens of those answers and prompts.

The loss at each answer position is the cross-entropy of the draft's distribution over its head rows against
the target's top-k probabilities (those inside the head, renormalised): forward KL up to a constant.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import time
from pathlib import Path

import torch
from torch.nn import functional as F
from tqdm import tqdm

from openafm.models.decoder import Decoder
from openafm.runtime.draft import DraftModel, build_draft
from openafm.runtime.generate import generate_tokens
from openafm.runtime.sampling import SamplingParams


@dataclasses.dataclass(frozen=True)
class DraftTrainConfig:
    n_layers: int = 2            # draft depth (the target's first layers, copied)
    vocab: int = 8192            # head rows: the most frequent tokens of the answers and prompts (+ EOS)
    answer_tokens: int = 96      # greedy tokens the target writes per prompt
    top_k: int = 32              # target probabilities kept per position
    epochs: int = 6
    lr: float = 3e-4
    batch: int = 8               # sequences per optimizer step
    minutes: float | None = None  # stop training after this long (the data collection is not counted)
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("n_layers", "vocab", "answer_tokens", "top_k", "epochs", "batch"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} is invalid: use an integer >= 1")
        if not self.lr > 0:
            raise ValueError(f"lr={self.lr!r} is invalid: use a number > 0")


@dataclasses.dataclass
class Scored:
    ids: torch.Tensor        # [T] the sequence: chat prompt + the target's answer
    start: int               # first position whose next token is part of the answer
    top_ids: torch.Tensor    # [T - 1 - start, k] the target's most likely next tokens at each answer position
    top_p: torch.Tensor      # [T - 1 - start, k] their probabilities


def answer_prompts(target: Decoder, tokenizer, prompts: list[str], *, answer_tokens: int, batch: int = 8,
                   progress: bool = True) -> list[tuple[list[int], list[int]]]:
    """(chat prompt ids, the target's greedy answer ids) for each prompt, generated in batches."""
    out = []
    eos = set(tokenizer.eos_token_ids)
    for i in tqdm(range(0, len(prompts), batch), desc="target answers", unit="batch", disable=not progress):
        ids = [tokenizer.encode(tokenizer.apply_chat_template([{"role": "user", "content": p}]))
               for p in prompts[i:i + batch]]
        gens = generate_tokens(target, ids, max_new_tokens=answer_tokens, sampling=SamplingParams(), eos_token_ids=eos)
        for prompt, g in zip(ids, gens):
            end = [t for t in sorted(eos)][:1] if g.finish_reason == "eos" else []
            out.append((prompt, g.token_ids + end))
    return out


def score(target: Decoder, pairs: list[tuple[list[int], list[int]]], *, top_k: int, progress: bool = True) -> list[Scored]:
    """The target's top-k next-token probabilities at every answer position (one cache-free forward each)."""
    out = []
    with torch.inference_mode():
        for prompt, answer in tqdm(pairs, desc="target scores", unit="seq", disable=not progress):
            if not answer:
                continue
            ids = torch.tensor(prompt + answer)
            logits = target(ids[None])[0, len(prompt) - 1:-1].float()                  # [A, V]
            top = logits.softmax(-1).topk(top_k, dim=-1)
            out.append(Scored(ids, len(prompt) - 1, top.indices, top.values))
    return out


def frequent_vocab(pairs: list[tuple[list[int], list[int]]], size: int, *, vocab_size: int,
                   always: set[int] = frozenset()) -> torch.Tensor:
    """The `size` most frequent token ids of the answers (then the prompts), plus `always`; sorted."""
    counts = collections.Counter()
    for prompt, answer in pairs:
        counts.update(answer)
        counts.update({t: 0 for t in prompt})
    chosen = set(always)
    for tok, _ in sorted(counts.items(), key=lambda kv: -kv[1]):
        if len(chosen) >= size:
            break
        chosen.add(tok)
    for tok in range(vocab_size):               # fill up with low ids (byte tokens, common merges first)
        if len(chosen) >= size:
            break
        chosen.add(tok)
    return torch.tensor(sorted(chosen), dtype=torch.long)


def distill(draft: DraftModel, data: list[Scored], config: DraftTrainConfig, *, progress: bool = True) -> dict:
    """Train the draft's own parameters on the scored answers -> a report (loss, steps, tokens/s)."""
    model = draft.model
    index = torch.full((draft.vocab_size,), -1, dtype=torch.long)                  # target id -> head row
    index[draft.vocab_ids] = torch.arange(len(draft.vocab_ids))
    params = [p for n, p in model.named_parameters() if not n.startswith("embed.")]
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(config.seed)
    steps_per_epoch = math.ceil(len(data) / config.batch)
    total = steps_per_epoch * config.epochs
    model.train()
    start, tokens, step, losses = time.perf_counter(), 0, 0, []
    bar = tqdm(total=total, desc="distil draft", unit="step", disable=not progress)
    for epoch in range(config.epochs):
        order = torch.randperm(len(data), generator=gen).tolist()
        for s in range(0, len(order), config.batch):
            if config.minutes is not None and time.perf_counter() - start > 60 * config.minutes:
                break
            loss, n = _batch_loss(model, [data[i] for i in order[s:s + config.batch]], index)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            lr = config.lr * 0.5 * (1 + math.cos(math.pi * step / max(1, total)))      # cosine to 0
            for g in opt.param_groups:
                g["lr"] = lr
            opt.step()
            step, tokens = step + 1, tokens + n
            losses.append(float(loss.detach()))
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.3f}", tok_s=f"{tokens / (time.perf_counter() - start):.0f}")
    bar.close()
    model.eval()
    for p in params:
        p.requires_grad_(False)
    seconds = time.perf_counter() - start
    return {"steps": step, "tokens": tokens, "seconds": seconds, "first_loss": losses[0] if losses else None,
            "final_loss": sum(losses[-5:]) / len(losses[-5:]) if losses else None}


def _batch_loss(model: Decoder, batch: list[Scored], index: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Right-padded batch -> mean over answer positions of -sum_j p_j log q(top_j) (p renormalised in the head)."""
    longest = max(len(x.ids) for x in batch)
    ids = torch.zeros(len(batch), longest, dtype=torch.long)
    for r, x in enumerate(batch):
        ids[r, :len(x.ids)] = x.ids
    logq = F.log_softmax(model(ids).float(), dim=-1)                                   # [B, T, K]
    total, count = logq.new_zeros(()), 0
    for r, x in enumerate(batch):
        rows = index[x.top_ids]                                                         # [A, k]; -1 off the head
        p = x.top_p * (rows >= 0)
        p = p / p.sum(-1, keepdim=True).clamp_min(1e-9)
        lq = logq[r, x.start:x.start + len(rows)].gather(-1, rows.clamp_min(0))         # [A, k]
        total = total - (p * lq).sum()
        count += len(rows)
    return total / max(count, 1), count


def train_draft(target: Decoder, tokenizer, prompts: list[str], config: DraftTrainConfig = DraftTrainConfig(), *,
                target_name: str = "", progress: bool = True, data_cache: str | Path | None = None
                ) -> tuple[DraftModel, dict]:
    """Answers, scores, vocabulary, build, distil -> (the draft, a report of every stage's size and time).

    data_cache: a file keeping the target's answers and scores (written after collecting them, read instead of
    collecting when it exists and was made from the same prompts, answer length and top-k)."""
    if not prompts:
        raise ValueError("train_draft needs at least one prompt")
    torch.manual_seed(config.seed)
    t0 = time.perf_counter()
    key = {"prompts": prompts, "answer_tokens": config.answer_tokens, "top_k": config.top_k}
    # tensors, numbers and lists only: the cache loads with weights_only=True (opening it cannot run code)
    cached = torch.load(data_cache, weights_only=True) if data_cache and Path(data_cache).is_file() else None
    if cached is not None and cached["key"] == key:
        pairs = [tuple(p) for p in cached["pairs"]]
        data = [Scored(**row) for row in cached["data"]]
        t1 = t2 = time.perf_counter()
    else:
        pairs = answer_prompts(target, tokenizer, prompts, answer_tokens=config.answer_tokens, progress=progress)
        t1 = time.perf_counter()
        data = score(target, pairs, top_k=config.top_k, progress=progress)
        t2 = time.perf_counter()
        if data_cache:
            torch.save({"key": key, "pairs": [list(p) for p in pairs],
                        "data": [dataclasses.asdict(d) for d in data]}, data_cache)
    vocab = frequent_vocab(pairs, min(config.vocab, target.kv_plan.vocab_size), vocab_size=target.kv_plan.vocab_size,
                           always=set(tokenizer.eos_token_ids))
    draft = build_draft(target, n_layers=config.n_layers, vocab_ids=vocab, target_name=target_name)
    report = distill(draft, data, config, progress=progress)
    answered = sum(len(a) for _, a in pairs)
    covered = sum(int(torch.isin(torch.tensor(a), vocab).sum()) for _, a in pairs if a)
    report.update({"prompts": len(prompts), "answer_tokens": answered, "answer_seconds": t1 - t0,
                   "score_seconds": t2 - t1, "head_rows": len(vocab), "head_coverage": covered / max(answered, 1),
                   "draft_parameters": draft.num_parameters(), "config": dataclasses.asdict(config)})
    return draft, report
