"""`openafm sft` through the CLI entry point on a tiny model with the real tokenizer: guided data end to end (the
adapter runs through fm), --resume, a JSONL file, and each bad input named."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest
import torch
from safetensors.torch import load_file

import openafm
import openafm.fm as fm
from openafm.checkpoint.adapter import read_adapter
from openafm.checkpoint.fingerprint import weights_fingerprint
from openafm.checkpoint.load import load_model
from openafm.checkpoint.native import save_checkpoint
from openafm.cli import main
from tiny import make_tiny

FAST = ["--batch-size", "2", "--seq-len", "1024", "--precision", "float32", "--checkpoint-every", "1"]


@pytest.fixture
def base(tmp_path, tokenizer):
    model = make_tiny("smollm2-tiny", vocab_size=tokenizer.vocab_size, max_seq_len=1024)
    save_checkpoint(tmp_path / "base", model.config, model.state_dict(), tokenizer)
    return str(tmp_path / "base")


def test_sft_on_guided_data_writes_an_adapter_fm_runs(tmp_path, base, capsys):
    out = tmp_path / "guided.safetensors"
    args = ["sft", str(out), "--model", base, "--steps", "2", "--rank", "4", "--eval-examples", "3", *FAST]
    assert main(args) == 0
    assert "SFT LoRA rank 4: 2 steps" in capsys.readouterr().out
    summary = json.loads((tmp_path / "guided.run" / "sft.json").read_text())
    assert summary["steps"] == 2 and summary["data"] == "guided" and summary["alpha"] == 8.0
    assert summary["heldout_before"]["examples"] == 3 and summary["heldout_after"]["tokens"] > 0
    assert summary["heldout_after"]["loss"] != summary["heldout_before"]["loss"]
    f = read_adapter(out)
    assert f.rank == 4 and f.base_name == base and f.base_fingerprint == weights_fingerprint(openafm.load(base).model)
    assert f.base_fingerprint == summary["base_fingerprint"]
    adapted = fm.SystemLanguageModel(model=base, adapter=fm.SystemLanguageModel.Adapter(str(out)))
    assert adapted.is_available() == (True, None)
    ids = torch.arange(1, 40)[None]
    with torch.no_grad():
        assert not torch.allclose(adapted.language_model().model(ids), openafm.load(base).model(ids), atol=1e-4)

    assert main(args) == 2                                     # the run dir has checkpoints: --resume or a new one
    assert "pass --resume" in capsys.readouterr().err
    before = load_file(out)
    assert main([*args, "--resume"]) == 0                      # resumes at step 2 of 2: the same adapter again
    after = load_file(out)
    assert sorted(after) == sorted(before) and all(torch.equal(after[k], before[k]) for k in before)
    assert len((tmp_path / "guided.run" / "metrics.jsonl").read_text().splitlines()) == 2


def test_sft_on_a_jsonl_file(tmp_path, base, capsys):
    data = tmp_path / "chat.jsonl"
    rows = [{"prompt": f"Name a colour, number {i}.", "response": json.dumps({"colour": c})}
            for i, c in enumerate(["red", "blue", "green", "teal"])]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "colours.safetensors"
    assert main(["sft", str(out), "--model", base, "--data", str(data), "--eval-data", str(data),
                 "--eval-examples", "2", "--steps", "1", "--rank", "2", *FAST]) == 0
    summary = json.loads((tmp_path / "colours.run" / "sft.json").read_text())
    assert summary["heldout_before"]["examples"] == 2 and read_adapter(out).rank == 2


@pytest.mark.parametrize("lines, message", [
    (['{"prompt": "a", "response": "b"}', '{"prompt": "a", "response": '], r"chat.jsonl:2: not valid JSON"),
    (['{"prompt": "a"}'], (r"chat.jsonl:1: a chat example has exactly the keys \['prompt', 'response'\]; "
                           r"missing \['response'\]")),
    (['{"prompt": "a", "response": "b", "id": 3}'], r"chat.jsonl:1: .*unknown \['id'\]"),
    (['{"prompt": "a", "response": 7}'], r"chat.jsonl:1: 'response' must be a non-empty string, got 7"),
    (['{"prompt": "a", "response": "b"}', '', '{"prompt": "a", "response": "b"}'], r"chat.jsonl:2: blank line"),
    (['{"prompt": "a", "response": "b"}', json.dumps({"prompt": "long " * 1500, "response": "b"})],
     r"chat.jsonl:2: \d+ tokens do not fit in seq_len=1024"),
])
def test_bad_jsonl_lines_are_named(tmp_path, base, capsys, lines, message):
    data = tmp_path / "chat.jsonl"
    data.write_text("\n".join(lines) + "\n")
    assert main(["sft", str(tmp_path / "x.safetensors"), "--model", base, "--data", str(data), "--steps", "1",
                 *FAST]) == 2
    err = capsys.readouterr().err
    assert re.search("openafm: error: .*" + message, err), err


@pytest.mark.parametrize("extra, message", [
    (["--data", "missing.jsonl"], "missing.jsonl: no such file"),
    (["--data", "gided"], "--data 'gided' is neither 'guided', 'bfcl' nor a JSONL file"),
    (["--eval-data", "bfcl"], "would measure on training data; use bfcl-heldout"),
    (["--method", "full", "--rank", "4"], "--method full trains every weight; --rank: options of --method lora only"),
    (["--eval-data", "guided"], "would measure on training data; use guided-heldout"),
    (["--eval-examples", "0"], "--eval-examples=0 must be >= 1"),
])
def test_bad_options_are_named(tmp_path, base, capsys, extra, message):
    assert main(["sft", str(tmp_path / "x.safetensors"), "--model", base, "--steps", "1", *extra, *FAST]) == 2
    assert message in capsys.readouterr().err


def test_out_must_be_a_safetensors_file(tmp_path, base, capsys):
    assert main(["sft", str(tmp_path / "adapter.bin"), "--model", base, *FAST]) == 2
    assert "must be a .safetensors file" in capsys.readouterr().err


def test_out_of_full_sft_must_be_a_directory_path(tmp_path, base, capsys):
    assert main(["sft", str(tmp_path / "m.safetensors"), "--method", "full", "--model", base, *FAST]) == 2
    assert "must be a directory path for --method full" in capsys.readouterr().err


def test_full_sft_trains_every_weight_and_writes_a_loadable_checkpoint(tmp_path, base, capsys):
    data = tmp_path / "chat.jsonl"
    rows = [{"system": "Reply with JSON.", "prompt": f"Name a colour, number {i}.", "response": json.dumps({"c": c})}
            for i, c in enumerate(["red", "blue", "green", "teal"])]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "full-model"
    assert main(["sft", str(out), "--method", "full", "--model", base, "--data", str(data), "--eval-data", str(data),
                 "--eval-examples", "2", "--steps", "2", "--lr", "1e-3", *FAST]) == 0
    assert "SFT full: 2 steps" in capsys.readouterr().out
    summary = json.loads((tmp_path / "full-model.run" / "sft.json").read_text())
    assert summary["method"] == "full" and summary["checkpoint"] == str(out) and summary["lr"] == 1e-3
    assert summary["heldout_after"]["loss"] < summary["heldout_before"]["loss"]
    tuned, original = load_model(out), load_model(base)
    assert tuned.tokenizer is not None and tuned.tokenizer.chat_template == original.tokenizer.chat_template
    config = json.loads((out / "config.json").read_text())
    assert config["sft"]["method"] == "full" and config["sft"]["steps"] == 2
    assert config["sft"]["base_fingerprint"] == weights_fingerprint(original.model)
    before, after = original.model.state_dict(), tuned.model.state_dict()
    assert sorted(before) == sorted(after)
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert len(changed) == len(before)                                 # every weight trained (no frozen base)
    ids = torch.arange(1, 40)[None]
    with torch.no_grad():
        assert not torch.allclose(tuned.model(ids), original.model(ids), atol=1e-4)


@pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None, reason="bfcl-eval not installed (make setup)")
def test_sft_on_bfcl_tool_calls(tmp_path, base, capsys):
    out = tmp_path / "tools.safetensors"
    assert main(["sft", str(out), "--model", base, "--data", "bfcl", "--eval-examples", "2", "--steps", "1",
                 "--rank", "2", "--batch-size", "1", "--seq-len", "512", "--precision", "float32"]) == 0
    summary = json.loads((tmp_path / "tools.run" / "sft.json").read_text())
    assert summary["data"] == "bfcl" and summary["heldout_before"]["examples"] + \
        summary["heldout_before"]["skipped"] == 2 and summary["examples_seen"] >= 1
