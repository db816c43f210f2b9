"""Prefill of one prompt chunk: the fused step (block kernels in register tiles, head on the last token) against the
module graph (each weight dequantized to float32, one matrix product), by chunk length.

    python benchmarks/prefill.py --json          # ~2 min on 2 cores; writes docs/results/prefill.json

The engine prefills a prompt remainder of at most `FUSED_PREFILL_MAX` tokens with the fused step and longer ones
with the module graph; this measures where the two cross, on the default model, warmed alike and interleaved per
length (`--repeats` rounds, medians). Both start from an empty cache of one row; the last token's logits are
compared (largest absolute difference, and whether the argmax agrees).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _common import add_settle, emit, interleaved, log, median, parser, settle  # noqa: E402

import torch  # noqa: E402

import openafm  # noqa: E402
from openafm.models.decoder import Logits  # noqa: E402
from openafm.runtime.engine import FUSED_PREFILL_MAX  # noqa: E402
from openafm.runtime.fused_step import fused_decoder  # noqa: E402
from openafm.runtime.kv_cache import KVCache  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "prefill.json"
LENGTHS = (8, 16, 32, 64, 96, 128, 192, 256)


def one_length(model, fused, t: int, repeats: int) -> dict:
    """Both ways of prefilling t tokens -> milliseconds (median), tokens/s and the logits' agreement."""
    ids = torch.randint(100, 10_000, (1, t), generator=torch.Generator().manual_seed(t))      # [1, T]
    out = {}

    def graph():
        cache = KVCache(model.config, batch_size=1, capacity=t)
        out["graph"] = model(ids, cache=cache, logits=Logits.LAST)[:, -1]                     # [1, V]

    def fused_step():
        cache = KVCache(model.config, batch_size=1, capacity=t)
        out["fused"] = fused.prefill(ids, cache, torch.arange(t)[None])                      # [1, V]

    with torch.inference_mode():
        times = interleaved({"graph": graph, "fused": fused_step}, repeats)
    ms = {k: round(median(v) * 1000, 1) for k, v in times.items()}
    return {"ms": ms, "tok_s": {k: round(t / v * 1000, 1) for k, v in ms.items()},
            "fused_over_graph": round(ms["graph"] / ms["fused"], 2),
            "max_abs_logit_diff": float((out["graph"] - out["fused"]).abs().max()),
            "same_argmax": bool(out["graph"].argmax() == out["fused"].argmax())}


def main() -> None:
    p = add_settle(parser(__doc__))
    p.set_defaults(repeats=7)
    args = p.parse_args()
    load = settle(args.settle)
    lm = openafm.load()
    fused = fused_decoder(lm.model)
    by_length = {}
    for t in LENGTHS:
        log(f"{t} tokens")
        by_length[str(t)] = one_length(lm.model, fused, t, args.repeats)
    faster = [int(t) for t, r in by_length.items() if r["fused_over_graph"] > 1.0]
    result = {"model": lm.name, "threads": torch.get_num_threads(), "load_at_start": round(load, 2),
              "repeats": args.repeats, "fused_prefill_max": FUSED_PREFILL_MAX,
              "fused_faster_up_to": max(faster) if faster else 0,
              "speedup_at_32": by_length["32"]["fused_over_graph"], "by_length": by_length,
              "command": "python benchmarks/prefill.py --json"}
    if args.json:
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    emit(result, args.json)


if __name__ == "__main__":
    main()
