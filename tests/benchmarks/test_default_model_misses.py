"""benchmarks/default_model.py's tool-round failure breakdown: each failed round is counted once, under the first
reason that holds (the model's calls before the tool's runs before the answer)."""

from __future__ import annotations

from bench_modules import load_benchmark

RIGHT = ("get_weather", {"city": "Paris"})


def row(asked, calls, missing=()) -> dict:
    asked_right, once = asked == [RIGHT], calls == [RIGHT]
    return {"asked": asked, "calls": calls, "asked_once_right": asked_right, "called_once_right": once,
            "missing": list(missing), "success": once and not missing}


def test_each_failed_round_is_counted_once_under_its_first_reason():
    bench = load_benchmark("default_model")
    rows = [row([RIGHT], [RIGHT]),                                   # success: not counted
            row([], []),                                             # no call
            row([("get_weather", {"city": "Lyon"})], [("get_weather", {"city": "Lyon"})]),  # wrong argument
            row([RIGHT, RIGHT], [RIGHT]),                            # a repeat the framework reused: success
            row([RIGHT, RIGHT], [RIGHT, RIGHT], missing=["12"]),     # a repeat run twice (CALL_AGAIN)
            row([RIGHT], [], missing=["12"]),                        # asked right, the tool did not run
            row([RIGHT], [RIGHT], missing=["12", "clear"]),          # the answer drops values
            row([RIGHT], [RIGHT], missing=["clear"])]
    assert bench.miss_kinds(rows) == {"no_call": 1, "wrong_or_extra_call": 2, "tool_not_run_once": 1,
                                      "answer_drops_a_value": 2}
