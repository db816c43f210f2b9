"""Rejection-sampling synthesis of SFT data (report §5: "verified synthetic data"): sample k responses per prompt,
keep those a verifier accepts, and write them with their provenance.

    kept, summary = rejection_sample(prompts, sampler, Verifier.reward("math"), k=8, seed=0)
    write_synth_jsonl("math.jsonl", kept)            # lines openafm.data.chat reads: prompt, response, meta

Verifiers (VerifierKind):
    reward     a reward from rl/rewards/registry.py against the prompt's target; a sample is kept when its reward reaches
               `threshold` (default 1.0: a verified answer, every constraint followed)
    majority   no target, only agreement: each sample's answer is extracted (after the marker, as the math reward
               does); the most common answer wins when at least `min_agreement` of the k samples give it, and the
               samples giving it are kept (self-consistency; unanswered samples count against agreement)

A sampler is any callable (prompt, k, seed) -> k responses; model_sampler builds one from a loaded model. The
meta of each kept line: source (where the prompt came from), verifier, reward or answer, the prompt's acceptance
rate (kept / k), k and the sample's index.
"""

from __future__ import annotations

import dataclasses
import enum
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from openafm.errors import ConfigError
from openafm.io import write_jsonl
from openafm.rl.rewards.registry import DEFAULT_MARKER, RewardFn, extract_answer, make_reward, normalise_answer
from openafm.runtime.generate import generate_tokens
from openafm.runtime.sampling import SamplingParams

Sampler = Callable[[str, int, int], list[str]]          # (prompt, k, seed) -> k responses


class VerifierKind(str, enum.Enum):
    REWARD = "reward"
    MAJORITY = "majority"


@dataclasses.dataclass(frozen=True)
class SynthPrompt:
    prompt: str
    target: Any = None       # what the reward compares against (None for majority voting)
    source: str = ""         # where the prompt came from: "instructions seed 0 #3", "prompts.jsonl:12"


@dataclasses.dataclass(frozen=True)
class Verifier:
    kind: VerifierKind
    name: str                                 # the reward's registry name, or "majority"
    reward: RewardFn | None = None
    threshold: float = 1.0
    min_agreement: float = 0.5
    marker: str = DEFAULT_MARKER

    @classmethod
    def from_reward(cls, name: str, *, threshold: float = 1.0, **options: Any) -> Verifier:
        return cls(VerifierKind.REWARD, name, make_reward(name, **options), threshold=threshold)

    @classmethod
    def majority(cls, *, min_agreement: float = 0.5, marker: str = DEFAULT_MARKER) -> Verifier:
        if not 0 < min_agreement <= 1:
            raise ConfigError(f"min_agreement={min_agreement} must be in (0, 1]")
        return cls(VerifierKind.MAJORITY, "majority", min_agreement=min_agreement, marker=marker)

    def accept(self, prompt: SynthPrompt, responses: Sequence[str]) -> list[dict[str, Any] | None]:
        """Per response: None when rejected, else what the meta records about why it was kept."""
        if self.kind is VerifierKind.REWARD:
            if prompt.target is None:
                raise ConfigError(f"{prompt.source or prompt.prompt[:40]!r}: the {self.name} verifier needs a target "
                                  f"beside the prompt; use the majority verifier for prompts without one")
            rewards = [self.reward(prompt.prompt, r, prompt.target) for r in responses]
            return [{"reward": w} if w >= self.threshold else None for w in rewards]
        answers = [extract_answer(r, self.marker) for r in responses]
        keys = [normalise_answer(a) if a is not None else None for a in answers]
        votes = Counter(key for key in keys if key is not None)
        if not votes:
            return [None] * len(responses)
        winner, count = votes.most_common(1)[0]
        if count / len(responses) < self.min_agreement:
            return [None] * len(responses)
        return [{"answer": winner, "agreement": count / len(responses)} if key == winner else None for key in keys]


@dataclasses.dataclass(frozen=True)
class Kept:
    prompt: str
    response: str
    meta: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "response": self.response, "meta": self.meta}


def rejection_sample(prompts: Sequence[SynthPrompt], sampler: Sampler, verifier: Verifier, *, k: int,
                     seed: int = 0, progress: bool = False) -> tuple[list[Kept], dict[str, Any]]:
    """-> (the kept samples, a summary: prompts, samples, kept, acceptance_rate, prompts_with_a_kept_sample).
    Prompt i is sampled with seed + i, so a run is reproducible and a prompt's samples do not depend on the others."""
    if k < 1:
        raise ConfigError(f"rejection sampling needs k >= 1 samples per prompt, got k={k}")
    kept: list[Kept] = []
    covered = 0
    bar = tqdm(total=len(prompts), desc=f"synth ({verifier.name})", unit="prompt", disable=not progress)
    for i, p in enumerate(prompts):
        responses = sampler(p.prompt, k, seed + i)
        bar.update(1)
        if len(responses) != k:
            raise ValueError(f"the sampler returned {len(responses)} responses for k={k}")
        verdicts = verifier.accept(p, responses)
        accepted = sum(v is not None for v in verdicts)
        covered += accepted > 0
        for j, (response, why) in enumerate(zip(responses, verdicts)):
            if why is not None:
                kept.append(Kept(p.prompt, response, {"source": p.source, "verifier": verifier.name, **why,
                                                      "acceptance_rate": accepted / k, "k": k, "sample": j}))
    bar.close()
    samples = len(prompts) * k
    return kept, {"prompts": len(prompts), "samples": samples, "kept": len(kept),
                  "acceptance_rate": len(kept) / samples if samples else 0.0,
                  "prompts_with_a_kept_sample": covered, "verifier": verifier.name, "k": k, "seed": seed}


def write_synth_jsonl(path: str | Path, kept: Sequence[Kept]) -> Path:
    """Atomically write one {"prompt", "response", "meta"} object per line."""
    write_jsonl(path, (x.to_dict() for x in kept))
    return Path(path)


def model_sampler(model, tokenizer, *, max_new_tokens: int, temperature: float = 0.8, top_p: float | None = 0.95
                  ) -> Sampler:
    """A sampler over a loaded model: the prompt as a user turn with the chat template's generation prompt, k
    copies decoded as one batch until the end-of-turn token (or max_new_tokens)."""
    if temperature <= 0:
        raise ConfigError(f"rejection sampling needs temperature > 0 (greedy gives k identical samples), "
                          f"got {temperature}")
    if tokenizer.chat_template is None:
        raise ConfigError("the model's tokenizer has no chat template; the sampler renders prompts as a user turn")

    def sample(prompt: str, k: int, seed: int) -> list[str]:
        ids = tokenizer.encode(tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                                             add_generation_prompt=True))
        out = generate_tokens(model, [ids] * k, max_new_tokens=max_new_tokens, tokenizer=tokenizer,
                              sampling=SamplingParams(temperature=temperature, top_p=top_p, seed=seed),
                              eos_token_ids=tokenizer.eos_token_ids)
        return [g.text if g.text is not None else tokenizer.decode(g.token_ids) for g in out]
    return sample
