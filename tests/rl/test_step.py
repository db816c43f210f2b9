"""The synchronous RLOO step on a tiny model: rollouts are laid out as rloo.py expects, and a few steps raise a
reward the random policy earns about half the time (a token-level preference it can learn)."""

from __future__ import annotations

import copy

import pytest
import torch

from openafm.rl.rloo import Baseline, RLOOConfig
from openafm.rl.step import RLOOStep, rollout
from tiny import make_tiny


def _spread_policy():
    """A tiny model whose next-token distribution is broad (make_tiny's embeddings make it repeat one token)."""
    model = make_tiny("smollm2-tiny")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed" in name:
                p.mul_(0.1)
    return model


def _even_share(prompt_index: int, response: list[int]) -> float:
    return sum(t % 2 == 0 for t in response) / max(len(response), 1)


def test_rollout_rows_and_mask():
    model = make_tiny("smollm2-tiny")
    roll = rollout(model, [[1, 2, 3], [4, 5]], _even_share, k=3, max_new_tokens=4, temperature=1.0, seed=0)
    assert roll.tokens.shape[0] == 6 and roll.mask.shape == (6, roll.tokens.shape[1] - 1)
    assert roll.mask[0, :2].sum() == 0 and roll.mask[0, 2] == 1          # the prompt is not scored
    assert roll.mask.sum(-1).tolist() == roll.lengths.tolist()
    assert torch.equal(roll.tokens[3, :2], torch.tensor([4, 5]))          # rows 3..5: the second prompt


def test_a_few_steps_raise_the_reward():
    torch.manual_seed(0)
    policy = _spread_policy()
    reference = copy.deepcopy(policy)
    step = RLOOStep(policy, reference, torch.optim.Adam(policy.parameters(), lr=1e-2), RLOOConfig(k=4, kl_coef=0.0),
                    reward=_even_share, max_new_tokens=8)
    prompts = [[1, 2, 3], [7, 8], [11, 12, 13, 14]]
    rewards = [step(prompts, seed=s)["reward"] for s in range(16)]
    assert sum(rewards[:4]) / 4 < 0.6 and sum(rewards[-4:]) / 4 > 0.9, rewards   # measured: 0.54 -> 0.96


def test_moving_average_baseline_state_follows_the_batch_rewards():
    policy = _spread_policy()
    config = RLOOConfig(k=2, kl_coef=0.0, baseline=Baseline.MOVING_AVERAGE, baseline_decay=0.5)
    step = RLOOStep(policy, copy.deepcopy(policy), torch.optim.SGD(policy.parameters(), lr=0.0), config,
                    reward=_even_share, max_new_tokens=4)
    first = step([[1, 2, 3], [7, 8]], seed=0)["reward"]
    assert step.baseline_state == pytest.approx(first)                  # no history: the first batch's mean
    second = step([[1, 2, 3], [7, 8]], seed=1)["reward"]
    assert step.baseline_state == pytest.approx(0.5 * first + 0.5 * second)


def test_greedy_sampling_is_refused():
    model = make_tiny("smollm2-tiny")
    with pytest.raises(ValueError, match="temperature"):
        RLOOStep(model, model, torch.optim.SGD(model.parameters(), lr=0.1), RLOOConfig(k=2), reward=_even_share,
                 max_new_tokens=4, temperature=0.0)
