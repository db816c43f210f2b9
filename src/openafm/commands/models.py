"""`openafm models`: the packaged models and presets with their plans, one preset described in full, or a GGUF file /
Hugging Face directory inspected."""

from __future__ import annotations

import json
from collections import Counter

from openafm.api import DEFAULT_MODEL, PACKAGED
from openafm.checkpoint.packaged import BUNDLED
from openafm.commands.inspect import inspect_file, print_inspection
from openafm.config import dump_flat
from openafm.models.build import build_model
from openafm.models.presets import CONFIG_ONLY, PRESETS, get_preset


def register(subparsers) -> None:
    m = subparsers.add_parser("models", help="list the models and presets, or inspect a model file",
                       description="List packaged models and presets, describe one in full, or inspect a GGUF file "
                                   "or Hugging Face directory: its family, sizes, storage types, tokenizer, and what "
                                   "openafm runs natively. Every command that takes --model also takes such a path.")
    m.add_argument("--describe", metavar="NAME", help="print one preset's full config, parameter count and cache size")
    m.add_argument("--inspect", metavar="PATH", help="describe a .gguf file or a Hugging Face directory (no weights "
                                                     "are loaded)")
    m.add_argument("--json", action="store_true", help="with --inspect: print one JSON object")
    m.set_defaults(run=run_models)


def run_models(args) -> int:
    if args.inspect:
        info = inspect_file(args.inspect)
        print(json.dumps(info, indent=1)) if args.json else print_inspection(info)
        return 0
    if args.describe:
        return _describe(args.describe)
    print(f"{'name':32s} {'kind':12s} {'params':>9s}  plan")
    for name in sorted(set(PRESETS) | set(PACKAGED)):
        config = get_preset(BUNDLED[name].base if name in BUNDLED else name)
        kind = ("bundled" if name in BUNDLED else "packaged" if name in PACKAGED else
                "config-only" if name in CONFIG_ONLY else "preset")
        shown = f"{name} (default)" if name == DEFAULT_MODEL else name
        print(f"{shown:32s} {kind:12s} {_human(config.param_count()):>9s}  {_plan_summary(config)}")
    return 0


def _describe(name: str) -> int:
    config = get_preset(name)
    plan = build_model(config, device="meta").kv_plan
    print(dump_flat(config), end="")
    owners = sum(1 for s in plan.layers if s.owns_kv)
    per_token = 2 * plan.n_kv_heads * plan.attn_head_dim * 2 * owners
    print(f"# parameters: {config.param_count():,}")
    print(f"# active parameters per token: {config.param_count(active=True):,}")
    print(f"# layers: {plan.n_layers} ({owners} with their own K/V); plan: {_plan_summary(config)}")
    print(f"# KV cache per token (bf16, before sliding-window caps): {per_token:,} bytes")
    return 0


def _plan_summary(config) -> str:
    prefix = ""
    if hasattr(config, "n_tracks"):
        prefix = (f"{config.n_tracks} tracks x {config.track.n_layers} layers, {config.n_blocks} blocks of "
                  f"{config.block_depth}: ")
        config = config.track
    kinds = Counter(s.attention.value + (f"(w={s.window})" if s.window else "") for s in config.layers)
    shared = sum(1 for s in config.layers if not s.owns_kv)
    moe = sum(1 for s in config.layers if s.ffn.value == "moe")
    text = prefix + ", ".join(f"{n}x {k}" for k, n in kinds.items())
    if moe:
        text += f"; {moe} MoE layers ({config.moe.n_experts} experts, top-{config.moe.top_k})"
    return text + (f"; {shared} layers share K/V" if shared else "")


def _human(n: int) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"
