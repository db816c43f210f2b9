"""Native checkpoints (atomic safetensors + config) and Hugging Face Llama directories."""

import json

import pytest
import torch
from tiny import make_tiny

import openafm
from openafm.checkpoint.native import load_checkpoint, save_checkpoint
from openafm.errors import CheckpointError


def test_native_round_trip_preserves_config_weights_and_logits(tmp_path):
    model = make_tiny("afm-server-dense-tiny")
    save_checkpoint(tmp_path / "ckpt", model.config, model.state_dict())
    lm = openafm.load(tmp_path / "ckpt")
    assert lm.config == model.config
    ids = torch.randint(0, 512, (1, 30))
    with torch.no_grad():
        assert torch.equal(lm.model(ids), model(ids))


def test_save_replaces_atomically_and_leaves_no_temp_dirs(tmp_path):
    a, b = make_tiny("smollm2-tiny", seed=1), make_tiny("smollm2-tiny", seed=2)
    save_checkpoint(tmp_path / "ckpt", a.config, a.state_dict())
    save_checkpoint(tmp_path / "ckpt", b.config, b.state_dict())
    _, state, _ = load_checkpoint(tmp_path / "ckpt")
    assert torch.equal(state["embed.weight"], b.state_dict()["embed.weight"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


def test_failed_save_keeps_the_old_checkpoint(tmp_path):
    a = make_tiny("smollm2-tiny", seed=1)
    save_checkpoint(tmp_path / "ckpt", a.config, a.state_dict())

    class Boom:
        def save(self, directory):
            raise RuntimeError("disk full")
    with pytest.raises(RuntimeError, match="disk full"):
        save_checkpoint(tmp_path / "ckpt", a.config, a.state_dict(), tokenizer=Boom())
    _, state, _ = load_checkpoint(tmp_path / "ckpt")
    assert torch.equal(state["embed.weight"], a.state_dict()["embed.weight"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


def test_truncated_weights_name_the_file(tmp_path):
    model = make_tiny("smollm2-tiny")
    save_checkpoint(tmp_path / "ckpt", model.config, model.state_dict())
    weights = tmp_path / "ckpt" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="model.safetensors: cannot be read as safetensors"):
        openafm.load(tmp_path / "ckpt")


def test_missing_weights_and_bad_config_name_the_file(tmp_path):
    model = make_tiny("smollm2-tiny")
    save_checkpoint(tmp_path / "ckpt", model.config, model.state_dict())
    (tmp_path / "ckpt" / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="model.safetensors: missing"):
        load_checkpoint(tmp_path / "ckpt")
    save_checkpoint(tmp_path / "ckpt", model.config, model.state_dict())
    (tmp_path / "ckpt" / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="config.json: not valid JSON"):
        openafm.load(tmp_path / "ckpt")
    with pytest.raises(CheckpointError, match="config.json: not valid JSON"):
        load_checkpoint(tmp_path / "ckpt")


def test_weights_that_do_not_fit_the_config_name_the_tensors(tmp_path):
    model = make_tiny("smollm2-tiny")
    state = model.state_dict()
    state.pop("norm.weight")
    state["layers.0.ffn.down.weight"] = torch.zeros(3, 3)
    save_checkpoint(tmp_path / "ckpt", model.config, state)
    with pytest.raises(CheckpointError, match=r"missing \['norm.weight'\].*layers.0.ffn.down.weight: \(3, 3\)"):
        openafm.load(tmp_path / "ckpt")


def test_not_a_checkpoint(tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(CheckpointError, match="notes.txt: not a checkpoint"):
        openafm.load(tmp_path / "notes.txt")


def test_hf_llama_directory_matches_transformers(tmp_path):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                                   num_attention_heads=4, num_key_value_heads=2, rope_theta=5000.0,
                                   rms_norm_eps=1e-6, max_position_embeddings=128, tie_word_embeddings=False)
    torch.manual_seed(0)
    ref = transformers.LlamaForCausalLM(cfg).eval()
    ref.save_pretrained(tmp_path / "hf")
    lm = openafm.load(tmp_path / "hf")
    ids = torch.randint(0, 300, (2, 40))
    with torch.no_grad():
        diff = (lm.model(ids) - ref(ids).logits).abs().max().item()
    assert diff < 1e-4


def test_hf_unsupported_model_type_is_named(tmp_path):
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (tmp_path / "hf" / "model.safetensors").write_bytes(b"")
    with pytest.raises(CheckpointError, match="model_type 'gpt2' is not supported"):
        openafm.load(tmp_path / "hf")
