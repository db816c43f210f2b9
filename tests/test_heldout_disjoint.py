"""Every held-out set the default model's figures are measured on is disjoint from every pool its recipe trains on,
by construction (openafm.splits): each test draws a training pool far larger than the recipe's and checks that no
held-out item is in it."""

from __future__ import annotations

import re

from openafm.data.guided import guided_example
from openafm.data.tool_rounds import families, tool_round_cases, tool_round_conversations
from openafm.eval.bfcl_data import load_category, package_info
from openafm.eval.instruction_following import instruction_items
from openafm.eval.texts import english_text
from openafm.pipelines.sft_data import builtin_conversations
from openafm.rl.multilingual_prompts import udhr_prompts
from openafm.rl.prompts import PromptSource, build_prompts
from openafm.rl.synthesis.tool_data import TASK as TOOL_TASK
from openafm.splits import Split

SMALL_MATH = {"dataset": "chain_sum", "config": {"min_terms": 2, "max_terms": 2, "max_digits": 1}, "hint": ""}


def test_ifeval_prompts_are_never_in_an_instruction_training_pool():
    heldout = {item.prompt for item in instruction_items(150, seed=0)}
    assert len(heldout) == 150
    for seed in (0, 1):
        pool = {r.prompt for r in build_prompts(PromptSource.INSTRUCTIONS, {"most": 2}, Split.TRAIN, size=3000,
                                                seed=seed)}
        assert len(pool) > 1000 and not heldout & pool


def test_math_heldout_questions_are_never_in_the_train_pool_even_where_the_space_is_small():
    # one-digit sums: ~200 distinct questions, so a 2,000-prompt pool covers nearly all of the train ones
    heldout = {r.key for r in build_prompts(PromptSource.REASONING_GYM, SMALL_MATH, Split.HELDOUT, size=40, seed=0)}
    pool = {r.key for r in build_prompts(PromptSource.REASONING_GYM, SMALL_MATH, Split.TRAIN, size=2000, seed=0)}
    assert len(heldout) >= 20 and len(pool) > 60
    assert not heldout & pool


def test_guided_heldout_schemas_are_never_trained_on():
    train = {repr(guided_example(0, i, Split.TRAIN).schema) for i in range(300)}
    heldout = {repr(guided_example(0, i, Split.HELDOUT).schema) for i in range(60)}
    assert not train & heldout


def test_the_guided_validation_set_is_disjoint_from_the_heldout_one():
    """benchmarks/guided_validation.py chooses decoding settings on training-split schemas (seed 101)."""
    validation = {repr(guided_example(101, i, Split.TRAIN).schema) for i in range(40)}
    heldout = {repr(guided_example(0, i, Split.HELDOUT).schema) for i in range(60)}
    assert len(validation) > 30 and not validation & heldout


def test_tool_round_families_split_and_every_tool_of_a_conversation_is_of_its_split():
    train, heldout = ({f.name for f in families(s)} for s in (Split.TRAIN, Split.HELDOUT))
    assert train and heldout and not train & heldout
    system_tools = re.compile(r'"name": "([a-z_]+)", "description"')
    for conv in tool_round_conversations(300, seed=3, split=Split.TRAIN):
        assert set(system_tools.findall(conv.messages[0]["content"])) <= train
    for case in tool_round_cases(40, seed=0, split=Split.HELDOUT):
        assert {t.name for t in case.tools} <= heldout


def test_made_tool_conversations_offer_no_heldout_tool_and_no_heldout_question():
    """The made-up tools (SFT's made-tool-rounds) are none of the held-out families, and no held-out question of the
    tool round benchmark is asked in them."""
    heldout = {f.name for f in families(Split.HELDOUT)}
    system_tools = re.compile(r'"name": "([a-z_]+)", "description"')
    questions = {case.question for case in tool_round_cases(60, seed=0, split=Split.HELDOUT)}
    for conv in builtin_conversations("made-tool-rounds", n=400, seed=0):
        assert not set(system_tools.findall(conv.messages[0]["content"])) & heldout
        assert not {m["content"] for m in conv.messages if m["role"] == "user"} & questions


def test_bfcl_sft_data_holds_no_heldout_question():
    _, data = package_info(TOOL_TASK)
    heldout = {e["id"] for c in ("simple_python", "multiple", "parallel") for e in load_category(data, c, Split.HELDOUT)}
    trained = {conv.where.split()[-1] for conv in builtin_conversations("bfcl", n=None, seed=0)}
    assert heldout and trained and not heldout & trained


def test_udhr_heldout_articles_are_not_in_the_sft_data():
    article = re.compile(r"^udhr/[^/]+/(\d+) ")
    heldout = {article.match(r.source).group(1) for r in udhr_prompts(Split.HELDOUT)}
    trained = {article.match(conv.where).group(1) for conv in builtin_conversations("udhr", n=None, seed=0)}
    assert heldout and trained and not heldout & trained


def test_tool_round_rl_prompts_never_offer_a_heldout_tool():
    """The RL source tool-rounds (both turns) draws only training families: the benchmark's held-out tool rounds
    (their families, and every tool they offer) are never in an RL prompt, nor in a result the answer turn reads."""
    heldout = {f.name for f in families(Split.HELDOUT)}
    offered = re.compile(r'"name": "([a-z_]+)", "description"')
    called = re.compile(r'"name": "([a-z_]+)", "arguments"')
    records = build_prompts(PromptSource.TOOL_ROUNDS, {}, Split.TRAIN, size=600, seed=0)
    assert {r.target["turn"] for r in records} == {"call", "answer"}
    for r in records:
        assert not set(offered.findall(r.system)) & heldout
        assert not set(called.findall(" ".join(m["content"] for m in r.history))) & heldout
    cases = tool_round_cases(60, seed=0, split=Split.HELDOUT)
    assert {case.expected_call[0] for case in cases} <= heldout


def test_plain_text_passages_share_no_sentence_with_the_drift_text():
    """The plain-text anchor (SFT's plain-text set) is never the text whose perplexity measures drift: no sentence
    of a passage is in the Debian Reference's held-out split, nor in its train split (the validation text)."""
    reference = " ".join(" ".join(english_text(split).split()) for split in (Split.TRAIN, Split.HELDOUT))
    sentences = {s.strip() for p in builtin_conversations("plain-text", n=190, seed=0)
                 for s in re.split(r"(?<=[.!?])\s+", " ".join(p.text.split())) if len(s.strip()) >= 60}
    assert len(sentences) > 1000
    assert not [s for s in sentences if s in reference]
