"""The QAT fake-quant kernels side by side: forward + backward of W̃ = s·(clamp(⌊W/s + z⌉) − z) over every
weight SmolLM2-135M-Instruct fake-quantizes (30 layers' qkv, out, gate_up, down at 2 bits per tensor, the tied
embedding at 4 bits per row), with FQKernel.EAGER (separate torch ops) and FQKernel.COMPILED (torch.compile,
fused). Interleaved rounds, medians; the compiled kernel is warmed up (compiled) before timing.

    python benchmarks/fake_quant.py --json
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, interleaved, log, median, parser  # noqa: E402

from openafm.compress.fake_quant import FQKernel, Granularity, absmax, fake_quantize  # noqa: E402
from openafm.compress.levels import Levels, level_set  # noqa: E402


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--layers", type=int, default=30, help="how many of SmolLM2's 30 layers' matrices to include")
    args = p.parse_args()
    import openafm
    model = openafm.load("smollm2-135m-instruct", weights="float32").model
    weights = []
    for name, prm in model.named_parameters():
        if prm.ndim != 2:
            continue
        if name.startswith("layers.") and int(name.split(".")[1]) >= args.layers:
            continue
        embed = name == "embed.weight"
        weights.append((prm.detach().clone(), level_set(Levels.BALANCED, 4 if embed else 2),
                        Granularity.CHANNEL if embed else Granularity.TENSOR))
    elements = sum(w.numel() for w, _, _ in weights)
    grads = [torch.randn_like(w) for w, _, _ in weights]

    def run(kernel: FQKernel):
        def step():
            for (w, ls, g), up in zip(weights, grads):
                w = w.requires_grad_(True)
                f = torch.full_like(absmax(w, g), 0.8).requires_grad_(True)
                fake_quantize(w, f, ls, g, kernel=kernel).backward(up)
                w.grad = None
        return step

    variants = {k.value: run(k) for k in FQKernel}
    log(f"{len(weights)} tensors, {elements / 1e6:.1f}M weights; warm-up compiles the fused kernel ...")
    times = interleaved(variants, args.repeats, warmup=1)
    result = {"tensors": len(weights), "weights": elements, "threads": torch.get_num_threads(),
              "seconds_forward_backward": {k: median(v) for k, v in times.items()},
              "runs": {k: [round(x, 3) for x in v] for k, v in times.items()}}
    result["speedup_compiled_over_eager"] = (result["seconds_forward_backward"]["eager"]
                                             / result["seconds_forward_backward"]["compiled"])
    emit(result, args.json)


if __name__ == "__main__":
    main()
