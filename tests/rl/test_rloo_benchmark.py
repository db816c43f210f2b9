"""benchmarks/rloo.py's gradient-variance measurement on a case with an exact answer: a one-token bandit (softmax
over 3 tokens, k = 3 samples of one prompt), whose estimator variances come from enumerating all 27 joint
outcomes in plain Python. The benchmark's pieces (its advantages per estimator, its policy gradient through
rloo_loss, its trace of the covariance) applied to sampled draws must land on them."""

from __future__ import annotations

import importlib.util
import itertools
import math
import sys
from pathlib import Path

import pytest
import torch

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "rloo.py"
REWARD = [1.0, 0.0, 0.3]                       # r(y) of the bandit's three tokens
THETA = [0.4, -0.2, 0.1]
K = 3


@pytest.fixture(scope="module")
def bench():
    if not BENCHMARK.exists():
        pytest.skip("benchmarks/rloo.py is not in this checkout")
    saved = list(sys.path)
    spec = importlib.util.spec_from_file_location("rloo_benchmark", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved           # the script puts benchmarks/ on sys.path for its own imports
    return module


class Bandit(torch.nn.Module):
    """A context-free policy: the same logits theta [V] at every position (input_ids [N, T] -> [N, T, V])."""

    def __init__(self):
        super().__init__()
        self.theta = torch.nn.Parameter(torch.tensor(THETA, dtype=torch.float64))

    def forward(self, input_ids):
        return self.theta.expand(*input_ids.shape, -1)


def _exact(baseline_of) -> tuple[list[float], float]:
    """The mean gradient and tr Cov of g = (1/k) sum_i A_i (e_{y_i} - pi) over all joint outcomes (exact)."""
    z = sum(math.exp(t) for t in THETA)
    pi = [math.exp(t) / z for t in THETA]
    outcomes = []
    for ys in itertools.product(range(3), repeat=K):
        prob = math.prod(pi[y] for y in ys)
        rewards = [REWARD[y] for y in ys]
        adv = [r - baseline_of(rewards, i) for i, r in enumerate(rewards)]
        g = [sum(adv[i] * ((ys[i] == v) - pi[v]) for i in range(K)) / K for v in range(3)]
        outcomes.append((prob, g))
    mean = [sum(p * g[v] for p, g in outcomes) for v in range(3)]
    return mean, sum(p * sum((g[v] - mean[v]) ** 2 for v in range(3)) for p, g in outcomes)


def test_trace_covariance_is_the_trace_of_the_sample_covariance(bench):
    grads = torch.randn(50, 7, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert bench.trace_covariance(grads) == pytest.approx(float(torch.cov(grads.T).trace()), rel=1e-12)
    with pytest.raises(ValueError, match="M >= 2"):
        bench.trace_covariance(grads[:1])


@pytest.fixture
def one_thread():
    """2,000 tiny autograd calls: on a shared 2-core machine, one thread is ~20x faster than two (measured)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_gradient_variance_matches_enumeration_on_a_bandit(bench, one_thread):
    pi = torch.softmax(torch.tensor(THETA, dtype=torch.float64), 0)
    mean_reward = float((pi * torch.tensor(REWARD, dtype=torch.float64)).sum())
    ma_state = 0.5
    exact = {"none": _exact(lambda rs, i: 0.0),
             "moving-average": _exact(lambda rs, i: ma_state),
             "ideal-scalar": _exact(lambda rs, i: mean_reward),
             "ideal-per-prompt": _exact(lambda rs, i: mean_reward),
             "leave-one-out": _exact(lambda rs, i: (sum(rs) - rs[i]) / (K - 1))}
    model = Bandit()
    params = [model.theta]
    gen = torch.Generator().manual_seed(0)
    draws = {name: [] for name in bench.VARIANCE_KINDS}
    for _ in range(2000):
        ys = torch.multinomial(pi, K, replacement=True, generator=gen)                # one prompt, k samples
        tokens = torch.stack([torch.zeros(K, dtype=torch.long), ys], 1)                # [k, 2]: prompt, response
        mask = torch.ones(K, 1, dtype=torch.float64)
        rewards = torch.tensor([REWARD[y] for y in ys.tolist()], dtype=torch.float64)
        advs = bench.estimator_advantages(rewards, k=K, ma_state=ma_state, scalar_mean=mean_reward,
                                          prompt_means=torch.tensor([mean_reward], dtype=torch.float64))
        for name, g in zip(advs, bench.policy_gradient(model, params, tokens, mask, list(advs.values())), strict=True):
            draws[name].append(g)
    for name, (mean, trace) in exact.items():
        grads = torch.stack(draws[name])                                              # [M, 3]
        assert bench.trace_covariance(grads) == pytest.approx(trace, rel=0.1), name   # sampling error ~3%
        torch.testing.assert_close(grads.mean(0), torch.tensor(mean, dtype=torch.float64), atol=0.01, rtol=0)
    # exact: none 0.0555, leave-one-out 0.0481 (its k / (k - 1) = 1.5 scale and a baseline from 2 samples: with one
    # prompt, a good constant beats it), ideal-scalar 0.0180, the constant 0.5 0.0168 -- distinct, so a mix-up fails
    traces = sorted(t for _, t in exact.values())
    assert all(b > 1.05 * a for a, b in itertools.pairwise(traces) if a != b) and len(set(traces)) == 4
