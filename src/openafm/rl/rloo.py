"""RLOO (REINFORCE leave-one-out; Kool et al. 2019, Ahmadian et al. 2024), the RL objective of post-training, as
pure tensor functions: no model, sampler or schedule, so the synchronous loop and the asynchronous system share it.

Layout: a batch holds P prompts x k samples, N = P * k rows, the k samples of prompt p in rows p*k .. p*k + k - 1.
Row n is the prompt and its sampled response, T tokens; logprobs[n, t] is log pi(token t | tokens < t) and
mask[n, t] = 1 exactly where token t was sampled (the response, its end-of-turn token included).

    advantage   A_i = R_i - mean_{j != i} R_j over the k samples of a prompt: an unbiased baseline (it does not
                depend on sample i), and the k advantages of a prompt sum to 0. Needs k >= 2.
    baseline    the kind of b in A = R - b (Baseline): leave-one-out (RLOO, the default); moving-average, plain
                REINFORCE's baseline, one scalar b_t = d * b_{t-1} + (1 - d) * mean(batch_t rewards) over past
                batches, used before it takes in the current batch (so it stays independent of the samples it
                centres), its state passed in and returned (None before the first batch: b = 0); none (A = R).
                benchmarks/rloo.py compares them at equal samples.
    KL          as reward shaping (the choice here): R_i = r_i - beta * sum_t (log pi_old - log pi_ref)(y_i,t),
                the sequence's sampled estimate of KL(pi_old || pi_ref), as in RLHF since Ziegler et al. 2019, the
                RLOO paper and AFM 2024's MDLOO. Why not a loss term: the penalty then enters the return the
                leave-one-out baseline centres, so samples are compared on the regularised objective the policy
                maximises; it costs nothing at training time (reference logprobs are taken once, when the sample
                is scored, which suits an asynchronous sampler); and the policy-gradient of the shaped return is
                an unbiased gradient of the KL-regularised objective, which a per-token k3 loss term is not.
    ratio       rho_t = exp(log pi - log pi_old) per sampled token, where pi_old is the policy that sampled. The
                loss is PPO's pessimistic clip, -min(rho_t A, clip(rho_t, 1 - eps, 1 + eps) A): a sample a few
                policy versions stale still gives a bounded update, and a token whose ratio has left the band in
                the direction its advantage pushes gets no gradient.
    normalise   how per-token terms are summed (Normalisation): token-mean (default) divides the sum over every
                sampled token of the batch by their number — REINFORCE's direction, scaled by 1 / (mean response
                length), with no bias between long and short responses, and what the trainer's token weighting
                (Objective.weight) averages correctly over micro-batches; sequence-sum is REINFORCE exactly (sum
                over a response's tokens, mean over responses); sequence-mean (GRPO's) averages each response
                over its own tokens first, which down-weights the tokens of long responses.
"""

from __future__ import annotations

import dataclasses
import enum

import torch

from openafm.errors import ConfigError


class Baseline(str, enum.Enum):
    LEAVE_ONE_OUT = "leave-one-out"
    MOVING_AVERAGE = "moving-average"
    NONE = "none"


class Normalisation(str, enum.Enum):
    TOKEN_MEAN = "token-mean"
    SEQUENCE_SUM = "sequence-sum"
    SEQUENCE_MEAN = "sequence-mean"


@dataclasses.dataclass(frozen=True)
class RLOOConfig:
    k: int = 4                              # samples per prompt
    clip: float = 0.2                       # epsilon of the ratio's band [1 - eps, 1 + eps]
    kl_coef: float = 0.05                   # beta of the KL shaping
    normalisation: Normalisation = Normalisation.TOKEN_MEAN
    baseline: Baseline = Baseline.LEAVE_ONE_OUT
    baseline_decay: float = 0.9             # d of the moving-average baseline (used by that kind only)

    def __post_init__(self):
        object.__setattr__(self, "baseline", Baseline(self.baseline))
        if self.baseline is Baseline.LEAVE_ONE_OUT:
            check_k(self.k)
        elif not isinstance(self.k, int) or self.k < 1:
            raise ConfigError(f"RLOO k={self.k!r} samples per prompt must be an int >= 1")
        check_decay(self.baseline_decay)
        if not self.clip > 0:
            raise ConfigError(f"RLOO clip={self.clip} must be > 0 (the ratio's band is [1 - clip, 1 + clip])")
        if self.kl_coef < 0:
            raise ConfigError(f"RLOO kl_coef={self.kl_coef} must be >= 0")
        object.__setattr__(self, "normalisation", Normalisation(self.normalisation))


def check_k(k: int) -> None:
    if not isinstance(k, int) or k < 2:
        raise ConfigError(f"RLOO needs k >= 2 samples per prompt (the leave-one-out baseline of a sample is the "
                          f"mean of the other k - 1); got k={k!r}")


def check_decay(decay: float) -> None:
    if not 0 <= decay < 1:
        raise ConfigError(f"moving-average baseline decay={decay} must be in [0, 1) (0: the last batch's mean)")


def group(values: torch.Tensor, k: int) -> torch.Tensor:
    """[N] -> [P, k] (row n = p * k + i)."""
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k={k!r} samples per prompt must be an int >= 1")
    if values.ndim != 1 or values.shape[0] % k:
        raise ValueError(f"{tuple(values.shape)} values do not split into groups of k={k} samples per prompt")
    return values.reshape(-1, k)


def leave_one_out_baseline(rewards: torch.Tensor) -> torch.Tensor:
    """rewards [P, k] -> baselines [P, k]: b_i = (sum_j R_j - R_i) / (k - 1)."""
    check_k(rewards.shape[-1])
    k = rewards.shape[-1]
    return (rewards.sum(-1, keepdim=True) - rewards) / (k - 1)


def leave_one_out_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """rewards [P, k] -> advantages [P, k] = R - leave-one-out baseline (= k / (k - 1) * (R - mean R))."""
    return rewards - leave_one_out_baseline(rewards)


def moving_average_advantages(rewards: torch.Tensor, state: float | None, decay: float
                              ) -> tuple[torch.Tensor, float]:
    """rewards [P, k], state (the baseline after the past batches; None before the first) -> (advantages [P, k] =
    R - state (0 when None), the state after this batch: decay * state + (1 - decay) * mean R, or mean R when
    None)."""
    check_decay(decay)
    mean = float(rewards.mean())
    if state is None:
        return rewards.clone(), mean
    return rewards - state, decay * state + (1 - decay) * mean


def advantages(rewards: torch.Tensor, baseline: Baseline, state: float | None = None, decay: float = 0.9
               ) -> tuple[torch.Tensor, float | None]:
    """rewards [P, k] -> (advantages [P, k], the baseline state to pass to the next batch; None unless
    moving-average) for the kind `baseline`."""
    baseline = Baseline(baseline)
    if baseline is Baseline.LEAVE_ONE_OUT:
        return leave_one_out_advantages(rewards), None
    if baseline is Baseline.MOVING_AVERAGE:
        return moving_average_advantages(rewards, state, decay)
    return rewards.clone(), None


def sequence_kl(old_logprobs: torch.Tensor, ref_logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[N, T] x 3 -> [N]: sum over sampled tokens of log pi_old - log pi_ref (the sampled KL estimate)."""
    return ((old_logprobs - ref_logprobs) * mask).sum(-1)


def shaped_rewards(rewards: torch.Tensor, seq_kl: torch.Tensor, kl_coef: float) -> torch.Tensor:
    """rewards [N], seq_kl [N] -> [N]: r - beta * KL."""
    return rewards - kl_coef * seq_kl


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """logits [N, T, V] predicting tokens [N, T] (logits[:, t] already shifted to score tokens[:, t]) -> [N, T]."""
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def normalise(per_token: torch.Tensor, mask: torch.Tensor, normalisation: Normalisation) -> torch.Tensor:
    """per_token [N, T], mask [N, T] -> a scalar, summed over sampled tokens as `normalisation` says."""
    normalisation = Normalisation(normalisation)
    masked = per_token * mask
    if normalisation is Normalisation.TOKEN_MEAN:
        return masked.sum() / mask.sum().clamp(min=1)
    if normalisation is Normalisation.SEQUENCE_SUM:
        return masked.sum(-1).mean()
    return (masked.sum(-1) / mask.sum(-1).clamp(min=1)).mean()


def rloo_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, *,
              clip: float = 0.2, normalisation: Normalisation = Normalisation.TOKEN_MEAN
              ) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped policy-gradient loss.

    logprobs [N, T] (with gradient, the policy being trained), old_logprobs [N, T] (the sampling policy's, no
    gradient), advantages [N] (leave-one-out, of the shaped reward), mask [N, T] -> (scalar loss, metrics).
    """
    if not logprobs.shape == old_logprobs.shape == mask.shape or advantages.shape != logprobs.shape[:1]:
        raise ValueError(f"shapes: logprobs {tuple(logprobs.shape)}, old_logprobs {tuple(old_logprobs.shape)}, "
                         f"mask {tuple(mask.shape)} must be equal [N, T], advantages {tuple(advantages.shape)} [N]")
    mask = mask.to(logprobs.dtype)
    ratio = torch.exp(logprobs - old_logprobs.detach())                                   # [N, T]
    adv = advantages.detach().to(logprobs.dtype).unsqueeze(-1)                            # [N, 1]
    unclipped, clipped = ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv               # [N, T]
    loss = normalise(-torch.minimum(unclipped, clipped), mask, normalisation)
    with torch.no_grad():
        n = mask.sum().clamp(min=1)
        metrics = {"clip_fraction": float(((clipped < unclipped).to(mask.dtype) * mask).sum() / n),
                   "ratio": float((ratio * mask).sum() / n),
                   "kl_old": float(((old_logprobs - logprobs) * mask).sum() / n)}
    return loss, metrics
