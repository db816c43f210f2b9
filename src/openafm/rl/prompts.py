"""RL prompt sets: where the prompts of one set come from, split into a train pool and a held-out slice that shares
no prompt with it. Each set pairs its prompts with a reward (rl/rewards/registry.py) in the RL config; this module only
builds the prompts and their targets.

    records = build_prompts(PromptSource.REASONING_GYM, {"dataset": "chain_sum"}, Split.TRAIN, size=500, seed=0)
    records[0].prompt, records[0].target        # the question with the answer hint, the reasoning-gym entry

Sources (PromptSource) and their options:
    reasoning-gym   dataset (a reasoning-gym name), config (that dataset's config keys, e.g. max_digits), hint
                    (appended to each question; default: end with a line 'Answer: ...'). Target: the entry.
    instructions    most (constraints per prompt, default 3): data/instructions' generator. Target: the constraints.
    bfcl            categories (default simple_python, multiple, parallel): BFCL questions (the bfcl-eval wheel)
                    with the framework's tools system prompt; the split is BFCL's by question id (rl/synthesis/tool_data.py,
                    the bfcl_*_heldout eval tasks). Target: {"truth", "functions"} for the tool-call reward.
    udhr            kinds (default both), languages (default all but English): UDHR translation / answer-in-a-
                    language prompts (rl/multilingual_prompts.py), split by article. Target: the reference text.
    tool-rounds     turns (default both: call, answer): single turns of the tool round trips the SFT data holds
                    (data/tool_rounds.py), split by tool family, so a held-out family (the default-model benchmark's
                    tool rounds) is never trained on. call: the question with the tools (target {"calls": [...]},
                    [] when no tool fits); answer: the transcript through the tool's result (target {"values"}).
                    For the tool-round reward.
    guided          no options: @generable requests with their schema injected as a session injects it
                    (data/guided.py), split by schema (that module's rule). Target: {"schema", "counts"} for the
                    guided reward.
    file            path: JSONL of {"prompt": str, "target": any, "system": optional str}; the file is the train
                    pool, `heldout_path` (optional) the held-out one.

Split (reasoning-gym, instructions): a prompt's split is a function of its question text alone
(openafm.splits.split_of(text, "prompt")): each split draws from its own seed (the held-out one from seed +
HELDOUT_SEED_OFFSET) and keeps only the questions of its split. A held-out question is therefore never in a train
pool of any size, nor in the reward model's pairs (rl/preference/sources.py uses the same rule), even where the
problem space is small (reasoning-gym's single-digit sums). Such a space may give fewer held-out prompts than asked.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from openafm.data.guided import guided_example
from openafm.data.instructions import instruction_prompts
from openafm.data.tool_rounds import Turn, tool_round_turns
from openafm.errors import ConfigError
from openafm.eval.bfcl_data import load_category, package_info
from openafm.eval.tool_use import DescribedTool
from openafm.fm.tool import MAX_CALLS_PER_TURN, tools_prompt
from openafm.io import JsonlError, read_jsonl
from openafm.rl.multilingual_prompts import Kind as UDHRKind
from openafm.rl.multilingual_prompts import udhr_prompts
from openafm.rl.rewards.registry import DEFAULT_MARKER
from openafm.rl.synthesis.tool_data import TASK as TOOL_TASK
from openafm.splits import Split, first_of_split

ANSWER_HINT = f"\nEnd your reply with a line '{DEFAULT_MARKER} ' followed by the final answer."
HELDOUT_SEED_OFFSET = 1_000_003
RL_BFCL_CATEGORIES = ("simple_python", "multiple", "parallel")


class PromptSource(str, enum.Enum):
    REASONING_GYM = "reasoning-gym"
    INSTRUCTIONS = "instructions"
    BFCL = "bfcl"
    UDHR = "udhr"
    GUIDED = "guided"
    TOOL_ROUNDS = "tool-rounds"
    FILE = "file"


@dataclasses.dataclass(frozen=True)
class PromptRecord:
    prompt: str                      # the user turn
    target: Any                      # what the set's reward compares the response with
    where: str                       # "reasoning-gym chain_sum seed 0 #12", "prompts.jsonl:7"
    system: str | None = None        # a system turn before the user turn (tool definitions, ...)
    key: str = ""                    # what makes two prompts the same question (its split is split_of(key))
    history: tuple[dict, ...] = ()   # turns after the user turn, before the generation prompt ({"role", "content"}:
                                     # a tool call and its result, for a prompt that asks for the turn after them)


OPTIONS = {PromptSource.REASONING_GYM: {"dataset", "config", "hint"},
           PromptSource.INSTRUCTIONS: {"most"},
           PromptSource.BFCL: {"categories"},
           PromptSource.UDHR: {"kinds", "languages"},
           PromptSource.GUIDED: set(),
           PromptSource.TOOL_ROUNDS: {"turns"},
           PromptSource.FILE: {"path", "heldout_path"}}


def check_options(source: PromptSource, options: Mapping[str, Any], where: str) -> None:
    unknown = sorted(set(options) - OPTIONS[source])
    if unknown:
        raise ConfigError(f"{where}: unknown option(s) {unknown} for source {source.value!r}; accepted: "
                          f"{sorted(OPTIONS[source])}")
    if source is PromptSource.REASONING_GYM and not isinstance(options.get("dataset"), str):
        raise ConfigError(f"{where}: source reasoning-gym needs options.dataset (a reasoning-gym dataset name)")
    if source is PromptSource.FILE and not isinstance(options.get("path"), str):
        raise ConfigError(f"{where}: source file needs options.path (a JSONL file of {{prompt, target}})")


def build_prompts(source: PromptSource | str, options: Mapping[str, Any], split: Split | str, *, size: int,
                  seed: int) -> list[PromptRecord]:
    """`size` prompts of the split (fewer for a file, or when held-out prompts repeat train ones)."""
    source, split = PromptSource(source), Split(split)
    check_options(source, options, f"prompt source {source.value}")
    if size < 1:
        raise ConfigError(f"prompt set size={size} must be >= 1")
    if source is PromptSource.BFCL:
        return _bfcl(options, split)[:size]
    if source is PromptSource.UDHR:
        return _udhr(options, split)[:size]
    if source is PromptSource.GUIDED:
        return [_guided(guided_example(seed, i, split)) for i in range(size)]
    if source is PromptSource.TOOL_ROUNDS:
        return _tool_rounds(options, split, size, seed)
    if source is PromptSource.FILE:
        key = "path" if split is Split.TRAIN else "heldout_path"
        if key not in options:
            return []
        return _file(Path(options[key]))[:size]
    draw = _reasoning_gym if source is PromptSource.REASONING_GYM else _instructions
    seed = seed if split is Split.TRAIN else seed + HELDOUT_SEED_OFFSET
    return first_of_split(lambda n: draw(options, n, seed), lambda r: r.key, "prompt", split, size)


def _reasoning_gym(options: Mapping[str, Any], size: int, seed: int) -> list[PromptRecord]:
    import reasoning_gym  # heavy optional import (loads every dataset module)

    name, config, hint = options["dataset"], dict(options.get("config") or {}), options.get("hint", ANSWER_HINT)
    try:
        data = reasoning_gym.create_dataset(name, size=size, seed=seed, **config)
    except (KeyError, ValueError, TypeError) as e:
        raise ConfigError(f"reasoning-gym dataset {name!r} with config {config}: {e}") from None
    return [PromptRecord(e["question"] + hint, e, f"reasoning-gym {name} seed {seed} #{i}", key=e["question"])
            for i, e in enumerate(data)]


def _instructions(options: Mapping[str, Any], size: int, seed: int) -> list[PromptRecord]:
    return [PromptRecord(p.prompt, [c.to_dict() for c in p.constraints], p.where, key=p.prompt)
            for p in instruction_prompts(size, seed=seed, most=int(options.get("most", 3)))]


def _bfcl(options: Mapping[str, Any], split: Split) -> list[PromptRecord]:
    version, data = package_info(TOOL_TASK)
    out = []
    for category in options.get("categories", RL_BFCL_CATEGORIES):
        for e in load_category(data, category, split):
            if len(e["ground_truth"]) > MAX_CALLS_PER_TURN:
                continue                       # the tool-call grammar's limit (rl/synthesis/tool_data.py drops them too)
            out.append(PromptRecord(e["question"], {"truth": e["ground_truth"], "functions": e["functions"]},
                                    f"bfcl-eval {version} {category} {e['id']}",
                                    tools_prompt([DescribedTool(f) for f in e["functions"]]), key=e["id"]))
    return out


def _udhr(options: Mapping[str, Any], split: Split) -> list[PromptRecord]:
    kinds = [UDHRKind(k) for k in options.get("kinds", [k.value for k in UDHRKind])]
    records = udhr_prompts(split, languages=options.get("languages"), kinds=kinds)
    return [PromptRecord(r.prompt, r.target, r.source, key=r.source) for r in records]


def _tool_rounds(options: Mapping[str, Any], split: Split, size: int, seed: int) -> list[PromptRecord]:
    accepted = [t.value for t in Turn]
    turns = options.get("turns", accepted)
    if not isinstance(turns, list) or not turns or any(t not in accepted for t in turns):
        raise ConfigError(f"prompt source tool-rounds: turns={turns!r} must be a non-empty list of {accepted}")
    out = []
    for t in tool_round_turns(size, seed=seed, split=split, turns=[Turn(t) for t in turns]):
        system, user, *history = t.messages
        out.append(PromptRecord(user["content"], {"turn": t.turn.value, **t.target}, t.where, system["content"],
                                key=t.where, history=tuple(history)))
    return out


def _guided(ex) -> PromptRecord:
    return PromptRecord(ex.prompt, {"schema": ex.schema, "counts": [list(c) for c in ex.counts]}, ex.where,
                        key=json.dumps(ex.schema, sort_keys=True))


def _file(path: Path) -> list[PromptRecord]:
    if not path.is_file():
        raise JsonlError(f"{path}: no such file (a JSONL file of {{\"prompt\", \"target\"}} objects)")
    out = []
    for lineno, row in enumerate(read_jsonl(path), start=1):
        where = f"{path}:{lineno}"
        extra = sorted(set(row) - {"prompt", "target", "system"})
        if extra or not isinstance(row.get("prompt"), str) or not row["prompt"] or "target" not in row:
            raise JsonlError(f"{where}: a prompt line is {{\"prompt\": non-empty string, \"target\": any, "
                             f"\"system\": optional string}}; got keys {sorted(row)}")
        if row.get("system") is not None and not isinstance(row["system"], str):
            raise JsonlError(f"{where}: \"system\" must be a string, got {type(row['system']).__name__}")
        out.append(PromptRecord(row["prompt"], row["target"], where, row.get("system"), key=row["prompt"]))
    if not out:
        raise JsonlError(f"{path}: no prompts (the file is empty)")
    return out
