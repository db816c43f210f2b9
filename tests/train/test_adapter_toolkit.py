"""The adapter toolkit: the JSONL conversation format and its errors (file:line), --skip-bad, labels on assistant
turns only, a tiny training run (eval per epoch, early stop, resume), the bundle, and a foreign base refused."""

import json
import shutil

import pytest
import torch
from tiny import make_tiny

from openafm.checkpoint.adapter import attach_adapter, read_adapter
from openafm.checkpoint.load import LoadedModel
from openafm.data.batch import IGNORE_INDEX
from openafm.data.conversations import ConversationError, parse_conversation, read_conversations
from openafm.errors import CheckpointError
from openafm.fm.tool import CALL_OPEN
from openafm.train.adapter_toolkit import (AdapterConfig, conversation_tokens, export_bundle, train_adapter)
from openafm.train.sft import pack_row

TOOLS = [{"name": "weather", "description": "Weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
TOOL_CONV = [{"role": "system", "content": "Be brief.", "tools": TOOLS},
             {"role": "user", "content": "Weather in Oslo?"},
             {"role": "assistant", "tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
             {"role": "tool", "content": "-3 C, snow"},
             {"role": "assistant", "content": "Snowy, -3 C."}]


def write(path, lines):
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def plain(q, a):
    return [{"role": "user", "content": q}, {"role": "assistant", "content": a}]


def test_tool_call_extension_renders_the_framework_format():
    conv = parse_conversation(TOOL_CONV, "x:1")
    assert conv.messages[0]["content"].startswith("Be brief.\nYou can call functions")
    assert conv.messages[2]["content"] == CALL_OPEN + '[{"name": "weather", "arguments": {"city": "Oslo"}}]</tool_call>'
    assert conv.assistant_turns() == [2, 4]


@pytest.mark.parametrize("line, message", [
    ('{"role": "user"}', "non-empty JSON array"),
    ('[{"role": "robot", "content": "hi"}]', "unknown role 'robot'"),
    ('[{"role": "user", "content": "hi", "lang": "en"}]', "no key"),
    ('[{"role": "user", "content": "hi"}]', "needs a user turn and an assistant turn"),
    ('[{"role": "user", "content": "a"}, {"role": "tool", "content": "r"}, {"role": "assistant", "content": "b"}]',
     "tool turn must follow"),
    ('[{"role": "user", "content": ""}, {"role": "assistant", "content": "b"}]', "non-empty string"),
    ('[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}', "not valid JSON"),
])
def test_bad_lines_name_file_and_line(tmp_path, line, message):
    path = write(tmp_path / "d.jsonl", [plain("q", "a"), line])
    with pytest.raises(ConversationError, match=message) as e:
        read_conversations(path)
    assert f"{path}:2:" in str(e.value)
    convs = read_conversations(path, skip_bad=True)
    assert len(convs) == 1 and len(convs.skipped) == 1 and f"{path}:2:" in convs.skipped[0]


def test_labels_are_the_assistant_turns_only(tokenizer):
    conv = parse_conversation(TOOL_CONV, "x:1")
    piece = conversation_tokens(tokenizer, conv)
    row = pack_row([piece], len(piece.ids), 0)
    labeled = [int(t) for t, lab in zip(row["input_ids"][1:], row["labels"][:-1], strict=True) if lab != IGNORE_INDEX]
    text = tokenizer.decode(labeled)
    assert "Oslo" in text and "Snowy, -3 C." in text                 # both assistant turns
    assert "Weather in Oslo?" not in text and "-3 C, snow" not in text and "Be brief" not in text
    assert text.count("<|im_end|>") == 2                             # each turn's end-of-turn token


def fresh(tokenizer):
    """Training wraps the base in LoRA in place (as `openafm adapter train` does once per process)."""
    return LoadedModel(make_tiny("smollm2-tiny", vocab_size=49152, max_seq_len=512).train(), tokenizer, name="tiny",
                       source="test")


@pytest.fixture()
def tiny_lm(tokenizer):
    return fresh(tokenizer)


def test_train_eval_each_epoch_resume_and_bundle(tmp_path, tiny_lm, tokenizer):
    data = write(tmp_path / "train.jsonl", [plain(f"Say {w}.", w) for w in ("red", "green", "blue", "cyan")] + [TOOL_CONV])
    held = read_conversations(write(tmp_path / "eval.jsonl", [plain("Say red.", "red")]))
    config = AdapterConfig(rank=4, alpha=2.0, epochs=2, patience=5, batch_size=1, seq_len=256, lr=1e-2)
    out, run = tmp_path / "a.safetensors", tmp_path / "a.run"
    report = train_adapter(tiny_lm, read_conversations(data), held, config, out=out, run_dir=run, base_name="tiny")
    assert [h["epoch"] for h in report["epochs"]] == [1, 2] and all(h["eval_loss"] for h in report["epochs"])
    assert report["epochs"][1]["eval_loss"] < report["epochs"][0]["eval_loss"]
    adapter = read_adapter(out)
    assert adapter.rank == 4 and adapter.alpha == 2.0
    # a run killed after epoch 1: its resume redoes epoch 2 from the epoch-1 checkpoint, to the same eval loss
    shutil.rmtree(run / "checkpoints" / "step_00000004")
    (run / "epochs.json").write_text(json.dumps(report["epochs"][:1]))
    more = train_adapter(fresh(tokenizer), read_conversations(data), held, config, out=out, run_dir=run, resume=True,
                         base_name="tiny")
    assert more["epochs"] == report["epochs"]
    bundle = export_bundle(out, tmp_path / "b", tokenizer=tokenizer)
    meta = json.loads((bundle / "bundle.json").read_text())
    assert meta["base_fingerprint"] == adapter.base_fingerprint and meta["tokenizer_hash"].startswith("sha256:")
    # an adapter from another base is refused
    with pytest.raises(CheckpointError, match="trained for base model"):
        attach_adapter(make_tiny("smollm2-tiny", vocab_size=49152, max_seq_len=512, seed=3), adapter)


def test_too_long_conversation_names_its_line(tmp_path, tiny_lm):
    data = write(tmp_path / "t.jsonl", [plain("hi", "yo"), plain("long " * 300, "x")])
    config = AdapterConfig(rank=2, epochs=1, batch_size=1, seq_len=64)
    with pytest.raises(ValueError, match=r"t.jsonl:2: .* do not fit"):
        train_adapter(tiny_lm, read_conversations(data), None, config, out=tmp_path / "a.safetensors",
                      run_dir=tmp_path / "r")
    report = train_adapter(fresh(tiny_lm.tokenizer), read_conversations(data), None,
                           AdapterConfig(**{**config.__dict__, "skip_bad": True}),
                           out=tmp_path / "a.safetensors", run_dir=tmp_path / "r2")
    assert report["skipped_too_long"] == 1
