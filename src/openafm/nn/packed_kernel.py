"""The CPU kernels (C++ in nn/csrc/, AVX2 + FMA + F16C, built once with torch's cpp_extension).

    y[m, o] = sum_i W[o, i] * x[m, i]        for a few rows m (decode), W read in its stored form

Stored forms (`WeightFormat`): float32; pack.py's packed 2/4/8-bit codes with a per-row scale and zero
point, W = scale[o] * (code - zero[o]); and GGUF's block formats kept byte for byte as in the file
(Q8_0, Q4_0, Q4_1, Q5_0, Q5_1: 32 weights per block with their own float16 scale, and a minimum for
Q4_1 / Q5_1; the K-quants Q4_K, Q5_K, Q6_K: super-blocks of 256 with 6- or 8-bit scales per sub-block of
32 or 16; and F16 / BF16 matrices, widened to float32 in the kernel).

The integer kernels quantize the activations per block of 32 to int8 (scale = max|x| / 127 per block),
the way llama.cpp feeds its integer dot products, and multiply with `maddubs` (u8 x s8 -> s16 pairs) and
`madd` (-> s32); this adds ~0.5% relative error per product for Gaussian activations, more where a block
holds an outlier (K-quants too: their sub-blocks sit inside the blocks of 32). Block formats can instead take the
activations in float32 (`Activations.FLOAT32`): each block's codes are widened to float and multiplied exactly,
then scaled (Q8_0's and Q5's on 512-bit registers where the CPU has AVX-512: `KernelIsa`). Work is split over a
small pool of threads that spin briefly, then yield, then sleep (csrc/pool.cpp), and the same kernels run the
fused decode step (csrc/decode_step.cpp, runtime/fused_step.py).

The extension is compiled on first use into ~/.cache/openafm/kernels/<hash of the sources> (or under
$OPENAFM_KERNEL_CACHE) and reused; building needs a C++ compiler (g++) and the Python headers. A build killed
half-way does not block later ones (see _build_lock).
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import hashlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import torch

SOURCES = ("matvec.cpp", "matvec512.cpp", "kquants.cpp", "q5_f16.cpp", "dequantize.cpp", "pool.cpp",
           "decode_step.cpp", "bindings.cpp")
HEADERS = ("kernels.h", "simd.h", "decode_step.h")
_module = None


class WeightFormat(enum.IntEnum):
    """How a weight matrix is stored (the values match csrc/kernels.h's Format: ggml's type codes for the
    block formats, except F16, whose ggml code 1 is PACKED here)."""

    F32 = 0
    PACKED = 1
    Q8_0 = 8
    Q4_0 = 2
    Q4_1 = 3
    Q5_0 = 6
    Q5_1 = 7
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    BF16 = 30
    F16 = 31
    PARTS = 100   # several weights over one input, outputs concatenated (nn.block_linear.BlockRows)


class Activations(enum.Enum):
    """What a block-format kernel multiplies the weights with."""

    FLOAT32 = "float32"   # the activations as they are: the dequantized weights' products, in float32
    INT8 = "int8"         # activations rounded to int8 per block of 32 first (llama.cpp's scheme): integer
                          # dot products, faster, and ~0.5% relative error per product (tokens may differ).
                          # F16 / BF16 matrices have no integer codes: they always take float32 activations.


class KernelIsa(enum.Enum):
    """The instruction set of the float32-activation Q8_0 / Q5_0 / Q5_1 kernels (every other kernel is AVX2)."""

    AVX2 = "avx2"
    AVX512 = "avx512"     # AVX-512 F/BW/DQ/VL (csrc/matvec512.cpp): the default where the CPU has them


def kernel_isa() -> KernelIsa:
    return KernelIsa(load_kernel().kernel_isa())


def set_kernel_isa(isa: KernelIsa) -> KernelIsa:
    """Choose the float32-activation Q8_0 / Q5 kernels' instruction set for this process (benchmarks, and tests of the
    AVX2 path on an AVX-512 CPU) -> the one it replaces. The two differ in the last bits of each output (another
    summation order); within one, a row's result does not depend on its batch. AVX512 on a CPU without it raises."""
    if not isinstance(isa, KernelIsa):
        raise ValueError(f"isa={isa!r} is not one of {[k.value for k in KernelIsa]}")
    kernel = load_kernel()
    before = KernelIsa(kernel.kernel_isa())
    if isa is KernelIsa.AVX512 and kernel.best_isa() != "avx512":
        raise KernelUnavailableError("this CPU lacks AVX-512 F/BW/DQ/VL: the kernels run AVX2 only")
    kernel.set_kernel_isa(isa.value)
    return before


# Block format -> (values per block, bytes per block); a row of n values takes n / values * bytes bytes.
BLOCK_SHAPES = {
    WeightFormat.Q8_0: (32, 34), WeightFormat.Q4_0: (32, 18), WeightFormat.Q4_1: (32, 20),
    WeightFormat.Q5_0: (32, 22), WeightFormat.Q5_1: (32, 24),
    WeightFormat.Q4_K: (256, 144), WeightFormat.Q5_K: (256, 176), WeightFormat.Q6_K: (256, 210),
    WeightFormat.F16: (1, 2), WeightFormat.BF16: (1, 2),
}
BLOCK_BYTES = {fmt: nbytes for fmt, (_, nbytes) in BLOCK_SHAPES.items()}   # bytes per block


class KernelUnavailableError(RuntimeError):
    """The CPU kernels cannot be built or run here (no AVX2, or no compiler)."""


def cache_dir() -> Path:
    return Path(os.environ.get("OPENAFM_KERNEL_CACHE", Path.home() / ".cache" / "openafm" / "kernels"))


def check_cpu(what: str, alternative: str) -> None:
    """Raise KernelUnavailableError naming the missing instruction set and the alternative to choose."""
    cap = torch.backends.cpu.get_cpu_capability()
    if cap not in ("AVX2", "AVX512"):
        raise KernelUnavailableError(f"{what} needs a CPU with AVX2, FMA and F16C; this CPU reports {cap!r}. "
                                     f"Use {alternative}")


def load_kernel():
    """The compiled extension (built on first use, then loaded from the cache)."""
    global _module
    if _module is not None:
        return _module
    check_cpu("the packed CPU kernel", "kernel=PackedKernel.TORCH (unpack + dequantize + matmul)")
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        raise KernelUnavailableError("building the CPU kernels needs a C++ compiler (c++/g++ on PATH): "
                                     "install one (e.g. `apt-get install g++`) or use kernel=PackedKernel.TORCH")
    from torch.utils.cpp_extension import load  # on use: the C++ toolchain glue, only for the first build
    csrc = Path(__file__).parent / "csrc"
    directory = build_directory(csrc)
    with _build_lock(directory):
        _module = load(name="openafm_cpu_kernels", sources=[str(csrc / s) for s in SOURCES],
                       extra_include_paths=[str(csrc)],
                       extra_cflags=["-O3", "-mavx2", "-mfma", "-mf16c", "-fopenmp", "-ffp-contract=off"],
                       extra_ldflags=["-fopenmp"], build_directory=str(directory), verbose=False)
    return _module


def build_directory(csrc: Path) -> Path:
    """cache_dir()/<hash of the sources and their folder>: each version of the kernels is built once and kept, so
    checkouts (worktrees, a fresh clone beside a working copy) do not rebuild over each other."""
    digest = hashlib.sha256(str(csrc).encode())        # torch's build also depends on where the sources are
    for name in sorted(SOURCES + HEADERS):
        digest.update(name.encode() + b"\0" + (csrc / name).read_bytes())
    directory = cache_dir() / digest.hexdigest()[:16]
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@contextlib.contextmanager
def _build_lock(directory: Path) -> Iterator[None]:
    """One openafm process builds or loads a version at a time, under an flock the OS releases when its holder
    dies. torch's own build baton (a `lock` file) is left behind by a builder that was killed, and every later
    load then waits on it forever; holding the flock, any such file is stale, and is removed."""
    with open(directory / "openafm-build.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        (directory / "lock").unlink(missing_ok=True)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def weight_spec(fmt: WeightFormat, out: int, in_features: int, data: torch.Tensor | tuple, *, bits: int = 0,
                scale: torch.Tensor | None = None, zero: torch.Tensor | None = None,
                lora: tuple[torch.Tensor, torch.Tensor, float] | None = None,
                activations: Activations = Activations.INT8) -> tuple:
    """The tuple csrc/decode_step.cpp's make_linear reads: one weight (and optional LoRA factors A, B, scale).
    `activations` applies to block formats (packed codes always take int8 activations). For PARTS, `data`
    is the parts' specs (each without LoRA), whose outputs are concatenated."""
    a, b, s = lora if lora is not None else (None, None, 0.0)
    return (int(fmt), int(bits), int(out), int(in_features), data, scale, zero, a, b, float(s),
            Activations(activations) is Activations.INT8)


def matvec(x: torch.Tensor, spec: tuple) -> torch.Tensor:
    """x float32 [M, in] (M small) times a weight (weight_spec) -> float32 [M, out], on torch's thread count."""
    return load_kernel().matvec(x, spec, torch.get_num_threads())


def packed_matvec(x: torch.Tensor, data: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor,
                  bits: int, in_features: int) -> torch.Tensor:
    """x float32 [M, in] (M small), data uint8 [out, bytes], scale/zero float32 [out] -> float32 [M, out]."""
    return matvec(x, weight_spec(WeightFormat.PACKED, data.shape[0], in_features, data, bits=bits,
                                 scale=scale, zero=zero))


def dequantize_blocks(data: torch.Tensor, fmt: WeightFormat, in_features: int) -> torch.Tensor:
    """Block-format rows uint8 [out, row_bytes] -> float32 [out, in_features] (ggml's float operations)."""
    return load_kernel().dequantize(data, int(fmt), in_features)
