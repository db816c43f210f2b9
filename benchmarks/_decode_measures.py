"""Pieces of benchmarks/decode.py that do not time anything: loading openafm by weight format (and saying when a
format is not available yet), which format a loaded model holds, the weight bytes a decode step reads, resident
memory from /proc/self/status, greedy-token agreement, and a competing CPU-bound process.

Tested in tests/benchmarks/test_decode_measures.py.
"""

from __future__ import annotations

import contextlib
import enum
import select
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch

import openafm

MODEL = "smollm2-135m-instruct"


class Weights(enum.Enum):
    """What `openafm.load(MODEL, weights=...)` is asked for. DEFAULT passes no weights= at all."""
    NATIVE = "native"              # the GGUF's Q4_1 / Q8_0 blocks kept in memory, float32 activations
    NATIVE_INT8 = "native-int8"    # the same blocks, activations rounded to int8 per block (as llama.cpp does)
    FLOAT32 = "float32"
    BFLOAT16 = "bfloat16"
    DEFAULT = "default"


class WeightsUnavailable(Exception):
    """openafm.load does not accept weights= yet, and the asked format has no other way to be loaded."""


# Before openafm.load takes weights=, float32 and bfloat16 are reachable through dtype=; native is not.
_DTYPE_BEFORE_WEIGHTS = {Weights.FLOAT32: "float32", Weights.BFLOAT16: "bfloat16"}
# What weight_format reads from the loaded model, per format asked for (both native kinds hold uint8 blocks).
HELD = {Weights.NATIVE: "native", Weights.NATIVE_INT8: "native", Weights.FLOAT32: "float32",
        Weights.BFLOAT16: "bfloat16"}


def load(weights: Weights, name: str = MODEL):
    """openafm.load(name, weights=...) -> (LanguageModel, how it was asked). Raises WeightsUnavailable for a format
    that cannot be loaded by this openafm, and RuntimeError when the loaded model holds another format."""
    if weights is Weights.DEFAULT:
        return openafm.load(name), "openafm.load(name)"
    try:
        lm, how = openafm.load(name, weights=weights.value), f"openafm.load(name, weights={weights.value!r})"
    except TypeError as e:
        if "weights" not in str(e):                                   # a TypeError from inside the loader
            raise
        if weights not in _DTYPE_BEFORE_WEIGHTS:
            raise WeightsUnavailable(f"openafm.load does not accept weights= yet ({e}); weights={weights.value!r} "
                                     f"has no other route") from None
        dtype = _DTYPE_BEFORE_WEIGHTS[weights]
        lm, how = openafm.load(name, dtype=dtype), f"openafm.load(name, dtype={dtype!r}) (no weights= yet)"
    held = weight_format(lm.model)
    if held != HELD[weights]:
        raise RuntimeError(f"{how} holds {held} weights, not the {HELD[weights]} this variant measures")
    return lm, how


def weight_tensors(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """Parameters and buffers that are weights: everything but rotary tables and caches."""
    named = list(model.named_parameters()) + list(model.named_buffers())
    return [(n, t) for n, t in named if not n.startswith("rope.") and "cache" not in n]


def weight_format(model: torch.nn.Module) -> str:
    """'native' when any matrix is held as integer blocks (uint8/int8), else the dtype of its float matrices."""
    mats = [t for _, t in weight_tensors(model) if t.ndim >= 2]
    if any(not t.dtype.is_floating_point for _, t in weight_tensors(model)):
        return "native"
    dtypes = {str(t.dtype).removeprefix("torch.") for t in mats}
    if len(dtypes) != 1:
        raise RuntimeError(f"the model's matrices mix dtypes {sorted(dtypes)}; name the format this measures")
    return dtypes.pop()


@dataclass(frozen=True)
class TensorSize:
    name: str
    nbytes: int
    rows: int          # first dimension (1 for a vector)


def bytes_per_token(tensors: Iterable[TensorSize], tied_embedding: bool, embed_prefix: str = "embed.") -> int:
    """Weight bytes one decode step reads: every tensor once, except an untied embedding table, of which one row
    is read (a tied table is read whole, as the output head)."""
    total = 0
    for t in tensors:
        if t.name.startswith(embed_prefix) and not tied_embedding:
            total += t.nbytes // max(t.rows, 1)
        else:
            total += t.nbytes
    return total


def model_bytes_per_token(model: torch.nn.Module) -> int:
    """bytes_per_token over the actual tensors of a loaded openafm model (a native model's uint8 block buffers
    count at their own size)."""
    tied = getattr(model, "lm_head", None) is None
    sizes = [TensorSize(n, t.numel() * t.element_size(), t.shape[0] if t.ndim else 1)
             for n, t in weight_tensors(model)]
    return bytes_per_token(sizes, tied)


def parse_proc_status(text: str) -> dict[str, int]:
    """/proc/<pid>/status -> {'VmRSS': bytes, 'VmHWM': bytes, ...} for its kB-valued lines."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        parts = value.split()
        if sep and len(parts) == 2 and parts[1] == "kB":
            out[key] = int(parts[0]) * 1024
    return out


def resident_bytes() -> dict[str, int]:
    """VmRSS (now), VmHWM (peak), and VmRSS's anonymous and file-backed (mapped files) parts, in bytes."""
    with open("/proc/self/status") as f:
        status = parse_proc_status(f.read())
    return {"rss": status["VmRSS"], "hwm": status["VmHWM"], "anon": status["RssAnon"], "file": status["RssFile"]}


@dataclass(frozen=True)
class Agreement:
    identical_fraction: float          # positions holding the same token / the longer sequence's length
    first_divergence: int | None       # first differing position; None when the sequences are equal


def agreement(a: list[int], b: list[int]) -> Agreement:
    n = max(len(a), len(b))
    if n == 0:
        return Agreement(1.0, None)
    same = sum(x == y for x, y in zip(a, b))
    diverge = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    if diverge is None and len(a) != len(b):
        diverge = min(len(a), len(b))
    return Agreement(same / n, diverge)


class Competitor(enum.Enum):
    """The CPU-bound process beside the contended measurement: one thread, for as long as it runs. Each says
    `ready` once its loop is about to start."""
    BUSY_LOOP = "print('ready', flush=True)\nwhile True: pass"
    MATMUL = ("import torch; torch.set_num_threads(1); a = torch.randn(512, 512)\nprint('ready', flush=True)\n"
              "while True: a @ a")


@contextlib.contextmanager
def competing_process(kind: Competitor = Competitor.BUSY_LOOP, settle_s: float = 0.5,
                      start_timeout_s: float = 120.0) -> Iterator[int]:
    """Run one CPU-bound process for the body of the with-block (from `settle_s` after it says it is ready);
    stop it (and wait for it) after. -> its pid."""
    proc = subprocess.Popen([sys.executable, "-c", kind.value], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], start_timeout_s)
        line = proc.stdout.readline() if ready else ""
        if line.strip() != "ready":
            raise RuntimeError(f"the competing process ({kind.name}) did not start its loop within "
                               f"{start_timeout_s} s (exit code {proc.poll()}, said {line!r})")
        time.sleep(settle_s)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
