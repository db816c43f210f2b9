"""Fitting a reward model on a CPU: the bottom of the trunk frozen and run once, the top layers and heads trained.

The trunk's first L - train_layers layers are frozen, so their output for each distinct (prompt, response) is
computed once (prefix_features, under bf16 autocast by default) and kept; every step then runs only the top
train_layers layers, the final norm and the heads on those cached states, forward and backward. With 2 of 30
layers trained an epoch costs about a fifth of one frozen forward over the data, against about three full
forwards for LoRA on every layer. The model is unchanged in kind: RewardModel.forward on token ids computes the
same scores (within the cache's rounding).

    data = RewardData.from_pairs(pairs, tags)                      # distinct responses, pair and grade indices
    feats = prefix_features(model, tokenizer, data.texts, split)   # [T_i, D] per response
    fit(model, split, feats, data, FitConfig(...), run_dir=...)    # checkpoints run_dir/fit.pt, resumable
    accuracy = pair_accuracy(score_features(model, split, feats), data)   # {tag: fraction, "all": ...}

A step takes the pairs of `batch_prompts` prompts (shuffled per epoch, seeded) and scores each of their
responses once: the level-aware pair loss over the pairs plus grading_weight x the grading loss over the
responses (rl/preference/model.py). A resumed run repeats the same steps: the order is a function of (seed, epoch).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import torch
from tqdm import tqdm

from openafm.errors import CheckpointError, ConfigError
from openafm.io import atomic_write
from openafm.rl.preference.model import (
    LEVELS,
    PreferenceKind,
    PreferencePair,
    RewardModel,
    collate,
    conversation_ids,
    grading_loss,
    pair_loss,
)
from openafm.train.config import Precision
from openafm.train.precision import autocast

FIT_FILE = "fit.pt"
BUCKET = 8                 # responses per forward of the trained layers, grouped by length


@dataclasses.dataclass(frozen=True)
class FitConfig:
    train_layers: int = 2          # top trunk layers trained (with the final norm and the heads); the rest frozen
    epochs: int = 4
    batch_prompts: int = 8         # prompts per step (all their pairs, each response scored once)
    lr: float = 3e-4               # trunk layers and final norm
    head_lr: float = 1e-3          # score and grading heads (zero / randomly initialised)
    grading_weight: float = 0.1    # 0: the ablation without single-sided grading
    kind: PreferenceKind = PreferenceKind.SOFT_LABEL
    precision: Precision = Precision.BF16_AUTOCAST
    seed: int = 0
    checkpoint_every: int = 50     # steps

    def __post_init__(self):
        object.__setattr__(self, "kind", PreferenceKind(self.kind))
        object.__setattr__(self, "precision", Precision(self.precision))
        for name in ("train_layers", "epochs", "batch_prompts", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1")
        if self.grading_weight < 0:
            raise ConfigError(f"grading_weight={self.grading_weight} must be >= 0 (0 turns the grading term off)")

    def to_dict(self) -> dict:
        return {k: v.value if hasattr(v, "value") else v for k, v in dataclasses.asdict(self).items()}


@dataclasses.dataclass
class RewardData:
    texts: list[tuple[str, str]]   # distinct (prompt, response)
    grades: torch.Tensor           # [N] per response, NO_GRADE for none
    chosen: torch.Tensor           # [P] index into texts
    rejected: torch.Tensor         # [P]
    levels: torch.Tensor           # [P] index into LEVELS
    tags: list[str]                # [P] e.g. the pair's source, for per-tag accuracy
    prompts: list[str]             # distinct prompts, in first-seen order
    prompt_of: torch.Tensor        # [P] index into prompts

    @classmethod
    def from_pairs(cls, pairs: Sequence[PreferencePair], tags: Sequence[str] | None = None) -> RewardData:
        tags = list(tags) if tags is not None else ["all"] * len(pairs)
        if len(tags) != len(pairs) or not pairs:
            raise ValueError(f"{len(pairs)} pairs and {len(tags)} tags: need one tag per pair and >= 1 pair")
        index: dict[tuple[str, str], int] = {}
        grades: list[int] = []
        prompts: dict[str, int] = {}

        def at(prompt: str, response: str, grade: int) -> int:
            key = (prompt, response)
            if key not in index:
                index[key] = len(grades)
                grades.append(grade)
            elif grades[index[key]] != grade:
                raise ValueError(f"response {response[:60]!r} to {prompt[:60]!r} has grades {grades[index[key]]} "
                                 f"and {grade} in different pairs; a response has one grade")
            return index[key]

        chosen = [at(p.prompt, p.chosen, p.chosen_grade) for p in pairs]
        rejected = [at(p.prompt, p.rejected, p.rejected_grade) for p in pairs]
        prompt_of = [prompts.setdefault(p.prompt, len(prompts)) for p in pairs]
        return cls(list(index), torch.tensor(grades), torch.tensor(chosen), torch.tensor(rejected),
                   torch.tensor([LEVELS.index(p.level) for p in pairs]), tags, list(prompts), torch.tensor(prompt_of))


@torch.no_grad()
def prefix_features(model: RewardModel, tokenizer, texts: Sequence[tuple[str, str]], split: int, *,
                    precision: Precision = Precision.BF16_AUTOCAST, batch_size: int = 16,
                    progress: bool = False) -> list[torch.Tensor]:
    """The hidden state after the first `split` layers for each (prompt, response) -> [T_i, D] each (bf16 under
    bf16 autocast, else float32)."""
    precision = Precision(precision)
    rows = [conversation_ids(tokenizer, p, r) for p, r in texts]
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))          # similar lengths batched together
    store = torch.bfloat16 if precision is Precision.BF16_AUTOCAST else torch.float32
    out: list[torch.Tensor | None] = [None] * len(rows)
    trunk = model.trunk
    for start in tqdm(range(0, len(order), batch_size), desc="frozen layers", unit="batch", disable=not progress):
        chunk = order[start:start + batch_size]
        ids, lengths = collate([rows[i] for i in chunk], tokenizer.pad_token_id or 0)
        with autocast(precision):
            x, ctx = trunk.begin(ids, None, None)                          # [B, T, D]
            for layer in trunk.layers[:split]:
                x = layer(x, ctx)
            ctx.store.end(ctx.positions)
        for j, i in enumerate(chunk):
            out[i] = x[j, :lengths[j]].to(store).clone()
    return out


@torch.no_grad()
def advance_features(model: RewardModel, hidden: Sequence[torch.Tensor], start: int, stop: int, *,
                     precision: Precision = Precision.BF16_AUTOCAST, batch_size: int = 16) -> list[torch.Tensor]:
    """Cached states after layer `start` -> the states after layer `stop` (frozen layers start..stop-1 run once), in
    the dtype prefix_features stores."""
    precision = Precision(precision)
    if not 0 <= start <= stop <= len(model.trunk.layers):
        raise ValueError(f"advance_features from layer {start} to {stop}: need 0 <= start <= stop <= "
                         f"{len(model.trunk.layers)}")
    if start == stop:
        return list(hidden)
    store = torch.bfloat16 if precision is Precision.BF16_AUTOCAST else torch.float32
    order = sorted(range(len(hidden)), key=lambda i: hidden[i].shape[0])
    out: list[torch.Tensor | None] = [None] * len(hidden)
    trunk = model.trunk
    for s in range(0, len(order), batch_size):
        chunk = [hidden[i] for i in order[s:s + batch_size]]
        t = max(h.shape[0] for h in chunk)
        x = torch.stack([torch.nn.functional.pad(h.float(), (0, 0, 0, t - h.shape[0])) for h in chunk])   # [B, T, D]
        with autocast(precision):
            _, ctx = trunk.begin(torch.zeros(x.shape[:2], dtype=torch.long), None, None)
            for layer in trunk.layers[start:stop]:
                x = layer(x, ctx)
            ctx.store.end(ctx.positions)
        for j, i in enumerate(order[s:s + batch_size]):
            out[i] = x[j, :hidden[i].shape[0]].to(store).clone()
    return out


def top_forward(model: RewardModel, split: int, hidden: Sequence[torch.Tensor]
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Cached states after layer `split` -> (scores [B], grade logits [B, G] or None), as RewardModel.forward."""
    t = max(h.shape[0] for h in hidden)
    x = torch.stack([torch.nn.functional.pad(h.float(), (0, 0, 0, t - h.shape[0])) for h in hidden])   # [B, T, D]
    lengths = torch.tensor([h.shape[0] for h in hidden])
    trunk = model.trunk
    _, ctx = trunk.begin(torch.zeros(x.shape[:2], dtype=torch.long), None, None)
    for layer in trunk.layers[split:]:
        x = layer(x, ctx)
    ctx.store.end(ctx.positions)
    h = trunk.norm(x)[torch.arange(x.shape[0]), lengths - 1]                              # [B, D]
    scores = model.score_head(h.float()).squeeze(-1)
    grades = model.grade_head(h.float()) if model.grade_head is not None else None
    return scores, grades


def bucketed_forward(model: RewardModel, split: int, hidden: Sequence[torch.Tensor], bucket: int = BUCKET
                     ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """top_forward over length-sorted groups of `bucket` states (less padding: a step mixes 70-token math answers
    with 250-token tool prompts) -> (scores [B], grade logits [B, G] or None) in the given order. Padding is on the
    right and attention causal, so each score is the one top_forward gives the state alone."""
    order = sorted(range(len(hidden)), key=lambda i: hidden[i].shape[0])
    parts = [top_forward(model, split, [hidden[i] for i in order[s:s + bucket]])
             for s in range(0, len(order), bucket)]
    back = torch.empty(len(order), dtype=torch.long)
    back[torch.tensor(order)] = torch.arange(len(order))
    scores = torch.cat([p[0] for p in parts])[back]
    grades = torch.cat([p[1] for p in parts])[back] if parts[0][1] is not None else None
    return scores, grades


def split_point(model: RewardModel, train_layers: int) -> int:
    n = len(model.trunk.layers)
    if not 1 <= train_layers <= n:
        raise ConfigError(f"train_layers={train_layers} must lie in 1..{n} (the trunk's layers)")
    return n - train_layers


def trainable_prefixes(model: RewardModel, split: int) -> list[str]:
    heads = ["score_head."] + (["grade_head."] if model.grade_head is not None else [])
    return [f"trunk.layers.{i}." for i in range(split, len(model.trunk.layers))] + ["trunk.norm."] + heads


def _trainable(model: RewardModel, split: int) -> tuple[list, list]:
    model.requires_grad_(False)
    layers = list(model.trunk.layers[split:].parameters()) + list(model.trunk.norm.parameters())
    heads = list(model.score_head.parameters()) + (list(model.grade_head.parameters()) if model.grade_head else [])
    for p in layers + heads:
        p.requires_grad_(True)
    return layers, heads


def _order(data: RewardData, config: FitConfig, epoch: int) -> list[list[int]]:
    """The epoch's steps: each a list of pair indices (the pairs of batch_prompts prompts)."""
    g = torch.Generator().manual_seed(config.seed * 100_003 + epoch)
    prompts = torch.randperm(len(data.prompts), generator=g).tolist()
    by_prompt: dict[int, list[int]] = {}
    for i, p in enumerate(data.prompt_of.tolist()):
        by_prompt.setdefault(p, []).append(i)
    return [[i for p in prompts[s:s + config.batch_prompts] for i in by_prompt[p]]
            for s in range(0, len(prompts), config.batch_prompts)]


def _save(path: Path, state: dict) -> None:
    atomic_write(path, lambda tmp: torch.save(state, tmp))


def fit(model: RewardModel, split: int, features: Sequence[torch.Tensor], data: RewardData, config: FitConfig, *,
        run_dir: str | Path | None = None, resume: bool = False, progress: bool = False,
        stop_after: int | None = None) -> list[dict]:
    """Train the top of `model` in place (stop_after: at most that many steps in this call) -> one metrics record
    per step of this call."""
    layers, heads = _trainable(model, split)
    optimizer = torch.optim.AdamW([{"params": layers, "lr": config.lr}, {"params": heads, "lr": config.head_lr}],
                                  weight_decay=0.0)
    steps_per_epoch = len(_order(data, config, 0))
    total = steps_per_epoch * config.epochs
    path = Path(run_dir) / FIT_FILE if run_dir is not None else None
    step = 0
    if path is not None and path.exists():
        if not resume:
            raise CheckpointError(f"{path} exists; pass --resume to continue the run or choose a new directory")
        state = torch.load(path, weights_only=True)
        if state["config"] != config.to_dict() or state["pairs"] != len(data.tags):
            raise CheckpointError(f"{path}: trained with {state['config']} on {state['pairs']} pairs; this run has "
                                  f"{config.to_dict()} on {len(data.tags)} pairs")
        model.load_state_dict(state["model"], strict=False)
        optimizer.load_state_dict(state["optimizer"])
        step = state["step"]
    model.train()
    records = []
    bar = tqdm(total=total, initial=step, desc="reward model", unit="step", disable=not progress)
    last = total if stop_after is None else min(total, step + stop_after)
    try:
        while step < last:
            epoch, within = divmod(step, steps_per_epoch)
            batch = _order(data, config, epoch)[within]
            records.append(_step(model, split, features, data, batch, config, optimizer, step / total))
            step += 1
            records[-1]["step"] = step
            bar.update(1)
            bar.set_postfix(loss=f"{records[-1]['loss']:.3f}", acc=f"{records[-1]['accuracy']:.2f}")
            if path is not None and (step % config.checkpoint_every == 0 or step in (total, last)):
                trained = {k: v for k, v in model.state_dict().items()
                           if any(k.startswith(p) for p in trainable_prefixes(model, split))}
                _save(path, {"model": trained, "optimizer": optimizer.state_dict(), "step": step,
                             "config": config.to_dict(), "pairs": len(data.tags)})
    finally:
        bar.close()
        model.eval()
    return records


def _step(model, split, features, data: RewardData, batch: list[int], config: FitConfig, optimizer,
          progress: float) -> dict:
    pairs = torch.tensor(batch)
    responses = torch.unique(torch.cat([data.chosen[pairs], data.rejected[pairs]]))        # sorted
    where = {int(r): i for i, r in enumerate(responses)}
    with autocast(config.precision):
        scores, grade_logits = bucketed_forward(model, split, [features[int(r)] for r in responses])
    scores = scores.float()
    chosen = scores[torch.tensor([where[int(i)] for i in data.chosen[pairs]])]
    rejected = scores[torch.tensor([where[int(i)] for i in data.rejected[pairs]])]
    pair = pair_loss(chosen, rejected, data.levels[pairs], config.kind)
    loss = pair
    grading = torch.zeros(())
    if config.grading_weight > 0:
        grading = grading_loss(None if grade_logits is None else grade_logits.float(), data.grades[responses])
        loss = loss + config.grading_weight * grading
    for group, base in zip(optimizer.param_groups, (config.lr, config.head_lr)):
        group["lr"] = base * (1 - progress)                                                  # linear decay to 0
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g["params"]], 1.0)
    optimizer.step()
    return {"loss": float(loss.detach()), "pair": float(pair.detach()), "grading": float(grading.detach()),
            "accuracy": float((chosen > rejected).float().mean())}


@torch.no_grad()
def score_features(model: RewardModel, split: int, features: Sequence[torch.Tensor], *,
                   precision: Precision = Precision.BF16_AUTOCAST, batch_size: int = 32) -> torch.Tensor:
    """The score of every cached response -> [N]."""
    model.eval()
    with autocast(precision):
        scores, _ = bucketed_forward(model, split, features, bucket=batch_size)
    return scores.float()


def pair_accuracy(scores: torch.Tensor, data: RewardData) -> dict[str, float]:
    """Fraction of pairs whose chosen response scores strictly higher, per tag and over all ("all")."""
    right = scores[data.chosen] > scores[data.rejected]                                  # [P]
    out = {}
    for tag in sorted(set(data.tags)):
        mask = torch.tensor([t == tag for t in data.tags])
        out[tag] = float(right[mask].float().mean())
    out["all"] = float(right.float().mean())
    return out
