"""ASTC weight compression (report §6) on SmolLM2-135M-Instruct's linear weights, beside group quantization.

Three parts, all in one run:

1. ``explore``: one matrix (--explore-matrix) through every texel mapping: profile (HDR fp16 / LDR unorm8),
   scale (none / per tile / per tensor), texel range (from 0 / one octave [1, 2]), channel packing
   (one tile replicated / 3 tiles in RGB / 4 in RGBA), encoder presets, footprints; the group quantizers on
   the same matrix; the encode speed that sets the whole-model budget; how often a tile's minimum element
   decodes exactly to the stored fp16 minimum.
2. ``svd``: the four matrix kinds of one layer (qkv, out, gate_up, down): ASTC of W (r = 0) vs SVD pull-out
   r = 16 / 32 then ASTC of the residual, bits with and without the adapter, and r = 0 at smaller
   footprints whose bits match the adapter-inclusive budget.
3. ``model``: every linear weight replaced by its reconstruction, per method: relative Frobenius error
   (aggregate sqrt(sum ||W - W~||^2 / sum ||W||^2) and per-matrix mean), true bits per weight, encode time,
   held-out perplexity (Debian Reference held-out split, --tokens tokens, context 512) beside the fp32
   model in the same run. The token embedding (tied to the LM head) is not a linear and is not compressed.

    python benchmarks/astc.py --json                     # whole model (25 min wall on 2 busy shared cores)
    python benchmarks/astc.py --json --layers 0,1        # restrict the model part to some layers
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log, parser  # noqa: E402

from openafm.compress.astc import (  # noqa: E402
    astc_compress_model, compress_weight, linear_modules, relative_error, total_size,
)
from openafm.compress.group_quant import group_quantize, group_quantize_model, matched_group  # noqa: E402
from openafm.compress.svd_pullout import pull_out  # noqa: E402

ASTC_6X6_NOMINAL = 128 / 36          # 3.556 bits per weight: the block alone

# name -> compress_weight options (block 6x6 unless given)
MAPPINGS = {
    "hdr/none/zero": dict(profile="hdr", scale="none", texel_range="zero"),      # the literal recipe
    "hdr/tensor/zero": dict(profile="hdr", scale="tensor", texel_range="zero"),
    "hdr/block/zero": dict(profile="hdr", scale="block", texel_range="zero"),
    "hdr/none/octave": dict(profile="hdr", scale="none", texel_range="octave"),
    "hdr/tensor/octave": dict(profile="hdr", scale="tensor", texel_range="octave"),
    "hdr/block/octave": dict(profile="hdr", scale="block", texel_range="octave"),
    "ldr/tensor/zero": dict(profile="ldr", scale="tensor", texel_range="zero"),
    "ldr/block/zero": dict(profile="ldr", scale="block", texel_range="zero"),
}


def astc_point(w: torch.Tensor, block="6x6", quality="fast", channels="replicated", **mapping) -> dict:
    t = time.perf_counter()
    aw = compress_weight(w, block=block, quality=quality, channels=channels, **mapping)
    encode_s = time.perf_counter() - t
    approx = aw.decode()
    size = aw.size()
    return {"rel_error": relative_error(w, approx), "bits_per_weight": size.bits_per_weight,
            "astc_only_bits_per_weight": size.astc_bits / size.weights,
            "encode_mtexels_per_s": w.numel() / encode_s / 1e6, "_aw": aw}


def min_exact_fraction(aw) -> float:
    """Fraction of tiles whose minimum element decodes exactly to the stored fp16 minimum."""
    bx, by = aw.block
    decoded = aw.decode().numpy()
    rows, cols = decoded.shape
    nty, ntx = rows // by, cols // bx
    if nty * by != rows or ntx * bx != cols:
        raise ValueError("min_exact_fraction needs a matrix that the footprint tiles exactly")
    tiles = decoded.reshape(nty, by, ntx, bx).transpose(0, 2, 1, 3).reshape(nty, ntx, -1)
    return float((tiles.min(axis=2) == aw.minimum[:nty, :ntx].astype(np.float32)).mean())


def strip(d: dict) -> dict:
    return {k: v for k, v in d.items() if not k.startswith("_")}


def explore(w: torch.Tensor) -> dict:
    out: dict = {"shape": list(w.shape), "mapping_x_channels": {}, "quality": {}, "block": {}, "group_quant": {},
                 "min_element_decodes_exactly": {}}
    for name, mapping in MAPPINGS.items():
        for channels in ("replicated", "rgb", "rgba"):
            point = astc_point(w, channels=channels, **mapping)
            out["mapping_x_channels"][f"{name}/{channels}"] = strip(point)
            if channels == "replicated":
                out["min_element_decodes_exactly"][name] = min_exact_fraction(point["_aw"])
        log(f"explore {name}: {out['mapping_x_channels'][f'{name}/replicated']['rel_error']:.4f}")
    for name in ("hdr/tensor/octave", "ldr/tensor/zero", "hdr/none/zero"):
        for quality in ("fastest", "fast", "medium", "thorough"):
            out["quality"][f"{name}/{quality}"] = strip(astc_point(w, quality=quality, **MAPPINGS[name]))
        log(f"explore presets {name} done")
    for block in ("4x4", "5x5", "6x5", "6x6", "8x6", "8x8", "10x10", "12x12"):
        out["block"][f"hdr/tensor/octave/{block}"] = strip(astc_point(w, block=block, **MAPPINGS["hdr/tensor/octave"]))
    for bits, group in group_settings():
        qw = group_quantize(w, bits, group)
        out["group_quant"][f"int{bits}/g{group}"] = {"rel_error": relative_error(w, qw.decode()),
                                                     "bits_per_weight": qw.bits_per_weight()}
    return out


def group_settings() -> list[tuple[int, int]]:
    """int3 at ASTC 6x6's nominal 3.56 and at its 4.0 with the fp16 minimum; int4 near 4.0 and at g=128."""
    return [(3, matched_group(3, ASTC_6X6_NOMINAL)), (3, matched_group(3, 4.0)), (4, 576), (4, 128)]


def svd_study(weights: dict[str, torch.Tensor], mapping: dict, quality: str) -> dict:
    out = {}
    for name, w in weights.items():
        row = {"shape": list(w.shape)}
        for block in ("6x6", "6x5", "5x5", "4x4"):
            p = astc_point(w, block=block, quality=quality, **mapping)
            row[f"r0/{block}"] = {"rel_error": p["rel_error"], "bits_per_weight": p["bits_per_weight"]}
        for rank in (16, 32):
            pulled = pull_out(w, rank)
            aw = compress_weight(pulled.residual, block="6x6", quality=quality, **mapping)
            size = aw.size()
            adapter_bpw = pulled.adapter.bits() / w.numel()
            row[f"r{rank}/6x6"] = {
                "rel_error": relative_error(w, pulled.adapter.product() + aw.decode()),
                "rel_error_adapter_only": relative_error(w, pulled.adapter.product()),
                "bits_per_weight_without_adapter": size.bits_per_weight,
                "bits_per_weight_with_adapter": size.bits_per_weight + adapter_bpw,
            }
        out[name] = row
        log(f"svd {name} done")
    return out


def aggregate_error(before: dict[str, torch.Tensor], model) -> float:
    num = den = 0.0
    for name, module in linear_modules(model, lambda n: n in before):
        num += float((module.weight.detach().float() - before[name]).pow(2).sum())
        den += float(before[name].pow(2).sum())
    return (num / den) ** 0.5


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--layers", default="all", help="comma-separated layer indices for the model part, or 'all'")
    p.add_argument("--quality", default="fast", choices=["fastest", "fast", "medium", "thorough"],
                   help="encoder preset for the model and svd parts (explore compares presets)")
    p.add_argument("--tokens", type=int, default=8192, help="held-out tokens scored for perplexity")
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--explore-matrix", default="layers.10.attn.out")
    p.add_argument("--svd-layer", type=int, default=10)
    p.add_argument("--skip-model", action="store_true", help="only the explore and svd parts")
    args = p.parse_args()
    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))

    import openafm
    from openafm.eval.perplexity import perplexity
    from openafm.eval.texts import english_text

    lm = openafm.load("smollm2-135m-instruct", weights="float32")
    model = lm.model.float().eval()
    result: dict = {"model": "smollm2-135m-instruct", "quality": args.quality,
                    "astc_6x6_nominal_bits_per_weight": ASTC_6X6_NOMINAL}

    linear = dict(linear_modules(model))
    result["explore"] = explore(linear[args.explore_matrix].weight.detach().float().clone())
    svd_weights = {n: m.weight.detach().float().clone() for n, m in linear.items()
                   if n.startswith(f"layers.{args.svd_layer}.")}
    result["svd"] = svd_study(svd_weights, MAPPINGS["hdr/tensor/octave"], args.quality)
    if args.skip_model:
        emit(result, args.json)
        return

    if args.layers == "all":
        include = None
    else:
        wanted = {int(i) for i in args.layers.split(",")}
        include = lambda name: name.startswith("layers.") and int(name.split(".")[1]) in wanted  # noqa: E731
    before = {n: m.weight.detach().float().clone() for n, m in linear_modules(model, include)}
    if not before:
        raise SystemExit(f"--layers {args.layers!r} matched no linear modules")

    ids = lm.encode(english_text("heldout"))[: args.tokens]
    if len(ids) < args.tokens:
        raise SystemExit(f"held-out text has {len(ids)} tokens, fewer than --tokens {args.tokens}")

    def restore():
        with torch.no_grad():
            for name, module in linear_modules(model, lambda n: n in before):
                module.weight.copy_(before[name])

    def ppl() -> float:
        return perplexity(model, ids, context=args.context, batch_size=4).ppl

    t = time.perf_counter()
    reference = ppl()
    result["model_part"] = {"layers": args.layers, "weights": sum(w.numel() for w in before.values()),
                            "tokens": args.tokens, "context": args.context,
                            "fp32": {"ppl": reference, "ppl_seconds": time.perf_counter() - t}, "methods": {}}
    log(f"fp32 ppl {reference:.4f}")

    methods: dict[str, dict] = {
        "astc hdr 6x6 (none/zero: literal)": dict(kind="astc", rank=0, **MAPPINGS["hdr/none/zero"]),
        "astc hdr 6x6 (tensor/octave)": dict(kind="astc", rank=0, **MAPPINGS["hdr/tensor/octave"]),
        "astc ldr 6x6 (tensor)": dict(kind="astc", rank=0, **MAPPINGS["ldr/tensor/zero"]),
        "astc hdr 6x6 (tensor/octave) + svd r16": dict(kind="astc", rank=16, **MAPPINGS["hdr/tensor/octave"]),
        "astc hdr 6x6 (tensor/octave) + svd r32": dict(kind="astc", rank=32, **MAPPINGS["hdr/tensor/octave"]),
    }
    for bits, group in group_settings():
        methods[f"int{bits} group g{group}"] = dict(kind="group", bits=bits, group=group)

    for name, spec in methods.items():
        restore()
        t = time.perf_counter()
        if spec["kind"] == "astc":
            records = astc_compress_model(model, spec["profile"], "6x6", scale=spec["scale"],
                                          texel_range=spec["texel_range"], quality=args.quality,
                                          rank=spec["rank"], include=include, progress=not args.json)
            size = total_size(records)
            errors = [r.relative_error for r in records]
            bits = {"bits_per_weight": size.bits_per_weight,
                    "bits_per_weight_without_adapter": size.bits_per_weight_without_adapter}
        else:
            out = group_quantize_model(model, spec["bits"], spec["group"], include=include)
            errors = [e for _, _, e in out]
            bits = {"bits_per_weight": sum(q.stored_bits() for _, q, _ in out) / sum(q.shape[0] * q.shape[1]
                                                                                    for _, q, _ in out)}
        encode_s = time.perf_counter() - t
        row = {"rel_error": aggregate_error(before, model), "rel_error_mean_per_matrix": float(np.mean(errors)),
               **bits, "encode_seconds": encode_s}
        row["ppl"] = ppl()
        row["ppl_ratio_to_fp32"] = row["ppl"] / reference
        result["model_part"]["methods"][name] = row
        log(f"{name}: err {row['rel_error']:.4f} bpw {row['bits_per_weight']:.3f} ppl {row['ppl']:.3f} "
            f"({encode_s:.0f}s)")
    restore()
    emit(result, args.json)


if __name__ == "__main__":
    main()
