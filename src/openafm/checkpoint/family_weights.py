"""Hugging Face tensor names of every supported family -> openafm's state dict (fusing q/k/v, gate/up, experts).

The families name the same things differently: Phi-3 stores q/k/v and gate/up already fused; Gemma's
`post_attention_layernorm` normalises the attention output (Llama's is the norm before the FFN), and Gemma
stores each RMSNorm weight as an offset from 1; MoE experts come one tensor per expert (`experts.{e}.gate_proj`,
Mixtral's `w1/w3/w2`) or stacked ([E, 2I, D] `experts.gate_up_proj`, transformers 5 in memory). Every tensor
of the source is used exactly once: a missing or an unexpected name raises, naming it.

`state_dict_from_hf` also says where each openafm tensor came from (`Provenance`), so a loader that keeps a
file's quantized blocks knows which source tensors became one fused matrix.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

import torch

from openafm.errors import CheckpointError
from openafm.models.plan import DecoderConfig, NormPlacement
from openafm.nn.layer_spec import FFNKind

Provenance = dict[str, list[str]]     # openafm name -> the source names it was made from, in order
Join = Callable[[list[str], list[torch.Tensor], int], object]   # (source names, their tensors, dim) -> one value


def concatenate(names: list[str], parts: list[torch.Tensor], dim: int) -> torch.Tensor:
    """The default join: the parts as one tensor (one part: itself)."""
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim)


class NormWeights(enum.Enum):
    """How a checkpoint stores RMSNorm weights."""

    AS_USED = "as-used"                # y = norm(x) * w (Llama, Qwen; and every GGUF file: llama.cpp adds Gemma's 1)
    OFFSET_FROM_ONE = "offset-from-1"  # y = norm(x) * (1 + w): Gemma's Hugging Face checkpoints


class _Source:
    """The source tensors, each taken once; `rest()` lists what was never taken."""

    def __init__(self, state: dict[str, torch.Tensor], where: str, join: Join):
        self.remaining, self.where, self.provenance, self.join = dict(state), where, {}, join

    def has(self, name: str) -> bool:
        return name in self.remaining

    def take(self, name: str) -> torch.Tensor:
        if name not in self.remaining:
            raise CheckpointError(f"{self.where}: tensor {name!r} is missing")
        return self.remaining.pop(name)

    def put(self, out: dict, ours: str, names: list[str], dim: int = 0) -> None:
        """out[ours] = the named tensors concatenated along `dim` (one name: that tensor)."""
        out[ours] = self.join(names, [self.take(n) for n in names], dim)
        self.provenance[ours] = names


def state_dict_from_hf(hf_sd: dict[str, torch.Tensor], config: DecoderConfig, source: str,
                       norms: NormWeights = NormWeights.AS_USED, join: Join = concatenate
                       ) -> tuple[dict[str, torch.Tensor], Provenance]:
    """HF names -> (openafm state dict, provenance). Missing or extra tensors raise CheckpointError.
    `join` makes one value of the parts of a fused matrix (a loader keeping quantized blocks may keep parts of
    different types apart)."""
    src, out = _Source(hf_sd, source, join), {}
    src.put(out, "embed.weight", ["model.embed_tokens.weight"])
    src.put(out, "norm.weight", ["model.norm.weight"])
    if config.tie_embeddings:
        head = src.remaining.pop("lm_head.weight", None)
        if head is not None and not torch.equal(head, out["embed.weight"]):
            raise CheckpointError(f"{source}: tie_word_embeddings is set but lm_head.weight differs from the embeddings")
    else:
        src.put(out, "lm_head.weight", ["lm_head.weight"])
    for i, spec in enumerate(config.layers):
        _attention(src, out, f"model.layers.{i}.", f"layers.{i}.", config)
        if spec.ffn is FFNKind.MOE:
            _experts(src, out, f"model.layers.{i}.", f"layers.{i}.ffn.", config)
        else:
            _dense(src, out, f"model.layers.{i}.mlp.", f"layers.{i}.ffn.")
    extra = sorted(k for k in src.remaining if not k.endswith("rotary_emb.inv_freq"))
    if extra:
        raise CheckpointError(f"{source}: unexpected tensors {extra[:5]}{' ...' if len(extra) > 5 else ''}")
    if norms is NormWeights.OFFSET_FROM_ONE:
        for name, value in out.items():
            if name.endswith("norm.weight"):
                out[name] = value.float() + 1.0 if value.is_floating_point() else value
    return out, src.provenance


def check_fits(state: dict[str, object], provenance: Provenance, expected: dict[str, torch.Size], source: str) -> None:
    """Every tensor has the shape the config (read from the file's metadata) needs, else CheckpointError naming
    the tensor and the source tensors it was made from. Quantized blocks (uint8 [rows, bytes]) are checked by
    rows; kept-apart parts (a list) by their rows together."""
    wrong = []
    for name, value in state.items():
        want = expected.get(name)
        if want is None:
            continue
        parts = value if isinstance(value, list) else [value]
        rows = sum(p.shape[0] for p in parts)
        blocks = not parts[0].is_floating_point()
        if (blocks and rows != want[0]) or (not blocks and tuple(value.shape) != tuple(want)):
            got = f"{rows} rows" if blocks else f"shape {tuple(value.shape)}"
            need = f"{want[0]} rows" if blocks else f"shape {tuple(want)}"
            wrong.append(f"{name} (from {', '.join(provenance.get(name, [name]))}) has {got}; the config needs {need}")
    if wrong:
        raise CheckpointError(f"{source}: tensors do not fit the model the metadata describes: {'; '.join(wrong[:3])}")


def _attention(src: _Source, out: dict, hf: str, ours: str, config: DecoderConfig) -> None:
    a = hf + "self_attn."
    if src.has(a + "qkv_proj.weight"):                                          # Phi-3
        src.put(out, ours + "attn.qkv.weight", [a + "qkv_proj.weight"])
    else:
        src.put(out, ours + "attn.qkv.weight", [a + f"{x}_proj.weight" for x in "qkv"])
    if config.features.qkv_bias:
        src.put(out, ours + "attn.in_bias", [a + f"{x}_proj.bias" for x in "qkv"])
    if config.features.qk_norm:
        src.put(out, ours + "attn.q_norm.weight", [a + "q_norm.weight"])
        src.put(out, ours + "attn.k_norm.weight", [a + "k_norm.weight"])
    src.put(out, ours + "attn.out.weight", [a + "o_proj.weight"])
    src.put(out, ours + "attn_norm.weight", [hf + "input_layernorm.weight"])
    if config.features.norms is NormPlacement.SANDWICH:                          # Gemma's four norms
        src.put(out, ours + "post_attn_norm.weight", [hf + "post_attention_layernorm.weight"])
        src.put(out, ours + "ffn_norm.weight", [hf + "pre_feedforward_layernorm.weight"])
        src.put(out, ours + "post_ffn_norm.weight", [hf + "post_feedforward_layernorm.weight"])
    else:
        src.put(out, ours + "ffn_norm.weight", [hf + "post_attention_layernorm.weight"])


def _dense(src: _Source, out: dict, hf: str, ours: str) -> None:
    if src.has(hf + "gate_up_proj.weight"):                                      # Phi-3
        src.put(out, ours + "gate_up.weight", [hf + "gate_up_proj.weight"])
    else:
        src.put(out, ours + "gate_up.weight", [hf + "gate_proj.weight", hf + "up_proj.weight"])
    src.put(out, ours + "down.weight", [hf + "down_proj.weight"])


def _experts(src: _Source, out: dict, hf: str, ours: str, config: DecoderConfig) -> None:
    """Router, experts ([E, 2H, D] gate_up and [E, D, H] down) and Qwen2-MoE's shared expert."""
    block = hf + ("block_sparse_moe." if src.has(hf + "block_sparse_moe.gate.weight") else "mlp.")
    src.put(out, ours + "router.weight", [block + "gate.weight"])
    e = block + "experts."
    if src.has(e + "gate_up_proj"):                                              # stacked (transformers 5)
        src.put(out, ours + "gate_up", [e + "gate_up_proj"])
        src.put(out, ours + "down", [e + "down_proj"])
    else:
        gate, up, down = ("w1", "w3", "w2") if src.has(e + "0.w1.weight") else ("gate_proj", "up_proj", "down_proj")
        n = config.moe.n_experts
        pairs = [src.take(e + f"{k}.{gate}.weight") for k in range(n)], [src.take(e + f"{k}.{up}.weight") for k in range(n)]
        out[ours + "gate_up"] = torch.cat([torch.stack(pairs[0]), torch.stack(pairs[1])], 1)   # [E, 2H, D]
        out[ours + "down"] = torch.stack([src.take(e + f"{k}.{down}.weight") for k in range(n)])  # [E, D, H]
        src.provenance[ours + "gate_up"] = [e + f"*.{gate}.weight", e + f"*.{up}.weight"]
        src.provenance[ours + "down"] = [e + f"*.{down}.weight"]
    if config.moe.shared_hidden is not None:
        _dense(src, out, block + "shared_expert.", ours + "shared.")
        src.put(out, ours + "shared_gate.weight", [block + "shared_expert_gate.weight"])
