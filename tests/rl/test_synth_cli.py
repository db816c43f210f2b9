"""`openafm synth` through the CLI on a tiny model with the real tokenizer: instruction prompts end to end (every
kept line verified again, the summary consistent, the run reproducible), a prompt file, and bad inputs named."""

from __future__ import annotations

import json

import pytest

from openafm.checkpoint.native import save_checkpoint
from openafm.cli import main
from openafm.data.chat import read_chat_jsonl
from openafm.data.instructions import instruction_prompts
from openafm.rl.rewards.registry import make_reward
from tiny import make_tiny

FAST = ["--k", "3", "--max-tokens", "6", "--temperature", "5.0", "--top-p", "1.0"]


@pytest.fixture
def base(tmp_path, tokenizer):
    model = make_tiny("smollm2-tiny", vocab_size=tokenizer.vocab_size, max_seq_len=512)
    save_checkpoint(tmp_path / "base", model.config, model.state_dict(), tokenizer)
    return str(tmp_path / "base")


def test_synth_instructions(tmp_path, base, capsys):
    out = tmp_path / "ins.jsonl"
    assert main(["synth", str(out), "--model", base, "--prompts", "instructions", "--n", "8", *FAST]) == 0
    summary = json.loads(capsys.readouterr().out)
    kept = read_chat_jsonl(out)
    assert summary["samples"] == 24 and summary["kept"] == len(kept) > 0
    prompts = {p.prompt: p for p in instruction_prompts(8, seed=0)}
    reward = make_reward("instructions", level="strict", aggregate="all")
    for x in kept:
        assert reward(x.prompt, x.response, prompts[x.prompt].constraints) == 1.0
        assert x.meta["source"] == prompts[x.prompt].where and x.meta["verifier"] == "instructions"
    assert main(["synth", str(tmp_path / "again.jsonl"), "--model", base, "--n", "8", *FAST]) == 0
    assert (tmp_path / "again.jsonl").read_text() == out.read_text()


def test_synth_from_a_file_and_bad_inputs(tmp_path, base, capsys):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "1+1?", "answer": "2"}\n{"prompt": "2+2?", "answer": "4"}\n')
    assert main(["synth", str(tmp_path / "o.jsonl"), "--model", base, "--prompts", str(prompts), *FAST]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["verifier"] == "math" and summary["samples"] == 6 and summary["prompts_from"] == str(prompts)
    assert main(["synth", str(tmp_path / "o.jsonl"), "--model", base, "--prompts", str(prompts), "--verifier",
                 "majority", *FAST]) == 0
    assert json.loads(capsys.readouterr().out)["verifier"] == "majority"
    prompts.write_text('{"prompt": "1+1?", "answer": "2"}\n{"prompt": "2+2?"}\n')
    assert main(["synth", str(tmp_path / "o.jsonl"), "--model", base, "--prompts", str(prompts)]) == 2
    assert "p.jsonl:2" in capsys.readouterr().err
    assert main(["synth", str(tmp_path / "o.jsonl"), "--model", base, "--prompts", "nope"]) == 2
    assert "'nope'" in capsys.readouterr().err
