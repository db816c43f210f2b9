"""Model FLOPs utilisation. FLOPs of one training token (forward + backward), following the PaLM paper's
appendix B accounting:

    flops_per_token = 6 * N  +  12 * sum over attention layers of  n_heads * head_dim * min(window, T)

N = parameters that take part in a matmul for this token: all parameters of the active path (top-k experts of
an MoE layer), minus the input embedding table when it is not tied to the output head (a lookup, not a
matmul). The attention term counts the QK^T and AV matmuls over the full T x T (or T x window) score matrix,
without the causal mask's saving, as PaLM does. MFU = flops_per_token * tokens/s / peak FLOP/s.

The peak is a config value; by default it is measured: the best fp32 matmul FLOP/s of this process's threads.
"""

from __future__ import annotations

import time

import torch


def _decoders(config):
    """[(decoder config, copies)]: a Decoder config once, a PT-MoE config's track config n_tracks times."""
    if hasattr(config, "n_tracks"):
        return [(config.track, config.n_tracks)]
    return [(config, 1)]


def matmul_params(config) -> int:
    n = config.param_count(active=True)
    track = _decoders(config)[0][0]
    if not track.tie_embeddings:
        n -= track.vocab_size * track.dim
    return n


def attention_flops_per_token(config, seq_len: int) -> int:
    total = 0
    for dec, copies in _decoders(config):
        per_layer = [dec.n_heads * dec.attn_head_dim * min(spec.window or seq_len, seq_len) for spec in dec.layers]
        total += copies * 12 * sum(per_layer)
    return total


def flops_per_token(config, seq_len: int) -> int:
    return 6 * matmul_params(config) + attention_flops_per_token(config, seq_len)


_PEAK_CACHE: dict[tuple[int, str], float] = {}


def measure_peak_flops(size: int = 1024, seconds: float = 0.5, dtype: torch.dtype = torch.float32) -> float:
    """Best FLOP/s of a [size, size] @ [size, size] matmul over `seconds` (cached per thread count and dtype)."""
    key = (torch.get_num_threads(), str(dtype))
    if key not in _PEAK_CACHE:
        a = torch.randn(size, size, dtype=dtype)
        b = torch.randn(size, size, dtype=dtype)
        a @ b                                                   # warm-up
        best, deadline = 0.0, time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            t = time.perf_counter()
            a @ b
            best = max(best, 2 * size ** 3 / (time.perf_counter() - t))
        _PEAK_CACHE[key] = best
    return _PEAK_CACHE[key]


def mfu(flops_token: int, tokens_per_second: float, peak_flops: float) -> float:
    return flops_token * tokens_per_second / peak_flops
