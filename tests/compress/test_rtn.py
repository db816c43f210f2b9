import pytest
import torch

from tiny import make_tiny
from openafm.compress.clip_init import ClipInit
from openafm.compress.fake_quant import Granularity
from openafm.compress.levels import Levels, level_set
from openafm.compress.rtn import quantize_model_rtn, rtn_quantize


def _w(shape=(12, 40), seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("bits", [2, 3])
@pytest.mark.parametrize("kind", list(Levels))
@pytest.mark.parametrize("granularity", list(Granularity))
def test_f_one_matches_naive_round_to_nearest(bits, kind, granularity):
    ls = level_set(kind, bits)
    w = _w()
    q = rtn_quantize(w, bits=bits, levels=kind, granularity=granularity, clip=ClipInit.NONE)
    deq = q.dequantize()
    levels = ls.values().tolist()
    for i in range(w.shape[0]):
        m = float(w.abs().max()) if granularity is Granularity.TENSOR else float(w[i].abs().max())
        s = m / ls.level_max                                              # f = 1
        assert float(q.scale.reshape(-1)[i if granularity is Granularity.CHANNEL else 0]) == pytest.approx(s)
        for j in range(w.shape[1]):
            nearest = min(levels, key=lambda v: abs(v - float(w[i, j]) / s))
            assert float(deq[i, j]) == pytest.approx(nearest * s, rel=1e-5, abs=1e-7)
            assert int(q.codes[i, j]) == levels.index(nearest)


def test_clip_lowers_error_at_two_bits_and_eight_bits_is_fine():
    w = _w((64, 256), seed=1)
    err = lambda q: float(((q.dequantize() - w) ** 2).mean())
    none = rtn_quantize(w, bits=2, clip=ClipInit.NONE)
    nr = rtn_quantize(w, bits=2, clip=ClipInit.NEWTON_RAPHSON)
    assert err(nr) < err(none)
    q8 = rtn_quantize(w, bits=8, granularity=Granularity.CHANNEL)
    assert float((q8.dequantize() - w).abs().max()) <= float(q8.scale.max()) / 2 + 1e-7
    three = rtn_quantize(w, bits=3, clip=ClipInit.NEWTON_RAPHSON)
    assert err(three) < err(nr)


def test_quantize_model_in_place():
    model = make_tiny("smollm2-tiny")
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    out = quantize_model_rtn(model, bits=3, granularity=Granularity.CHANNEL, clip=ClipInit.NEWTON_RAPHSON)
    params = dict(model.named_parameters())
    assert set(out) == {n for n in before if n.startswith("layers.") and before[n].ndim == 2}
    for name, q in out.items():
        assert torch.equal(params[name], q.dequantize())
        assert not torch.equal(params[name], before[name])
        assert torch.equal(q.dequantize(), rtn_quantize(before[name], bits=3, granularity=Granularity.CHANNEL,
                                                        clip=ClipInit.NEWTON_RAPHSON).dequantize())
    for name in before:                                                  # norms and the fp32 embedding untouched
        if name not in out:
            assert torch.equal(params[name], before[name])


def test_quantize_model_embedding_and_moe():
    from openafm.models.build import build_model
    from openafm.models.presets import get_preset
    torch.manual_seed(0)
    model = build_model(get_preset("afm-server-tiny"))
    out = quantize_model_rtn(model, bits=2, embed_bits=4)
    assert out["embed.weight"].bits == 4 and out["embed.weight"].scale.ndim == 1
    moe_keys = [k for k in out if ".ffn.gate_up." in k and k.split(".")[-1].isdigit()]
    assert moe_keys
    name = moe_keys[0].rsplit(".", 1)[0]
    stack = dict(model.named_parameters())[name]
    assert torch.equal(stack[0], out[f"{name}.0"].dequantize())


def test_bad_bits_raise():
    with pytest.raises(ValueError, match="bits=5"):
        rtn_quantize(_w(), bits=5)
    with pytest.raises(ValueError, match="embed_bits=7"):
        quantize_model_rtn(make_tiny("smollm2-tiny"), bits=2, embed_bits=7)
