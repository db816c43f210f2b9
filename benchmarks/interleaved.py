"""Interleaved local/global attention (report §2.2): KV-cache bytes at 32k context of the server
pattern (3 sliding-window RoPE layers + 1 global NoPE layer) vs every layer global, against the
closed form  bytes = 2 * n_kv_heads * head_dim * elem * sum over layers of min(window, context).

    python benchmarks/interleaved.py --json
"""

from __future__ import annotations

import dataclasses
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, parser  # noqa: E402

from openafm.models.plan import LayerSpec
from openafm.models.presets import get_preset
from openafm.runtime.kv_cache import KVCache


def closed_form(config, context: int, elem: int) -> int:
    per_slot = 2 * config.n_kv_heads * config.attn_head_dim * elem
    return per_slot * sum(min(s.window or context, context) for s in config.layers if s.owns_kv)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--preset", default="afm-server-dense-small")
    p.add_argument("--context", type=int, default=32768)
    args = p.parse_args()

    config = get_preset(args.preset)
    all_global = dataclasses.replace(config, layers=[LayerSpec() for _ in config.layers])
    dtype = torch.bfloat16
    elem = torch.finfo(dtype).bits // 8
    measured = {name: KVCache(c, batch_size=1, capacity=args.context, dtype=dtype).nbytes()
                for name, c in (("interleaved", config), ("all_global", all_global))}
    expected = {"interleaved": closed_form(config, args.context, elem),
                "all_global": closed_form(all_global, args.context, elem)}
    result = {
        "preset": args.preset, "context": args.context, "dtype": str(dtype).removeprefix("torch."),
        "pattern": "3x sliding-rope + 1x global-nope",
        "window": next(s.window for s in config.layers if s.window),
        "kv_cache_bytes": measured,
        "closed_form_bytes": expected,
        "matches_closed_form": measured == expected,
        "ratio_interleaved_over_global": measured["interleaved"] / measured["all_global"],
    }
    emit(result, args.json)


if __name__ == "__main__":
    main()
