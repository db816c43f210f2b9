import pytest
import torch
from torch import nn
from torch.nn.utils import parametrize

from tiny import make_tiny
from openafm.models.build import build_model
from openafm.nn.moe import MoE
from openafm.models.presets import get_preset
from openafm.compress.clip_init import ClipInit
from openafm.compress.fake_quant import Granularity
from openafm.compress.levels import Levels
from openafm.compress.qat import QATSpec, export_model, prepare_qat, qat_param_groups, qat_parametrizations


def _ids(model, t=12, seed=0):
    return torch.randint(0, model.config.vocab_size, (2, t), generator=torch.Generator().manual_seed(seed))


def test_every_linear_fake_quantized_and_trainable():
    model = make_tiny("afm-ondevice-tiny").requires_grad_(False)
    linears = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    prepare_qat(model, QATSpec(bits=2))
    names = {n for n, *_ in qat_parametrizations(model)}
    assert names == {f"{n}.weight" for n in linears} | {"embed.weight"}
    for _, module, attr, fq in qat_parametrizations(model):
        assert module.parametrizations[attr].original.requires_grad and fq.f.requires_grad
        if attr == "weight" and isinstance(module, nn.Linear):
            assert fq.f.shape == (1, 1) and fq.levels.bits == 2           # one f per tensor (fused qkv included)
            assert 0 < float(fq.f.detach()) < 1                                    # Newton-Raphson init clips
    model.train()
    logits = model(_ids(model))
    logits.float().pow(2).mean().backward()
    for _, module, attr, fq in qat_parametrizations(model):
        assert fq.f.grad is not None and float(fq.f.grad.abs().sum()) > 0
        assert module.parametrizations[attr].original.grad is not None


def test_export_dequant_equals_forward_weights_bit_exactly():
    model = make_tiny("smollm2-tiny")
    prepare_qat(model, QATSpec(bits=2, levels=Levels.UNBALANCED, granularity=Granularity.CHANNEL))
    exported = export_model(model)
    for name, module, attr, _ in qat_parametrizations(model):
        assert torch.equal(exported[name].dequantize(), getattr(module, attr))
    assert exported["layers.0.attn.qkv.weight"].scale.shape == (model.layers[0].attn.qkv.out_features,)


def test_quantized_model_equals_plain_model_with_dequantized_weights():
    model = make_tiny("smollm2-tiny")
    plain = make_tiny("smollm2-tiny")
    prepare_qat(model, QATSpec(bits=3))
    exported = export_model(model)
    with torch.no_grad():
        params = dict(plain.named_parameters())
        for name, q in exported.items():
            params[name].copy_(q.dequantize())
    ids = _ids(model)
    with torch.no_grad():
        assert torch.equal(model(ids), plain(ids))


def test_moe_expert_stacks_exported_per_expert():
    torch.manual_seed(0)
    model = build_model(get_preset("afm-server-tiny"))
    prepare_qat(model, QATSpec(bits=2))
    exported = export_model(model)
    (moe_name, moe) = next((n, m) for n, m in model.named_modules() if isinstance(m, MoE))
    e = moe.parametrizations.gate_up.original.shape[0]
    for i in range(e):
        q = exported[f"{moe_name}.gate_up.{i}"]
        assert q.codes.shape == moe.parametrizations.gate_up.original.shape[1:]
        assert torch.equal(q.dequantize(), moe.gate_up[i])
    assert moe.parametrizations.down[0].f.shape == (e, 1, 1)             # one f per expert matrix
    ids = torch.randint(0, model.kv_plan.vocab_size, (2, 12), generator=torch.Generator().manual_seed(0))
    model(ids).pow(2).mean().backward()
    assert float(moe.parametrizations.down[0].f.grad.abs().sum()) > 0


def test_skip_and_bad_skip():
    model = make_tiny("smollm2-tiny")
    prepare_qat(model, QATSpec(skip=["layers.0.*"]))
    names = {n for n, *_ in qat_parametrizations(model)}
    assert not any(n.startswith("layers.0.") for n in names) and "layers.1.attn.qkv.weight" in names
    with pytest.raises(ValueError, match="'nope.*' matches no quantized tensor"):
        prepare_qat(make_tiny("smollm2-tiny"), QATSpec(skip=["nope.*"]))


def test_prepare_twice_raises():
    model = prepare_qat(make_tiny("smollm2-tiny"))
    with pytest.raises(ValueError, match="already has parametrized"):
        prepare_qat(model)


@pytest.mark.parametrize("field,value", [("bits", 5), ("bits", 1), ("embed_bits", 6)])
def test_bits_outside_supported_raise_naming_value(field, value):
    with pytest.raises(ValueError, match=rf"{field}={value}.*\[2, 3, 4, 8\]"):
        QATSpec(**{field: value})


def test_spec_enums_from_strings():
    spec = QATSpec(levels="unbalanced", granularity="channel", init="none")
    assert spec.levels is Levels.UNBALANCED and spec.granularity is Granularity.CHANNEL and spec.init is ClipInit.NONE
    with pytest.raises(ValueError):
        QATSpec(granularity="row")


def test_param_groups_zero_decay_for_qat_params():
    model = make_tiny("smollm2-tiny").requires_grad_(True)
    prepare_qat(model)
    groups = qat_param_groups(model, weight_decay=0.1)
    qat, other = groups
    assert qat["weight_decay"] == 0.0 and other["weight_decay"] == 0.1
    n_quant = len(qat_parametrizations(model))
    assert len(qat["params"]) == 2 * n_quant                             # latent weight + f each
    assert all(p.ndim == 1 for p in other["params"])                     # the norms
    torch.optim.AdamW(groups, lr=1e-3)
    frozen = prepare_qat(make_tiny("smollm2-tiny").requires_grad_(False))
    assert [g["name"] for g in qat_param_groups(frozen, weight_decay=0.1)] == ["qat"]
    with pytest.raises(ValueError, match="prepare_qat first"):
        qat_param_groups(make_tiny("smollm2-tiny"), weight_decay=0.0)


def test_a_few_steps_reduce_the_loss():
    model = make_tiny("smollm2-tiny").requires_grad_(False)
    prepare_qat(model, QATSpec(bits=2, embed_bits=None))
    opt = torch.optim.AdamW(qat_param_groups(model, weight_decay=0.0), lr=3e-3)
    ids = _ids(model, t=16)
    losses = []
    for _ in range(8):
        logits = model(ids)
        loss = nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert not parametrize.is_parametrized(model.embed)


def test_spec_dict_round_trip():
    from openafm.config import from_dict, to_dict
    spec = QATSpec(bits=3, levels=Levels.UNBALANCED, embed_bits=None, skip=["layers.0.*"])
    data = to_dict(spec)
    assert data["levels"] == "unbalanced" and data["embed_bits"] is None
    assert from_dict(QATSpec, data) == spec
