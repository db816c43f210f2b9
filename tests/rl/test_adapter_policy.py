"""RL that trains a LoRA adapter on a frozen model (rl/adapter_policy.py): the continued adapter is the reference
policy, only its factors move, the model's own weights stay those its fingerprint names, and the run writes an
adapter file whose merge is the saved policy; an adapter made for other weights, and bad adapter settings, are
refused by name."""

from __future__ import annotations

import pytest
import torch

from openafm.checkpoint.adapter import attach_adapter, read_adapter, save_adapter
from openafm.checkpoint.fingerprint import weights_fingerprint
from openafm.checkpoint.load import load_model
from openafm.checkpoint.native import save_checkpoint
from openafm.errors import CheckpointError, ConfigError
from openafm.nn.lora import apply_lora, lora_layers
from openafm.rl.config import RLConfig
from openafm.rl.rewards.registry import REWARDS
from openafm.rl.run import RLRun
from openafm.train.metrics import read_metrics
from tiny import make_tiny


@pytest.fixture(autouse=True)
def letters_reward(monkeypatch):
    monkeypatch.setitem(REWARDS, "letters", lambda: lambda prompt, response, target:
                        sum(c.isalpha() for c in response) / max(1, len(response)))


def tiny_base(path, tokenizer, seed: int) -> str:
    model = make_tiny("smollm2-tiny", seed=seed, vocab_size=tokenizer.vocab_size, max_seq_len=512)
    save_checkpoint(path, model.config, model.state_dict(), tokenizer)
    return str(path)


@pytest.fixture
def base(tmp_path, tokenizer):
    return tiny_base(tmp_path / "base", tokenizer, seed=0)


def sft_adapter(base: str, path) -> str:
    """A rank-2 adapter with nonzero factors, made for `base`'s weights (as an sft stage writes one)."""
    model = load_model(base).model
    fingerprint = weights_fingerprint(model)
    apply_lora(model, rank=2, alpha=4.0)
    torch.manual_seed(1)
    with torch.no_grad():
        for layer in lora_layers(model).values():
            layer.lora_B.normal_(0, 0.02)
    return str(save_adapter(path, model, base_name=base, base_fingerprint=fingerprint))


def config(base, run_dir, **changes) -> RLConfig:
    data = {"model": base, "run_dir": str(run_dir), "steps": 2, "prompts_per_step": 2, "max_new_tokens": 5,
            "temperature": 5.0, "micro_batch": 3, "progress": False, "rloo": {"k": 3},
            "optimizer": {"lr": 1e-2, "weight_decay": 0.0, "grad_clip": 1.0},
            "heldout": {"every": 2, "size": 2}, "checkpoint": {"every": 2, "keep": 1},
            "prompt_sets": [{"name": "ifeval", "source": "instructions", "weight": 1.0, "reward": "letters",
                             "pool": 8, "options": {"most": 1}}]}
    data.update(changes)
    return RLConfig.from_dict(data)


def test_rl_continues_an_adapter_and_writes_one(tmp_path, base):
    start = sft_adapter(base, tmp_path / "sft.safetensors")
    run = RLRun(config(base, tmp_path / "run", adapter={"init": start}))
    summary = run.run()
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert records[1]["kl"] == pytest.approx(0.0, abs=1e-5)       # the first samples come from the continued adapter
    plain = load_model(base).model
    base_weights = {k: v for k, v in run.policy.state_dict().items() if "lora_" not in k}
    assert all(torch.equal(t, plain.state_dict()[k.replace(".base.", ".")]) for k, t in base_weights.items())
    before, after = read_adapter(start), read_adapter(summary["adapter"])
    assert (after.rank, after.alpha, after.targets) == (before.rank, before.alpha, before.targets)
    assert after.base_fingerprint == before.base_fingerprint == summary["base_fingerprint"]
    assert any(not torch.equal(after.tensors[k], before.tensors[k]) for k in before.tensors)
    # the saved policy is the written adapter merged into the model
    ids = torch.tensor([[1, 5, 9, 200, 31, 7]])
    merged = load_model(summary["policy"]).model.eval()
    attached = attach_adapter(plain, after)
    with torch.no_grad():
        torch.testing.assert_close(merged(ids), attached(ids), rtol=1e-4, atol=1e-4)


def test_a_fresh_adapter_starts_as_the_model(tmp_path, base):
    run = RLRun(config(base, tmp_path / "run", adapter={"rank": 2}, steps=1))
    assert {p.requires_grad for n, p in run.policy.named_parameters() if "lora_" in n} == {True}
    assert not any(p.requires_grad for n, p in run.policy.named_parameters() if "lora_" not in n)
    summary = run.run()
    adapter = read_adapter(summary["adapter"])
    assert adapter.rank == 2 and adapter.alpha == 4.0


def test_an_adapter_made_for_other_weights_is_refused(tmp_path, tokenizer, base):
    other = tiny_base(tmp_path / "other", tokenizer, seed=5)
    start = sft_adapter(other, tmp_path / "other.safetensors")
    with pytest.raises(CheckpointError, match="was trained on base .* with weights sha256:.*the RL model's weights"):
        RLRun(config(base, tmp_path / "run", adapter={"init": start}))
    with pytest.raises(CheckpointError, match="adapter.init='nowhere.safetensors' is neither a bundled model"):
        RLRun(config(base, tmp_path / "run", adapter={"init": "nowhere.safetensors"}))


@pytest.mark.parametrize("adapter, message", [
    ({}, "exactly one of init .* or rank"),
    ({"init": "a.safetensors", "rank": 4}, "exactly one of init"),
    ({"init": "a.safetensors", "alpha": 8.0}, "adapter.alpha=8.0 is the continued adapter's own"),
    ({"rank": 0}, "adapter.rank=0 must be >= 1"),
    ({"rank": 2, "alpha": -1.0}, "adapter.alpha=-1.0 must be > 0"),
])
def test_bad_adapter_settings_are_named(tmp_path, base, adapter, message):
    with pytest.raises(ConfigError, match=message):
        config(base, tmp_path / "run", adapter=adapter)
