"""The low-bit runtime on SmolLM2-135M-Instruct: decode speed, resident memory and bytes read per token
for fp32, bf16 and packed 2-bit / int4 / int8 weights, and the held-out perplexity change from the int8
KV cache — all in one run.

Codes: plain per-output-channel round-to-nearest, computed here (the QAT worker's quantizers make the
real ones). Codes do not change speed, memory or bytes read; they do make the RTN model's quality poor,
so no weight-format quality is reported here.
Formats: "packed_2bit" = every linear matrix at 2 bits and the (tied) embedding/head at 4 bits with a
per-row scale (the report's on-device recipe); "packed_int4", "packed_int8" = every matrix incl. the
embedding at 4 / 8 bits. Packed models run from a compressed checkpoint written by save_compressed and
read by load_compressed, with the AVX2 kernel (PackedKernel.CPU).
Resident memory: VmRSS from /proc/self/status of a fresh child process after loading the format (and
again after one short generation, which touches every weight and builds/loads the kernel), minus its
VmRSS after importing torch and openafm (so the figures are what the model adds); tensor_mb is the
exact bytes of the model's parameters and buffers.
int8 KV perplexity: held-out English text (eval.texts), windows of --context tokens, each prefilled in
chunks of --chunk tokens through a KVCache, so every chunk's queries read the earlier chunks' K/V from
the cache (int8 or fp32 storage); the fp32-cache run and the int8-cache run score the same tokens.

    python benchmarks/lowbit_runtime.py --json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log, median, parser  # noqa: E402

PROMPT = ("The history of the Roman Empire spans more than a thousand years. Historians usually divide it "
          "into several periods, and the first of these begins with")
FORMATS = ("fp32", "bf16", "packed_2bit", "packed_int4", "packed_int8")
BITS = {"packed_2bit": (2, 4), "packed_int4": (4, 4), "packed_int8": (8, 8)}   # (matrices, embedding)


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("VmRSS not found in /proc/self/status")


def rtn_quantized(model, bits: int, embed_bits: int) -> dict:
    from openafm.nn.packed_model import QuantizedCodes
    out = {}
    for name, p in model.named_parameters():
        if p.ndim != 2:
            continue
        b = embed_bits if name == "embed.weight" else bits
        w = p.detach().float()
        levels = (1 << b) - 1
        lo, hi = w.min(1).values, w.max(1).values
        scale = ((hi - lo) / levels).clamp_min(1e-8)
        zero = torch.round(-lo / scale)
        codes = torch.clamp(torch.round(w / scale[:, None] + zero[:, None]), 0, levels).to(torch.uint8)
        out[name] = QuantizedCodes(codes, scale, zero, b)
    return out


def load_format(fmt: str, artifact: str | None):
    import openafm
    if fmt in ("fp32", "bf16"):
        return openafm.load("smollm2-135m-instruct", weights="float32" if fmt == "fp32" else "bfloat16").model
    from openafm.checkpoint.compressed import load_compressed
    return load_compressed(artifact)


def weight_bytes_per_token(model) -> int:
    """Bytes of weights one decode step reads: every matrix once (a tied head reads the whole embedding,
    a lookup one row), packed codes plus their scales and zeros, and the norm vectors."""
    from openafm.nn.packed_linear import PackedEmbedding, PackedLinear
    total = 0
    for name, m in model.named_modules():
        if isinstance(m, PackedLinear):
            total += sum(b.nbytes for b in m.buffers())
        elif isinstance(m, PackedEmbedding):
            pass                                                  # counted through its table (a PackedLinear)
        elif isinstance(m, torch.nn.Linear):
            total += m.weight.nbytes
        elif isinstance(m, torch.nn.Embedding):
            total += m.weight.nbytes if model.lm_head is None else m.weight[0].nbytes
    return total + sum(p.nbytes for p in model.parameters() if p.ndim == 1)


def child_rss(fmt: str, artifact: str | None) -> dict:
    """Run this script as a fresh process that loads one format and reports its VmRSS."""
    cmd = [sys.executable, __file__, "--rss-child", fmt] + ([artifact] if artifact else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def rss_child_main(fmt: str, artifact: str | None) -> None:
    import gc
    import openafm  # noqa: F401
    from openafm.compress import artifact as _  # noqa: F401
    before = rss_bytes()
    model = load_format(fmt, artifact)
    gc.collect()
    after = rss_bytes()
    held = sum(t.nbytes for t in [*model.parameters(), *model.buffers()])
    from openafm.runtime.generate import generate_tokens
    generate_tokens(model, [[1, 2, 3]], max_new_tokens=2)                   # touch every weight once
    gc.collect()
    touched = rss_bytes()
    print(json.dumps({"rss_after_load_mb": after / 2**20, "rss_added_by_model_mb": (after - before) / 2**20,
                      "rss_added_after_one_generation_mb": (touched - before) / 2**20,
                      "tensor_mb": held / 2**20}))


def decode_run(model, ids: list[int], tokens: int):
    from openafm.runtime.generate import GenerationStats, generate_tokens

    def run():
        stats = GenerationStats()
        out = generate_tokens(model, [ids], max_new_tokens=tokens, stats=stats)[0]
        return stats.decode_tokens_per_second, out.token_ids
    return run


def chunked_nll(model, ids: torch.Tensor, context: int, chunk: int, storage, batch: int) -> tuple[float, int]:
    """Summed NLL of every token after the first in each window, prefilled in chunks through a KV cache."""
    import torch.nn.functional as F
    from openafm.runtime.kv_cache import KVCache
    windows = ids[: len(ids) // context * context].view(-1, context)              # [N, T]
    nll, count = 0.0, 0
    with torch.inference_mode():
        for i in range(0, len(windows), batch):
            win = windows[i:i + batch]
            cache = KVCache(model.kv_plan, batch_size=len(win), capacity=context, storage=storage)
            logits = torch.cat([model(win[:, s:s + chunk], cache=cache) for s in range(0, context, chunk)], 1)
            nll += float(F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                                         win[:, 1:].reshape(-1), reduction="sum"))
            count += win[:, 1:].numel()
    return nll, count


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--tokens", type=int, default=64, help="new tokens per generation")
    p.add_argument("--context", type=int, default=256, help="perplexity window (tokens)")
    p.add_argument("--chunk", type=int, default=32, help="prefill chunk through the KV cache (tokens)")
    p.add_argument("--ppl-tokens", type=int, default=16384, help="held-out tokens scored for the KV perplexity")
    p.add_argument("--rss-child", nargs="+", help=argparse_hidden())
    args = p.parse_args()
    if args.rss_child:
        rss_child_main(args.rss_child[0], args.rss_child[1] if len(args.rss_child) > 1 else None)
        return
    import openafm
    from openafm.checkpoint.compressed import save_compressed
    from openafm.eval.texts import english_text
    from openafm.runtime.kv_cache import KVStorage
    threads = torch.get_num_threads()

    lm = openafm.load("smollm2-135m-instruct", weights="float32")
    fp16_bytes = sum(p.numel() * 2 for p in lm.model.parameters())
    tmp = Path(tempfile.mkdtemp(prefix="openafm-lowbit-"))
    artifacts, file_mb = {}, {}
    for fmt, (bits, ebits) in BITS.items():
        log(f"writing {fmt} compressed checkpoint ...")
        path = save_compressed(lm.model, rtn_quantized(lm.model, bits, ebits), tmp / f"{fmt}.safetensors")
        artifacts[fmt], file_mb[fmt] = str(path), path.stat().st_size / 2**20

    log("resident memory, one child process per format ...")
    memory = {fmt: child_rss(fmt, artifacts.get(fmt)) for fmt in FORMATS}

    log("loading every format for decode ...")
    models = {fmt: load_format(fmt, artifacts.get(fmt)) for fmt in FORMATS}
    models["fp32"] = lm.model
    ids = lm.encode(PROMPT)
    runs = {fmt: decode_run(m, ids, args.tokens) for fmt, m in models.items()}
    for fn in runs.values():
        fn()                                                                     # warm-up (builds the kernel)
    speeds = {fmt: [] for fmt in runs}
    log(f"{args.repeats} interleaved rounds of {args.tokens} tokens, {threads} threads ...")
    for _ in range(args.repeats):
        for fmt, fn in runs.items():
            speeds[fmt].append(fn()[0])
    tok_s = {fmt: median(v) for fmt, v in speeds.items()}

    log("held-out perplexity through fp32 and int8 KV caches ...")
    text_ids = torch.tensor(lm.encode(english_text("heldout"))[: args.ppl_tokens])
    t = time.perf_counter()
    nll32, n = chunked_nll(lm.model, text_ids, args.context, args.chunk, KVStorage.NATIVE, 8)
    nll8, _ = chunked_nll(lm.model, text_ids, args.context, args.chunk, KVStorage.INT8, 8)
    from openafm.eval.perplexity import perplexity
    free = perplexity(lm.model, text_ids, context=args.context, batch_size=8)
    ppl_seconds = time.perf_counter() - t
    import math
    ppl32, ppl8 = math.exp(nll32 / n), math.exp(nll8 / n)

    bytes_tok = {fmt: weight_bytes_per_token(m) for fmt, m in models.items()}
    out = {
        "model": "smollm2-135m-instruct", "threads": threads, "new_tokens": args.tokens, "repeats": args.repeats,
        "codes": "per-channel round-to-nearest (speed/memory only; not a quality figure)",
        "decode_tok_s": tok_s,
        "decode_tok_s_runs": {k: [round(x, 1) for x in v] for k, v in speeds.items()},
        "ratio_decode_over_fp32": {k: v / tok_s["fp32"] for k, v in tok_s.items()},
        "greedy_tokens_identical_to_fp32": {k: runs[k]()[1] == runs["fp32"]()[1] for k in runs if k != "fp32"},
        "memory": memory,
        "weight_bytes_per_token": bytes_tok,
        "bytes_ratio_fp32_over": {k: bytes_tok["fp32"] / v for k, v in bytes_tok.items()},
        "artifact_file_mb": file_mb,
        "artifact_over_fp16": {k: v * 2**20 / fp16_bytes for k, v in file_mb.items()},
        "kv_int8_perplexity": {"tokens_scored": n, "context": args.context, "chunk": args.chunk,
                               "ppl_fp32_cache": ppl32, "ppl_int8_cache": ppl8, "ppl_cache_free": free.ppl,
                               "relative_change": ppl8 / ppl32 - 1, "target_abs_change": 0.01,
                               "seconds": ppl_seconds},
        "llama_cpp": llama_cpp_note(),
    }
    emit(out, args.json)


def argparse_hidden():
    import argparse
    return argparse.SUPPRESS


def llama_cpp_note():
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return "llama_cpp not importable: no llama.cpp ratio (the brief's anchor: ~160 tok/s for Q4_1 here)"
    return "llama_cpp importable but not measured by this script; see benchmarks/decode.py"


if __name__ == "__main__":
    main()
