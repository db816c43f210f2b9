"""A GGUF file of a supported family -> a Hugging Face state dict and config.json-like dict.

llama.cpp's converter changes four things, undone here (then checkpoint/families.py maps the HF form):
1. names: `blk.{i}.attn_q.weight` for `model.layers.{i}.self_attn.q_proj.weight`, and so on (Gemma's norms
   and MoE experts have names of their own);
2. Q and K rows of 'llama' files (Llama, Mistral, Mixtral): it permutes each head's rows so that its
   adjacent-pair RoPE computes what Hugging Face's rotate-half RoPE computes; `unpermute_rope_rows` reverses
   it (the other families use the rotate-half layout in llama.cpp too, and are stored as they are);
3. metadata: the config lives in `{arch}.*` keys, not a config.json; rotary scaling as stored frequency
   factors (`rope_freqs`, Phi-3's `rope_factors_short`) rather than the formula's parameters;
4. Gemma's RMSNorm weights are stored with the 1 already added (so they are used as they are).
"""

from __future__ import annotations

import os
import re
from typing import Any

import torch

from openafm.checkpoint.gguf.dequant import one_thread
from openafm.checkpoint.gguf.reader import GGUFFile, read_gguf
from openafm.checkpoint.gguf.types import GGMLType
from openafm.errors import CheckpointError

# general.architecture -> the model_type its config becomes ('llama' with experts becomes 'mixtral')
ARCHITECTURES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "gemma2": "gemma2",
                 "gemma3": "gemma3_text", "phi3": "phi3", "qwen2moe": "qwen2_moe", "qwen3moe": "qwen3_moe"}
SUPPORTED_ARCHITECTURES = tuple(ARCHITECTURES)
PERMUTED = ("llama",)     # architectures whose Q/K rows llama.cpp's converter permutes (Mistral, Mixtral: 'llama')

GLOBAL_NAMES = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
                "output.weight": "lm_head.weight"}
LAYER_NAMES = {  # blk.{i}.<GGUF> -> model.layers.{i}.<Hugging Face>
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight", "attn_qkv.weight": "self_attn.qkv_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias", "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
    "ffn_gate_inp.weight": "mlp.gate.weight",
    "ffn_gate_exps.weight": "mlp.experts.gate_proj", "ffn_up_exps.weight": "mlp.experts.up_proj",
    "ffn_down_exps.weight": "mlp.experts.down_proj",
    "ffn_gate_inp_shexp.weight": "mlp.shared_expert_gate.weight",
    "ffn_gate_shexp.weight": "mlp.shared_expert.gate_proj.weight",
    "ffn_up_shexp.weight": "mlp.shared_expert.up_proj.weight",
    "ffn_down_shexp.weight": "mlp.shared_expert.down_proj.weight",
}
GEMMA_NAMES = {"post_attention_norm.weight": "post_attention_layernorm.weight",
               "ffn_norm.weight": "pre_feedforward_layernorm.weight",
               "post_ffw_norm.weight": "post_feedforward_layernorm.weight"}
ROPE_FACTORS = ("rope_freqs.weight", "rope_factors_short.weight", "rope_factors_long.weight")
_LAYER_TENSOR = re.compile(r"blk\.(\d+)\.(.+)")


def load_gguf_hf(path: str | os.PathLike, dtype: torch.dtype = torch.float32,
                 keep: frozenset[GGMLType] = frozenset()
                 ) -> tuple[dict[str, torch.Tensor], dict[str, Any], dict[str, GGMLType]]:
    """-> (state dict in Hugging Face names, torch shapes [out, in]; HF config.json-like dict; {name: type} of
    the matrices kept as stored).

    Matrices stored in a type of `keep` stay as uint8 rows [out, row bytes] (views of the read-only mapping;
    Q/K rows of permuted files are un-permuted copies), stacked experts as [E, rows, row bytes]; everything else
    is dequantized to `dtype`.
    `lm_head.weight` is present only if the file has `output.weight` (else `tie_word_embeddings` is True)."""
    if not dtype.is_floating_point:
        raise ValueError(f"dtype {dtype} is not a floating-point dtype; weights load as float32, bfloat16, ...")
    gguf = read_gguf(path)
    config = hf_config(gguf)
    arch = gguf.metadata["general.architecture"]
    names = {g: hf_name(g, gguf) for g in gguf.tensors if g not in ROPE_FACTORS}
    rope_heads = ({"q_proj": config["num_attention_heads"], "k_proj": config["num_key_value_heads"]}
                  if arch in PERMUTED else {})
    state: dict[str, torch.Tensor] = {}
    kept: dict[str, GGMLType] = {}
    with one_thread():  # many mid-sized ops: fastest and steadiest on one thread (see dequant.one_thread)
        for gguf_name, name in names.items():
            info = gguf.info(gguf_name)
            if info.type in keep and len(info.shape) in (2, 3):
                weight = gguf.raw(gguf_name).view(*info.torch_shape[:-1], -1)   # uint8 [(E,) out, row bytes]
                kept[name] = info.type
            else:
                weight = gguf.dequantize(gguf_name).view(info.torch_shape)   # float32
            n_heads = rope_heads.get(name.rsplit(".", 2)[-2])     # 'q_proj' in '...self_attn.q_proj.weight'
            if n_heads is not None:
                weight = unpermute_rope_rows(weight, n_heads)
            state[name] = weight if dtype == torch.float32 or name in kept else weight.to(dtype)
    _stack_experts(state, kept, gguf.path)
    for name in [n for n in state if n.endswith("shared_expert_gate.weight")]:
        state[name] = state[name].reshape(1, -1)                   # llama.cpp keeps Qwen2-MoE's gate as a vector
    return state, config, kept


def unpermute_rope_rows(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's Q/K row permutation: [n_heads * head_dim, in] -> the same shape, HF row order.

    Within each head llama.cpp stores row pairs (i, i + head_dim/2) next to each other; Hugging Face
    keeps the two halves apart. (A bias [n_heads * head_dim] is a matrix of one column.)"""
    if weight.ndim == 1:
        return unpermute_rope_rows(weight[:, None], n_heads)[:, 0]
    out_features, in_features = weight.shape
    half = out_features // n_heads // 2
    return (weight.reshape(n_heads, half, 2, in_features)   # [H, D/2, 2, in]
            .transpose(1, 2)                               # [H, 2, D/2, in]
            .reshape(out_features, in_features))


def hf_name(gguf_name: str, gguf: GGUFFile) -> str:
    if gguf_name in GLOBAL_NAMES:
        return GLOBAL_NAMES[gguf_name]
    gemma = gguf.metadata.get("general.architecture") in ("gemma2", "gemma3")
    match = _LAYER_TENSOR.fullmatch(gguf_name)
    if match:
        part = match.group(2)
        mapped = GEMMA_NAMES.get(part) if gemma else None
        if gguf.metadata.get("general.architecture") == "phi3" and part == "ffn_up.weight":
            mapped = "mlp.gate_up_proj.weight"                      # Phi-3 keeps gate and up fused
        mapped = mapped or LAYER_NAMES.get(part)
        if mapped:
            return f"model.layers.{match.group(1)}.{mapped}"
    raise CheckpointError(f"{gguf.path}: tensor {gguf_name!r} has no place in a "
                          f"{gguf.metadata.get('general.architecture')} model; expected {sorted(GLOBAL_NAMES)}, "
                          f"blk.N.{{{', '.join(LAYER_NAMES)}}}")


def _stack_experts(state: dict[str, torch.Tensor], kept: dict[str, GGMLType], path) -> None:
    """[E, I, D] gate and up experts -> one [E, 2I, D] `experts.gate_up_proj` (the stacked HF form); kept blocks
    stay blocks ([E, 2I, row bytes]) when gate and up share a type."""
    for name in [n for n in state if n.endswith("mlp.experts.gate_proj")]:
        prefix = name[: -len("gate_proj")]
        types = kept.pop(name, None), kept.pop(prefix + "up_proj", None)
        if types[0] != types[1]:
            raise CheckpointError(f"{path}: {prefix}gate and up experts are stored in different types "
                                  f"({types[0]}, {types[1]}); load it with weights='float32'")
        state[prefix + "gate_up_proj"] = torch.cat([state.pop(name), state.pop(prefix + "up_proj")], 1)
        if types[0] is not None:
            kept[prefix + "gate_up_proj"] = types[0]


def hf_config(gguf: GGUFFile) -> dict[str, Any]:
    """The HF config.json fields of the file's model, from its `{arch}.*` metadata and its tensors."""
    meta = gguf.metadata
    arch = meta.get("general.architecture")
    if arch not in ARCHITECTURES:
        raise CheckpointError(f"{gguf.path}: general.architecture {arch!r} is not supported "
                              f"(supported: {', '.join(SUPPORTED_ARCHITECTURES)})")
    key = _Keys(gguf, arch)
    hidden, n_heads = key.integer("embedding_length"), key.integer("attention.head_count")
    head_dim = key.integer("attention.key_length", hidden // n_heads)
    if key.integer("attention.value_length", head_dim) != head_dim:
        raise CheckpointError(f"{gguf.path}: {arch}.attention.value_length differs from key_length {head_dim}")
    if key.integer("rope.dimension_count", head_dim) != head_dim:
        raise CheckpointError(f"{gguf.path}: {arch}.rope.dimension_count = {meta[f'{arch}.rope.dimension_count']} "
                              f"rotates part of each head (head_dim {head_dim}); partial RoPE is not supported")
    vocab_size = gguf.info("token_embd.weight").torch_shape[0]
    if key.integer("vocab_size", vocab_size) != vocab_size:
        raise CheckpointError(f"{gguf.path}: {arch}.vocab_size = {meta[f'{arch}.vocab_size']} but token_embd.weight "
                              f"has {vocab_size} rows")
    model_type = ARCHITECTURES[arch]
    experts = key.integer("expert_count", 0)
    if arch == "llama" and experts:
        model_type = "mixtral"
    config: dict[str, Any] = {
        "model_type": model_type, "hidden_size": hidden, "intermediate_size": key.integer("feed_forward_length", 0),
        "num_hidden_layers": key.integer("block_count"), "num_attention_heads": n_heads,
        "num_key_value_heads": key.integer("attention.head_count_kv", n_heads), "head_dim": head_dim,
        "rms_norm_eps": float(key.need("attention.layer_norm_rms_epsilon")),
        "rope_theta": float(meta.get(f"{arch}.rope.freq_base", 10000.0)), "vocab_size": vocab_size,
        "max_position_embeddings": key.integer("context_length"),
        "tie_word_embeddings": "output.weight" not in gguf.tensors, "hidden_act": "silu",
    }
    window = meta.get(f"{arch}.attention.sliding_window")
    if window:
        config["sliding_window"] = int(window)
    config |= _moe_keys(key, model_type, experts)
    config |= _gemma_keys(key, arch, hidden, n_heads, head_dim)
    config |= _rope_keys(gguf, key, arch, head_dim)
    for hf_key, gguf_key in (("bos_token_id", "bos_token_id"), ("eos_token_id", "eos_token_id"),
                             ("pad_token_id", "padding_token_id")):
        if f"tokenizer.ggml.{gguf_key}" in meta:
            config[hf_key] = meta[f"tokenizer.ggml.{gguf_key}"]
    return config


class _Keys:
    """`{arch}.*` metadata lookups that name the file and key when a value is missing or malformed."""

    def __init__(self, gguf: GGUFFile, arch: str):
        self.gguf, self.arch = gguf, arch

    def need(self, key: str) -> Any:
        if f"{self.arch}.{key}" not in self.gguf.metadata:
            raise CheckpointError(f"{self.gguf.path}: metadata key {self.arch}.{key!r} is missing")
        return self.gguf.metadata[f"{self.arch}.{key}"]

    def integer(self, key: str, default: int | None = None) -> int:
        value = self.need(key) if default is None else self.gguf.metadata.get(f"{self.arch}.{key}", default)
        if not isinstance(value, int) or isinstance(value, bool):
            raise CheckpointError(f"{self.gguf.path}: metadata {self.arch}.{key} = {value!r} is not a single "
                                  f"integer (per-layer values are not supported)")
        return value


def _moe_keys(key: _Keys, model_type: str, experts: int) -> dict[str, Any]:
    if not experts:
        if model_type in ("qwen2_moe", "qwen3_moe"):
            raise CheckpointError(f"{key.gguf.path}: {key.arch}.expert_count is missing or 0")
        return {}
    used = key.integer("expert_used_count")
    if model_type == "mixtral":
        return {"num_local_experts": experts, "num_experts_per_tok": used}
    # llama.cpp renormalises Qwen3-MoE's top-k weights and not Qwen2-MoE's; a layer without a router is dense
    n_layers = key.integer("block_count")
    dense = [i for i in range(n_layers) if f"blk.{i}.ffn_gate_inp.weight" not in key.gguf.tensors]
    out = {"mlp_only_layers": dense, "decoder_sparse_step": 1,"num_experts": experts, "num_experts_per_tok": used, "norm_topk_prob": model_type == "qwen3_moe",
           "moe_intermediate_size": key.integer("expert_feed_forward_length")}
    if model_type == "qwen2_moe":
        out["shared_expert_intermediate_size"] = key.integer("expert_shared_feed_forward_length")
    return out


def _gemma_keys(key: _Keys, arch: str, hidden: int, n_heads: int, head_dim: int) -> dict[str, Any]:
    if arch not in ("gemma2", "gemma3"):
        return {}
    meta = key.gguf.metadata
    # GGUF does not store query_pre_attn_scalar; llama.cpp uses dim / heads for the 27B models, else head_dim
    n_layers = key.integer("block_count")
    big = (arch, n_layers) in (("gemma2", 46), ("gemma3", 62))
    out = {"hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": hidden // n_heads if big else head_dim,
           "attn_logit_softcapping": meta.get(f"{arch}.attn_logit_softcapping"),
           "final_logit_softcapping": meta.get(f"{arch}.final_logit_softcapping")}
    if arch == "gemma3":
        # llama.cpp: local layers rotate with base 10000, and every 6th layer is global
        pattern = meta.get("gemma3.attention.sliding_window_pattern", 6)
        if not isinstance(pattern, int):
            raise CheckpointError(f"{key.gguf.path}: gemma3.attention.sliding_window_pattern = {pattern!r}: only a "
                                  f"period (one global layer every N) is supported")
        out |= {"rope_local_base_freq": 10000.0, "sliding_window_pattern": pattern,
                "attn_logit_softcapping": None, "final_logit_softcapping": None}
    return out


def _rope_keys(gguf: GGUFFile, key: _Keys, arch: str, head_dim: int) -> dict[str, Any]:
    """Rotary scaling as HF's rope_scaling dict; stored frequency factors as the 'factors' kind."""
    meta = gguf.metadata
    scaling = meta.get(f"{arch}.rope.scaling.type", "none")
    original = meta.get(f"{arch}.rope.scaling.original_context_length")
    stored = next((n for n in ("rope_freqs.weight", "rope_factors_short.weight") if n in gguf.tensors), None)
    if stored is not None:
        factors = gguf.dequantize(stored).tolist()
        if len(factors) != head_dim // 2:
            raise CheckpointError(f"{gguf.path}: {stored} has {len(factors)} factors, head_dim {head_dim} needs "
                                  f"{head_dim // 2}")
        rope = {"rope_type": "factors", "factors": factors, "source": stored}
        if stored == "rope_factors_short.weight":          # Phi-3 LongRoPE: short factors, capped context
            rope |= {"attention_factor": float(meta.get(f"{arch}.rope.scaling.attn_factor", 1.0)),
                     "original_max_position_embeddings": int(original or key.integer("context_length"))}
        return {"rope_scaling": rope}
    if scaling in ("none", None):
        return {}
    if scaling == "linear":
        return {"rope_scaling": {"rope_type": "linear", "factor": float(key.need("rope.scaling.factor"))}}
    if scaling == "yarn":
        return {"rope_scaling": {"rope_type": "yarn", "factor": float(key.need("rope.scaling.factor")),
                                 "original_max_position_embeddings": int(original or 0) or None}}
    raise CheckpointError(f"{gguf.path}: {arch}.rope.scaling.type {scaling!r} is not supported "
                          f"(supported: none, linear, yarn, and stored frequency factors)")
