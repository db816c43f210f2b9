"""`openafm eval` on the real SmolLM2-135M-Instruct with tiny limits: the records agree with their own scores,
and constrained tool calling always produces a call (the grammar admits nothing else)."""

import importlib.util

import pytest

from openafm.checkpoint.load import load_model
from openafm.eval.harness import read_records, run_eval
from openafm.eval.mc import LETTERS
from openafm.eval.registry import get_task

pytestmark = pytest.mark.real_model
CONFIG = {"model": "smollm2-135m-instruct", "adapter": None, "dtype": "float32", "seed": 0}


@pytest.fixture(scope="module")
def smollm2():
    return load_model("smollm2-135m-instruct")


def test_mmlu_reasoning_records_on_the_real_model(smollm2, tmp_path):
    summary = run_eval(smollm2, [get_task("mmlu_reasoning_5shot")], limit=3, out=tmp_path, config=CONFIG,
                       batch_size=3, progress=False)
    t = summary["tasks"]["mmlu_reasoning_5shot"]
    records = list(read_records(tmp_path / "mmlu_reasoning_5shot.jsonl").values())
    assert t["n"] == len(records) == 3 and t["chance"] == 0.25
    for r in records:
        lps = r["letter_logprobs"]
        assert r["loglik_pick"] == LETTERS[lps.index(max(lps))] and all(lp < 0 for lp in lps)
        assert r["prompt"].count("Answer: ") == 5 and r["prompt"].endswith("Answer:")
    assert t["metrics"]["acc_loglik"] == sum(r["loglik_pick"] == r["answer"] for r in records) / 3
    assert (tmp_path / "summary.md").read_text().count("mmlu_reasoning_5shot") == 1


@pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None, reason="bfcl-eval not installed (make setup)")
def test_constrained_tool_calling_always_calls(smollm2, tmp_path):
    summary = run_eval(smollm2, [get_task("bfcl_simple_constrained")], limit=1, out=tmp_path, config=CONFIG,
                       progress=False)
    record, = read_records(tmp_path / "bfcl_simple_constrained.jsonl").values()
    assert record["output"].startswith("<tool_call>") and record["calls"]
    assert summary["tasks"]["bfcl_simple_constrained"]["metrics"]["has_call"] == 1.0
