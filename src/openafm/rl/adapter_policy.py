"""The RL policy as a LoRA adapter on a frozen model: RLOO updates only the adapter's factors, so what RL makes has
the form SFT makes — an adapter file tied to its base's fingerprint, which a package stage ships as a bundled
model (checkpoint/bundled.py) — and the asynchronous system publishes megabytes, not the whole model
(rl/system/params.py).

Why an adapter is enough for RL: a policy-gradient update carries a few bits per episode, far fewer than a low-rank
adapter holds (Schulman et al., "LoRA Without Regret", Thinking Machines 2025, measured LoRA RL matching full
fine-tuning down to rank 1); and the report's on-device model ships its features as rank-32 adapters (§5).

    fingerprint = adapt_policy(model, AdapterSettings(init="openafm-135m"))   # LoRA layers in place, base frozen
    save_adapter_policy(run_dir / "adapter.safetensors", run_dir / "policy", model, tokenizer,
                        base_name=..., fingerprint=fingerprint, extra={...})

The invariant: the model's own weights never change (they are the weights the fingerprint names); the reference
policy is the model with the adapter as it started (an SFT adapter's policy, or the model itself for a fresh one).
"""

from __future__ import annotations

import copy
from pathlib import Path

from torch import nn

from openafm.checkpoint.adapter import read_adapter, save_adapter, wrap_with_adapter
from openafm.checkpoint.fingerprint import weights_fingerprint
from openafm.checkpoint.native import save_checkpoint
from openafm.checkpoint.packaged import BUNDLED
from openafm.errors import CheckpointError
from openafm.nn.lora import apply_lora, merge_lora
from openafm.rl.config import AdapterSettings


def adapter_source(init: str) -> Path:
    """An adapter to continue: a bundled model's name (its adapter file) or a path to an adapter file."""
    if init in BUNDLED:
        return BUNDLED[init].adapter_path
    path = Path(init)
    if not path.is_file():
        raise CheckpointError(f"rl config: adapter.init={init!r} is neither a bundled model ({sorted(BUNDLED)}) nor "
                              f"an adapter file")
    return path


def adapt_policy(model: nn.Module, settings: AdapterSettings) -> str:
    """Wrap `model`'s target layers in LoRA (everything else frozen), continuing settings.init if given.
    -> the fingerprint of the model's weights, which the saved adapter records. Raises CheckpointError when the
    continued adapter was made for other weights."""
    fingerprint = weights_fingerprint(model)
    if settings.init is None:
        alpha = settings.alpha if settings.alpha is not None else 2.0 * settings.rank
        apply_lora(model, rank=settings.rank, alpha=alpha)
        return fingerprint
    adapter = read_adapter(adapter_source(settings.init))
    if adapter.base_fingerprint != fingerprint:
        raise CheckpointError(f"rl config: adapter.init={settings.init!r} ({adapter.path}) was trained on base "
                              f"{adapter.base_name!r} with weights {adapter.base_fingerprint}; the RL model's weights "
                              f"are {fingerprint} (name the adapter's own base as the model)")
    wrap_with_adapter(model, adapter)
    return fingerprint


def save_adapter_policy(adapter_path: Path, policy_dir: Path, model: nn.Module, tokenizer, *, base_name: str,
                        fingerprint: str, extra: dict) -> None:
    """The adapter file (for a package stage) and the adapter merged into a copy of the model as a native checkpoint
    (what openafm.load and the evaluation read); `model` keeps its LoRA layers."""
    save_adapter(adapter_path, model, base_name=base_name, base_fingerprint=fingerprint)
    merged = copy.deepcopy(model)
    merge_lora(merged)
    save_checkpoint(policy_dir, merged.config, merged.state_dict(), tokenizer=tokenizer, extra=extra)
