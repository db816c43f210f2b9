"""A GGUF model whose matrices stay in the file's block formats (weights="native"), any supported family.

Matrices in a type the kernels read (NATIVE_TYPES: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, F16,
BF16) become nn.block_linear layers holding the file's bytes (the fused q/k/v and gate/up rows are the
parts' rows, concatenated; parts stored in different types stay apart in a BlockRows layer, as llama.cpp's
Q4_K_M stores V with more bits than Q and K); norms, biases, mixture-of-experts tensors and matrices of any
other type are float32 (the type counts are in the source string, so what was dequantized is visible).
Decoding reads the blocks
with float32 activations (weights="native") or int8 ones as llama.cpp does (weights="native-int8");
prefill dequantizes one matrix at a time.
"""

from __future__ import annotations

import collections
import ctypes
import gc
from pathlib import Path

import torch

from openafm.checkpoint.families import config_from_hf
from openafm.checkpoint.family_weights import check_fits, concatenate, state_dict_from_hf
from openafm.checkpoint.gguf import GGMLType, load_gguf_hf, read_gguf
from openafm.errors import CheckpointError
from openafm.models.build import build_model
from openafm.models.decoder import CausalLM
from openafm.nn.block_linear import BlockEmbedding, BlockLinear, BlockRows
from openafm.nn.moe import StoredExpert
from openafm.nn.packed_kernel import Activations, WeightFormat, check_cpu
from openafm.nn.packed_model import module_path, set_module

# Every GGUF matrix type the kernels read as stored (the formats share ggml's names).
NATIVE_TYPES = {GGMLType[f.name]: f for f in (WeightFormat.Q8_0, WeightFormat.Q4_0, WeightFormat.Q4_1, WeightFormat.Q5_0,
                                              WeightFormat.Q5_1, WeightFormat.Q4_K, WeightFormat.Q5_K,
                                              WeightFormat.Q6_K, WeightFormat.F16, WeightFormat.BF16)}


def load_block_model(path: Path, activations: Activations = Activations.FLOAT32) -> tuple[CausalLM, str]:
    """-> (the model, a summary of its weight types such as "Q4_1 x 210, Q8_0 x 1, F32 x 61")."""
    check_cpu("weights='native'", "weights='float32' (dequantized at load)")
    hf_sd, hf_config, kept = load_gguf_hf(path, keep=frozenset(NATIVE_TYPES))
    config = config_from_hf(hf_config, str(path))
    state, provenance = state_dict_from_hf(hf_sd, config, str(path), join=_join_keeping(kept, str(path)))
    model = build_model(config, device="meta")
    check_fits(state, provenance, {k: v.shape for k, v in model.state_dict().items()}, str(path))
    for name in [n for n, v in state.items() if isinstance(v, MixedParts)]:
        in_features = model.get_submodule(module_path(name)).weight.shape[1]
        layer = BlockRows([BlockLinear(blocks.clone(), NATIVE_TYPES[kept[n]], in_features, activations)
                           for n, blocks in zip(provenance[name], state.pop(name))])
        set_module(model, module_path(name), layer)
    for layer, experts in _stored_experts(state, provenance, kept, model, activations).items():
        model.get_submodule(f"layers.{layer}.ffn").store_experts(experts)
    formats = {name: NATIVE_TYPES[kept[parts[0]]] for name, parts in provenance.items()
               if name in state and parts[0] in kept}
    fused = {name for name in formats if len(provenance[name]) > 1}
    for name, fmt in formats.items():
        # A copy, unless fusing q/k/v or gate/up already made one: the model owns its bytes, not the mapping.
        blocks = state.pop(name)                                          # uint8 [out, row bytes]
        if name not in fused:
            blocks = blocks.clone()
        original = model.get_submodule(module_path(name))
        in_features = original.weight.shape[1]
        if isinstance(original, torch.nn.Embedding):
            layer = BlockEmbedding(blocks, fmt, in_features, activations)
        else:
            layer = BlockLinear(blocks, fmt, in_features, activations)
        set_module(model, module_path(name), layer)
    missing, unexpected = model.load_state_dict(state, assign=True, strict=False)
    missing = [k for k in missing if not k.endswith(".blocks") and ".parts." not in k and ".stored." not in k]
    if missing or unexpected:
        raise CheckpointError(f"{path}: weights do not fit the config: missing {missing[:5]}, "
                              f"unexpected {unexpected[:5]}")
    held = [_held_as(info) for info in read_gguf(path).tensors.values()]
    counts = collections.Counter([h for h in held if h in NATIVE_NAMES] + [h for h in held if h not in NATIVE_NAMES])
    del hf_sd, state
    release_free_memory()
    return model, ", ".join(f"{k} x {v}" for k, v in counts.most_common())


NATIVE_NAMES = {t.name for t in NATIVE_TYPES}


def _held_as(info) -> str:
    """How the native model holds one GGUF tensor, in the words of the source string."""
    if info.type in NATIVE_TYPES and len(info.shape) in (2, 3):
        return info.type.name
    return "F32" if info.type is GGMLType.F32 else f"{info.type.name} dequantized to F32"


def release_free_memory() -> None:
    """Hand the load's freed buffers back to the OS (glibc keeps freed heap pages otherwise; measured:
    ~30 MB of a 96 MB model). A no-op where the C library has no malloc_trim."""
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):
        pass


def _stored_experts(state: dict, provenance, kept: dict[str, GGMLType], model: torch.nn.Module,
                    activations: Activations) -> dict[int, list[StoredExpert]]:
    """Mixture-of-experts layers whose stacked experts were kept as blocks ([E, rows, row bytes], popped from
    `state`) -> {layer: one StoredExpert per expert, each matrix a BlockLinear of its own rows}."""
    out = {}
    for name in [n for n in state if n.endswith(".ffn.gate_up") and provenance[n][0] in kept]:
        layer = int(name.split(".")[1])
        down_name = name[: -len("gate_up")] + "down"
        if provenance[down_name][0] not in kept:
            raise CheckpointError(f"{down_name}: the experts' down matrices are stored in a type the kernels do not "
                                  f"read while gate/up are kept; load it with weights='float32'")
        moe = model.get_submodule(name.rsplit(".", 1)[0])
        gate_up, down = state.pop(name), state.pop(down_name)         # uint8 [E, 2H, bytes], [E, D, bytes]
        fmt_gu, fmt_d = NATIVE_TYPES[kept[provenance[name][0]]], NATIVE_TYPES[kept[provenance[down_name][0]]]
        out[layer] = [StoredExpert(BlockLinear(gate_up[e].clone(), fmt_gu, moe.dim, activations),
                                   BlockLinear(down[e].clone(), fmt_d, moe.hidden, activations))
                      for e in range(moe.n_experts)]
    return out


class MixedParts(list):
    """The blocks of a fused matrix's parts stored in different types, kept apart (a BlockRows holds them)."""


def _join_keeping(kept: dict[str, GGMLType], source: str):
    """family_weights' join for a block model: parts of one type are concatenated (blocks row-wise); parts in
    different types the kernels read stay apart (MixedParts); kept and dequantized parts cannot mix."""
    def join(names: list[str], parts: list[torch.Tensor], dim: int):
        types = [kept.get(n) for n in names]
        if len(set(types)) == 1:
            return concatenate(names, parts, dim)
        if None in types or dim != 0:
            stored = ", ".join(f"{n}: {t.name if t else 'float'}" for n, t in zip(names, types))
            raise CheckpointError(f"{source}: a fused matrix's parts are stored in types the kernels read and types "
                                  f"they do not ({stored}); load it with weights='float32'")
        return MixedParts(parts)
    return join
