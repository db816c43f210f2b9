"""A prompt set's reward, built from its config: the registry's reward (rl/rewards/registry.py) with the set's options, plus
what a config cannot spell: the BFCL AST match as the checker of `tool-call` sets (target {"truth", "functions"},
what the bfcl prompt source stores), and a trained reward model, loaded from `reward_options.path`, for
`reward-model` sets (its tokenizer checked against the policy's: TokenizerMismatchError)."""

from __future__ import annotations

from typing import Any

from openafm.errors import ConfigError
from openafm.eval.bfcl_data import parse_calls_leniently, question_correct
from openafm.rl.config import PromptSetConfig
from openafm.rl.preference.saved import load_reward_model
from openafm.rl.rewards.registry import RewardFn, make_reward


def bfcl_checker(response: str, target: Any) -> bool:
    """The eval's AST match of the calls read from the response against the question's ground truth."""
    if not isinstance(target, dict) or set(target) != {"truth", "functions"}:
        raise ValueError(f"the BFCL checker needs a target {{'truth', 'functions'}}, got {str(target)[:80]}")
    return question_correct(parse_calls_leniently(response), target["truth"], target["functions"])


def build_reward(prompt_set: PromptSetConfig, tokenizer) -> RewardFn:
    options = dict(prompt_set.reward_options)
    if prompt_set.reward == "tool-call":
        if options:
            raise ConfigError(f"prompt set {prompt_set.name!r}: the tool-call reward takes no reward_options here "
                              f"(its checker is the BFCL AST match), got {sorted(options)}")
        return make_reward("tool-call", checker=bfcl_checker)
    if prompt_set.reward == "reward-model":
        if set(options) != {"path"}:
            raise ConfigError(f"prompt set {prompt_set.name!r}: the reward-model reward needs reward_options "
                              f"{{path: <an `openafm reward train` output>}} and nothing else, got {sorted(options)}")
        return make_reward("reward-model", scorer=load_reward_model(options["path"], policy_tokenizer=tokenizer))
    return make_reward(prompt_set.reward, **options)
