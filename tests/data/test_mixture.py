"""Mixture weights, language temperature sampling, the multilingual curriculum and the sampler."""

import math

import numpy as np
import pytest

from openafm.data.mixture import (Curriculum, MixtureConfig, MixtureSampler, SourceStats, counter_uniform,
                                  language_probs)
from openafm.errors import ConfigError


def test_weights_must_sum_to_one():
    with pytest.raises(ConfigError, match=r"sum to 0.9, not 1") as e:
        MixtureConfig(weights={"general": 0.5, "code": 0.4})
    assert "'general': 0.5" in str(e.value)
    with pytest.raises(ConfigError, match="unknown domains \\['poetry'\\]"):
        MixtureConfig(weights={"general": 0.5, "poetry": 0.5})
    with pytest.raises(ConfigError, match=">= 0"):
        MixtureConfig(weights={"general": 1.5, "code": -0.5})


def test_language_probs_formula():
    counts = {"en": 1000, "de": 100, "fr": 10}
    for t in (1.0, 2.0, 5.0):
        probs = language_probs(counts, t)
        raw = {k: v ** (1 / t) for k, v in counts.items()}
        for k in counts:
            assert probs[k] == pytest.approx(raw[k] / sum(raw.values()), rel=1e-12)
    assert language_probs(counts, 1.0)["fr"] == pytest.approx(10 / 1110)
    assert language_probs(counts, 1e9)["fr"] == pytest.approx(1 / 3, rel=1e-6)  # T -> inf: uniform


def test_curriculum_moves_multilingual_8_to_30_percent():
    config = MixtureConfig(weights={"general": 0.62, "code": 0.15, "math": 0.15, "multilingual": 0.08},
                           curriculum=Curriculum(start=0.08, end=0.30))
    for progress, ml in ((0.0, 0.08), (0.5, 0.19), (1.0, 0.30), (2.0, 0.30)):
        w = config.domain_weights(progress)
        assert w["multilingual"] == pytest.approx(ml)
        assert sum(w.values()) == pytest.approx(1.0)
        rest = 1 - ml
        assert w["general"] == pytest.approx(0.62 / 0.92 * rest) and w["code"] == pytest.approx(0.15 / 0.92 * rest)


def _sources():
    return [SourceStats(domain="general", lang="en", n_tokens=100_000, n_docs=1000),     # mean 100
            SourceStats(domain="code", lang=None, n_tokens=50_000, n_docs=100),          # mean 500
            SourceStats(domain="multilingual", lang="de", n_tokens=90_000, n_docs=900),
            SourceStats(domain="multilingual", lang="fr", n_tokens=10_000, n_docs=50)]


def test_sampler_token_shares_match_weights():
    config = MixtureConfig(weights={"general": 0.5, "code": 0.3, "multilingual": 0.2}, language_temperature=2.0)
    sampler = MixtureSampler(config, _sources(), seed=3)
    shares = sampler.token_shares(0.0)
    p_de = 3 / (3 + 1)  # 90000**0.5 : 10000**0.5 = 300 : 100
    np.testing.assert_allclose(shares, [0.5, 0.3, 0.2 * p_de, 0.2 * (1 - p_de)])
    mean_len = np.array([100, 500, 100, 200])
    tokens = np.zeros(4)
    for draw in range(40_000):
        tokens[sampler.choose(draw, 0.0)] += mean_len[sampler.choose(draw, 0.0)]
    np.testing.assert_allclose(tokens / tokens.sum(), shares, atol=0.01)


def test_sampler_is_deterministic_per_seed():
    config = MixtureConfig(weights={"general": 0.5, "code": 0.3, "multilingual": 0.2})
    a = [MixtureSampler(config, _sources(), seed=1).choose(i, 0.3) for i in range(200)]
    b = [MixtureSampler(config, _sources(), seed=1).choose(i, 0.3) for i in range(200)]
    c = [MixtureSampler(config, _sources(), seed=2).choose(i, 0.3) for i in range(200)]
    assert a == b and a != c


def test_sampler_needs_sources_for_weighted_domains():
    config = MixtureConfig(weights={"general": 0.5, "math": 0.5})
    with pytest.raises(ConfigError, match=r"domains \['math'\] but no source"):
        MixtureSampler(config, _sources())
    # A curriculum that only later gives multilingual weight still needs multilingual sources.
    config = MixtureConfig(weights={"general": 1.0}, curriculum=Curriculum(start=0.0, end=0.3))
    with pytest.raises(ConfigError, match="multilingual"):
        MixtureSampler(config, [_sources()[0]])


def test_counter_uniform_is_uniform():
    u = np.array([counter_uniform(7, i) for i in range(20_000)])
    assert 0 <= u.min() and u.max() < 1
    hist = np.histogram(u, bins=10, range=(0, 1))[0]
    assert np.abs(hist - 2000).max() < 5 * math.sqrt(2000)
