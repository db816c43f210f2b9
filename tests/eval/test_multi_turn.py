"""BFCL multi-turn (eval/multi_turn.py): scripted "models" on real questions and environments of the bfcl-eval
wheel — the ground truth's own calls score 1.0, silence scores 0.0 where the ground truth changes state, a read
the model skips fails execution_match only — and the public-state comparison on hand-made instances."""

import importlib.util
import json
from types import SimpleNamespace

import pytest

from openafm.eval import multi_turn as mt
from openafm.eval.registry import get_task
from openafm.eval.tool_use import ToolMode

pytestmark = pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None,
                                reason="bfcl-eval not installed (make setup)")


@pytest.fixture(scope="module")
def questions():
    items, left_out = mt.multi_turn_items(200, seed=0, task="bfcl_multi_turn")
    return {q.id: q for q in items}, left_out


def scripted(q, *, per_step=False, skip=frozenset()):
    """A reply function that emits the ground truth's calls of the current turn (all in one reply, or one per
    reply with per_step), leaving out the (turn, index) pairs in `skip`, then a plain-text answer."""
    env = mt.new_environment(q.classes, q.initial_config)
    sent = {"turn": -1, "next": 0}

    def reply(messages):
        turn = sum(m["role"] == "user" for m in messages) - 1
        if turn != sent["turn"]:
            sent.update(turn=turn, next=0)
        calls = [mt.call_as_json(env, s) for i, s in enumerate(q.ground_truth[turn]) if (turn, i) not in skip]
        calls = calls[sent["next"]:]
        if per_step:
            calls = calls[:1]
        sent["next"] += len(calls)
        return f"<tool_call>{json.dumps(calls)}</tool_call>" if calls else "Done."

    return reply


def test_every_class_loads_and_no_question_is_left_out(questions):
    items, left_out = questions
    assert len(items) == 200 and left_out == {}


@pytest.mark.parametrize("qid", ["multi_turn_base_0", "multi_turn_base_1", "multi_turn_base_57",
                                 "multi_turn_base_120", "multi_turn_base_199"])
def test_ground_truth_calls_score_one(questions, qid):
    q = questions[0][qid]
    record = mt.run_question(q, scripted(q))
    assert record["metrics"] == {"state_match": 1.0, "turn_state_match": 1.0, "execution_match": 1.0,
                                 "has_call": 1.0}
    assert [len(t["calls"]) for t in record["turns"]] == [len(g) for g in q.ground_truth]


def test_silence_scores_zero_where_the_ground_truth_changes_state(questions):
    q = questions[0]["multi_turn_base_0"]
    # by hand: the first turn's ground truth creates document/temp and moves final_report.pdf into it
    env = mt.new_environment(q.classes, q.initial_config)
    for s in q.ground_truth[0]:
        mt.execute(env, {f["name"] for f in q.functions}, *mt.parse_call_string(s))
    document = env["GorillaFileSystem"].root.contents["document"]
    assert sorted(document.contents) == ["previous_report.pdf", "temp"]
    assert list(document.contents["temp"].contents) == ["final_report.pdf"]
    record = mt.run_question(q, lambda messages: "")
    assert record["metrics"] == {"state_match": 0.0, "turn_state_match": 0.0, "execution_match": 0.0,
                                 "has_call": 0.0}
    assert len(record["turns"]) == 4 and record["output"].count("---") == 3     # one empty reply per turn


def test_a_skipped_read_fails_execution_match_but_not_state(questions):
    q = questions[0]["multi_turn_base_0"]
    assert q.ground_truth[1][1].startswith("grep(")                 # a read: it changes no state
    record = mt.run_question(q, scripted(q, skip={(1, 1)}))
    assert [t["responses"] for t in record["turns"]] == [True, False, True, True]
    assert record["metrics"]["state_match"] == 1.0 and record["metrics"]["execution_match"] == 0.0


def test_steps_per_turn_are_capped(questions):
    q = questions[0]["multi_turn_base_0"]
    assert [len(g) for g in q.ground_truth] == [3, 2, 1, 4]
    record = mt.run_question(q, scripted(q, per_step=True))
    # one call per reply, MAX_STEPS=3 replies: the last turn's 4th call (diff, a read) never runs
    assert [len(t["calls"]) for t in record["turns"]] == [3, 2, 1, 3]
    assert [t["responses"] for t in record["turns"]] == [True, True, True, False]
    assert record["metrics"]["state_match"] == 1.0 and record["metrics"]["execution_match"] == 0.0


def test_a_wrong_argument_breaks_the_state_from_that_turn_on(questions):
    q = questions[0]["multi_turn_base_0"]
    right = scripted(q)

    def reply(messages):
        text = right(messages)
        return text.replace('"dir_name": "temp"', '"dir_name": "tmp"')
    record = mt.run_question(q, reply)
    assert [t["state"] for t in record["turns"]] == [False, False, False, False]
    assert record["metrics"]["state_match"] == 0.0 and record["metrics"]["turn_state_match"] == 0.0


def test_state_comparison_on_hand_made_instances():
    config = {"TwitterAPI": {"username": "ann", "password": "pw", "tweets": {}, "tweet_counter": 0,
                             "following_list": ["carl"]},
              "GorillaFileSystem": {"root": {"home": {"type": "directory", "contents": {
                  "a": {"type": "directory", "contents": {}}}}}}}
    a = mt.new_environment(["TwitterAPI", "GorillaFileSystem"], config)
    b = mt.new_environment(["TwitterAPI", "GorillaFileSystem"], config)
    assert mt.same_state(a, b)
    a["GorillaFileSystem"].cd(folder="a")                          # moves the private _current_dir only
    a["TwitterAPI"]._anything = 1
    assert mt.same_state(a, b)
    assert mt.public_state(a["TwitterAPI"]) == {"username": "ann", "password": "pw", "authenticated": False,
                                                "tweets": {}, "comments": {}, "retweets": {},
                                                "following_list": ["carl"], "tweet_counter": 0}
    a["GorillaFileSystem"].touch(file_name="x.txt")
    assert not mt.same_state(a, b)
    b["GorillaFileSystem"].cd(folder="a")
    b["GorillaFileSystem"].touch(file_name="x.txt")
    assert mt.same_state(a, b)
    b["TwitterAPI"].tweet_counter = 1
    assert not mt.same_state(a, b)
    with pytest.raises(ValueError, match="different classes"):
        mt.same_state(a, {"TwitterAPI": b["TwitterAPI"]})


def test_execute_and_call_strings():
    env = mt.new_environment(["MathAPI"], {})
    assert mt.execute(env, {"add"}, "add", [], {"a": 2, "b": 3}) == json.dumps({"result": 5})
    assert mt.execute(env, {"add"}, "multiply", [], {"a": 2, "b": 3}) == "Error: no function named 'multiply'"
    assert mt.execute(env, {"add"}, "nope", [], {}) == "Error: no function named 'nope'"
    assert mt.execute(env, {"add"}, "add", [], {"x": 1}).startswith("Error: TypeError")
    assert mt.parse_call_string("sort('f.pdf')") == ("sort", ["f.pdf"], {})
    assert mt.parse_call_string("mv(source='a',destination='b')") == ("mv", [], {"source": "a", "destination": "b"})
    fs = mt.new_environment(["GorillaFileSystem"], {})
    assert mt.call_as_json(fs, "sort('f.pdf')") == {"name": "sort", "arguments": {"file_name": "f.pdf"}}
    with pytest.raises(ValueError, match="not a plain function call"):
        mt.parse_call_string("os.system('ls')")
    with pytest.raises(ValueError, match="unknown BFCL environment class 'Nope'"):
        mt.environment_class("Nope")


def test_registered_tasks_build_seeded_items():
    for name in ("bfcl_multi_turn", "bfcl_multi_turn_constrained"):
        task = get_task(name)
        built = task.build(3, 0, None)
        assert len(built.items) == 3 and built.notes == {"left_out_ids": {}}
        assert task.metrics[0] == "state_match"
    assert [q.id for q in get_task("bfcl_multi_turn").build(3, 0, None).items] == [q.id for q in built.items]
    assert all("cp" not in {f["name"] for f in q.functions} for q in built.items if q.id == "multi_turn_base_0")


def test_a_conversation_past_the_context_window_gets_an_empty_reply(questions, tokenizer):
    q = questions[0]["multi_turn_base_0"]
    tiny = SimpleNamespace(kv_plan=SimpleNamespace(max_seq_len=mt.MAX_TOKENS + 50))     # too short: never run
    reply = mt.model_reply(tiny, tokenizer, q, ToolMode.FREE)
    assert reply([{"role": "system", "content": q.system}, {"role": "user", "content": q.turns[0]}]) == ""
