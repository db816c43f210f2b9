"""One synchronous RLOO step: sample k responses per prompt from the policy, reward them, update the policy.

The step is the synchronous form of report §5's RL: rollouts and the update happen in one process, one after the
other, so the sampling policy is the policy being updated (the clipped ratio starts at 1; it matters when the
asynchronous system of the next issue feeds the same loss slightly stale samples). The objective is `rloo.py`'s:
leave-one-out advantages of the KL-shaped reward, the clipped policy-gradient loss.

    step = RLOOStep(policy, reference, optimizer, RLOOConfig(k=4), reward=lambda p, response: ..., max_new_tokens=32)
    metrics = step(prompts, seed=0)     # prompts: token-id lists; metrics: reward, kl, loss, response length, ...

``reward(prompt_index, response_ids) -> float``; text rewards from ``rewards.make_reward`` are wrapped by the
caller with its tokenizer. Shapes: P prompts, k samples each, N = P * k rows, T tokens per row (right-padded).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from openafm.rl.rloo import RLOOConfig, advantages, group, rloo_loss, sequence_kl, shaped_rewards, token_logprobs
from openafm.rl.rollout import Row, pack_rows
from openafm.runtime.generate import generate_tokens
from openafm.runtime.sampling import SamplingParams

Reward = Callable[[int, list[int]], float]


@dataclass(frozen=True)
class Rollout:
    tokens: torch.Tensor      # [N, T] prompt + response, right-padded with 0
    mask: torch.Tensor        # [N, T - 1] 1 where tokens[:, t + 1] was sampled (the response)
    rewards: torch.Tensor     # [N] the task reward, before KL shaping
    lengths: torch.Tensor     # [N] response tokens


def rollout(policy, prompts: Sequence[list[int]], reward: Reward, *, k: int, max_new_tokens: int,
            temperature: float, seed: int, eos_token_ids: frozenset[int] = frozenset()) -> Rollout:
    """k sampled responses for each prompt (rows p * k .. p * k + k - 1), rewarded."""
    rows, scores, lengths = [], [], []
    for p, prompt in enumerate(prompts):
        for i in range(k):
            sampling = SamplingParams(temperature=temperature, seed=seed * 1_000_003 + p * k + i)
            gen = generate_tokens(policy, [list(prompt)], max_new_tokens=max_new_tokens, eos_token_ids=eos_token_ids,
                                  sampling=sampling)[0]
            rows.append(Row(list(prompt), list(gen.token_ids), stopped=False))   # the end token is not kept
            scores.append(float(reward(p, gen.token_ids)))
            lengths.append(len(gen.token_ids))
    tokens, mask = pack_rows(rows)
    return Rollout(tokens, mask, torch.tensor(scores), torch.tensor(lengths, dtype=torch.float))


def sequence_token_logprobs(model, tokens: torch.Tensor) -> torch.Tensor:
    """tokens [N, T] -> [N, T - 1]: log p(tokens[:, t + 1] | tokens[:, :t + 1])."""
    logits = model(tokens[:, :-1])                                   # [N, T - 1, V]
    return token_logprobs(logits, tokens[:, 1:])


class RLOOStep:
    """Sample, reward, and take one optimizer step on the RLOO loss (see the module docstring)."""

    def __init__(self, policy, reference, optimizer: torch.optim.Optimizer, config: RLOOConfig, *, reward: Reward,
                 max_new_tokens: int, temperature: float = 1.0, eos_token_ids: frozenset[int] = frozenset()):
        if temperature <= 0:
            raise ValueError(f"RLOO samples: temperature={temperature} must be > 0 (greedy samples are all alike)")
        self.policy, self.reference, self.optimizer, self.config = policy, reference, optimizer, config
        self.reward, self.max_new_tokens, self.temperature = reward, max_new_tokens, temperature
        self.eos_token_ids = frozenset(eos_token_ids)
        self.baseline_state: float | None = None        # the moving-average baseline's (config.baseline)

    def __call__(self, prompts: Sequence[list[int]], *, seed: int) -> dict[str, float]:
        self.policy.eval()
        with torch.no_grad():
            roll = rollout(self.policy, prompts, self.reward, k=self.config.k, max_new_tokens=self.max_new_tokens,
                           temperature=self.temperature, seed=seed, eos_token_ids=self.eos_token_ids)
            old = sequence_token_logprobs(self.policy, roll.tokens)                    # [N, T - 1]
            ref = sequence_token_logprobs(self.reference, roll.tokens)
            seq_kl = sequence_kl(old, ref, roll.mask)                                  # [N]
            shaped = shaped_rewards(roll.rewards, seq_kl, self.config.kl_coef)
            adv, self.baseline_state = advantages(group(shaped, self.config.k), self.config.baseline,
                                                  self.baseline_state, self.config.baseline_decay)
        self.policy.train()
        logprobs = sequence_token_logprobs(self.policy, roll.tokens)
        loss, metrics = rloo_loss(logprobs, old, adv.reshape(-1), roll.mask, clip=self.config.clip,
                                  normalisation=self.config.normalisation)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.policy.eval()
        return {"loss": float(loss.detach()), "reward": float(roll.rewards.mean()), "kl": float(seq_kl.mean()),
                "response_tokens": float(roll.lengths.mean()), **metrics}
