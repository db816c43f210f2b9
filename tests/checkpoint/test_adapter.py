import pytest
import torch

from openafm.checkpoint.adapter import attach_adapter, read_adapter, save_adapter
from openafm.checkpoint.fingerprint import weights_fingerprint
from openafm.errors import CheckpointError
from openafm.nn.lora import LoRALinear, apply_lora
from tiny import make_tiny


def _trained_adapter(tmp_path, seed=0):
    """A tiny model with a non-zero LoRA update, saved; returns (adapted model, base model, path)."""
    base = make_tiny("smollm2-tiny", seed=seed)
    adapted = make_tiny("smollm2-tiny", seed=seed)
    apply_lora(adapted, rank=4, alpha=8, targets=("qkv", "down"))
    with torch.no_grad():
        for name, p in adapted.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    path = save_adapter(tmp_path / "a.safetensors", adapted, base_name="smollm2-tiny",
                        base_fingerprint=weights_fingerprint(base))
    return adapted, base, path


def test_attached_adapter_reproduces_the_trained_model_and_leaves_the_base_alone(tmp_path):
    adapted, base, path = _trained_adapter(tmp_path)
    ids = torch.randint(0, base.config.vocab_size, (2, 6))
    plain = base(ids)
    f = read_adapter(path)
    assert (f.rank, f.alpha, f.targets) == (4, 8.0, ("down", "qkv"))
    clone = attach_adapter(base, f)
    torch.testing.assert_close(clone(ids), adapted(ids), rtol=0, atol=0)
    torch.testing.assert_close(base(ids), plain, rtol=0, atol=0)            # the base is unchanged...
    assert not any(isinstance(m, LoRALinear) for m in base.modules())
    assert clone.layers[0].ffn.down.base.weight is base.layers[0].ffn.down.weight   # ...and shared, not copied
    assert all(p.requires_grad for p in base.parameters())


def test_adapter_for_other_weights_is_refused_naming_both_fingerprints(tmp_path):
    _, base, path = _trained_adapter(tmp_path, seed=0)
    other = make_tiny("smollm2-tiny", seed=1)
    with pytest.raises(CheckpointError, match=r"trained for base model 'smollm2-tiny' with weights sha256:\w+, "
                                              r"but this model's weights are sha256:\w+"):
        attach_adapter(other, read_adapter(path))


def test_fingerprint_tracks_in_place_changes():
    model = make_tiny("smollm2-tiny")
    first = weights_fingerprint(model)
    assert weights_fingerprint(model) == first == weights_fingerprint(make_tiny("smollm2-tiny"))
    with torch.no_grad():
        model.norm.weight[0] += 1
    assert weights_fingerprint(model) != first


def test_unreadable_or_foreign_files_raise_naming_the_file(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not safetensors")
    with pytest.raises(CheckpointError, match="bad.safetensors: cannot be read as safetensors"):
        read_adapter(bad)
    with pytest.raises(CheckpointError, match="no such adapter file"):
        read_adapter(tmp_path / "missing.safetensors")
    from safetensors.torch import save_file
    save_file({"x": torch.zeros(1)}, str(tmp_path / "other.safetensors"), metadata={"format": "something"})
    with pytest.raises(CheckpointError, match="format 'something' is not 'openafm-lora-adapter'"):
        read_adapter(tmp_path / "other.safetensors")
