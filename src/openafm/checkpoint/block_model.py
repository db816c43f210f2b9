"""A GGUF model whose matrices stay in the file's block formats (weights="native"), any supported family.

Q8_0, Q4_0 and Q4_1 matrices become nn.block_linear layers holding the file's bytes (the fused q/k/v and
gate/up rows are the parts' rows, concatenated; parts stored in different types stay apart in an
nn.stacked_linear layer); norms, biases, mixture-of-experts tensors and matrices of any other type are float32
(the type counts are in the source string, so what was dequantized is visible). Decoding reads the blocks
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
from openafm.checkpoint.family_weights import concatenate, state_dict_from_hf
from openafm.checkpoint.gguf import GGMLType, load_gguf_hf
from openafm.errors import CheckpointError
from openafm.models.build import build_model
from openafm.models.decoder import CausalLM
from openafm.nn.block_linear import BLOCK, BlockEmbedding, BlockLinear
from openafm.nn.linear import Linear
from openafm.nn.packed_kernel import BLOCK_BYTES, Activations, WeightFormat, check_cpu
from openafm.nn.stacked_linear import StackedLinear
from openafm.nn.packed_model import module_path, set_module

NATIVE_TYPES = {GGMLType.Q8_0: WeightFormat.Q8_0, GGMLType.Q4_0: WeightFormat.Q4_0, GGMLType.Q4_1: WeightFormat.Q4_1}


def load_block_model(path: Path, activations: Activations = Activations.FLOAT32) -> tuple[CausalLM, str]:
    """-> (the model, a summary of its weight types such as "Q4_1 x 210, Q8_0 x 1, F32 x 61")."""
    check_cpu("weights='native'", "weights='float32' (dequantized at load)")
    hf_sd, hf_config, kept = load_gguf_hf(path, keep=frozenset(NATIVE_TYPES))
    config = config_from_hf(hf_config, str(path))
    state, provenance = state_dict_from_hf(hf_sd, config, str(path), join=_join_keeping(kept))
    model = build_model(config, device="meta")
    for name in [n for n, v in state.items() if isinstance(v, MixedParts)]:
        parts = state.pop(name)
        layer = StackedLinear([_part_layer(t, kept.get(n), activations) for n, t in zip(provenance[name], parts)])
        set_module(model, module_path(name), layer)
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
        layer = (BlockEmbedding(blocks, fmt, in_features, activations) if isinstance(original, torch.nn.Embedding)
                 else BlockLinear(blocks, fmt, in_features, activations))
        set_module(model, module_path(name), layer)
    missing, unexpected = model.load_state_dict(state, assign=True, strict=False)
    missing = [k for k in missing if not k.endswith(".blocks") and ".parts." not in k]
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


class MixedParts(list):
    """The parts of a fused matrix stored in different types, kept apart (a StackedLinear holds them)."""


def _join_keeping(kept: dict[str, GGMLType]):
    """family_weights' join for a block model: parts of one type are concatenated (blocks row-wise), parts of
    different types (llama.cpp's Q4_K_M: V in another type than Q and K) stay apart."""
    def join(names: list[str], parts: list[torch.Tensor], dim: int):
        if len({kept.get(n) for n in names}) > 1:
            if dim != 0:
                raise CheckpointError(f"{names}: parts stored in different types cannot be joined along dim {dim}")
            return MixedParts(parts)
        return concatenate(names, parts, dim)
    return join


def _part_layer(weight: torch.Tensor, stored: GGMLType | None, activations: Activations) -> torch.nn.Module:
    """One part of a StackedLinear: its blocks as stored, or a float32 Linear."""
    if stored is None:
        layer = Linear(weight.shape[1], weight.shape[0], bias=False, device="meta")
        layer.weight = torch.nn.Parameter(weight.float(), requires_grad=False)
        return layer
    fmt = NATIVE_TYPES[stored]
    return BlockLinear(weight.clone(), fmt, weight.shape[1] // BLOCK_BYTES[fmt] * BLOCK, activations)
