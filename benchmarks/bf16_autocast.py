"""What training under bfloat16 autocast costs on this CPU against float32: one matmul of the default model's MLP
shape, and one of its decoder layers forward and backward over an SFT row (4 x 768 tokens), each way interleaved.

    python benchmarks/bf16_autocast.py --json      # writes docs/results/bf16_autocast.json (~2 min on an AVX2 CPU)

PyTorch runs CPU bfloat16 matmuls through oneDNN where the CPU has native bfloat16 (AVX512-BF16, AMX) and through
its reference GEMM elsewhere; train/precision.py warns in the second case. The result records which case this
machine is (`cpu_capability`, `native_bf16`) beside the times (medians of --repeats rounds, after a warm-up).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
import torch  # noqa: E402

from _common import add_settle, emit, interleaved, log, median, parser, settle  # noqa: E402
from openafm.checkpoint.load import load_model  # noqa: E402
from openafm.checkpoint.packaged import RAW_MODEL  # noqa: E402
from openafm.train.config import Precision  # noqa: E402
from openafm.train.precision import autocast, slow_bf16  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "bf16_autocast.json"
WAYS = (Precision.FLOAT32, Precision.BF16_AUTOCAST)


def matmul(precision: Precision, a: torch.Tensor, b: torch.Tensor):
    def run():
        with autocast(precision):
            a @ b
    return run


def layer_step(precision: Precision, model, x: torch.Tensor):
    """One decoder layer forward and backward over x [B, T, D] (its weights frozen, as under LoRA: input grads)."""
    layer = model.layers[0]
    ids = torch.zeros(x.shape[:2], dtype=torch.long)

    def run():
        h = x.detach().requires_grad_(True)
        with autocast(precision):
            _, ctx = model.begin(ids, None, None)
            out = layer(h, ctx)
        out.float().sum().backward()
    return run


def main() -> None:
    p = add_settle(parser(__doc__.splitlines()[0]))
    p.set_defaults(repeats=3)
    args = p.parse_args()
    load_avg = settle(args.settle)
    t0 = time.perf_counter()
    torch.manual_seed(0)
    model = load_model(RAW_MODEL).model.requires_grad_(False)
    d, hidden = model.config.dim, model.layers[0].ffn.hidden
    a, b = torch.randn(512, d), torch.randn(d, hidden)                     # [512, 576] x [576, 1536]
    x = torch.randn(4, 768, d)                                             # an SFT step's rows
    result: dict = {"cpu_capability": torch.backends.cpu.get_cpu_capability(),
                    "native_bf16": not slow_bf16(torch.device("cpu")), "threads": torch.get_num_threads(),
                    "matmul_shape": [512, d, hidden], "layer_tokens": [4, 768]}
    for name, make, inputs in (("matmul", matmul, (a, b)), ("layer_step", layer_step, (model, x))):
        log(f"{name}: {args.repeats} rounds of float32 and bfloat16 autocast, interleaved")
        times = interleaved({w.value: make(w, *inputs) for w in WAYS}, args.repeats)
        ms = {w: round(1000 * median(t), 2) for w, t in times.items()}
        result[name] = {"ms": ms, "bf16_over_float32": round(ms["bfloat16-autocast"] / ms["float32"], 1)}
    result |= {"load_at_start": round(load_avg, 2), "seconds": round(time.perf_counter() - t0),
               "command": "python benchmarks/bf16_autocast.py --json"}
    emit(result, args.json)
    if args.json:
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
