import pytest
import torch

from openafm.errors import SamplingOptionError
from openafm.runtime.sampling import Sampler, SamplingParams, _nucleus, greedy


def test_greedy_is_argmax():
    logits = torch.randn(4, 50, generator=torch.Generator().manual_seed(0))
    assert torch.equal(Sampler(SamplingParams())(logits), logits.argmax(-1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_greedy_picks_what_torch_argmax_picks_ties_and_nan_included(dtype):
    x = torch.randn(5, 49152, generator=torch.Generator().manual_seed(0)).to(dtype)
    x[1, 5] = x[1, 9] = 1e4                        # a tie: the first wins
    x[2, 7] = float("nan")                         # NaN counts as the largest
    x[3] = 0.0                                     # all equal
    with torch.inference_mode():
        got = greedy(x)
    assert got.dtype == torch.int64 and got.tolist() == x.argmax(dim=-1).tolist()
    assert got.tolist()[1:4] == [5, 7, 0]
    assert greedy(x[:, ::2]).tolist() == x[:, ::2].argmax(dim=-1).tolist()       # a strided view


def test_seeded_sampling_is_reproducible_and_seed_dependent():
    logits = torch.zeros(1, 1000)
    draw = lambda seed: [Sampler(SamplingParams(temperature=1.0, seed=seed))(logits).item() for _ in range(1)] + \
        Sampler(SamplingParams(temperature=1.0, seed=seed))(logits.expand(8, -1)).tolist()
    assert draw(7) == draw(7)
    assert draw(7) != draw(8)


def test_top_k_only_samples_the_k_best():
    logits = torch.arange(20, dtype=torch.float32)[None].expand(2000, -1)
    got = Sampler(SamplingParams(temperature=5.0, top_k=3, seed=0))(logits)
    assert set(got.tolist()) == {17, 18, 19}


def test_nucleus_keeps_smallest_set_reaching_top_p():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    kept = _nucleus(probs.log(), 0.8).isfinite()[0].tolist()
    assert kept == [True, True, False, False]           # 0.5 + 0.3 reaches 0.8
    kept = _nucleus(probs.log(), 0.81).isfinite()[0].tolist()
    assert kept == [True, True, True, False]
    kept = _nucleus(probs.log(), 0.1).isfinite()[0].tolist()
    assert kept == [True, False, False, False]          # the top token always stays


def test_sampling_frequencies_follow_temperature_softmax():
    logits = torch.tensor([[0.0, 1.0, 2.0]])
    sampler = Sampler(SamplingParams(temperature=2.0, seed=3))
    counts = torch.bincount(sampler(logits.expand(20000, -1)), minlength=3).double() / 20000
    expected = (logits[0] / 2.0).softmax(-1).double()
    assert (counts - expected).abs().max().item() < 0.015


@pytest.mark.parametrize("kwargs, name", [
    (dict(temperature=-1), "temperature=-1"), (dict(temperature=float("nan")), "temperature=nan"),
    (dict(temperature=1, top_k=0), "top_k=0"), (dict(temperature=1, top_p=1.5), "top_p=1.5"),
    (dict(temperature=1, top_p=0), "top_p=0"), (dict(top_k=5), "top_k has no effect"),
    (dict(temperature=1, seed=-2), "seed=-2"),
])
def test_invalid_options_name_the_option(kwargs, name):
    with pytest.raises(SamplingOptionError, match=name):
        SamplingParams(**kwargs)


def test_min_p_keeps_the_tokens_at_least_min_p_times_the_best_against_transformers():
    from transformers.generation.logits_process import MinPLogitsWarper, TemperatureLogitsWarper
    logits = torch.randn(3, 200, generator=torch.Generator().manual_seed(0))
    ours = Sampler(SamplingParams(temperature=0.7, min_p=0.1, seed=0)).probs(logits)                 # [3, 200]
    scaled = TemperatureLogitsWarper(0.7)(None, logits.clone())
    theirs = MinPLogitsWarper(0.1, min_tokens_to_keep=1)(None, scaled).softmax(-1)
    assert torch.equal(ours > 0, theirs > 0)
    torch.testing.assert_close(ours, theirs)
    kept = ours > 0
    tempered = (logits / 0.7).softmax(-1)
    assert bool((tempered[kept] >= 0.1 * tempered.amax(-1, keepdim=True).expand_as(tempered)[kept]).all())
    assert 1 < int(kept.sum(-1).min()) and int(kept.sum(-1).max()) < 200           # the cut bites, and keeps several


@pytest.mark.parametrize("bad", [-0.1, 1.5, True, "0.1"])
def test_min_p_out_of_range_raises_naming_it(bad):
    with pytest.raises(SamplingOptionError, match="min_p="):
        SamplingParams(temperature=1.0, min_p=bad)


def test_min_p_with_greedy_raises():
    with pytest.raises(SamplingOptionError, match="min_p has no effect"):
        SamplingParams(min_p=0.05)
