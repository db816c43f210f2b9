"""What several subcommands share: the --model and sampling flags, loading with a timer, the streamed token printer
and the timing line."""

from __future__ import annotations

import argparse
import sys
import time

from openafm.api import DEFAULT_MODEL, load
from openafm.runtime.draft import DraftModel, load_draft
from openafm.runtime.proposers import ProposerKind
from openafm.runtime.threads import set_threads, threads_summary

SPECULATE_HELP = ("speculative decoding inside the engine's step, outputs unchanged: ngram (prompt lookup, no extra "
                  "model), draft:DIR (a draft trained by `openafm draft train --out DIR`), or off (default). Rows "
                  "guess only while the measured acceptance and step costs say it pays")


def parse_speculate(value: str) -> tuple[ProposerKind, str | None]:
    """--speculate VALUE -> (proposer kind, draft directory or None); raises naming the value."""
    kind, sep, directory = value.partition(":")
    if kind == ProposerKind.DRAFT.value and sep and directory:
        return ProposerKind.DRAFT, directory
    if not sep and kind in (ProposerKind.OFF.value, ProposerKind.NGRAM.value):
        return ProposerKind(kind), None
    raise argparse.ArgumentTypeError(f"--speculate {value!r} is not one of: off, ngram, draft:DIR")


def speculation(value: tuple[ProposerKind, str | None], model) -> tuple[ProposerKind, DraftModel | None]:
    """The parsed --speculate value with its draft loaded (and checked against `model`)."""
    kind, directory = value
    return kind, (load_draft(directory, model) if directory is not None else None)


def model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", "-m", default=DEFAULT_MODEL,
                   help=f"packaged model, preset, .gguf file, checkpoint directory or compressed checkpoint directory "
                        f"(runs from packed low-bit weights; default: {DEFAULT_MODEL}); "
                        "see `openafm models`")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="weight dtype (default float32)")
    p.add_argument("--weights", default="auto", choices=["auto", "native", "native-int8", "float32", "bfloat16"],
                   help="how a GGUF model's quantized matrices are held: native keeps Q8_0/Q4_0/Q4_1 blocks as stored "
                        "(native-int8: activations rounded to int8 per block like llama.cpp, faster, less exact; auto: native "
                        "in float32 on the CPU, the default); float32 "
                        "and bfloat16 dequantize at load")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads for the matrix work (default: torch's choice, the cores this process may use); "
                        "idle threads sleep (OMP_WAIT_POLICY=PASSIVE) unless the environment says otherwise; the "
                        "timing line says what was used")


def sampling_args(p: argparse.ArgumentParser, default_max: int = 128) -> None:
    p.add_argument("--max-tokens", type=int, default=default_max, help=f"most new tokens (default {default_max})")
    p.add_argument("--temperature", "-t", type=float, default=0.0, help="0 = greedy (default); > 0 samples")
    p.add_argument("--top-k", type=int, default=None, help="sample from the k most likely tokens (needs temperature > 0)")
    p.add_argument("--top-p", type=float, default=None, help="nucleus sampling mass in (0, 1] (needs temperature > 0)")
    p.add_argument("--seed", type=int, default=None, help="seed for sampling (reproducible output)")
    p.add_argument("--stop", action="append", default=[], metavar="TEXT", help="stop when TEXT appears (repeatable)")


def sampling(args) -> dict:
    return dict(max_tokens=args.max_tokens, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                seed=args.seed, stop=args.stop)


def load_timed(name: str, dtype: str = "float32", threads: int | None = None, weights: str = "auto"):
    set_threads(threads)
    t = time.perf_counter()
    lm = load(name, dtype=dtype, weights=weights)
    return lm, time.perf_counter() - t


def print_token(event) -> None:
    sys.stdout.write(event.text)
    sys.stdout.flush()


def stats_line(stats, load_s: float | None = None) -> str:
    parts = []
    if load_s is not None:
        parts.append(f"load {load_s:.2f} s")
    parts += [f"prompt {stats.prompt_tokens} tok", f"time to first token {stats.time_to_first_token * 1e3:.0f} ms",
              f"{stats.new_tokens} new tok", f"decode {stats.decode_tokens_per_second:.1f} tok/s",
              f"KV cache {stats.kv_cache_bytes / 1e6:.1f} MB", f"step {stats.step}", threads_summary()]
    return "[" + ", ".join(parts) + "]"
