"""RLOO: leave-one-out advantages against a hand-computed example, baselines that centre each group, the
moving-average and no-baseline alternatives by hand, the loss's gradient against a naive REINFORCE loop when the
ratio is 1 and the KL 0, clipping that zeroes the gradient outside the band, and KL shaping."""

from __future__ import annotations

import pytest
import torch

from openafm.errors import ConfigError
from openafm.rl.rloo import (
    Baseline,
    Normalisation,
    RLOOConfig,
    advantages,
    group,
    leave_one_out_advantages,
    leave_one_out_baseline,
    moving_average_advantages,
    rloo_loss,
    sequence_kl,
    shaped_rewards,
    token_logprobs,
)


def test_advantages_by_hand():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [2.0, 4.0, 6.0, 8.0]])
    # group 2: baseline of 2 is (4 + 6 + 8) / 3 = 6 -> -4; of 4: 16/3 -> -4/3; of 6: 14/3 -> 4/3; of 8: 4 -> 4
    expected = torch.tensor([[2 / 3, -2 / 3, -2 / 3, 2 / 3], [-4.0, -4 / 3, 4 / 3, 4.0]])
    torch.testing.assert_close(leave_one_out_advantages(rewards), expected)
    torch.testing.assert_close(leave_one_out_baseline(rewards)[1], torch.tensor([6.0, 16 / 3, 14 / 3, 4.0]))


def test_advantages_sum_to_zero_per_group_and_equal_scaled_centring():
    rewards = torch.randn(7, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    adv = leave_one_out_advantages(rewards)
    torch.testing.assert_close(adv.sum(-1), torch.zeros(7, dtype=torch.float64))
    torch.testing.assert_close(adv, 5 / 4 * (rewards - rewards.mean(-1, keepdim=True)))
    same = leave_one_out_advantages(torch.full((2, 3), 0.5))
    assert torch.equal(same, torch.zeros(2, 3))               # equal rewards teach nothing


@pytest.mark.parametrize("k", [1, 0])
def test_k_below_two_raises_naming_k(k):
    with pytest.raises(ConfigError, match=f"k={k}"):
        leave_one_out_advantages(torch.zeros(3, k))
    with pytest.raises(ConfigError, match=f"k={k}"):
        RLOOConfig(k=k)


def test_moving_average_baseline_by_hand():
    batches = [torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.ones(2, 2), torch.zeros(2, 2)]    # means 0.5, 1, 0
    # decay 0.5: no history -> b = 0, state 0.5; b = 0.5, state 0.5 * 0.5 + 0.5 * 1 = 0.75; b = 0.75, state 0.375
    state, seen = None, []
    for rewards in batches:
        adv, state = moving_average_advantages(rewards, state, decay=0.5)
        seen.append((adv, state))
    torch.testing.assert_close(seen[0][0], batches[0])
    torch.testing.assert_close(seen[1][0], torch.full((2, 2), 0.5))
    torch.testing.assert_close(seen[2][0], torch.full((2, 2), -0.75))
    assert [s for _, s in seen] == [0.5, 0.75, 0.375]
    adv, state = advantages(torch.ones(2, 2), Baseline.MOVING_AVERAGE, 0.75, decay=0.5)   # the kind dispatches
    assert torch.equal(adv, torch.full((2, 2), 0.25)) and state == 0.875


def test_no_baseline_advantages_are_the_rewards_and_leave_one_out_keeps_no_state():
    rewards = torch.tensor([[0.2, 0.9, 0.4], [1.0, 0.0, 0.5]])
    adv, state = advantages(rewards, Baseline.NONE, state=0.3)
    assert torch.equal(adv, rewards) and state is None
    adv, state = advantages(rewards, "leave-one-out")
    assert torch.equal(adv, leave_one_out_advantages(rewards)) and state is None


def test_baseline_config_checks():
    assert RLOOConfig(k=1, baseline="moving-average").baseline is Baseline.MOVING_AVERAGE   # REINFORCE: k = 1 is fine
    with pytest.raises(ConfigError, match="decay=1"):
        RLOOConfig(baseline_decay=1)
    with pytest.raises(ValueError, match="'mean'"):
        RLOOConfig(baseline="mean")


def test_group_layout():
    assert group(torch.arange(6.0), 3).tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(ValueError, match="k=4"):
        group(torch.arange(6.0), 4)


def _policy(n=6, t=5, v=7, seed=0):
    """A tabular policy: logits [N, T, V] as the parameter, sampled tokens, a ragged response mask."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, t, v, generator=g, dtype=torch.float64, requires_grad=True)
    tokens = torch.randint(0, v, (n, t), generator=g)
    lengths = torch.tensor([5, 2, 4, 1, 3, 5])[:n]
    mask = (torch.arange(t) >= t - lengths.unsqueeze(1)).double()         # responses end the row
    return logits, tokens, mask


@pytest.mark.parametrize("normalisation", list(Normalisation))
def test_gradient_is_reinforce_when_ratio_one_and_kl_zero(normalisation):
    logits, tokens, mask = _policy()
    rewards = torch.tensor([1.0, 0.0, 0.5, 2.0, -1.0, 0.0], dtype=torch.float64)
    adv = leave_one_out_advantages(group(rewards, 3)).flatten()
    logp = token_logprobs(logits, tokens)
    ref = logp.detach()
    shaped = shaped_rewards(rewards, sequence_kl(logp.detach(), ref, mask), kl_coef=0.3)
    assert torch.equal(shaped, rewards)                                  # KL 0: shaping changes nothing
    loss, metrics = rloo_loss(logp, logp.detach(), adv, mask, normalisation=normalisation)
    (grad,) = torch.autograd.grad(loss, logits)
    assert metrics["ratio"] == pytest.approx(1.0) and metrics["clip_fraction"] == 0.0

    naive = 0.0                        # REINFORCE: -(1/N) sum_n A_n sum_t log pi(y_nt), in plain Python loops
    total_tokens = float(mask.sum())
    for n in range(6):
        seq = sum(torch.log_softmax(logits[n, t], -1)[tokens[n, t]] for t in range(5) if mask[n, t])
        count = float(mask[n].sum())
        scale = {Normalisation.SEQUENCE_SUM: 1 / 6, Normalisation.TOKEN_MEAN: 1 / total_tokens,
                 Normalisation.SEQUENCE_MEAN: 1 / (6 * count)}[normalisation]
        naive = naive - scale * float(adv[n]) * seq
    (expected,) = torch.autograd.grad(naive, logits)
    torch.testing.assert_close(grad, expected)
    if normalisation is Normalisation.TOKEN_MEAN:                       # REINFORCE's direction, scaled
        assert expected.abs().max() > 0


def test_clipping_zeroes_the_gradient_outside_the_band():
    logp = torch.zeros(4, 3, dtype=torch.float64, requires_grad=True)
    # ratios exp(0 - old): row 0 1.5, row 1 0.5, row 2 1.1 (inside), row 3 0.5
    old = -torch.log(torch.tensor([1.5, 0.5, 1.1, 0.5], dtype=torch.float64)).unsqueeze(1).expand(4, 3).clone()
    adv = torch.tensor([1.0, -1.0, 1.0, 1.0], dtype=torch.float64)
    mask = torch.ones(4, 3, dtype=torch.float64)
    loss, metrics = rloo_loss(logp, old, adv, mask, clip=0.2)
    (grad,) = torch.autograd.grad(loss, logp)
    ratio = torch.exp(logp.detach() - old)[:, 0]
    torch.testing.assert_close(ratio, torch.tensor([1.5, 0.5, 1.1, 0.5], dtype=torch.float64))
    assert torch.equal(grad[0], torch.zeros(3)) and torch.equal(grad[1], torch.zeros(3))   # left the band
    # inside the band, and a positive advantage with a low ratio (PPO's min keeps the unclipped term): -A * rho / 12
    torch.testing.assert_close(grad[2], torch.full((3,), -1.1 / 12, dtype=torch.float64))
    torch.testing.assert_close(grad[3], torch.full((3,), -0.5 / 12, dtype=torch.float64))
    assert metrics["clip_fraction"] == pytest.approx(0.5)


def test_kl_shaping_penalises_drift_from_the_reference():
    old = torch.tensor([[-1.0, -2.0, -0.5], [-1.0, -1.0, -1.0]])
    ref = torch.tensor([[-1.5, -2.0, -9.0], [-1.0, -1.0, -1.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    kl = sequence_kl(old, ref, mask)
    torch.testing.assert_close(kl, torch.tensor([8.5, 0.0]))             # the masked prompt token is not counted
    torch.testing.assert_close(shaped_rewards(torch.tensor([1.0, 1.0]), kl, 0.1), torch.tensor([0.15, 1.0]))


def test_shapes_are_checked():
    with pytest.raises(ValueError, match="advantages"):
        rloo_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(3), torch.ones(2, 3))
