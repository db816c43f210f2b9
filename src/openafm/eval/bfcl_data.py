"""BFCL (Berkeley Function Calling Leaderboard) data for the `bfcl_*` eval tasks and benchmarks/bfcl.py: the
question and possible-answer files shipped in the `bfcl-eval` wheel, BFCL function docs as JSON Schema, a lenient
reader of tool calls in free text, and an AST-match checker (written here from the rules below, not copied from
bfcl-eval, whose code is never imported).

AST match of one predicted call against one ground-truth call `{name: {param: [acceptable values]}}`:
the name is the ground truth's; every parameter the function requires is present; every predicted
parameter is one the ground truth lists, with a value among its acceptable values; a ground-truth
parameter may be missing only when "" is among its acceptable values. Values: numbers by value (an int
equals the same float; booleans are not numbers), strings case-insensitively after trimming, lists
element by element, dicts key by key (a ground-truth dict whose values are all lists is itself a nested
possible answer: acceptable values per key), null only as null.

Split: every question id falls, by a stable hash, into the train split (post-training data: rl/synthesis/tool_data.py) or
the held-out split (openafm.splits.HELDOUT_PERCENT of the ids; the `bfcl_*_heldout` eval tasks), so SFT on the train split can
be evaluated on questions it never saw. `split_of(id)` depends on the id alone, not on the file or its order.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

from openafm.errors import MissingTaskDataError
from openafm.io import Blank, read_jsonl
from openafm import splits
from openafm.splits import Split

PACKAGE = "bfcl-eval"
INSTALL_COMMAND = f"pip install --no-deps {PACKAGE}"
CATEGORY_ALIASES = {"simple_python": ("simple_python", "simple"), "multiple": ("multiple",),
                    "parallel": ("parallel",), "parallel_multiple": ("parallel_multiple",)}
_TYPES = {"dict": "object", "float": "number", "tuple": "array", "integer": "integer", "string": "string",
          "array": "array", "boolean": "boolean", "any": None}
_DROPPED = {"optional"}           # BFCL's own annotation; "required" already says which parameters must be given


def split_of(question_id: str) -> Split:
    """TRAIN or HELDOUT for a question id (openafm.splits: the same split wherever the question is drawn)."""
    return splits.split_of(question_id, "bfcl")


def in_split(question_id: str, split: Split | None) -> bool:
    """Whether the question is in `split` (None: every question is)."""
    return split is None or split_of(question_id) is Split(split)


# ---- the data files -------------------------------------------------------------------------------

def package_info(task: str = "bfcl") -> tuple[str, Path]:
    """(bfcl-eval version, its data folder). Only the data files are read; the package is not imported.
    Raises MissingTaskDataError naming the install command when it is absent."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise MissingTaskDataError(task, PACKAGE, INSTALL_COMMAND)
    data = Path(list(spec.submodule_search_locations)[0]) / "data"
    return importlib.metadata.version(PACKAGE), data


def category_files(data: Path, category: str) -> tuple[Path, Path]:
    """(questions, possible answers) of a category: the newest BFCL_v*_ file under any of its names."""
    found = []
    for name in CATEGORY_ALIASES.get(category, (category,)):
        for q in data.glob(f"BFCL_v*_{name}.json"):
            m = re.fullmatch(rf"BFCL_v(\d+)_{re.escape(name)}\.json", q.name)
            a = data / "possible_answer" / q.name
            if m and a.is_file():
                found.append((int(m.group(1)), q, a))
    if not found:
        raise ValueError(f"no BFCL question + possible_answer files for {category!r} under {data}; "
                         f"categories: {', '.join(CATEGORY_ALIASES)}")
    _, q, a = max(found)
    return q, a


def load_category(data: Path, category: str, split: Split | None = None) -> list[dict]:
    """Entries {id, question (the single user turn), functions, ground_truth} of the split, in file order."""
    q_path, a_path = category_files(data, category)
    answers = {e["id"]: e["ground_truth"] for e in read_jsonl(a_path, Blank.SKIP)}
    out = []
    for e in read_jsonl(q_path, Blank.SKIP):
        if not in_split(e["id"], split):
            continue
        turns = e["question"]
        if len(turns) != 1 or len(turns[0]) != 1 or turns[0][0]["role"] != "user":
            raise ValueError(f"{e['id']}: expected one single-message user turn, got {turns!r}")
        out.append({"id": e["id"], "question": turns[0][0]["content"], "functions": e["function"],
                    "ground_truth": answers[e["id"]]})
    return out


# ---- BFCL function docs -> JSON Schema ------------------------------------------------------------

def to_json_schema(node: dict) -> dict:
    """BFCL's JSON-Schema-like parameter doc as JSON Schema: dict->object, float->number, tuple->array,
    any->no type; objects with properties get additionalProperties: false (a call may not invent
    arguments); other keywords pass through unchanged, so the engine judges them."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key == "type":
            if value not in _TYPES:
                raise ValueError(f"unknown BFCL type {value!r}")
            if _TYPES[value] is not None:
                out["type"] = _TYPES[value]
        elif key == "properties":
            out["properties"] = {k: to_json_schema(v) for k, v in value.items()}
        elif key == "items":
            out["items"] = to_json_schema(value)
        else:
            out[key] = value
    if out.get("type") == "object" and "properties" in out:
        out.setdefault("additionalProperties", False)
    return out


# ---- free text -> calls ---------------------------------------------------------------------------

def parse_calls_leniently(text: str) -> list[dict]:
    """Every {"name", "arguments"} object found in the text: inside <tool_call>...</tool_call> blocks (an
    unclosed last block runs to the end), or anywhere when there is no block; a JSON list contributes its
    items; "parameters" is taken for "arguments", and arguments given as a JSON string are decoded."""
    blocks = re.findall(r"<tool_call>(.*?)(?:</tool_call>|$)", text, flags=re.S)
    calls = []
    for block in blocks or [text]:
        for value in _json_values(block):
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, dict) and "name" in item:
                    args = item.get("arguments", item.get("parameters", {}))
                    if isinstance(args, str):
                        try:
                            args = json.loads(args)
                        except json.JSONDecodeError:
                            pass
                    calls.append({"name": item["name"], "arguments": args})
    return calls


def _json_values(text: str):
    decoder, i = json.JSONDecoder(), 0
    while i < len(text):
        if text[i] in "[{":
            try:
                value, end = decoder.raw_decode(text, i)
            except json.JSONDecodeError:
                i += 1
                continue
            yield value
            i = end
        else:
            i += 1


# ---- AST match ------------------------------------------------------------------------------------

def call_matches(call: dict, truth: dict, functions: list[dict]) -> bool:
    """One predicted call {"name", "arguments"} against one ground-truth call {name: {param: [values]}}."""
    (name, expected), = truth.items()
    args = call.get("arguments")
    if call.get("name") != name or not isinstance(args, dict):
        return False
    doc = next((f for f in functions if f["name"] == name), None)
    required = doc["parameters"].get("required", []) if doc else []
    if any(p not in args for p in required):
        return False
    if any(p not in expected or not _acceptable(v, expected[p]) for p, v in args.items()):
        return False
    return all(p in args or "" in values for p, values in expected.items())


def question_correct(calls: list[dict], truth: list[dict], functions: list[dict]) -> bool:
    """As many calls as the ground truth has, each ground-truth call matched by a different call (any order)."""
    if len(calls) != len(truth):
        return False
    ok = [[call_matches(c, t, functions) for t in truth] for c in calls]
    return _perfect_matching(ok)


def _perfect_matching(ok: list[list[bool]]) -> bool:
    match: dict[int, int] = {}                 # truth index -> call index

    def assign(c: int, seen: set[int]) -> bool:
        for t, good in enumerate(ok[c]):
            if good and t not in seen:
                seen.add(t)
                if t not in match or assign(match[t], seen):
                    match[t] = c
                    return True
        return False

    return all(assign(c, set()) for c in range(len(ok)))


def _acceptable(value: Any, values: list) -> bool:
    return any(_equal(value, v) for v in values)


def _equal(pred: Any, truth: Any) -> bool:
    if isinstance(truth, bool) or truth is None:
        return pred is truth
    if isinstance(truth, (int, float)):
        return isinstance(pred, (int, float)) and not isinstance(pred, bool) and float(pred) == float(truth)
    if isinstance(truth, str):
        return isinstance(pred, str) and pred.strip().lower() == truth.strip().lower()
    if isinstance(truth, list):
        return isinstance(pred, list) and len(pred) == len(truth) and all(map(_equal, pred, truth))
    if isinstance(truth, dict):
        if not isinstance(pred, dict):
            return False
        if truth and all(isinstance(v, list) for v in truth.values()):   # nested possible answer
            return (all(k in truth and _acceptable(v, truth[k]) for k, v in pred.items())
                    and all(k in pred or "" in vs for k, vs in truth.items()))
        return pred.keys() == truth.keys() and all(_equal(pred[k], truth[k]) for k in truth)
    raise ValueError(f"unexpected ground-truth value {truth!r}")
