import pytest
import torch

from openafm.nn.lora import LoRALinear, apply_lora, load_lora_state_dict, lora_state_dict, merge_lora
from tiny import make_tiny


def _randomize(model, seed=1):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.05)


def test_fresh_adapter_changes_nothing_and_only_the_adapter_trains():
    model = make_tiny("smollm2-tiny")
    ids = torch.randint(0, model.config.vocab_size, (2, 9))
    before = model(ids)
    names = apply_lora(model, rank=4, alpha=8)
    assert len(names) == 2 * model.config.n_layers + 2 * model.config.n_layers  # qkv, out, gate_up, down
    torch.testing.assert_close(model(ids), before, rtol=0, atol=0)
    model(ids).sum().backward()
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    assert all(p.grad is not None for n, p in model.named_parameters() if "lora_A" in n)


def test_forward_equals_the_merged_weight():
    base = torch.nn.Linear(12, 7, bias=False)
    layer = LoRALinear(base, rank=3, alpha=6)
    with torch.no_grad():
        layer.lora_B.normal_()
    x = torch.randn(5, 12)
    merged = base.weight + (6 / 3) * layer.lora_B @ layer.lora_A
    torch.testing.assert_close(layer(x), x @ merged.T, rtol=1e-5, atol=1e-5)


def test_merge_folds_every_adapter_into_the_base():
    model = make_tiny("afm-ondevice-tiny")               # includes KV-reader layers (q-only projections)
    ids = torch.randint(0, model.config.vocab_size, (1, 7))
    apply_lora(model, rank=2, alpha=2)
    _randomize(model)
    adapted = model(ids)
    assert merge_lora(model) > 0
    assert not any(isinstance(m, LoRALinear) for m in model.modules())
    torch.testing.assert_close(model(ids), adapted, rtol=1e-4, atol=1e-5)


def test_state_dict_round_trip_and_mismatches_are_named():
    a, b = make_tiny("smollm2-tiny"), make_tiny("smollm2-tiny")
    apply_lora(a, rank=2, alpha=4)
    apply_lora(b, rank=2, alpha=4)
    _randomize(a)
    load_lora_state_dict(b, lora_state_dict(a))
    ids = torch.randint(0, a.config.vocab_size, (1, 5))
    torch.testing.assert_close(a(ids), b(ids), rtol=0, atol=0)
    c = make_tiny("smollm2-tiny")
    apply_lora(c, rank=3, alpha=4)
    with pytest.raises(ValueError, match=r"has shape \(2, 64\).*needs \(3, 64\)"):
        load_lora_state_dict(c, lora_state_dict(a))
    with pytest.raises(ValueError, match="missing"):
        load_lora_state_dict(c, {})


def test_bad_rank_and_no_targets_raise():
    with pytest.raises(ValueError, match="rank must be in 1..4"):
        LoRALinear(torch.nn.Linear(4, 8), rank=5, alpha=1)
    with pytest.raises(ValueError, match="no nn.Linear named one of"):
        apply_lora(make_tiny("smollm2-tiny"), rank=1, alpha=1, targets=["nope"])


def test_lora_on_a_packed_layer_adds_the_same_update_and_refuses_to_merge():
    """A recovery adapter runs unmerged beside a packed low-bit layer: output = packed(x) + scale · B A x."""
    from openafm.nn.pack import pack
    from openafm.nn.packed_linear import PackedKernel, PackedLinear
    g = torch.Generator().manual_seed(0)
    codes = torch.randint(0, 4, (12, 20), generator=g, dtype=torch.uint8)
    p = pack(codes, 2)
    packed = PackedLinear(p.data, torch.rand(12, generator=g) + 0.1, 1.5, 2, p.in_features, PackedKernel.TORCH)
    layer = LoRALinear(packed, rank=3, alpha=6.0)
    with torch.no_grad():
        layer.lora_B.normal_(generator=g)
    x = torch.randn(2, 5, 20, generator=g)
    expected = packed(x) + 2.0 * (x @ layer.lora_A.T) @ layer.lora_B.T
    torch.testing.assert_close(layer(x), expected)
    model = torch.nn.Sequential()
    model.add_module("out", layer)
    with pytest.raises(TypeError, match="cannot be merged"):
        merge_lora(model)
