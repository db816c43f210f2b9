"""2-bit QAT (report §6, Table 3): held-out perplexity of SmolLM2-135M-Instruct in fp32, with its weights
rounded to nearest (RTN) on the QAT level sets (--rtn-only), and after QAT on the project's trainer.

Training phase (the default; benchmarks/_qat_train.py): held-out perplexity vs QAT tokens as a curve for
(a) SmolLM2 QAT-2-bit balanced (EMA and raw weights evaluated from one run), unbalanced as a second run, beside
RTN-2 and RTN-3 (same spec: per-tensor Newton-Raphson clip, 4-bit per-row embeddings), loss spikes of each,
and LoRA recovery on the QAT-2-bit base; (b) a small on-device preset trained from scratch here in fp32 and
then QAT-2-bit'd (ratio to its fp32 perplexity; target <= 1.3). Writes a JSON object and a PNG (--plot).

Every Linear weight (fused qkv, out, gate_up, down) is quantized at 2, 3 or 4 bits, per tensor or per
output channel, with f = 1 (no clipping) or f from the Newton-Raphson clip init; the tied embedding table
stays fp32 in those rows, and two extra rows quantize only the embedding table to 4 bits per row (f = 1, NR).
Text: openafm.eval.texts held-out split, the first --tokens tokens, non-overlapping --context windows.

    python benchmarks/qat.py --rtn-only --json
    python benchmarks/qat.py --steps 40 --eval-every 10 --json --plot qat_curve.png      # ~15 min on 2 cores
    python benchmarks/qat.py --steps 600 --recovery-steps 300 --scratch-steps 1500 --scratch-qat-steps 600 \
        --batch-size 8 --seq-len 256 --tokens 8192 --device cuda --json --plot qat_curve.png   # the full run
"""

from __future__ import annotations

import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log, parser  # noqa: E402

import openafm
from openafm.compress.clip_init import ClipInit
from openafm.compress.fake_quant import Granularity
from openafm.compress.levels import Levels
from openafm.compress.rtn import quantize_model_rtn
from openafm.eval.perplexity import perplexity
from openafm.eval.texts import english_text


def rtn_variants(bits_list: list[int]) -> list[dict]:
    """The RTN grid: (bits, granularity, clip) for the Linear weights, plus 4-bit embeddings alone."""
    rows = [dict(bits=b, granularity=g, clip=c, embed_bits=None)
            for b in bits_list for g in Granularity for c in ClipInit]
    rows += [dict(bits=None, granularity=Granularity.CHANNEL, clip=c, embed_bits=4) for c in ClipInit]
    return rows


def variant_name(v: dict) -> str:
    if v["bits"] is None:
        return f"embed{v['embed_bits']}_{v['granularity'].value}_{v['clip'].value}"
    return f"w{v['bits']}_{v['granularity'].value}_{v['clip'].value}"


def apply_variant(model: torch.nn.Module, v: dict, levels: Levels) -> None:
    if v["bits"] is None:   # embeddings only: quantize_model_rtn needs a weight width, so skip every weight
        quantize_model_rtn(model, bits=2, levels=levels, clip=v["clip"], embed_bits=v["embed_bits"],
                           embed_granularity=v["granularity"], skip=["layers.*"])
    else:
        quantize_model_rtn(model, bits=v["bits"], levels=levels, granularity=v["granularity"], clip=v["clip"])


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--rtn-only", action="store_true", help="measure the fp32 and RTN grid only (no training)")
    p.add_argument("--tokens", type=int, default=None, help="held-out tokens scored (default 8192, 2048 training)")
    p.add_argument("--context", type=int, default=None, help="perplexity window (default 512, 256 training)")
    p.add_argument("--steps", type=int, default=40, help="QAT steps per SmolLM2 run (training phase)")
    p.add_argument("--eval-every", type=int, default=10, help="held-out perplexity every n QAT steps")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--lr", type=float, default=5e-5, help="peak AdamW lr of the SmolLM2 QAT runs")
    p.add_argument("--ema-decay", type=float, default=0.99)
    p.add_argument("--recovery-steps", type=int, default=20, help="LoRA recovery steps (0: skip)")
    p.add_argument("--rank", type=int, default=16, help="LoRA recovery rank")
    p.add_argument("--scratch-preset", default="afm-ondevice-tiny")
    p.add_argument("--scratch-steps", type=int, default=300, help="fp32 pretraining steps of the scratch model (0: skip)")
    p.add_argument("--scratch-qat-steps", type=int, default=100)
    p.add_argument("--skip-smollm2", action="store_true", help="only the scratch model")
    p.add_argument("--skip-unbalanced", action="store_true")
    p.add_argument("--unbalanced-steps", type=int, default=None,
                   help="stop the unbalanced run after n steps of the balanced run's schedule (default --steps); "
                        "spikes are compared over those first n steps")
    p.add_argument("--device", default="cpu")
    p.add_argument("--work-dir", default=None, help="where runs and models go (default: a temporary directory)")
    p.add_argument("--plot", default=None, help="PNG path for the curves")
    p.add_argument("--replot", nargs="+", default=None, metavar="JSON",
                   help="only draw --plot from earlier training-phase JSON outputs (their parts merged, later "
                        "files winning): e.g. a SmolLM2 run and a separate --skip-smollm2 scratch run")
    p.add_argument("--bits", type=int, nargs="+", default=[2, 3, 4])
    p.add_argument("--levels", type=Levels, default=Levels.BALANCED, choices=list(Levels))
    args = p.parse_args()
    if args.replot:
        import json
        from _qat_train import plot
        if not args.plot:
            p.error("--replot needs --plot PATH")
        merged: dict = {}
        for path in args.replot:
            with open(path) as f:
                merged.update(json.load(f))
        plot(merged, args.plot)
        return
    if not args.rtn_only:
        from _qat_train import training_phase
        args.tokens, args.context = args.tokens or 2048, args.context or 256
        emit(training_phase(args), args.json)
        return
    args.tokens, args.context = args.tokens or 8192, args.context or 512

    lm = openafm.load(args.model, weights="float32")
    model = lm.model
    ids = lm.encode(english_text("heldout"))[: args.tokens]
    if len(ids) < args.tokens:
        raise ValueError(f"held-out text has {len(ids)} tokens, fewer than --tokens {args.tokens}")
    fp32_state = {k: v.clone() for k, v in model.state_dict().items()}

    def ppl() -> float:
        return perplexity(model, ids, context=args.context, batch_size=4).ppl

    t0 = time.perf_counter()
    base = ppl()
    log(f"fp32: {base:.3f} ({time.perf_counter() - t0:.0f}s)")
    rows = {}
    for v in rtn_variants(args.bits):
        model.load_state_dict(fp32_state)
        t = time.perf_counter()
        apply_variant(model, v, args.levels)
        value = ppl()
        rows[variant_name(v)] = {"ppl": value, "ratio_to_fp32": value / base}
        log(f"{variant_name(v)}: {value:.4g} ({time.perf_counter() - t:.0f}s)")
    model.load_state_dict(fp32_state)

    emit({"model": args.model, "levels": args.levels.value, "text": "debian-reference heldout",
          "tokens": len(ids), "context": args.context, "threads": torch.get_num_threads(),
          "fp32_ppl": base, "rtn": rows}, args.json)


if __name__ == "__main__":
    main()
