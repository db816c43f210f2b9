"""The compression table of the README (issue 6, report Table 3's columns on SmolLM2-135M-Instruct): one row per
compression path, with bits per weight, file size, resident memory, decode tokens/s, held-out perplexity and a
task score, plus a plot (file size against perplexity).

Needs the models of a QAT run: `python benchmarks/qat.py ... --work-dir W` leaves in W the QAT-2-bit balanced
run (W/qat2_balanced/{model,packed}, W/qat2_balanced_noema_model), the unbalanced run (W/qat2_unbalanced) and
the LoRA recovery adapter (W/qat2_recovery.safetensors). Everything else is made here from the fp32 model:
RTN 2-bit (QAT's starting point: per-tensor Newton-Raphson clip, 4-bit per-row embedding, no training),
int4 g128 and int3 g32 group quantization, ASTC HDR 6x6 (tensor scale, texels in [1, 2]: astc.py's best
mapping), SVD r32 pull-out + ASTC (or + int3 g32, the same 4.0 bits: the equal-bits codec comparison) + a LoRA
recovery adapter trained here from the pulled-out factors (--astc-recovery-steps), the int8 KV cache and
4-bit embeddings alone.

Columns:
  bits/weight  linear layers' stored bits per weight (codes + scales/minimums; + the adapter when there is one)
  file MB      the whole model as stored: written artifacts are measured on disk (packed checkpoints,
               adapters); formats without a packed runtime (group, ASTC) are computed from their stored bits
               plus the tensors they keep in fp32 (embedding table, norms)
  RSS MB       resident memory a fresh process adds by loading the format (lowbit_runtime.py's method)
  tok/s        greedy decode, --new-tokens tokens, median of --repeats interleaved rounds
  ppl          held-out perplexity (eval.texts held-out split: not seen by QAT or recovery training)
  task         3-shot arithmetic, 4-way multiple choice by log-likelihood (eval.tasks; chance 0.25)
Group and ASTC rows run decoded to fp32 (no packed kernel for those formats), so their RSS and tok/s are the
fp32 runtime's, marked as such. The int8-KV row scores perplexity through the cache (chunked prefill, as in
lowbit_runtime.py); its task score is the fp32 one, since scoring runs without a cache.

    python benchmarks/compression_table.py --qat-work W --json --plot compression.png --markdown table.md
    python benchmarks/compression_table.py --replot table.json --plot compression.png      # redraw only
    python benchmarks/compression_table.py --replot table.json --add-pullout int3g32 --json  # one row, merged
"""

from __future__ import annotations

import copy
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log, median, parser  # noqa: E402
from lowbit_runtime import PROMPT, child_rss, chunked_nll, decode_run  # noqa: E402

import openafm
from openafm.checkpoint.compressed import COMPRESSED_FILE, save_compressed_checkpoint
from openafm.compress.clip_init import ClipInit
from openafm.compress.fake_quant import Granularity
from openafm.compress.rtn import quantize_model_rtn
from openafm.eval.perplexity import perplexity
from openafm.eval.tasks import mc_accuracy, task_items
from openafm.eval.texts import english_text

MODEL = "smollm2-135m-instruct"


def plain_copy(model):
    return copy.deepcopy(model).float().eval().requires_grad_(False)


def tensor_bytes(model) -> int:
    return sum(t.nbytes for t in [*model.parameters(), *model.buffers()])


def linear_weights(model) -> int:
    return sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))


def file_bytes(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*.safetensors"))


def rtn_export(model, **rtn_kwargs):
    """(a copy of model with its weights rounded, their QuantizedWeights): compress.rtn, no training."""
    m = plain_copy(model)
    return m, quantize_model_rtn(m, **rtn_kwargs)


def packed_bits_per_weight(meta_quantized: dict, path: Path, model) -> float:
    """Stored bits per linear weight of a packed checkpoint (codes + per-row scale and zero, float32)."""
    from safetensors import safe_open
    bits, weights = 0, 0
    with safe_open(str(path), framework="pt") as f:
        for mpath, info in meta_quantized.items():
            if info["module"] != "linear":
                continue
            bits += 8 * sum(f.get_slice(f"{mpath}.{k}").get_shape()[0] * (
                f.get_slice(f"{mpath}.{k}").get_shape()[1] if k == "packed" else 4) for k in ("packed", "scale", "zero"))
            weights += model.get_submodule(mpath).weight.numel()
    return bits / weights if weights else 32.0


CODECS = ("astc", "int3g32")      # what compresses the residual after the SVD pull-out


def pullout_recovery(base_model, args, train_ids, work: Path, codec: str) -> tuple[torch.nn.Module, dict]:
    """SVD pull-out (rank args.astc_rank) + a codec on the residual + LoRA recovery: the base holds the decoded
    residual, the adapter starts at the pulled-out B A and trains by distillation from the fp32 model.
    codec "astc": ASTC HDR 6x6 (tensor scale, texels in [1, 2]); "int3g32": int3 group quantization, g32 —
    the same 4.0 bits/weight, so the two rows compare the codecs at equal bits and equal recovery."""
    from openafm.compress.astc import astc_compress_model, linear_modules, relative_error, total_size
    from openafm.compress.group_quant import group_quantize
    from openafm.compress.svd_pullout import pull_out
    from openafm.compress.recovery import build_recovery_trainer
    from openafm.nn.lora import merge_lora
    from openafm.train.config import TrainConfig
    from openafm.train.token_loader import TokenArrayLoader
    if codec not in CODECS:
        raise ValueError(f"codec={codec!r}; accepted: {list(CODECS)}")
    model = plain_copy(base_model)
    t = time.perf_counter()
    factors, errors = {}, []
    if codec == "astc":
        records = astc_compress_model(model, "hdr", "6x6", scale="tensor", texel_range="octave",
                                      quality=args.astc_quality, rank=args.astc_rank, progress=not args.json)
        with torch.no_grad():
            for r in records:                               # the model holds B A + decode(R): keep decode(R)
                model.get_submodule(r.name).weight.sub_(r.adapter.product())
                factors[r.name] = r.adapter
        size = total_size(records)
        bits, adapter_bits, weights = size.bits, size.adapter_bits, size.weights
        errors = [r.relative_error for r in records]
    else:
        bits, adapter_bits, weights = 0, 0, 0
        with torch.no_grad():
            for name, module in linear_modules(model):
                w = module.weight.detach().float().clone()
                pulled = pull_out(w, args.astc_rank)
                q = group_quantize(pulled.residual, 3, 32)
                decoded = q.decode()
                module.weight.copy_(decoded)
                factors[name] = pulled.adapter
                errors.append(relative_error(w, pulled.adapter.product() + decoded))
                bits += q.stored_bits() + pulled.adapter.bits()
                adapter_bits += pulled.adapter.bits()
                weights += w.numel()
    info = {"codec": codec, "encode_seconds": time.perf_counter() - t, "rank": args.astc_rank,
            "bits_per_weight": bits / weights, "bits_per_weight_without_adapter": (bits - adapter_bits) / weights,
            "relative_error_before_training": sum(errors) / len(errors)}
    if args.astc_recovery_steps:
        cfg = TrainConfig.from_dict(dict(
            model=str(work / f"{codec}_residual_base"), run_dir=str(work / f"{codec}_recovery"),
            steps=args.astc_recovery_steps,
            batch_size=args.batch_size, seq_len=args.seq_len, device="cpu", init="keep", progress=not args.json,
            peak_flops=1e12, objective=dict(kind="kd", teacher=MODEL),
            optimizer=dict(lr=args.recovery_lr, weight_decay=0.0, grad_clip=1.0),
            schedule=dict(kind="warmup-cosine", warmup_steps=min(5, args.astc_recovery_steps - 1)),
            checkpoint=dict(every=10 ** 6, keep=1)))
        loader = TokenArrayLoader(train_ids, seq_len=args.seq_len, global_batch=args.batch_size, seed=3)
        trainer, _ = build_recovery_trainer(cfg, rank=args.astc_rank, alpha=float(args.astc_rank), loader=loader,
                                            base=model, init_factors=factors)
        t = time.perf_counter()
        trainer.run()
        info |= {"recovery_steps": args.astc_recovery_steps, "recovery_seconds": time.perf_counter() - t,
                 "recovery_tokens": args.astc_recovery_steps * args.batch_size * args.seq_len}
        model = trainer.model
    else:
        from openafm.nn.lora import LoRALinear
        for name, f in factors.items():
            parent, _, leaf = name.rpartition(".")
            setattr(model.get_submodule(parent), leaf, LoRALinear.from_factors(model.get_submodule(name), f.a, f.b))
    merge_lora(model)                          # quality only: the runtime of this row is the decoded fp32 one
    return model.eval().requires_grad_(False), info


def pullout_row(base, args, train_ids, work: Path, codec: str, quality, n_linear: int, fp32_rest_mb: float):
    """(row name, row) of one SVD pull-out + codec + LoRA path; its runtime is the decoded fp32 one."""
    m, info = pullout_recovery(base, args, train_ids, work, codec)
    name = f"{'ASTC' if codec == 'astc' else 'int3 group g32'} + SVD r{args.astc_rank} + LoRA"
    row = {**quality(m, name), "bits_per_weight": info["bits_per_weight"],
           "file_mb": info["bits_per_weight"] * n_linear / 8 / 2**20 + fp32_rest_mb,
           "file_measured": False, "runtime": "fp32 (decoded at load)", "detail": info}
    return name, row


def evaluation(args):
    """(the fp32 LanguageModel, held-out ids, quality): quality(model, label) -> {"ppl", "task"} on the
    table's held-out tokens and task items."""
    lm = openafm.load(MODEL, weights="float32")
    heldout = torch.tensor(lm.encode(english_text("heldout"))[: args.tokens])
    items = task_items("arithmetic", args.task_items, seed=0)

    def quality(model, label: str) -> dict:
        t = time.perf_counter()
        ppl = perplexity(model, heldout, context=args.context, batch_size=4).ppl
        task = mc_accuracy(model, lm.tokenizer, items).accuracy
        log(f"{label}: ppl {ppl:.4g}, task {task:.3f} ({time.perf_counter() - t:.0f}s)")
        return {"ppl": ppl, "task": task}
    return lm, heldout, quality


def add_pullout_row(args) -> None:
    """--add-pullout: one pull-out row computed with the table's settings, merged into an earlier table."""
    with open(args.replot) as f:
        result = json.load(f)
    if result["heldout_tokens"] != args.tokens or result["context"] != args.context \
            or result["task"]["items"] != args.task_items:
        raise SystemExit(f"--tokens/--context/--task-items ({args.tokens}/{args.context}/{args.task_items}) differ "
                         f"from the table's ({result['heldout_tokens']}/{result['context']}/{result['task']['items']})")
    lm, heldout, quality = evaluation(args)

    n_linear = linear_weights(lm.model)
    rest_mb = (tensor_bytes(lm.model) - 4 * n_linear) / 2**20
    train_ids = torch.tensor(lm.encode(english_text("train")))
    out = Path(args.out_dir or tempfile.mkdtemp(prefix="openafm-table-"))
    name, row = pullout_row(lm.model, args, train_ids, out, args.add_pullout, quality, n_linear, rest_mb)
    row |= {"rss_mb": result["rows"]["fp32"]["rss_mb"], "tok_s": result["rows"]["fp32"]["tok_s"]}
    rows = {}
    for k, v in result["rows"].items():                    # place it after the other pull-out row
        rows[k] = v
        if k.startswith("ASTC + SVD"):
            rows[name] = row
    rows.setdefault(name, row)
    result["rows"] = rows
    if args.markdown:
        Path(args.markdown).write_text(markdown(result))
    if args.plot:
        plot(result, args.plot)
    emit(result, args.json)


def markdown(result: dict) -> str:
    head = ("| compression | bits/weight (linear) | file MB | RSS MB | decode tok/s | held-out ppl | task (arith. 3-shot) |\n"
            "| --- | --- | --- | --- | --- | --- | --- |\n")
    lines = []
    for name, r in result["rows"].items():
        mark = " ‡" if r.get("runtime") == "fp32 (decoded at load)" else ""
        same = " §" if r.get("runtime_of") else ""
        lines.append(f"| {name} | {r['bits_per_weight']:.2f} | {r['file_mb']:.1f}{'' if r['file_measured'] else ' *'} | "
                     f"{r['rss_mb']:.0f}{mark}{same} | {r['tok_s']:.1f}{mark}{same} | {r['ppl']:.4g} | "
                     f"{r['task']:.3f} |")
    return head + "\n".join(lines) + "\n"


def plot(result: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(10, 6.5))
    points: dict[tuple[float, float], list[str]] = {}        # rows at (nearly) the same spot share one label
    for name, r in result["rows"].items():
        key = (round(math.log10(r["file_mb"]), 2), round(math.log10(r["ppl"]), 1))
        points.setdefault(key, []).append(name)
    for i, ((_, _), names) in enumerate(sorted(points.items())):
        r = result["rows"][names[0]]
        ax.scatter(r["file_mb"], r["ppl"], s=45, color=f"C{i % 10}")
        ax.annotate(" / ".join(names), (r["file_mb"], r["ppl"]), fontsize=8, color=f"C{i % 10}",
                    xytext=(6, 8 if i % 2 else -12), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("model file size, MB (log)")
    ax.set_ylabel("held-out perplexity (log)")
    ax.set_title(f"SmolLM2-135M-Instruct compressed: size vs quality ({result['heldout_tokens']} held-out tokens)")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--qat-work", default=None, help="the --work-dir of a benchmarks/qat.py training run (required)")
    p.add_argument("--out-dir", default=None, help="where the artifacts made here go (default: a temporary directory)")
    p.add_argument("--tokens", type=int, default=4096, help="held-out tokens scored")
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--task-items", type=int, default=200)
    p.add_argument("--new-tokens", type=int, default=48, help="tokens per timed decode")
    p.add_argument("--astc-rank", type=int, default=32)
    p.add_argument("--astc-quality", default="fast", choices=["fastest", "fast", "medium", "thorough"])
    p.add_argument("--astc-recovery-steps", type=int, default=60)
    p.add_argument("--recovery-lr", type=float, default=1e-3)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--plot", default=None, help="PNG path: file size against perplexity")
    p.add_argument("--markdown", default=None, help="write the table as Markdown to this path")
    p.add_argument("--replot", default=None, metavar="JSON",
                   help="only redraw --plot (and --markdown) from an earlier --json output")
    p.add_argument("--add-pullout", choices=CODECS, default=None,
                   help="only compute the SVD pull-out + CODEC + LoRA row and add it to the --replot JSON "
                        "(printed with --json; --plot and --markdown redrawn)")
    args = p.parse_args()
    if args.add_pullout and not args.replot:
        p.error("--add-pullout needs --replot JSON (the table to add the row to)")
    if args.replot and not args.add_pullout:
        with open(args.replot) as f:
            earlier = json.load(f)
        if args.plot:
            plot(earlier, args.plot)
        if args.markdown:
            Path(args.markdown).write_text(markdown(earlier))
        return
    if args.add_pullout:
        add_pullout_row(args)
        return
    if not args.qat_work:
        p.error("--qat-work is required (the --work-dir of a benchmarks/qat.py training run)")
    qat = Path(args.qat_work)
    needed = [qat / "qat2_balanced" / "model", qat / "qat2_balanced" / "packed", qat / "qat2_balanced_noema_model",
              qat / "qat2_unbalanced" / "packed", qat / "qat2_recovery.safetensors"]
    missing = [str(x) for x in needed if not x.exists()]
    if missing:
        raise SystemExit(f"--qat-work {qat} lacks {missing}: run benchmarks/qat.py with --work-dir first")
    out = Path(args.out_dir or tempfile.mkdtemp(prefix="openafm-table-"))
    threads = torch.get_num_threads()

    lm, heldout, quality = evaluation(args)
    base = lm.model

    rows: dict[str, dict] = {}
    artifacts: dict[str, Path] = {}           # row -> packed checkpoint directory (its own runtime)
    n_linear = linear_weights(base)
    fp32_mb = tensor_bytes(base) / 2**20
    rows["fp32"] = {**quality(base, "fp32"), "bits_per_weight": 32.0, "file_mb": fp32_mb, "file_measured": False}
    bf16 = copy.deepcopy(base).to(torch.bfloat16)
    rows["bf16"] = {**quality(bf16, "bf16"), "bits_per_weight": 16.0, "file_mb": fp32_mb / 2, "file_measured": False}
    del bf16

    # RTN 2-bit: QAT's starting point without training, written as a packed checkpoint
    rtn, rtn_q = rtn_export(base, bits=2, granularity=Granularity.TENSOR, clip=ClipInit.NEWTON_RAPHSON,
                            embed_bits=4, embed_granularity=Granularity.CHANNEL)
    artifacts["RTN 2-bit"] = save_compressed_checkpoint(out / "rtn2", rtn, rtn_q, tokenizer=lm.tokenizer)
    rows["RTN 2-bit"] = quality(rtn, "RTN 2-bit")
    del rtn, rtn_q

    def qat_row(name: str, model_dir: Path, packed_dir: Path | None):
        m = openafm.load(str(model_dir)).model
        rows[name] = quality(m, name)
        if packed_dir is not None:
            artifacts[name] = packed_dir
        return m

    qat_row("QAT 2-bit balanced, EMA", qat / "qat2_balanced" / "model", qat / "qat2_balanced" / "packed")
    qat_row("QAT 2-bit balanced, no EMA", qat / "qat2_balanced_noema_model", None)
    rows["QAT 2-bit balanced, no EMA"]["runtime_of"] = "QAT 2-bit balanced, EMA"
    qat_row("QAT 2-bit unbalanced, EMA", qat / "qat2_unbalanced" / "model", qat / "qat2_unbalanced" / "packed")

    from openafm.checkpoint.adapter import attach_adapter, read_adapter
    adapter = read_adapter(qat / "qat2_recovery.safetensors")
    recovered = attach_adapter(openafm.load(str(qat / "qat2_balanced" / "model")).model, adapter)  # checks the base
    rows["QAT 2-bit + LoRA r16 recovery"] = quality(recovered, "QAT + LoRA")
    del recovered

    # group quantization and ASTC: decoded to fp32 at load (no packed kernel for them)
    from openafm.compress.group_quant import group_quantize_model
    embed_and_norms_mb = (tensor_bytes(base) - 4 * n_linear) / 2**20
    for bits, group in ((4, 128), (3, 32)):
        m = plain_copy(base)
        out_q = group_quantize_model(m, bits, group)
        bpw = sum(q.stored_bits() for _, q, _ in out_q) / n_linear
        rows[f"int{bits} group g{group}"] = {**quality(m, f"int{bits} g{group}"), "bits_per_weight": bpw,
                                              "file_mb": bpw * n_linear / 8 / 2**20 + embed_and_norms_mb,
                                              "file_measured": False, "runtime": "fp32 (decoded at load)"}
        del m
    from openafm.compress.astc import astc_compress_model, total_size
    m = plain_copy(base)
    t = time.perf_counter()
    size = total_size(astc_compress_model(m, "hdr", "6x6", scale="tensor", texel_range="octave",
                                          quality=args.astc_quality, progress=not args.json))
    log(f"ASTC encode {time.perf_counter() - t:.0f}s")
    rows["ASTC HDR 6x6"] = {**quality(m, "ASTC"), "bits_per_weight": size.bits_per_weight,
                            "file_mb": size.bits / 8 / 2**20 + embed_and_norms_mb, "file_measured": False,
                            "runtime": "fp32 (decoded at load)"}
    del m
    train_ids = torch.tensor(lm.encode(english_text("train")))
    for codec in CODECS:
        name, row = pullout_row(base, args, train_ids, out, codec, quality, n_linear, embed_and_norms_mb)
        rows[name] = row
    astc_info = rows[f"ASTC + SVD r{args.astc_rank} + LoRA"]["detail"]

    # int8 KV cache: fp32 weights, perplexity through the cache
    from openafm.runtime.kv_cache import KVStorage
    nll32, n = chunked_nll(base, heldout, args.context, 32, KVStorage.NATIVE, 4)
    nll8, _ = chunked_nll(base, heldout, args.context, 32, KVStorage.INT8, 4)
    rows["int8 KV cache"] = {"ppl": math.exp(nll8 / n), "task": rows["fp32"]["task"], "bits_per_weight": 32.0,
                             "file_mb": fp32_mb, "file_measured": False,
                             "detail": {"ppl_fp32_cache": math.exp(nll32 / n), "ppl_int8_cache": math.exp(nll8 / n),
                                        "relative_change": math.exp((nll8 - nll32) / n) - 1}}

    # 4-bit embeddings alone (per row, f = 1: the better of the RTN embedding rows in qat.py --rtn-only)
    emb4, emb4_q = rtn_export(base, bits=2, embed_bits=4, embed_granularity=Granularity.CHANNEL, clip=ClipInit.NONE,
                              skip=["layers.*"])
    artifacts["4-bit embeddings"] = save_compressed_checkpoint(out / "emb4", emb4, emb4_q, tokenizer=lm.tokenizer)
    rows["4-bit embeddings"] = {**quality(emb4, "4-bit embeddings"), "bits_per_weight": 32.0}
    del emb4, emb4_q

    # sizes of the packed rows, measured on disk
    from openafm.checkpoint.compressed import read_metadata
    for name, d in artifacts.items():
        f = Path(d) / COMPRESSED_FILE
        meta = read_metadata(f)
        rows[name].setdefault("bits_per_weight", packed_bits_per_weight(meta["quantized"], f, base))
        rows[name] |= {"file_mb": file_bytes(f) / 2**20, "file_measured": True}
    rows["QAT 2-bit balanced, no EMA"] |= {k: rows["QAT 2-bit balanced, EMA"][k]
                                           for k in ("bits_per_weight", "file_mb", "file_measured")}
    adapter_mb = file_bytes(qat / "qat2_recovery.safetensors") / 2**20
    rec = rows["QAT 2-bit + LoRA r16 recovery"]
    qat_bal = rows["QAT 2-bit balanced, EMA"]
    rec |= {"file_mb": qat_bal["file_mb"] + adapter_mb, "file_measured": True,
            "bits_per_weight": qat_bal["bits_per_weight"] + adapter_mb * 2**20 * 8 / n_linear}

    # runtime: resident memory (fresh processes) and interleaved decode speed
    log("resident memory, one child process per format ...")
    rss = {"fp32": child_rss("fp32", None), "bf16": child_rss("bf16", None)}
    for name, d in artifacts.items():
        rss[name] = child_rss("packed", str(Path(d) / COMPRESSED_FILE))
    from openafm.checkpoint.compressed import load_compressed
    models = {"fp32": base, "bf16": copy.deepcopy(base).to(torch.bfloat16)}
    for name, d in artifacts.items():
        models[name] = load_compressed(Path(d) / COMPRESSED_FILE)
    packed = load_compressed(artifacts["QAT 2-bit balanced, EMA"] / COMPRESSED_FILE)
    models["QAT 2-bit + LoRA r16 recovery"] = attach_adapter(packed, adapter)   # unmerged, on the packed layers
    ids = lm.encode(PROMPT)
    runs = {name: decode_run(m, ids, args.new_tokens) for name, m in models.items()}
    from openafm.runtime.generate import GenerationStats, generate_tokens

    def int8_kv_run():
        stats = GenerationStats()
        generate_tokens(base, [ids], max_new_tokens=args.new_tokens, stats=stats, kv_storage=KVStorage.INT8)
        return stats.decode_tokens_per_second, None
    runs["int8 KV cache"] = int8_kv_run
    for fn in runs.values():
        fn()                                                              # warm-up (builds the packed kernel)
    speeds: dict[str, list[float]] = {k: [] for k in runs}
    log(f"{args.repeats} interleaved decode rounds of {args.new_tokens} tokens, {threads} threads ...")
    for _ in range(args.repeats):
        for name, fn in runs.items():
            speeds[name].append(fn()[0])
    tok_s = {k: median(v) for k, v in speeds.items()}

    for name, r in rows.items():
        source = r.get("runtime_of") or name
        if r.get("runtime") == "fp32 (decoded at load)" or name == "int8 KV cache":
            source_rss, source_tok = rss["fp32"], tok_s["int8 KV cache" if name == "int8 KV cache" else "fp32"]
        else:
            source_rss, source_tok = rss.get(source), tok_s[source]
        if name == "QAT 2-bit + LoRA r16 recovery":      # packed base + the adapter's float32 factors
            source_rss = dict(rss["QAT 2-bit balanced, EMA"])
            source_rss["rss_added_after_one_generation_mb"] += adapter_mb * 2
        r["rss_mb"] = source_rss["rss_added_after_one_generation_mb"]
        r["tok_s"] = source_tok
    result = {"model": MODEL, "threads": threads, "heldout_tokens": len(heldout), "context": args.context,
              "task": {"name": "arithmetic 3-shot multiple choice", "items": args.task_items, "chance": 0.25},
              "linear_weights": n_linear, "decode_tokens": args.new_tokens, "repeats": args.repeats,
              "decode_tok_s_runs": {k: [round(x, 1) for x in v] for k, v in speeds.items()},
              "rss_children": rss, "astc_recovery": astc_info, "qat_work": str(qat), "artifacts": str(out),
              "rows": rows}
    if args.markdown:
        Path(args.markdown).write_text(markdown(result))
        result["markdown"] = args.markdown
    if args.plot:
        plot(result, args.plot)
        result["plot"] = args.plot
    emit(result, args.json)


if __name__ == "__main__":
    main()
