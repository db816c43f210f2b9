"""BFCL tool-use SFT data: the train/held-out split by question id, and every built example verified against the
eval's own parser and AST match and against the constrained tool-call grammar, rendered as the eval prompts."""

from __future__ import annotations

import hashlib
import importlib.util
import json

import llguidance
import pytest

from openafm.data.chat import ChatExample, read_chat_jsonl
from openafm.eval.bfcl_data import load_category, package_info, parse_calls_leniently, question_correct, split_of
from openafm.eval.registry import get_task
from openafm.eval.tool_use import ToolQuestion, _prompt, bfcl_items, tools_of
from openafm.fm.tool import tool_call_grammar
from openafm.rl.synthesis.tool_data import DEFAULT_CATEGORIES, bfcl_sft_examples, call_text
from openafm.runtime.constrained import accepts_text
from openafm.splits import Split
from openafm.train.sft import chat_tokens

pytestmark = pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None,
                                reason="bfcl-eval not installed (make setup)")


@pytest.fixture(scope="module")
def built():
    return bfcl_sft_examples(DEFAULT_CATEGORIES)


def test_the_split_is_a_stable_hash_of_the_id_with_a_quarter_held_out():
    for qid in ("simple_python_0", "multiple_17", "parallel_199"):
        h = int.from_bytes(hashlib.sha256(f"bfcl-split:{qid}".encode()).digest()[:8], "big") % 100
        assert split_of(qid) is (Split.HELDOUT if h < 25 else Split.TRAIN)
    _, data = package_info()
    for category in DEFAULT_CATEGORIES:
        every = load_category(data, category)
        train, held = load_category(data, category, Split.TRAIN), load_category(data, category, Split.HELDOUT)
        assert sorted(e["id"] for e in train + held) == sorted(e["id"] for e in every)
        assert 0.18 < len(held) / len(every) < 0.32


def test_heldout_eval_items_are_only_heldout_questions_and_the_default_is_unchanged():
    items, _ = bfcl_items("multiple", 1000, seed=0, task="t", split=Split.HELDOUT)
    assert items and all(split_of(q.id) is Split.HELDOUT for q in items)
    every, _ = bfcl_items("multiple", 1000, seed=0, task="t")
    assert len(every) == 200 and {q.id for q in items} < {q.id for q in every}
    for name in ("bfcl_parallel_multiple_heldout_constrained", "bfcl_simple_heldout"):
        built = get_task(name).build(5, 0, None)
        assert len(built.items) == 5 and all(split_of(q.id) is Split.HELDOUT for q in built.items)
    assert [q.id for q in get_task("bfcl_multiple").build(5, 0, None).items] == [q.id for q in every[:5]]


def test_every_example_is_train_split_and_scores_correct_and_is_admitted_by_the_grammar(built):
    examples, dropped = built
    _, data = package_info()
    entries = {e["id"]: e for c in DEFAULT_CATEGORIES for e in load_category(data, c)}
    assert len(examples) > 700 and len(dropped) < 20
    ids = [ex.meta["id"] for ex in examples]
    assert len(set(ids)) == len(ids) and not set(ids) & set(dropped)
    assert {i for i in entries if split_of(i) is Split.TRAIN} == set(ids) | {i for i in dropped}
    items = {q.id: q for c in DEFAULT_CATEGORIES for q in bfcl_items(c, 1000, seed=0, task="t")[0]}
    for ex in examples[::7]:
        e = entries[ex.meta["id"]]
        assert split_of(e["id"]) is Split.TRAIN and ex.prompt == e["question"]
        assert question_correct(parse_calls_leniently(ex.response), e["ground_truth"], e["functions"])
        q = items[e["id"]]
        assert ex.system == q.system
        grammar = llguidance.LLMatcher.grammar_from_lark(tool_call_grammar(tools_of(q), None, required=True))
        assert accepts_text(grammar, ex.response)


def test_call_text_is_the_grammars_compact_json_in_schema_order():
    functions = [{"name": "f", "description": "d", "parameters": {"type": "dict", "required": ["b"], "properties": {
        "b": {"type": "integer"}, "a": {"type": "string"}, "c": {"type": "float"}}}}]
    truth = [{"f": {"a": ["é", "x"], "b": [3.0, 3], "c": ["", 1.5]}}]
    text = call_text(truth, functions)
    assert text == '<tool_call>[{"name": "f", "arguments": {"b": 3, "a": "é"}}]</tool_call>'
    assert question_correct(parse_calls_leniently(text), truth, functions)


def test_the_example_renders_as_the_eval_prompts_it_and_roundtrips_jsonl(built, tokenizer, tmp_path):
    ex = built[0][0]
    q = ToolQuestion(id="x", question=ex.prompt, functions=[], ground_truth=[], system=ex.system)
    tokens = chat_tokens(tokenizer, ex)
    assert tokenizer.decode(tokens.ids[:tokens.start]) == _prompt(tokenizer, q)
    assert ex.response in tokenizer.decode(tokens.ids[tokens.start:])
    path = tmp_path / "tools.jsonl"
    path.write_text("".join(json.dumps(e.to_dict()) + "\n" for e in built[0][:3]))
    back = read_chat_jsonl(path)
    assert [(b.system, b.prompt, b.response, b.meta) for b in back] == \
        [(e.system, e.prompt, e.response, e.meta) for e in built[0][:3]]
    assert ChatExample("p", "r").system is None
