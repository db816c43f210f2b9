"""Training and judging a reward model on graded pairs (rl/preference/pairs.py): what `openafm reward train` and
benchmarks/reward_model.py share.

    prepared = prepare(model, tokenizer, pairs, train_layers=2)     # frozen-layer features of every response, once
    fit(model, prepared.split, prepared.train_features, prepared.train, FitConfig(...))
    report = evaluate(model, prepared)                              # held-out accuracy per source, verifier agreement

Judged on (Judge): VALIDATION fits on the training pairs outside the validation slice (pairs.carve_validation) and
judges on the slice, the way settings are chosen; HELDOUT fits on every training pair and judges on the held-out
pairs, the reported figures. A validation run never computes anything on a held-out pair.

features_cache: a folder where the frozen layers' output is kept per (base weights, precision, split), one tensor per
distinct (prompt, response); a later run reuses it, and one with a later split point advances the cached states
through the extra frozen layers instead of recomputing them from the tokens.

Judged figures (each with its pair count n and a 95% Wilson interval):
    pair_accuracy          per source and pooled ("all"): the chosen response scores strictly higher
    pair_accuracy_by_grades  the same per source and couple of grades ("math 1>0": correct unmarked over wrong)
    verifier_order         over held-out pairs whose two verifier rewards differ: the fraction the reward model
                           orders as the verifier does
    verifier_spearman      per source: Spearman's rank correlation of the reward model's scores with the verifier
                           rewards over the distinct held-out responses (ties ranked by their average)
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import re
from collections.abc import Sequence
from pathlib import Path

import torch

from openafm.checkpoint.fingerprint import weights_fingerprint
from openafm.eval.report import wilson_interval
from openafm.io import atomic_write
from openafm.rl.preference.fit import (
    RewardData,
    advance_features,
    pair_accuracy,
    prefix_features,
    score_features,
    split_point,
)
from openafm.rl.preference.model import RewardModel
from openafm.rl.preference.pairs import GradedPair, by_split, carve_validation
from openafm.splits import Split
from openafm.train.config import Precision


class Judge(str, enum.Enum):
    VALIDATION = "validation"      # fit outside the validation slice of the training pairs, judge on the slice
    HELDOUT = "heldout"            # fit on every training pair, judge on the held-out pairs


@dataclasses.dataclass
class Prepared:
    split: int
    judge: Judge
    train: RewardData
    judged: RewardData | None
    train_features: list[torch.Tensor]
    judged_features: list[torch.Tensor]
    judged_pairs: list[GradedPair]
    precision: Precision


def prepare(model: RewardModel, tokenizer, pairs: Sequence[GradedPair], *, train_layers: int,
            precision: Precision = Precision.BF16_AUTOCAST, judge: Judge = Judge.HELDOUT,
            features_cache: str | Path | None = None, progress: bool = False) -> Prepared:
    judge, precision = Judge(judge), Precision(precision)
    train = by_split(pairs, Split.TRAIN)
    if not train:
        raise ValueError(f"no training pairs among {len(pairs)} (every pair's split is 'heldout')")
    if judge is Judge.VALIDATION:
        train, judged = carve_validation(train)
        if not train or not judged:
            raise ValueError(f"the validation slice of {len(train) + len(judged)} training pairs leaves {len(train)} "
                             f"to fit and {len(judged)} to judge; build more training prompts")
    else:
        judged = by_split(pairs, Split.HELDOUT)
    split = split_point(model, train_layers)
    train_data = RewardData.from_pairs([p.pair for p in train], [p.source.value for p in train])
    judged_data = RewardData.from_pairs([p.pair for p in judged], [p.source.value for p in judged]) if judged else None
    texts = train_data.texts + (judged_data.texts if judged_data else [])
    if features_cache is None:
        feats = prefix_features(model, tokenizer, texts, split, precision=precision, progress=progress)
    else:
        feats = cached_features(model, tokenizer, texts, split, Path(features_cache), precision=precision,
                                progress=progress)
    n = len(train_data.texts)
    return Prepared(split, judge, train_data, judged_data, feats[:n], feats[n:], judged, precision)


def _text_key(prompt: str, response: str) -> str:
    return hashlib.sha256(f"{prompt}\0{response}".encode()).hexdigest()


def cached_features(model: RewardModel, tokenizer, texts: Sequence[tuple[str, str]], split: int, folder: Path, *,
                    precision: Precision = Precision.BF16_AUTOCAST, progress: bool = False) -> list[torch.Tensor]:
    """prefix_features through a cache in `folder`: features-<base weights>-<precision>-split<k>.pt maps each
    (prompt, response) to its states after layer k. States cached at the nearest earlier split are advanced; the
    rest are computed from the tokens; the merged map is written back at `split`."""
    base = f"features-{weights_fingerprint(model.trunk)[:16]}-{Precision(precision).value}"
    found: dict[int, Path] = {}
    for f in folder.glob(f"{base}-split*.pt"):
        m = re.fullmatch(rf"{re.escape(base)}-split(\d+)\.pt", f.name)
        if m and int(m.group(1)) <= split:
            found[int(m.group(1))] = f
    keys = [_text_key(p, r) for p, r in texts]
    cache: dict[str, torch.Tensor] = {}
    if split in found:
        cache = torch.load(found[split], weights_only=True)
    elif found:
        start = max(found)
        earlier = torch.load(found[start], weights_only=True)
        wanted = sorted({k for k in keys if k in earlier})
        cache = dict(zip(wanted, advance_features(model, [earlier[k] for k in wanted], start, split,
                                                  precision=precision)))
    missing: dict[str, int] = {}                                                         # one per distinct text
    for i, k in enumerate(keys):
        if k not in cache:
            missing.setdefault(k, i)
    if missing:
        new = prefix_features(model, tokenizer, [texts[i] for i in missing.values()], split, precision=precision,
                              progress=progress)
        cache.update(zip(missing, new))
    if missing or split not in found:
        atomic_write(folder / f"{base}-split{split}.pt", lambda tmp: torch.save(cache, tmp))
    return [cache[k] for k in keys]


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


def with_interval(hits: int, n: int) -> dict:
    """A proportion with its count and 95% Wilson interval (eval/report.py)."""
    lo, hi = wilson_interval(hits, n)
    return {"value": hits / n if n else None, "hits": hits, "n": n, "ci95": [round(lo, 4), round(hi, 4)]}


def evaluate(model: RewardModel, prepared: Prepared) -> dict:
    """Judged pair accuracy per source (and pooled), agreement with the verifiers; each with n and a 95% Wilson
    interval."""
    if prepared.judged is None:
        return {"judged_on": prepared.judge.value, "judged_pairs": 0}
    data, pairs = prepared.judged, prepared.judged_pairs
    scores = score_features(model, prepared.split, prepared.judged_features, precision=prepared.precision)
    accuracy = pair_accuracy(scores, data)
    right = (scores[data.chosen] > scores[data.rejected]).tolist()
    intervals = {tag: with_interval(sum(r for r, t in zip(right, data.tags) if t == tag), data.tags.count(tag))
                 for tag in sorted(set(data.tags))} | {"all": with_interval(sum(right), len(right))}
    by_grades: dict[str, list[bool]] = {}                  # "math 2>0": the pairs of those two grades
    for p, r in zip(pairs, right, strict=True):
        by_grades.setdefault(f"{p.source.value} {p.pair.chosen_grade}>{p.pair.rejected_grade}", []).append(r)
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
        "judged_on": prepared.judge.value,
        "judged_pairs": len(pairs),
        "pair_accuracy": accuracy,
        "pair_accuracy_interval": intervals,
        "pair_accuracy_by_grades": {k: with_interval(sum(v), len(v)) for k, v in sorted(by_grades.items())},
        "pairs_per_source": {s: data.tags.count(s) for s in sorted(set(data.tags))},
        "verifier_order": {**agree, "all": sum(pooled) / len(pooled) if pooled else None},
        "verifier_order_interval": {**{s: with_interval(sum(v), len(v)) for s, v in sorted(order.items())},
                                    "all": with_interval(sum(pooled), len(pooled))},
        "verifier_order_pairs": {s: len(v) for s, v in sorted(order.items())},
        "verifier_spearman": {s: spearman([float(scores[i]) for i in seen], list(seen.values()))
                              for s, seen in sorted(by_source.items())},
    }
