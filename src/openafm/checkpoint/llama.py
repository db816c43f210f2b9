"""Llama-family weights (Hugging Face names and layout) -> an openafm decoder plan and state dict.

Used by both the GGUF importer (after dequantizing and un-permuting) and the Hugging Face importer.
"""

from __future__ import annotations

from typing import Any

import torch

from openafm.errors import CheckpointError
from openafm.models.plan import DecoderConfig, LayerSpec

SUPPORTED_MODEL_TYPES = ("llama",)


def config_from_hf(hf: dict[str, Any], source: str) -> DecoderConfig:
    """An HF config.json dict (or the GGUF importer's equivalent) -> DecoderConfig (all global RoPE)."""
    model_type = hf.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise CheckpointError(f"{source}: model_type {model_type!r} is not supported; supported: {SUPPORTED_MODEL_TYPES}")
    if hf.get("sliding_window"):
        raise CheckpointError(f"{source}: sliding_window={hf['sliding_window']!r} is not supported by the Llama importer")
    # transformers 4.x writes rope_theta (+ rope_scaling); 5.x writes rope_parameters {rope_theta, rope_type}.
    rope = dict(hf.get("rope_parameters") or {})
    rope_type = rope.get("rope_type", (hf.get("rope_scaling") or {}).get("rope_type", "default"))
    if rope_type != "default" or (hf.get("rope_scaling") and hf["rope_scaling"].get("rope_type", "default") != "default"):
        raise CheckpointError(f"{source}: rope_type {rope_type!r} (rope scaling) is not supported by the Llama "
                              f"importer; supported: 'default'")
    rope_theta = rope.get("rope_theta", hf.get("rope_theta", 10000.0))
    if hf.get("attention_bias") or hf.get("mlp_bias"):
        raise CheckpointError(f"{source}: attention/MLP biases are not supported by the Llama importer")
    if hf.get("hidden_act", "silu") != "silu":
        raise CheckpointError(f"{source}: hidden_act={hf['hidden_act']!r} is not supported (only silu)")
    try:
        n_heads = hf["num_attention_heads"]
        return DecoderConfig(
            vocab_size=hf["vocab_size"], dim=hf["hidden_size"], n_heads=n_heads,
            n_kv_heads=hf.get("num_key_value_heads", n_heads), head_dim=hf.get("head_dim"),
            ffn_hidden=hf["intermediate_size"], norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
            rope_theta=float(rope_theta),
            max_seq_len=hf.get("max_position_embeddings", 2048),
            tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
            layers=[LayerSpec() for _ in range(hf["num_hidden_layers"])])
    except KeyError as e:
        raise CheckpointError(f"{source}: config lacks the key {e.args[0]!r}") from None


def state_dict_from_hf(hf_sd: dict[str, torch.Tensor], config: DecoderConfig, source: str) -> dict[str, torch.Tensor]:
    """HF Llama tensor names -> openafm names, fusing q/k/v and gate/up. Missing or extra tensors raise."""
    remaining = dict(hf_sd)

    def take(name: str) -> torch.Tensor:
        if name not in remaining:
            raise CheckpointError(f"{source}: tensor {name!r} is missing")
        return remaining.pop(name)

    out = {"embed.weight": take("model.embed_tokens.weight"), "norm.weight": take("model.norm.weight")}
    if config.tie_embeddings:
        head = remaining.pop("lm_head.weight", None)
        if head is not None and not torch.equal(head, out["embed.weight"]):
            raise CheckpointError(f"{source}: tie_word_embeddings is set but lm_head.weight differs from the embeddings")
    else:
        out["lm_head.weight"] = take("lm_head.weight")
    for i in range(config.n_layers):
        p = f"model.layers.{i}."
        out[f"layers.{i}.attn_norm.weight"] = take(p + "input_layernorm.weight")
        out[f"layers.{i}.ffn_norm.weight"] = take(p + "post_attention_layernorm.weight")
        out[f"layers.{i}.attn.qkv.weight"] = torch.cat(
            [take(p + f"self_attn.{x}_proj.weight") for x in "qkv"], dim=0)
        out[f"layers.{i}.attn.out.weight"] = take(p + "self_attn.o_proj.weight")
        out[f"layers.{i}.ffn.gate_up.weight"] = torch.cat(
            [take(p + "mlp.gate_proj.weight"), take(p + "mlp.up_proj.weight")], dim=0)
        out[f"layers.{i}.ffn.down.weight"] = take(p + "mlp.down_proj.weight")
    extra = sorted(k for k in remaining if not k.endswith("rotary_emb.inv_freq"))
    if extra:
        raise CheckpointError(f"{source}: unexpected tensors {extra[:5]}{' ...' if len(extra) > 5 else ''}")
    return out
