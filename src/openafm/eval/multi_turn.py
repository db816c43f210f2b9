"""BFCL multi-turn (base): several user turns over stateful tool environments, scored by execution.

The questions, ground-truth call sequences (one list of Python call strings per turn), function docs per class
(data/multi_turn_func_doc) and the executable environments (GorillaFileSystem, MathAPI, MessageAPI,
TwitterAPI, TicketAPI, TradingBot, TravelAPI, VehicleControlAPI, from bfcl_eval's func_source_code modules)
are the `bfcl-eval` wheel's. Only those environment classes are imported from it (they are the data); the
driver and the checker are written here.

Driver, per question: the involved classes are instantiated twice (the model's set and the ground truth's),
each loaded with `_load_scenario(initial_config[class])` (MathAPI has no state and no loader). The system
prompt lists the involved classes' functions (minus the question's `excluded_function`) in the framework's
tools format, as eval/tool_use.py does. Each user turn: the model replies; the calls in its reply
(`<tool_call>[...]</tool_call>`) run on its instances, in order, and each result (the return value as
JSON, or "Error: ..." for an unknown function, bad arguments or an exception) comes back as a tool message;
up to MAX_STEPS replies per turn, the turn ending early at a reply without calls. Then the turn's
ground-truth calls run on the other set.

Checker, after every turn:
* state — for each involved class, the public state of the two instances is equal: `vars(instance)` minus
  names starting with "_" (BFCL's rule; private names hold random generators, timestamps and the like),
  compared with == (GorillaFileSystem's Directory/File objects compare by name and contents).
* responses — every ground-truth call's result (as JSON text) appears among the results of the model's
  calls in that turn (BFCL's response check: read-only calls change no state, so only this sees them).
Metrics per question: `state_match` (headline: the state matched after every turn), `turn_state_match`
(fraction of turns whose state matched), `execution_match` (state and responses matched after every turn:
BFCL's multi-turn rule, less its check that no turn is left empty), `has_call`. State match is the headline
because it is what the task asks for (the environment ends up as asked), and it does not depend on how
results are printed; execution_match is the stricter BFCL-like number beside it.

Modes: `ToolMode.FREE` — greedy text stopped at "</tool_call>", calls read leniently; `ToolMode.CONSTRAINED`
— the framework's tool-call grammar with required=False: a schema-valid call list or a plain-text answer.
A question is left out (with the reason, in `left_out`) when a class's module does not import with the
wheel installed --no-deps, or when the grammar engine rejects one of its function schemas.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
import random
from collections.abc import Callable
from dataclasses import dataclass

from openafm.eval.bfcl_data import package_info, parse_calls_leniently
from openafm.eval.tool_use import MAX_TOKENS, DescribedTool, ToolMode
from openafm.fm.errors import InvalidGenerationSchemaError
from openafm.fm.tool import CALL_CLOSE, tool_call_grammar, tools_prompt
from openafm.io import Blank, read_jsonl
from openafm.runtime.constrained import GrammarConstraint
from openafm.runtime.generate import FinishReason, generate_tokens

CATEGORY = "multi_turn_base"
MAX_STEPS = 3                   # model replies per user turn
ENV_PACKAGE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
CLASSES = {                     # class name -> (module in ENV_PACKAGE, its doc file in data/multi_turn_func_doc)
    "GorillaFileSystem": ("gorilla_file_system", "gorilla_file_system.json"),
    "MathAPI": ("math_api", "math_api.json"),
    "MessageAPI": ("message_api", "message_api.json"),
    "TwitterAPI": ("posting_api", "posting_api.json"),
    "TicketAPI": ("ticket_api", "ticket_api.json"),
    "TradingBot": ("trading_bot", "trading_bot.json"),
    "TravelAPI": ("travel_booking", "travel_booking.json"),
    "VehicleControlAPI": ("vehicle_control", "vehicle_control.json"),
}

Reply = Callable[[list[dict]], str]     # chat messages so far -> the model's next reply text


@dataclass(frozen=True)
class MultiTurnQuestion:
    id: str
    turns: list[str]                    # the user message of each turn
    classes: list[str]
    initial_config: dict                # class name -> scenario
    functions: list[dict]               # BFCL docs of the involved classes' functions, exclusions removed
    ground_truth: list[list[str]]       # per turn, Python call strings
    system: str                         # the tools prompt
    lang: str = "en"


# ---- environments ---------------------------------------------------------------------------------

def environment_class(name: str) -> type:
    """The executable class; ImportError when its module needs a package that is not installed."""
    if name not in CLASSES:
        raise ValueError(f"unknown BFCL environment class {name!r}; known: {', '.join(CLASSES)}")
    return getattr(importlib.import_module(f"{ENV_PACKAGE}.{CLASSES[name][0]}"), name)


def new_environment(classes: list[str], initial_config: dict) -> dict[str, object]:
    env = {}
    for name in classes:
        instance = environment_class(name)()
        if hasattr(instance, "_load_scenario"):
            instance._load_scenario(copy.deepcopy(initial_config.get(name, {})))
        env[name] = instance
    return env


def public_state(instance: object) -> dict:
    return {k: v for k, v in vars(instance).items() if not k.startswith("_")}


def same_state(a: dict[str, object], b: dict[str, object]) -> bool:
    """Every class's public state equal in the two environments (same classes required)."""
    if a.keys() != b.keys():
        raise ValueError(f"environments of different classes: {sorted(a)} vs {sorted(b)}")
    return all(public_state(a[n]) == public_state(b[n]) for n in a)


def execute(env: dict[str, object], allowed: set[str], name: str, args: list, kwargs: dict) -> str:
    """Run one call on the environment; the result as JSON text, or an error message (never raises)."""
    owner = next((inst for inst in env.values() if callable(getattr(inst, name, None))), None)
    if owner is None or name not in allowed or name.startswith("_"):
        return f"Error: no function named {name!r}"
    try:
        result = getattr(owner, name)(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the model's mistakes are results, as in BFCL
        return f"Error: {type(e).__name__}: {e}"
    return json.dumps(result, default=str)


def parse_call_string(text: str) -> tuple[str, list, dict]:
    """A ground-truth call "mv(source='a', destination='b')" as (name, positional args, keyword args)."""
    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain function call: {text!r}")
    return (node.func.id, [ast.literal_eval(a) for a in node.args],
            {k.arg: ast.literal_eval(k.value) for k in node.keywords})


def call_as_json(env: dict[str, object], text: str) -> dict:
    """A ground-truth call string as {"name", "arguments"} (positional arguments named by the signature)."""
    name, args, kwargs = parse_call_string(text)
    owner = next(inst for inst in env.values() if callable(getattr(inst, name, None)))
    bound = inspect.signature(getattr(owner, name)).bind(*args, **kwargs)
    return {"name": name, "arguments": dict(bound.arguments)}


# ---- items ----------------------------------------------------------------------------------------

def multi_turn_items(n: int, *, seed: int, task: str) -> tuple[list[MultiTurnQuestion], dict[str, str]]:
    """(n seeded questions, {left-out id: reason}) — see the module doc for what is left out."""
    _, data = package_info(task)
    questions = list(read_jsonl(data / f"BFCL_v4_{CATEGORY}.json", Blank.SKIP))
    answers = {e["id"]: e["ground_truth"]
               for e in read_jsonl(data / "possible_answer" / f"BFCL_v4_{CATEGORY}.json", Blank.SKIP)}
    docs, broken = {}, {}
    for name, (_, doc_file) in CLASSES.items():
        try:
            environment_class(name)
        except ImportError as e:
            broken[name] = f"{name} does not import: {e}"
            continue
        docs[name] = list(read_jsonl(data / "multi_turn_func_doc" / doc_file, Blank.SKIP))
    rng = random.Random(f"bfcl:{CATEGORY}:{seed}")
    items, left_out = [], {}
    for i in rng.sample(range(len(questions)), len(questions)):
        if len(items) == n:
            break
        q = questions[i]
        missing = [broken.get(c, f"unknown class {c}") for c in q["involved_classes"] if c not in docs]
        if missing:
            left_out[q["id"]] = "; ".join(missing)
            continue
        excluded = set(q.get("excluded_function", []))
        functions = [f for c in q["involved_classes"] for f in docs[c] if f["name"] not in excluded]
        try:
            system = tools_prompt([DescribedTool(f) for f in functions])
        except InvalidGenerationSchemaError as e:
            left_out[q["id"]] = f"schema rejected: {e}"[:200]
            continue
        items.append(MultiTurnQuestion(
            id=q["id"], turns=[_user_text(t) for t in q["question"]], classes=q["involved_classes"],
            initial_config=q["initial_config"], functions=functions, ground_truth=answers[q["id"]], system=system))
    return items, left_out


def _user_text(turn: list[dict]) -> str:
    if len(turn) != 1 or turn[0]["role"] != "user":
        raise ValueError(f"expected one user message per turn, got {turn!r}")
    return turn[0]["content"]


# ---- driver and checker ---------------------------------------------------------------------------

def run_question(q: MultiTurnQuestion, reply: Reply) -> dict:
    """Drive one question with `reply` (see the module doc); the record's metrics and per-turn details."""
    mine, truth = new_environment(q.classes, q.initial_config), new_environment(q.classes, q.initial_config)
    allowed = {f["name"] for f in q.functions}
    messages: list[dict] = [{"role": "system", "content": q.system}]
    turns, outputs, n_calls = [], [], 0
    for user, gt_calls in zip(q.turns, q.ground_truth, strict=True):
        messages.append({"role": "user", "content": user})
        results, calls = [], []
        for _ in range(MAX_STEPS):
            text = reply(messages)
            outputs.append(text)
            messages.append({"role": "assistant", "content": text})
            step_calls = parse_calls_leniently(text)
            if not step_calls:
                break
            for c in step_calls:
                args = c["arguments"] if isinstance(c["arguments"], dict) else {}
                result = execute(mine, allowed, str(c["name"]), [], args)
                messages.append({"role": "tool", "content": result})
                results.append(result)
                calls.append(c)
        n_calls += len(calls)
        gt_results = [execute(truth, allowed | _all_names(truth), *parse_call_string(s)) for s in gt_calls]
        turns.append({"calls": json.loads(json.dumps(calls, default=str)), "state": same_state(mine, truth),
                      "responses": all(r in results for r in gt_results)})
    state = all(t["state"] for t in turns)
    metrics = {"state_match": float(state),
               "turn_state_match": sum(t["state"] for t in turns) / len(turns),
               "execution_match": float(state and all(t["responses"] for t in turns)),
               "has_call": float(n_calls > 0)}
    return {"id": q.id, "lang": q.lang, "prompt": q.turns[0], "output": "\n---\n".join(outputs),
            "turns": turns, "ground_truth": q.ground_truth, "score": metrics["state_match"], "metrics": metrics}


def _all_names(env: dict[str, object]) -> set[str]:
    # ground-truth calls may use any public function of their classes (exclusions only narrow the model's list)
    return {n for inst in env.values() for n in dir(inst) if not n.startswith("_")}


def model_reply(model, tokenizer, q: MultiTurnQuestion, mode: ToolMode) -> Reply:
    """The model as a Reply: greedy, MAX_TOKENS per reply; a conversation past the context window gets ""
    (no calls) from then on, and the record says so through its empty outputs."""
    window = model.kv_plan.max_seq_len
    grammar = tool_call_grammar([DescribedTool(f) for f in q.functions], None) if mode is ToolMode.CONSTRAINED \
        else None

    def reply(messages: list[dict]) -> str:
        ids = tokenizer.encode(tokenizer.apply_chat_template(messages, add_generation_prompt=True))
        if len(ids) + MAX_TOKENS > window:
            return ""
        constraint = GrammarConstraint.from_lark(grammar, tokenizer) if grammar is not None else None
        gen, = generate_tokens(model, [ids], max_new_tokens=MAX_TOKENS, constraint=constraint,
                               stop=[CALL_CLOSE] if constraint is None else [],
                               eos_token_ids=set(tokenizer.eos_token_ids), tokenizer=tokenizer)
        text = gen.text or ""
        return text + CALL_CLOSE if constraint is None and gen.finish_reason == FinishReason.STOP else text

    return reply


def evaluate_multi_turn(model, tokenizer, items: list[MultiTurnQuestion], *, mode: ToolMode) -> list[dict]:
    return [run_question(q, model_reply(model, tokenizer, q, mode)) for q in items]
