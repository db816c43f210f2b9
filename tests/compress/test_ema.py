import pytest
import torch

from tiny import make_tiny
from openafm.compress.ema import EMA
from openafm.compress.qat import QATSpec, prepare_qat


def _qat_model():
    return prepare_qat(make_tiny("smollm2-tiny").requires_grad_(False), QATSpec(bits=2))


def test_tracks_latent_weights_and_f():
    model = _qat_model()
    ema = EMA(model, decay=0.9)
    assert ema.params and all("parametrizations" in n for n in ema.params)
    assert any(n.endswith(".original") for n in ema.params) and any(n.endswith(".f") for n in ema.params)


def test_matches_the_formula_over_steps():
    model = _qat_model()
    decay = 0.8
    ema = EMA(model, decay)
    name, p = next(iter(ema.params.items()))
    expected = p.detach().clone().double()
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        with torch.no_grad():
            p.add_(torch.randn(p.shape, generator=gen))
        ema.update()
        expected = decay * expected + (1 - decay) * p.detach().double()   # shadow = d·shadow + (1-d)·param
    assert torch.allclose(ema.shadow[name].double(), expected, rtol=1e-6, atol=1e-6)
    assert ema.updates == 5


def test_swap_in_and_restore():
    model = _qat_model()
    ema = EMA(model, decay=0.5)
    name, p = next(iter(ema.params.items()))
    with torch.no_grad():
        p.add_(1.0)
    ema.update()
    trained = p.detach().clone()
    with ema.swap_in():
        assert torch.equal(p, ema.shadow[name])
        assert torch.allclose(p, trained - 0.5)                            # half-way back to the start
    assert torch.equal(p, trained)
    with pytest.raises(RuntimeError, match="boom"):
        with ema.swap_in():
            raise RuntimeError("boom")
    assert torch.equal(p, trained)


def test_state_round_trip_and_bad_input():
    model = _qat_model()
    ema = EMA(model, decay=0.9)
    ema.update()
    other = EMA(model, decay=0.5)
    other.load_state_dict(ema.state_dict())
    assert other.decay == 0.9 and all(torch.equal(other.shadow[k], ema.shadow[k]) for k in ema.shadow)
    with pytest.raises(ValueError, match="decay must be in"):
        EMA(model, decay=1.0)
    with pytest.raises(ValueError, match="no trainable parameters"):
        EMA(make_tiny("smollm2-tiny").requires_grad_(False), decay=0.9)
