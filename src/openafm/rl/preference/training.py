"""Training and judging a reward model on graded pairs (rl/preference/pairs.py): what `openafm reward train` and
benchmarks/reward_model.py share.

    prepared = prepare(model, tokenizer, pairs, train_layers=2)     # frozen-layer features of every response, once
    fit(model, prepared.split, prepared.train_features, prepared.train, FitConfig(...))
    report = evaluate(model, prepared)                              # held-out accuracy per source, verifier agreement

Held-out figures:
    pair_accuracy          per source and pooled ("all"): the chosen response scores strictly higher
    verifier_order         over held-out pairs whose two verifier rewards differ: the fraction the reward model
                           orders as the verifier does
    verifier_spearman      per source: Spearman's rank correlation of the reward model's scores with the verifier
                           rewards over the distinct held-out responses (ties ranked by their average)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch

from openafm.rl.preference.fit import RewardData, pair_accuracy, prefix_features, score_features, split_point
from openafm.rl.preference.model import RewardModel
from openafm.rl.preference.pairs import GradedPair, by_split
from openafm.splits import Split
from openafm.train.config import Precision


@dataclasses.dataclass
class Prepared:
    split: int
    train: RewardData
    heldout: RewardData | None
    train_features: list[torch.Tensor]
    heldout_features: list[torch.Tensor]
    heldout_pairs: list[GradedPair]
    precision: Precision


def prepare(model: RewardModel, tokenizer, pairs: Sequence[GradedPair], *, train_layers: int,
            precision: Precision = Precision.BF16_AUTOCAST, progress: bool = False) -> Prepared:
    train, heldout = by_split(pairs, Split.TRAIN), by_split(pairs, Split.HELDOUT)
    if not train:
        raise ValueError(f"no training pairs among {len(pairs)} (every pair's split is 'heldout')")
    split = split_point(model, train_layers)
    train_data = RewardData.from_pairs([p.pair for p in train], [p.source.value for p in train])
    held_data = RewardData.from_pairs([p.pair for p in heldout], [p.source.value for p in heldout]) if heldout else None
    texts = train_data.texts + (held_data.texts if held_data else [])
    feats = prefix_features(model, tokenizer, texts, split, precision=precision, progress=progress)
    n = len(train_data.texts)
    return Prepared(split, train_data, held_data, feats[:n], feats[n:], heldout, Precision(precision))


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties given their average rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's rho (Pearson correlation of the ranks); None when either side is constant."""
    ra, rb = torch.tensor(ranks(a)), torch.tensor(ranks(b))
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = float(ra.norm() * rb.norm())
    return float((ra * rb).sum()) / denom if denom else None


def evaluate(model: RewardModel, prepared: Prepared) -> dict:
    """Held-out pair accuracy per source (and pooled), agreement with the verifiers."""
    if prepared.heldout is None:
        return {"heldout_pairs": 0}
    data, pairs = prepared.heldout, prepared.heldout_pairs
    scores = score_features(model, prepared.split, prepared.heldout_features, precision=prepared.precision)
    accuracy = pair_accuracy(scores, data)
    index = {t: i for i, t in enumerate(data.texts)}
    order: dict[str, list[bool]] = {}
    by_source: dict[str, dict[int, float]] = {}
    for p in pairs:
        c, r = index[(p.pair.prompt, p.pair.chosen)], index[(p.pair.prompt, p.pair.rejected)]
        if p.chosen_verifier is None or p.rejected_verifier is None:
            continue
        seen = by_source.setdefault(p.source.value, {})
        seen[c], seen[r] = p.chosen_verifier, p.rejected_verifier
        if p.chosen_verifier != p.rejected_verifier:
            verifier_says = p.chosen_verifier > p.rejected_verifier
            order.setdefault(p.source.value, []).append(bool(scores[c] > scores[r]) == verifier_says)
    agree = {s: sum(v) / len(v) for s, v in sorted(order.items())}
    pooled = [x for v in order.values() for x in v]
    return {
        "heldout_pairs": len(pairs),
        "pair_accuracy": accuracy,
        "pairs_per_source": {s: data.tags.count(s) for s in sorted(set(data.tags))},
        "verifier_order": {**agree, "all": sum(pooled) / len(pooled) if pooled else None},
        "verifier_order_pairs": {s: len(v) for s, v in sorted(order.items())},
        "verifier_spearman": {s: spearman([float(scores[i]) for i in seen], list(seen.values()))
                              for s, seen in sorted(by_source.items())},
    }
