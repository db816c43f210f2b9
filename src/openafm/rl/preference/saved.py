"""A trained reward model on disk, and the scorer the reward registry uses.

REWARD_FILE (safetensors) holds only the trained tensors (the top trunk layers, the final norm, the score and
grading heads) and, as metadata, what they were trained on: the base model's name and weights fingerprint
(checkpoint/fingerprint.py), the tokenizer's digest and the fit's settings. Loading rebuilds the trunk from the
base model, refuses a base whose weights or tokenizer differ, and puts the trained tensors on top.

    save_reward_model(out_dir, model, split, base_name=..., base_fingerprint=..., tokenizer=..., settings={...})
    scorer = load_reward_model(out_dir, policy_tokenizer=policy.tokenizer)   # TokenizerMismatchError if they differ
    reward = make_reward("reward-model", scorer=scorer)                     # scorer(prompt, response) -> float
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

from safetensors import safe_open

from openafm.checkpoint.atomic import save_safetensors_atomic
from openafm.checkpoint.fingerprint import weights_fingerprint
from openafm.checkpoint.load import load_model
from openafm.errors import CheckpointError
from openafm.rl.preference.fit import trainable_prefixes
from openafm.rl.preference.model import RewardModel, TokenizerMismatchError, check_same_tokenizer, score_texts

REWARD_FILE = "reward_model.safetensors"
FORMAT = "openafm-reward-model"


def tokenizer_digest(tokenizer) -> str:
    """SHA-256 over the vocabulary (id order), the special ids and the chat template."""
    h = hashlib.sha256()
    for i in range(tokenizer.vocab_size):
        h.update(tokenizer.id_to_token(i).encode("utf-8", "surrogatepass") + b"\0")
    h.update(json.dumps([list(tokenizer.eos_token_ids or []), tokenizer.bos_token_id, tokenizer.pad_token_id,
                         tokenizer.chat_template]).encode())
    return h.hexdigest()


def save_reward_model(out_dir: str | Path, model: RewardModel, split: int, *, base_name: str,
                      base_fingerprint: str, tokenizer, settings: dict) -> Path:
    prefixes = trainable_prefixes(model, split)
    tensors = {k: v for k, v in model.state_dict().items() if any(k.startswith(p) for p in prefixes)}
    meta = {"format": FORMAT, "base_model": base_name, "base_fingerprint": base_fingerprint,
            "tokenizer_digest": tokenizer_digest(tokenizer), "n_grades": str(model.n_grades), "split": str(split),
            "settings": json.dumps(settings)}
    return save_safetensors_atomic(tensors, Path(out_dir) / REWARD_FILE, meta)


class RewardScorer:
    """A loaded reward model: scorer(prompt, response) -> float, scorer.score(prompts, responses) -> [float]."""

    def __init__(self, model: RewardModel, tokenizer, meta: dict[str, str]):
        self.model, self.tokenizer, self.meta = model, tokenizer, meta

    def __call__(self, prompt: str, response: str) -> float:
        return self.score([prompt], [response])[0]

    def score(self, prompts: Sequence[str], responses: Sequence[str], *, batch_size: int = 16) -> list[float]:
        if len(prompts) != len(responses):
            raise ValueError(f"{len(prompts)} prompts and {len(responses)} responses: give one prompt per response")
        out: list[float] = []
        for s in range(0, len(prompts), batch_size):
            out += score_texts(self.model, self.tokenizer, prompts[s:s + batch_size], responses[s:s + batch_size])
        return out

    def check_policy(self, policy_tokenizer) -> None:
        """Raise TokenizerMismatchError unless the policy tokenizes and renders chats as this reward model does."""
        check_same_tokenizer(self.tokenizer, policy_tokenizer)


def load_reward_model(path: str | Path, *, policy_tokenizer=None, base: str | None = None,
                      device: str = "cpu") -> RewardScorer:
    """A reward model written by save_reward_model (a directory holding REWARD_FILE, or the file). base: load the
    trunk from this model instead of the recorded name (its weights must still match the fingerprint)."""
    path = Path(path)
    file = path / REWARD_FILE if path.is_dir() else path
    if not file.is_file():
        raise CheckpointError(f"{path}: no reward model ({REWARD_FILE}, written by `openafm reward train`)")
    with safe_open(str(file), "pt") as f:
        meta = f.metadata() or {}
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{file}: format {meta.get('format')!r}, expected {FORMAT!r}")
    lm = load_model(base or meta["base_model"], device=device)
    found = weights_fingerprint(lm.model)
    if found != meta["base_fingerprint"]:
        raise CheckpointError(f"{file}: trained on base weights {meta['base_fingerprint'][:16]}..., but "
                              f"{base or meta['base_model']!r} has weights {found[:16]}...")
    digest = tokenizer_digest(lm.tokenizer)
    if digest != meta["tokenizer_digest"]:
        raise TokenizerMismatchError(f"{file}: trained with tokenizer {meta['tokenizer_digest'][:16]}..., but "
                                     f"{base or meta['base_model']!r} has tokenizer {digest[:16]}...")
    model = RewardModel(lm.model, int(meta["n_grades"])).to(device)
    missing = set(trainable_prefixes(model, int(meta["split"])))
    state = model.state_dict()
    bad = sorted(k for k in tensors if k not in state or state[k].shape != tensors[k].shape)
    if bad or not all(any(k.startswith(p) for k in tensors) for p in missing):
        raise CheckpointError(f"{file}: tensors {bad[:5]} do not fit the base model, or a trained part is missing")
    model.load_state_dict(tensors, strict=False)
    model.eval().requires_grad_(False)
    scorer = RewardScorer(model, lm.tokenizer, meta)
    if policy_tokenizer is not None:
        scorer.check_policy(policy_tokenizer)
    return scorer
