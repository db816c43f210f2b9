"""`openafm eval` on the real SmolLM2-135M-Instruct with tiny limits: the records agree with their own scores,
constrained tool calling always produces a call (the grammar admits nothing else), and --adapter is applied."""

import copy
import importlib.util
import json

import pytest
import torch

from openafm.checkpoint.adapter import save_adapter
from openafm.checkpoint.fingerprint import weights_fingerprint
from openafm.checkpoint.load import load_model
from openafm.cli import main
from openafm.eval.harness import read_records, run_eval
from openafm.eval.mc import LETTERS
from openafm.eval.registry import get_task
from openafm.nn.lora import apply_lora

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


def test_cli_adapter_run_scores_the_adapted_model(smollm2, tmp_path):
    """`openafm eval --adapter FILE`: the run records the adapter, and a non-zero LoRA update moves the scores."""
    adapted = copy.deepcopy(smollm2.model)
    apply_lora(adapted, rank=4, alpha=8, targets=("qkv", "down"))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in adapted.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    path = save_adapter(tmp_path / "a.safetensors", adapted, base_name="smollm2-135m-instruct",
                        base_fingerprint=weights_fingerprint(smollm2.model))
    args = ["eval", "--model", "smollm2-135m-instruct", "--tasks", "mmlu_wordnet", "--limit", "2", "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "base")]) == 0
    assert main([*args, "--adapter", str(path), "--out", str(tmp_path / "lora")]) == 0
    run = json.loads((tmp_path / "lora" / "run.json").read_text())
    assert run["adapter"] == str(path)
    base, lora = ([json.loads(line)["letter_logprobs"] for line in (tmp_path / d / "mmlu_wordnet.jsonl").open()]
                  for d in ("base", "lora"))
    assert base != lora
