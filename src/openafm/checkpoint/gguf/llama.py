"""A Llama-family GGUF -> a Hugging Face Llama state dict and config.json-like dict.

llama.cpp's converter changes three things, undone here:
1. names: `blk.{i}.attn_q.weight` for `model.layers.{i}.self_attn.q_proj.weight`, and so on;
2. Q and K rows: it permutes each head's rows so that its RoPE (which rotates adjacent pairs) computes
   what Hugging Face's rotate-half RoPE computes on the original rows; `unpermute_rope_rows` reverses it;
3. metadata: the config lives in `{arch}.*` keys, not a config.json.
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

SUPPORTED_ARCHITECTURES = ("llama",)

GLOBAL_NAMES = {  # GGUF name -> Hugging Face name
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
LAYER_NAMES = {  # blk.{i}.<GGUF> -> model.layers.{i}.<Hugging Face>
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_LAYER_TENSOR = re.compile(r"blk\.(\d+)\.(.+)")


def load_llama_gguf(path: str | os.PathLike,
                    dtype: torch.dtype = torch.float32) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """-> (state dict in Hugging Face Llama names, torch shapes [out, in]; HF config.json-like dict).

    `lm_head.weight` is present only if the file has `output.weight` (else `tie_word_embeddings` is True).
    """
    if not dtype.is_floating_point:
        raise ValueError(f"dtype {dtype} is not a floating-point dtype; weights load as float32, bfloat16, ...")
    state, config, _ = _load(path, dtype, frozenset())
    return state, config


def load_llama_gguf_blocks(path: str | os.PathLike, keep: frozenset[GGMLType]
                           ) -> tuple[dict[str, torch.Tensor], dict[str, Any], dict[str, GGMLType]]:
    """Like load_llama_gguf, but matrices stored in a type of `keep` stay as stored: uint8 rows
    [out, in / block * block bytes] (views of the read-only file mapping: copy before writing; the Q/K
    rows are un-permuted copies, like the float path).
    -> (state dict, config, {name: type} of the tensors kept as blocks); the rest is float32."""
    return _load(path, torch.float32, keep)


def _load(path, dtype: torch.dtype, keep: frozenset[GGMLType]):
    gguf = read_gguf(path)
    config = llama_config(gguf)
    names = {gguf_name: hf_name(gguf_name, gguf) for gguf_name in gguf.tensors}
    _check_tensors(gguf, config, names)
    rope_heads = {"q_proj": config["num_attention_heads"], "k_proj": config["num_key_value_heads"]}
    state: dict[str, torch.Tensor] = {}
    kept: dict[str, GGMLType] = {}
    with one_thread():  # see one_thread: many mid-sized ops, fastest and steadiest on one thread
        for gguf_name, name in names.items():
            info = gguf.info(gguf_name)
            if info.type in keep and len(info.shape) == 2:
                weight = gguf.raw(gguf_name).view(info.torch_shape[0], -1)   # uint8 [out, row bytes], the mapping
                kept[name] = info.type
            else:
                weight = gguf.dequantize(gguf_name)                                 # [out, in] float32
            n_heads = rope_heads.get(name.rsplit(".", 2)[-2])     # 'q_proj' in '...self_attn.q_proj.weight'
            if n_heads is not None:
                weight = unpermute_rope_rows(weight, n_heads)
            state[name] = weight if dtype == torch.float32 or name in kept else weight.to(dtype)
    return state, config, kept


def unpermute_rope_rows(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's Q/K row permutation: [n_heads * head_dim, in] -> the same shape, HF row order.

    Within each head llama.cpp stores row pairs (i, i + head_dim/2) next to each other; Hugging Face
    keeps the two halves apart.
    """
    out_features, in_features = weight.shape
    half = out_features // n_heads // 2
    return (weight.reshape(n_heads, half, 2, in_features)   # [H, D/2, 2, in]
            .transpose(1, 2)                               # [H, 2, D/2, in]
            .reshape(out_features, in_features))


def hf_name(gguf_name: str, gguf: GGUFFile) -> str:
    if gguf_name in GLOBAL_NAMES:
        return GLOBAL_NAMES[gguf_name]
    match = _LAYER_TENSOR.fullmatch(gguf_name)
    if match and match.group(2) in LAYER_NAMES:
        return f"model.layers.{match.group(1)}.{LAYER_NAMES[match.group(2)]}"
    if gguf_name == "rope_freqs.weight":
        raise CheckpointError(f"{gguf.path}: tensor 'rope_freqs.weight' (Llama 3 style per-frequency RoPE "
                              f"scaling) is not supported")
    raise CheckpointError(f"{gguf.path}: tensor {gguf_name!r} has no place in a Llama model; expected "
                          f"{sorted(GLOBAL_NAMES)} and blk.N.{{{', '.join(LAYER_NAMES)}}}")


def llama_config(gguf: GGUFFile) -> dict[str, Any]:
    """The HF config.json fields of a Llama model, from the file's `{arch}.*` metadata and its tensors."""
    meta = gguf.metadata
    arch = meta.get("general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise CheckpointError(f"{gguf.path}: general.architecture {arch!r} is not supported "
                              f"(supported: {', '.join(SUPPORTED_ARCHITECTURES)})")

    def need(key: str) -> Any:
        if f"{arch}.{key}" not in meta:
            raise CheckpointError(f"{gguf.path}: metadata key {arch}.{key!r} is missing")
        return meta[f"{arch}.{key}"]

    def integer(key: str, default: int | None = None) -> int:
        value = need(key) if default is None else meta.get(f"{arch}.{key}", default)
        if not isinstance(value, int) or isinstance(value, bool):
            raise CheckpointError(f"{gguf.path}: metadata {arch}.{key} = {value!r} is not a single integer")
        return value

    if meta.get(f"{arch}.expert_count", 0):
        raise CheckpointError(f"{gguf.path}: {arch}.expert_count = {meta[f'{arch}.expert_count']}: "
                              f"mixture-of-experts Llama files are not supported")
    hidden, n_heads = integer("embedding_length"), integer("attention.head_count")
    head_dim = integer("attention.key_length", hidden // n_heads)
    if integer("attention.value_length", head_dim) != head_dim:
        raise CheckpointError(f"{gguf.path}: {arch}.attention.value_length differs from key_length {head_dim}")
    if integer("rope.dimension_count", head_dim) != head_dim:
        raise CheckpointError(f"{gguf.path}: {arch}.rope.dimension_count = {meta[f'{arch}.rope.dimension_count']} "
                              f"rotates part of each head (head_dim {head_dim}); partial RoPE is not supported")
    vocab_size = gguf.info("token_embd.weight").torch_shape[0]
    if integer("vocab_size", vocab_size) != vocab_size:
        raise CheckpointError(f"{gguf.path}: {arch}.vocab_size = {meta[f'{arch}.vocab_size']} but token_embd.weight "
                              f"has {vocab_size} rows")

    config: dict[str, Any] = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": hidden,
        "intermediate_size": integer("feed_forward_length"),
        "num_hidden_layers": integer("block_count"),
        "num_attention_heads": n_heads,
        "num_key_value_heads": integer("attention.head_count_kv", n_heads),
        "head_dim": head_dim,
        "rms_norm_eps": float(need("attention.layer_norm_rms_epsilon")),
        "rope_theta": float(meta.get(f"{arch}.rope.freq_base", 10000.0)),
        "vocab_size": vocab_size,
        "max_position_embeddings": integer("context_length"),
        "tie_word_embeddings": "output.weight" not in gguf.tensors,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
    }
    scaling = meta.get(f"{arch}.rope.scaling.type", "none")
    if scaling != "none":  # passed on, so that a consumer without RoPE scaling can refuse it by name
        config["rope_scaling"] = {
            "rope_type": scaling,
            "factor": float(meta.get(f"{arch}.rope.scaling.factor", 1.0)),
            "original_max_position_embeddings": meta.get(f"{arch}.rope.scaling.original_context_length"),
        }
    for hf_key, gguf_key in (("bos_token_id", "bos_token_id"), ("eos_token_id", "eos_token_id"),
                             ("pad_token_id", "padding_token_id")):
        if f"tokenizer.ggml.{gguf_key}" in meta:
            config[hf_key] = meta[f"tokenizer.ggml.{gguf_key}"]
    return config


def _check_tensors(gguf: GGUFFile, config: dict[str, Any], names: dict[str, str]) -> None:
    """Every tensor a Llama of this config needs is present with its shape; nothing else is."""
    hidden, ffn, head_dim = config["hidden_size"], config["intermediate_size"], config["head_dim"]
    q_rows, kv_rows = config["num_attention_heads"] * head_dim, config["num_key_value_heads"] * head_dim
    expected = {"model.embed_tokens.weight": (config["vocab_size"], hidden), "model.norm.weight": (hidden,)}
    if not config["tie_word_embeddings"]:
        expected["lm_head.weight"] = (config["vocab_size"], hidden)
    for i in range(config["num_hidden_layers"]):
        layer = f"model.layers.{i}."
        expected |= {
            layer + "input_layernorm.weight": (hidden,),
            layer + "post_attention_layernorm.weight": (hidden,),
            layer + "self_attn.q_proj.weight": (q_rows, hidden),
            layer + "self_attn.k_proj.weight": (kv_rows, hidden),
            layer + "self_attn.v_proj.weight": (kv_rows, hidden),
            layer + "self_attn.o_proj.weight": (hidden, q_rows),
            layer + "mlp.gate_proj.weight": (ffn, hidden),
            layer + "mlp.up_proj.weight": (ffn, hidden),
            layer + "mlp.down_proj.weight": (hidden, ffn),
        }
    found = {hf: gguf.tensors[g].torch_shape for g, hf in names.items()}
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    wrong = [f"{name} {list(found[name])} (expected {list(shape)})"
             for name, shape in expected.items() if name in found and found[name] != shape]
    if missing or extra or wrong:
        raise CheckpointError(f"{gguf.path}: tensors do not fit a Llama of this config: missing {missing[:4]}, "
                              f"unexpected {extra[:4]}, wrong shapes {wrong[:4]}")
