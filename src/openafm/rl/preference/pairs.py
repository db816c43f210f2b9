"""Graded preference pairs from verified sources: every response graded by a verifier, every pair with a reason.

A prompt group is one prompt with responses of distinct grades (0 .. N_GRADES - 1), each grade confirmed by the
source's checker when the group is built (rl/preference/sources.py). Its pairs are every (higher grade, lower grade)
couple; the level of preference comes from the two grades through the source's ladder:

    source        grade 2                      grade 1                          grade 0
    math          correct, "Answer: X" marked  correct, answer left unmarked    wrong answer, marked
    instructions  every constraint met         some met, some not               none met (not even loosely)
    tool-call     the exact call               right function, wrong arguments  wrong function

    levels        2 > 1: math slightly better (format only), instructions better, tool-call better
                  1 > 0: math better, instructions better, tool-call slightly better (both calls fail)
                  2 > 0: significantly better

Pairs JSONL (one pair a line; read_pairs names file:line of the first bad line):
    {"source": "math", "group": "math chain_sum seed 0 #3", "split": "train", "prompt": ..., "chosen": ...,
     "rejected": ..., "level": "better", "chosen_grade": 2, "rejected_grade": 0, "reason": ...,
     "chosen_verifier": 1.0, "rejected_verifier": 0.0}
"verifier" values are the source's verifier reward (rl/rewards/registry.py) of each response, optional (null: unknown).

Settings (learning rate, layers, epochs, pair counts, grading weight) are chosen on a validation slice carved from
the training pairs, never on the held-out pairs: carve_validation puts every pair of a prompt on one side, by a
stable hash of the prompt text (namespace "reward-validation", independent of the train/held-out hash).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import itertools
from collections.abc import Iterable, Sequence
from pathlib import Path

from openafm.errors import OpenAFMError
from openafm.io import JsonlError, read_jsonl, write_jsonl
from openafm.rl.preference.model import Level, PreferencePair
from openafm.splits import Split

N_GRADES = 3
VALIDATION_PERCENT = 20     # of the training prompts, by hash: the slice settings are chosen on


class Source(str, enum.Enum):
    MATH = "math"
    INSTRUCTIONS = "instructions"
    TOOL_CALL = "tool-call"


class PairFormatError(OpenAFMError, JsonlError):
    """A pairs JSONL line that is not a graded pair (names file:line, the key and what is accepted)."""


class GradeMismatchError(OpenAFMError, AssertionError):
    """A built response whose grade the source's checker does not confirm (names the response and the verdict)."""


# (higher grade, lower grade) -> level, per source
LADDERS: dict[Source, dict[tuple[int, int], Level]] = {
    Source.MATH: {(2, 1): Level.SLIGHTLY_BETTER, (1, 0): Level.BETTER, (2, 0): Level.SIGNIFICANTLY_BETTER},
    Source.INSTRUCTIONS: {(2, 1): Level.BETTER, (1, 0): Level.BETTER, (2, 0): Level.SIGNIFICANTLY_BETTER},
    Source.TOOL_CALL: {(2, 1): Level.BETTER, (1, 0): Level.SLIGHTLY_BETTER, (2, 0): Level.SIGNIFICANTLY_BETTER},
}
GRADE_NAMES: dict[Source, tuple[str, ...]] = {
    Source.MATH: ("a wrong answer", "a correct but unmarked answer", "a correct, marked answer"),
    Source.INSTRUCTIONS: ("no constraint met", "some constraints met", "every constraint met"),
    Source.TOOL_CALL: ("the wrong function", "the right function with wrong arguments", "the exact call"),
}


@dataclasses.dataclass(frozen=True)
class GradedResponse:
    text: str
    grade: int              # 0 .. N_GRADES - 1, confirmed by the source's checker
    reason: str             # why it has that grade, in words
    verifier: float         # the source's verifier reward (rl/rewards/registry.py)


@dataclasses.dataclass(frozen=True)
class PromptGroup:
    source: Source
    group: str              # the prompt's id: "math chain_sum seed 0 #3", a BFCL question id
    split: Split
    prompt: str
    responses: tuple[GradedResponse, ...]


@dataclasses.dataclass(frozen=True)
class GradedPair:
    source: Source
    group: str
    split: Split
    pair: PreferencePair    # prompt, chosen, rejected, level, grades
    reason: str
    chosen_verifier: float | None = None
    rejected_verifier: float | None = None

    def to_dict(self) -> dict:
        p = self.pair
        return {"source": self.source.value, "group": self.group, "split": self.split.value, "prompt": p.prompt,
                "chosen": p.chosen, "rejected": p.rejected, "level": p.level.value, "chosen_grade": p.chosen_grade,
                "rejected_grade": p.rejected_grade, "reason": self.reason, "chosen_verifier": self.chosen_verifier,
                "rejected_verifier": self.rejected_verifier}


def pairs_of(group: PromptGroup) -> list[GradedPair]:
    """Every (higher grade, lower grade) couple of the group's responses, its level from the source's ladder."""
    grades = sorted(r.grade for r in group.responses)
    if len(set(grades)) != len(grades):
        raise GradeMismatchError(f"{group.group}: responses of grades {grades}; a group has one response per grade")
    out = []
    for a, b in itertools.combinations(sorted(group.responses, key=lambda r: -r.grade), 2):
        level = LADDERS[group.source][(a.grade, b.grade)]
        names = GRADE_NAMES[group.source]
        reason = f"{names[a.grade]} > {names[b.grade]}: {a.reason}; rejected: {b.reason}"
        out.append(GradedPair(group.source, group.group, group.split,
                              PreferencePair(group.prompt, a.text, b.text, level, a.grade, b.grade), reason,
                              a.verifier, b.verifier))
    return out


def all_pairs(groups: Iterable[PromptGroup]) -> list[GradedPair]:
    return [p for g in groups for p in pairs_of(g)]


# --- JSONL -------------------------------------------------------------------------------------------------------

REQUIRED = {"source": str, "group": str, "split": str, "prompt": str, "chosen": str, "rejected": str, "level": str,
            "chosen_grade": int, "rejected_grade": int, "reason": str}
OPTIONAL = {"chosen_verifier": (int, float, type(None)), "rejected_verifier": (int, float, type(None))}


def write_pairs(path: str | Path, pairs: Iterable[GradedPair]) -> int:
    return write_jsonl(path, (p.to_dict() for p in pairs))


def read_pairs(path: str | Path) -> list[GradedPair]:
    """Every line of `path` as a GradedPair; the first bad line raises PairFormatError naming path:line."""
    path = Path(path)
    if not path.is_file():
        raise PairFormatError(f"{path}: no such file (a JSONL file of graded pairs)")
    out = [_pair_from_object(d, f"{path}:{lineno}") for lineno, d in enumerate(_objects(path), start=1)]
    if not out:
        raise PairFormatError(f"{path}: no pairs (the file is empty)")
    return out


def _objects(path: Path):
    """read_jsonl's objects; its line errors (blank, not JSON, not an object) as PairFormatError."""
    try:
        yield from read_jsonl(path)
    except JsonlError as e:
        raise PairFormatError(str(e)) from None


def _pair_from_object(d: dict, where: str) -> GradedPair:
    missing, extra = sorted(set(REQUIRED) - set(d)), sorted(set(d) - set(REQUIRED) - set(OPTIONAL))
    if missing or extra:
        raise PairFormatError(f"{where}: a graded pair has the keys {sorted(REQUIRED)} (optionally "
                              f"{sorted(OPTIONAL)}); missing {missing}, unknown {extra}")
    for key, kind in (REQUIRED | OPTIONAL).items():
        if key in d and (not isinstance(d[key], kind) or isinstance(d[key], bool)):
            raise PairFormatError(f"{where}: {key!r} must be {_kind_name(kind)}, got {d[key]!r}")
    for key, enum_ in (("source", Source), ("split", Split), ("level", Level)):
        if d[key] not in {e.value for e in enum_}:
            raise PairFormatError(f"{where}: {key}={d[key]!r}; accepted: {[e.value for e in enum_]}")
    for key in ("chosen_grade", "rejected_grade"):
        if not 0 <= d[key] < N_GRADES:
            raise PairFormatError(f"{where}: {key}={d[key]} must lie in 0..{N_GRADES - 1}")
    if d["chosen_grade"] <= d["rejected_grade"]:
        raise PairFormatError(f"{where}: chosen_grade={d['chosen_grade']} must exceed "
                              f"rejected_grade={d['rejected_grade']} (the chosen response is the better graded)")
    for key in ("prompt", "chosen", "rejected"):
        if not d[key]:
            raise PairFormatError(f"{where}: {key!r} must be a non-empty string")
    pair = PreferencePair(d["prompt"], d["chosen"], d["rejected"], Level(d["level"]), d["chosen_grade"],
                          d["rejected_grade"])
    return GradedPair(Source(d["source"]), d["group"], Split(d["split"]), pair, d["reason"],
                      d.get("chosen_verifier"), d.get("rejected_verifier"))


def _kind_name(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({str: "a string", int: "an integer", float: "a number", type(None): "null"}[k]
                       for k in kinds)


def by_split(pairs: Sequence[GradedPair], split: Split) -> list[GradedPair]:
    return [p for p in pairs if p.split is split]


def is_validation(prompt: str, percent: int = VALIDATION_PERCENT) -> bool:
    """Whether a training prompt falls in the validation slice: the first 8 bytes of
    sha256("reward-validation:<prompt>") mod 100 below `percent` (stable across runs and machines)."""
    digest = hashlib.sha256(f"reward-validation:{prompt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 100 < percent


def carve_validation(pairs: Sequence[GradedPair], percent: int = VALIDATION_PERCENT
                     ) -> tuple[list[GradedPair], list[GradedPair]]:
    """Training pairs -> (fit, validation): every pair of a prompt on the same side. A held-out pair raises: the
    validation slice comes from the training split only."""
    if not 0 < percent < 100:
        raise ValueError(f"validation percent={percent} must lie in 1..99")
    held = [p.group for p in pairs if p.split is not Split.TRAIN]
    if held:
        raise ValueError(f"carve_validation takes training pairs only; {len(held)} are {Split.HELDOUT.value} "
                         f"(first: {held[0]!r})")
    fit, validation = [], []
    for p in pairs:
        (validation if is_validation(p.pair.prompt, percent) else fit).append(p)
    return fit, validation
