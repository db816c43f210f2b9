"""A Llama GGUF as a model whose matrices stay in the file's block formats (weights="native").

Matrices in a type the kernels read (NATIVE_TYPES: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, F16,
BF16) become nn.block_linear layers holding the file's bytes (the fused q/k/v and gate/up rows are the
parts' rows, concatenated); norms, and matrices of any other type, are float32 (the type counts are in
the source string, so what was dequantized is visible). Decoding reads the blocks
with float32 activations (weights="native") or int8 ones as llama.cpp does (weights="native-int8");
prefill dequantizes one matrix at a time.
"""

from __future__ import annotations

import collections
import ctypes
import gc
from pathlib import Path

import torch

from openafm.checkpoint.gguf import GGMLType, load_llama_gguf_blocks
from openafm.checkpoint.llama import config_from_hf, state_dict_from_hf
from openafm.errors import CheckpointError
from openafm.models.build import build_model
from openafm.models.decoder import CausalLM
from openafm.nn.block_linear import BlockEmbedding, BlockLinear, BlockRows
from openafm.nn.packed_kernel import Activations, WeightFormat, check_cpu
from openafm.nn.packed_model import module_path, set_module

# Every GGUF matrix type the kernels read as stored (the formats share ggml's names).
NATIVE_TYPES = {GGMLType[f.name]: f for f in (WeightFormat.Q8_0, WeightFormat.Q4_0, WeightFormat.Q4_1, WeightFormat.Q5_0,
                                              WeightFormat.Q5_1, WeightFormat.Q4_K, WeightFormat.Q5_K,
                                              WeightFormat.Q6_K, WeightFormat.F16, WeightFormat.BF16)}
FUSED_PARTS = {"attn.qkv": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
               "ffn.gate_up": ("mlp.gate_proj", "mlp.up_proj")}


def load_block_model(path: Path, activations: Activations = Activations.FLOAT32) -> tuple[CausalLM, str]:
    """-> (the model, a summary of its weight types such as "Q4_1 x 210, Q8_0 x 1, F32 x 61")."""
    check_cpu("weights='native'", "weights='float32' (dequantized at load)")
    hf_sd, hf_config, kept = load_llama_gguf_blocks(path, frozenset(NATIVE_TYPES))
    config = config_from_hf(hf_config, str(path))
    formats = _openafm_formats(kept, config.n_layers, str(path))
    parts = _take_mixed_parts(formats, hf_sd)
    state = state_dict_from_hf(hf_sd, config, str(path))
    fused = {name for name in formats if name.endswith(("attn.qkv.weight", "ffn.gate_up.weight"))}
    model = build_model(config, device="meta")
    for name, fmt in formats.items():
        # A copy, unless fusing q/k/v or gate/up already made one: the model owns its bytes, not the mapping.
        blocks = state.pop(name)                                          # uint8 [out, row bytes]
        if name not in fused:
            blocks = blocks.clone()
        original = model.get_submodule(module_path(name))
        in_features = original.weight.shape[1]
        if name in parts:       # q/k/v in different formats (a K-quant mix): one BlockLinear per part
            layer = BlockRows([BlockLinear(b.clone(), f, in_features, activations) for b, f in zip(parts[name], fmt)])
        elif isinstance(original, torch.nn.Embedding):
            layer = BlockEmbedding(blocks, fmt, in_features, activations)
        else:
            layer = BlockLinear(blocks, fmt, in_features, activations)
        set_module(model, module_path(name), layer)
    missing, unexpected = model.load_state_dict(state, assign=True, strict=False)
    missing = [k for k in missing if not k.endswith(".blocks")]
    if missing or unexpected:
        raise CheckpointError(f"{path}: weights do not fit the config: missing {missing[:5]}, "
                              f"unexpected {unexpected[:5]}")
    counts = collections.Counter(t.name for t in kept.values())
    counts["F32"] = sum(1 for v in hf_sd.values() if v.dtype == torch.float32)
    del hf_sd, state
    release_free_memory()
    return model, ", ".join(f"{k} x {v}" for k, v in counts.most_common())


def release_free_memory() -> None:
    """Hand the load's freed buffers back to the OS (glibc keeps freed heap pages otherwise; measured:
    ~30 MB of a 96 MB model). A no-op where the C library has no malloc_trim."""
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):
        pass


def _take_mixed_parts(formats: dict, hf_sd: dict[str, torch.Tensor]) -> dict[str, list[torch.Tensor]]:
    """For fused layers whose parts have different formats: openafm name -> the parts' blocks, each replaced in
    `hf_sd` by an empty uint8 [rows, 0] so that fusing concatenates nothing."""
    out = {}
    for name, fmt in formats.items():
        if isinstance(fmt, tuple):
            _, layer, *fused, _ = name.split(".")                        # "layers", "3", "attn", "qkv", "weight"
            keys = [f"model.layers.{layer}.{part}.weight" for part in FUSED_PARTS[".".join(fused)]]
            out[name] = [hf_sd[k] for k in keys]
            for k in keys:
                hf_sd[k] = torch.empty(hf_sd[k].shape[0], 0, dtype=torch.uint8)
    return out


def _openafm_formats(kept: dict[str, GGMLType], n_layers: int, source: str) -> dict:
    """openafm weight name -> block format, for the matrices kept as blocks; a fused layer whose parts are in
    different block formats maps to the parts' formats (a tuple). Kept and dequantized parts cannot mix."""
    out = {}
    if "model.embed_tokens.weight" in kept:
        out["embed.weight"] = NATIVE_TYPES[kept["model.embed_tokens.weight"]]
    if "lm_head.weight" in kept:
        out["lm_head.weight"] = NATIVE_TYPES[kept["lm_head.weight"]]
    for i in range(n_layers):
        p = f"model.layers.{i}."
        for ours, hf in (("attn.out", "self_attn.o_proj"), ("ffn.down", "mlp.down_proj")):
            if p + hf + ".weight" in kept:
                out[f"layers.{i}.{ours}.weight"] = NATIVE_TYPES[kept[p + hf + ".weight"]]
        for ours, parts in FUSED_PARTS.items():
            types = {part: kept.get(p + part + ".weight") for part in parts}
            if None in types.values() and len(set(types.values())) > 1:
                stored = ", ".join(f"{k}: {v.name if v else 'float'}" for k, v in types.items())
                raise CheckpointError(f"{source}: layer {i} stores {ours}'s parts in types the kernels read and types "
                                      f"they do not ({stored}); load it with weights='float32'")
            if len(set(types.values())) > 1:
                out[f"layers.{i}.{ours}.weight"] = tuple(NATIVE_TYPES[t] for t in types.values())
            elif types[parts[0]] is not None:
                out[f"layers.{i}.{ours}.weight"] = NATIVE_TYPES[types[parts[0]]]
    return out
