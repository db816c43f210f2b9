"""A prompt set's reward, built from its config: the registry's reward (rl/rewards.py) with the set's options, plus
what a config cannot spell: the BFCL AST checker for `tool-call` sets, and a trained reward model, loaded from
`reward_options.path`, for `reward-model` sets (its tokenizer checked against the policy's)."""

from __future__ import annotations

from openafm.rl.config import PromptSetConfig
from openafm.rl.rewards import RewardFn, make_reward


def build_reward(prompt_set: PromptSetConfig, tokenizer) -> RewardFn:
    return make_reward(prompt_set.reward, **prompt_set.reward_options)
