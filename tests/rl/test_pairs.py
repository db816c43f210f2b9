"""Graded pairs: every built response's grade re-checked here by the verifiers (reasoning-gym's scorer, the
instruction checkers, the BFCL AST match), negatives that the confirmers reject, levels from the ladder, the
splits, and the pairs JSONL (round trip; a bad line named file:line)."""

from __future__ import annotations

import json

import pytest

from openafm.data.instructions import check, instruction_prompts
from openafm.eval.bfcl_data import load_category, package_info, parse_calls_leniently
from openafm.eval.bfcl_data import split_of as bfcl_split_of
from openafm.rl.preference.pairs import (
    GradedResponse,
    GradeMismatchError,
    Level,
    PairFormatError,
    Source,
    all_pairs,
    pairs_of,
    read_pairs,
    write_pairs,
)
from openafm.rl.preference.sources import (
    MATH_CONFIG,
    MATH_DATASETS,
    _confirm_math,
    _confirm_tool,
    bfcl_checker,
    build_groups,
    worked,
)
from openafm.rl.rewards.registry import make_reward
from openafm.rl.prompts import PromptSource, build_prompts
from openafm.splits import Split, split_of


@pytest.fixture(scope="module")
def groups():
    g, skipped = build_groups(["math", "instructions", "tool-call"], 6, heldout=3, seed=1)
    return g


def test_every_group_has_grades_2_1_0_confirmed_by_the_verifiers(groups):
    assert {(g.source, g.split) for g in groups} == {(s, sp) for s in Source for sp in Split}
    math_reward, tool_reward = make_reward("math"), make_reward("tool-call", checker=bfcl_checker)
    for g in groups:
        assert sorted(r.grade for r in g.responses) == [0, 1, 2]
        by = {r.grade: r for r in g.responses}
        if g.source is Source.MATH:
            answer = by[2].text.rsplit("Answer: ", 1)[1]
            assert [math_reward(g.prompt, by[k].text, answer) for k in (2, 1, 0)] == [1.0, 0.0, 0.0]
            assert by[1].text.rstrip(".").endswith(answer) and "Answer:" in by[0].text
            assert [by[k].verifier for k in (2, 1, 0)] == [1.0, 0.0, 0.0]
        elif g.source is Source.INSTRUCTIONS:
            prompt = next(p for s in (1, 10_001) for p in instruction_prompts(200, seed=s) if p.where == g.group)
            verdicts = [check(prompt.constraints, by[k].text) for k in (2, 1, 0)]
            assert verdicts[0].all_strict and not any(verdicts[2].loose)
            assert any(verdicts[1].strict) and not verdicts[1].all_loose
            assert by[2].verifier == 1.0 > by[1].verifier > by[0].verifier == 0.0
        else:
            calls = [parse_calls_leniently(by[k].text)[0] for k in (2, 1, 0)]
            assert [tool_reward(g.prompt, by[k].text, _question(g.group)) for k in (2, 1, 0)] == [1.0, 0.0, 0.0]
            assert calls[0]["name"] == calls[1]["name"] != calls[2]["name"]
            assert calls[0]["arguments"] != calls[1]["arguments"]


def _question(qid: str) -> dict:
    _, data = package_info()
    return next(q for c in ("simple_python", "multiple") for q in load_category(data, c) if q["id"] == qid)


def test_splits_are_disjoint_and_follow_the_one_rule(groups):
    for source in Source:
        train = {g.prompt for g in groups if g.source is source and g.split is Split.TRAIN}
        held = {g.prompt for g in groups if g.source is source and g.split is Split.HELDOUT}
        assert len(train) == 6 and len(held) == 3 and not train & held
    for g in groups:        # the split every other pool gives the same item: BFCL's by id, the prompt text's
        expected = bfcl_split_of(g.group) if g.source is Source.TOOL_CALL else split_of(g.prompt, "prompt")
        assert g.split is expected, g.group


def test_held_out_pair_questions_are_in_no_rl_train_pool_of_any_size():
    """The reward model's held-out math questions cannot be RL training prompts, however large the pool: both
    pools assign a question to its split by its text."""
    groups, _ = build_groups(["math"], n=2, heldout=12, seed=0)
    held = {g.prompt for g in groups if g.split is Split.HELDOUT}
    assert len(held) == 12
    for dataset in MATH_DATASETS:
        pool = build_prompts(PromptSource.REASONING_GYM, {"dataset": dataset, "config": MATH_CONFIG}, Split.TRAIN,
                             size=2000, seed=0)
        assert len(pool) == 2000 and not held & {r.key for r in pool}


def test_levels_and_reasons_follow_the_ladder(groups):
    math = next(g for g in groups if g.source is Source.MATH)
    pairs = pairs_of(math)
    assert [(p.pair.chosen_grade, p.pair.rejected_grade, p.pair.level) for p in pairs] == [
        (2, 1, Level.SLIGHTLY_BETTER), (2, 0, Level.SIGNIFICANTLY_BETTER), (1, 0, Level.BETTER)]
    assert pairs[0].reason.startswith("a correct, marked answer > a correct but unmarked answer")
    assert len(all_pairs(groups)) == 3 * len(groups)


def test_worked_steps_match_python_and_a_slip_changes_the_answer():
    for expr in ["4 - 1 - 7", "( 56 + -33 ) - 84", "-( 20 + 67 + -59 )", "85 / 17", "3 * -4 + 2"]:
        value, steps = worked(expr)
        assert value == eval(expr)                                    # the reference: Python's own arithmetic
        slipped, wrong_steps = worked(expr, len(steps) - 1, 2)
        assert abs(slipped - value) == 2 and wrong_steps[:-1] == steps[:-1]      # a slip of 2, negated or not


def test_confirmers_reject_a_mislabelled_response():
    entry = {"question": "Calculate 2 + 3.", "answer": "5",
             "metadata": {"source_dataset": "basic_arithmetic", "expression": "2 + 3"}}
    scorer = make_reward("reasoning-gym")
    with pytest.raises(GradeMismatchError, match="grade 2"):
        _confirm_math(entry, [GradedResponse("2 + 3 = 6.\nAnswer: 6", 2, "claimed right", 0.0)], scorer)
    with pytest.raises(GradeMismatchError, match="grade 1"):            # marked, so not "unmarked"
        _confirm_math(entry, [GradedResponse("2 + 3 = 5.\nAnswer: 5", 1, "claimed unmarked", 0.0)], scorer)
    q = {"id": "x", "question": "Area of a 2 x 3 rectangle?",
         "functions": [{"name": "area", "parameters": {"type": "dict", "properties": {"w": {"type": "integer"}},
                                                       "required": ["w"]}}],
         "ground_truth": [{"area": {"w": [2]}}]}
    tool = make_reward("tool-call", checker=bfcl_checker)
    right = '<tool_call>\n{"name": "area", "arguments": {"w": 2}}\n</tool_call>'
    assert _confirm_tool(q, [GradedResponse(right, 2, "", 0.0)], tool)[0].verifier == 1.0
    with pytest.raises(GradeMismatchError, match="grade 1"):            # exact, so not "wrong arguments"
        _confirm_tool(q, [GradedResponse(right, 1, "", 0.0)], tool)
    with pytest.raises(GradeMismatchError, match="grade 0"):            # right function, so not "wrong function"
        _confirm_tool(q, [GradedResponse(right.replace("2}", "5}"), 0, "", 0.0)], tool)


def test_pairs_jsonl_round_trip(tmp_path, groups):
    pairs = all_pairs(groups)
    assert write_pairs(tmp_path / "p.jsonl", pairs) == len(pairs)
    assert read_pairs(tmp_path / "p.jsonl") == pairs


GOOD = {"source": "math", "group": "g", "split": "train", "prompt": "p", "chosen": "a", "rejected": "b",
        "level": "better", "chosen_grade": 2, "rejected_grade": 0, "reason": "r"}


@pytest.mark.parametrize("line, message", [
    ('{"source": "math"', r"p.jsonl:2: not valid JSON"),
    ("", r"p.jsonl:2: blank line"),
    ("[1]", r"p.jsonl:2: expected a JSON object, got list"),
    (json.dumps({**GOOD, "level": "much better"}), r"p.jsonl:2: level='much better'; accepted: \['significantly"),
    (json.dumps({**GOOD, "source": "chess"}), r"p.jsonl:2: source='chess'; accepted"),
    (json.dumps({**GOOD, "chosen_grade": 3}), r"p.jsonl:2: chosen_grade=3 must lie in 0..2"),
    (json.dumps({**GOOD, "chosen_grade": 0}), r"p.jsonl:2: chosen_grade=0 must exceed rejected_grade=0"),
    (json.dumps({**GOOD, "chosen_grade": "2"}), r"p.jsonl:2: 'chosen_grade' must be an integer, got '2'"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "reason"}), r"p.jsonl:2: .*missing \['reason'\]"),
    (json.dumps({**GOOD, "score": 1}), r"p.jsonl:2: .*unknown \['score'\]"),
    (json.dumps({**GOOD, "chosen": ""}), r"p.jsonl:2: 'chosen' must be a non-empty string"),
])
def test_a_bad_pairs_line_is_named(tmp_path, line, message):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + line + "\n")
    with pytest.raises(PairFormatError, match=message):
        read_pairs(path)


def test_unknown_source_is_named():
    with pytest.raises(ValueError, match=r"unknown pair source 'chess'; accepted: \['math', 'instructions'"):
        build_groups(["chess"], 1)
