"""A deliberately naive decoder forward: loops, explicit masks and manual softmax, written from the plan.

It shares no code with openafm.nn, so the optimized decoder (fused projections, SDPA, fast-path masks,
caches, prefill bypass) is checked against an independent statement of the same math.
"""

from __future__ import annotations

import math

import torch

from openafm.models.plan import AttentionKind, DecoderConfig


def naive_mask(t: int, window: int | None) -> torch.Tensor:
    m = torch.zeros(t, t, dtype=torch.bool)
    for q in range(t):
        for k in range(t):
            m[q, k] = k <= q and (window is None or q - k < window)
    return m


def naive_rope(x: torch.Tensor, theta: float) -> torch.Tensor:
    """x [H, T, Dh]: rotate pairs (i, i + Dh/2) by pos * theta^(-2i/Dh)."""
    h, t, dh = x.shape
    out = x.clone()
    for pos in range(t):
        for i in range(dh // 2):
            ang = pos * theta ** (-2 * i / dh)
            c, s = math.cos(ang), math.sin(ang)
            a, b = x[:, pos, i], x[:, pos, i + dh // 2]
            out[:, pos, i], out[:, pos, i + dh // 2] = a * c - b * s, b * c + a * s
    return out


def rms(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def naive_forward(config: DecoderConfig, sd: dict[str, torch.Tensor], ids: torch.Tensor) -> torch.Tensor:
    """ids [T] -> logits [T, V] in float64."""
    sd = {k: v.double() for k, v in sd.items()}
    hd, nh, nkv = config.attn_head_dim, config.n_heads, config.n_kv_heads
    x = sd["embed.weight"][ids]
    t = ids.shape[0]
    kv_of: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    for i, spec in enumerate(config.layers):
        p = f"layers.{i}."
        h = rms(x, sd[p + "attn_norm.weight"], config.norm_eps)
        if spec.owns_kv:
            w = sd[p + "attn.qkv.weight"]
            wq, wk, wv = w.split([nh * hd, nkv * hd, nkv * hd])
            k = (h @ wk.T).view(t, nkv, hd).transpose(0, 1)
            v = (h @ wv.T).view(t, nkv, hd).transpose(0, 1)
            if spec.attention is not AttentionKind.GLOBAL_NOPE:
                k = naive_rope(k, config.rope_theta)
            kv_of[i] = (k, v)
        else:
            wq = sd[p + "attn.q.weight"]
            k, v = kv_of[spec.kv_source]
        q = (h @ wq.T).view(t, nh, hd).transpose(0, 1)
        if spec.attention is not AttentionKind.GLOBAL_NOPE:
            q = naive_rope(q, config.rope_theta)
        k = k.repeat_interleave(nh // nkv, dim=0)
        v = v.repeat_interleave(nh // nkv, dim=0)
        scores = q @ k.transpose(1, 2) / math.sqrt(hd)
        scores = scores.masked_fill(~naive_mask(t, spec.window), float("-inf"))
        att = torch.exp(scores - scores.max(-1, keepdim=True).values)
        att = att / att.sum(-1, keepdim=True)
        o = (att @ v).transpose(0, 1).reshape(t, nh * hd)
        x = x + o @ sd[p + "attn.out.weight"].T
        h = rms(x, sd[p + "ffn_norm.weight"], config.norm_eps)
        gu = h @ sd[p + "ffn.gate_up.weight"].T
        g, u = gu.split(config.ffn_hidden, dim=-1)
        x = x + (g * torch.sigmoid(g) * u) @ sd[p + "ffn.down.weight"].T
    x = rms(x, sd["norm.weight"], config.norm_eps)
    head = sd["lm_head.weight"] if "lm_head.weight" in sd else sd["embed.weight"]
    return x @ head.T
