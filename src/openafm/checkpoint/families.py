"""Model families people run (Llama, Mistral, Qwen, Gemma, Phi, the MoEs) -> openafm decoder plans, from config.json.

A family adds nothing to the runtime: it says which `models.plan.Features` its layers use, which layers slide,
which are mixtures of experts, and how its rotary frequencies are scaled. Hugging Face's config.json is the
common language: the GGUF importer (checkpoint/gguf/families.py) writes the same dict from a file's metadata.

    llama       Llama 2/3.x (Llama 3 rope scaling), SmolLM, and files converted as 'llama' (Mistral, Mixtral)
    mistral     sliding-window attention on every layer (when the config sets one)
    qwen2       q/k/v biases
    qwen3       an RMSNorm over each head's q and k
    gemma2      sandwich norms, GeGLU, sqrt(dim) embedding scale, soft-capped scores and logits, local/global
    gemma3      Gemma 2's block without soft-capping, q/k norms, a separate rotary base for local layers
    phi3        fused q/k/v and gate/up rows; LongRoPE (short factors, context capped at the original length)
    mixtral     top-2 of 8 SwiGLU experts, renormalised
    qwen2_moe   top-k experts, weights not renormalised, plus a sigmoid-gated shared expert
    qwen3_moe   top-k experts, renormalised (norm_topk_prob), q/k norms
"""

from __future__ import annotations

import math
from typing import Any

from openafm.errors import CheckpointError
from openafm.models.plan import DecoderConfig, Features, MoESpec, NormPlacement
from openafm.nn.layer_spec import AttentionKind, FFNKind, LayerSpec
from openafm.nn.mlp import Activation
from openafm.nn.moe import Routing
from openafm.nn.rope import RopeScaling

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3_text", "phi3", "mixtral",
                         "qwen2_moe", "qwen3_moe")
GEMMA = ("gemma2", "gemma3_text")
MOE = ("mixtral", "qwen2_moe", "qwen3_moe")
ACTIVATIONS = {"silu": Activation.SILU, "gelu_pytorch_tanh": Activation.GELU_TANH}


def config_from_hf(hf: dict[str, Any], source: str) -> DecoderConfig:
    """A Hugging Face config.json dict (or the GGUF importer's equivalent) -> DecoderConfig."""
    kind = hf.get("model_type")
    if kind == "gemma3" and "text_config" in hf:
        raise CheckpointError(f"{source}: model_type 'gemma3' is the image-text model; openafm loads its text "
                              f"decoder from a GGUF file, or from a 'gemma3_text' checkpoint")
    if kind not in SUPPORTED_MODEL_TYPES:
        raise CheckpointError(f"{source}: model_type {kind!r} is not supported; supported: "
                              f"{', '.join(SUPPORTED_MODEL_TYPES)}")
    try:
        return _config(kind, hf, source)
    except KeyError as e:
        raise CheckpointError(f"{source}: config lacks the key {e.args[0]!r} that {kind} models need") from None


def _config(kind: str, hf: dict[str, Any], source: str) -> DecoderConfig:
    n_heads = hf["num_attention_heads"]
    head_dim = hf.get("head_dim") or hf["hidden_size"] // n_heads
    _refuse_unsupported(kind, hf, source)
    rope = _rope_parameters(hf, "full_attention")
    max_seq = hf.get("max_position_embeddings", 2048)
    scaling = _rope_scaling(rope, head_dim, max_seq, source)
    if rope.get("rope_type") == "longrope" or rope.get("original_max_position_embeddings") and \
            rope.get("rope_type") == "factors":              # LongRoPE's short factors: cap the context where they hold
        max_seq = int(rope.get("original_max_position_embeddings") or hf["original_max_position_embeddings"])
    moe = _moe_spec(kind, hf) if kind in MOE else None
    return DecoderConfig(
        vocab_size=hf["vocab_size"], dim=hf["hidden_size"], n_heads=n_heads,
        n_kv_heads=hf.get("num_key_value_heads") or n_heads, head_dim=head_dim,
        ffn_hidden=hf.get("intermediate_size") or (moe.hidden if moe else 0),
        norm_eps=float(hf.get("rms_norm_eps", 1e-6)), rope_theta=float(rope.get("rope_theta", 10000.0)),
        max_seq_len=int(max_seq), tie_embeddings=bool(hf.get("tie_word_embeddings", kind in GEMMA)),
        layers=_layers(kind, hf), moe=moe, rope_scaling=scaling, features=_features(kind, hf, head_dim, source))


def _refuse_unsupported(kind: str, hf: dict[str, Any], source: str) -> None:
    """Options of these families that openafm does not compute raise, naming the key."""
    act = hf.get("hidden_activation") or hf.get("hidden_act", "silu")
    if act not in ACTIVATIONS:
        raise CheckpointError(f"{source}: activation {act!r} is not supported (supported: {', '.join(ACTIVATIONS)})")
    if hf.get("mlp_bias"):
        raise CheckpointError(f"{source}: mlp_bias=true (biases on the FFN) is not supported")
    if hf.get("attention_bias") and kind != "qwen2":
        raise CheckpointError(f"{source}: attention_bias=true on {kind} (biases on q/k/v and the output) is not "
                              f"supported; only Qwen2's q/k/v biases are")
    partial = _rope_parameters(hf, "full_attention").get("partial_rotary_factor", hf.get("partial_rotary_factor", 1.0))
    if partial != 1.0:
        raise CheckpointError(f"{source}: partial_rotary_factor={partial} (RoPE on part of each head) is not supported")
    if kind in ("qwen2_moe", "qwen3_moe") and hf.get("decoder_sparse_step", 1) < 1:
        raise CheckpointError(f"{source}: decoder_sparse_step={hf['decoder_sparse_step']} must be >= 1")


def _features(kind: str, hf: dict[str, Any], head_dim: int, source: str) -> Features:
    act = ACTIVATIONS[hf.get("hidden_activation") or hf.get("hidden_act", "silu")]
    if kind not in GEMMA:
        return Features(qkv_bias=kind in ("qwen2", "qwen2_moe"), qk_norm=kind in ("qwen3", "qwen3_moe"),
                        activation=act)
    scalar = hf.get("query_pre_attn_scalar", head_dim)
    per_type = hf.get("rope_parameters") or {}
    local = per_type.get("sliding_attention") or {"rope_theta": hf.get("rope_local_base_freq", 10000.0)}
    return Features(qk_norm=kind == "gemma3_text", norms=NormPlacement.SANDWICH, activation=act,
                    embed_scale=float(hf["hidden_size"]) ** 0.5, attn_scale=float(scalar) ** -0.5,
                    attn_softcap=hf.get("attn_logit_softcapping"), logit_softcap=hf.get("final_logit_softcapping"),
                    local_rope_theta=float(local["rope_theta"]) if kind == "gemma3_text" else None)


def _layers(kind: str, hf: dict[str, Any]) -> list[LayerSpec]:
    n = hf["num_hidden_layers"]
    window = hf.get("sliding_window") or None
    types = hf.get("layer_types")
    if types is None:
        if kind == "gemma2":
            types = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
        elif kind == "gemma3_text":
            pattern = hf.get("sliding_window_pattern") or hf.get("_sliding_window_pattern") or 6
            types = ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(n)]
        elif kind in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe") and not hf.get("use_sliding_window"):
            types = ["full_attention"] * n
        else:                            # Mistral, Phi-3, Llama: every layer slides where a window is set
            types = ["sliding_attention" if window else "full_attention"] * n
    if len(types) != n:
        raise CheckpointError(f"layer_types has {len(types)} entries for num_hidden_layers={n}")
    moe_layers = _moe_layers(kind, hf)
    specs = []
    for i, t in enumerate(types):
        if t not in ("full_attention", "sliding_attention"):
            raise CheckpointError(f"layer_types[{i}] = {t!r} is not supported (full_attention, sliding_attention)")
        slides = t == "sliding_attention" and window is not None
        specs.append(LayerSpec(attention=AttentionKind.SLIDING_ROPE if slides else AttentionKind.GLOBAL_ROPE,
                               window=window if slides else None,
                               ffn=FFNKind.MOE if i in moe_layers else FFNKind.DENSE))
    return specs


def _moe_layers(kind: str, hf: dict[str, Any]) -> set[int]:
    n = hf["num_hidden_layers"]
    if kind == "mixtral":
        return set(range(n))
    if kind not in MOE:
        return set()
    step, dense = hf.get("decoder_sparse_step", 1), set(hf.get("mlp_only_layers") or [])
    return {i for i in range(n) if i not in dense and (i + 1) % step == 0}


def _moe_spec(kind: str, hf: dict[str, Any]) -> MoESpec:
    if kind == "mixtral":
        return MoESpec(n_experts=hf["num_local_experts"], top_k=hf["num_experts_per_tok"],
                       hidden=hf["intermediate_size"])
    renorm = hf.get("norm_topk_prob", False)
    return MoESpec(n_experts=hf.get("num_experts") or hf["num_local_experts"], top_k=hf["num_experts_per_tok"], hidden=hf["moe_intermediate_size"],
                   routing=Routing.RENORMALIZED if renorm else Routing.RAW,
                   shared_hidden=hf.get("shared_expert_intermediate_size") if kind == "qwen2_moe" else None)


# --- rotary scaling ------------------------------------------------------------------------------------------

def _rope_parameters(hf: dict[str, Any], layer_type: str) -> dict[str, Any]:
    """transformers 5 writes `rope_parameters` (per layer type for Gemma 3); 4.x wrote rope_theta + rope_scaling."""
    params = hf.get("rope_parameters")
    if isinstance(params, dict) and layer_type in params:
        return dict(params[layer_type])
    if isinstance(params, dict) and params:
        return dict(params)
    merged = dict(hf.get("rope_scaling") or {})
    if "type" in merged and "rope_type" not in merged:
        merged["rope_type"] = merged.pop("type")
    merged.setdefault("rope_theta", hf.get("rope_theta", 10000.0))
    return merged


def _rope_scaling(rope: dict[str, Any], head_dim: int, max_seq: int, source: str) -> RopeScaling | None:
    kind = rope.get("rope_type", "default")
    half = head_dim // 2
    theta = float(rope.get("rope_theta", 10000.0))
    inv_freq = [1.0 / theta ** (2 * i / head_dim) for i in range(half)]
    if kind == "default":
        return None
    if kind == "factors":                                  # stored in a GGUF file (llama.cpp's rope_freqs)
        return RopeScaling(kind=f"factors ({rope['source']})", freq_factors=[float(f) for f in rope["factors"]],
                           attention_factor=float(rope.get("attention_factor", 1.0)))
    if kind == "linear":
        return RopeScaling(kind=kind, freq_factors=[float(rope["factor"])] * half)
    if kind == "llama3":
        return RopeScaling(kind=kind, freq_factors=llama3_factors(inv_freq, rope))
    if kind == "longrope":
        factors = [float(f) for f in rope["short_factor"]]
        original = rope.get("original_max_position_embeddings")
        factor = rope.get("factor") or max_seq / original
        attention = rope.get("attention_factor") or (
            1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original)))
        return RopeScaling(kind=kind, freq_factors=factors, attention_factor=float(attention))
    if kind == "yarn":
        return yarn_scaling(rope, head_dim, max_seq)
    raise CheckpointError(f"{source}: rope_type {kind!r} is not supported "
                          f"(supported: default, linear, llama3, longrope, yarn, and a GGUF file's factors)")


def llama3_factors(inv_freq: list[float], rope: dict[str, Any]) -> list[float]:
    """Llama 3.1's scaling: long wavelengths slowed by `factor`, short ones kept, a smooth blend between."""
    factor, low, high = float(rope["factor"]), float(rope["low_freq_factor"]), float(rope["high_freq_factor"])
    original = float(rope["original_max_position_embeddings"])
    out = []
    for f in inv_freq:
        wavelen = 2 * math.pi / f
        if wavelen < original / high:
            out.append(1.0)
        elif wavelen > original / low:
            out.append(factor)
        else:
            smooth = (original / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return out


def yarn_scaling(rope: dict[str, Any], head_dim: int, max_seq: int) -> RopeScaling:
    """YaRN: frequencies interpolated by `factor` below a ramp of dimensions, kept above it; cos/sin scaled."""
    if not rope.get("original_max_position_embeddings"):
        raise CheckpointError("YaRN rope scaling needs original_max_position_embeddings (the pre-training context)")
    theta, original = float(rope["rope_theta"]), float(rope["original_max_position_embeddings"])
    factor = float(rope.get("factor") or max_seq / original)

    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention = rope.get("attention_factor")
    if attention is None:
        m, m_all = rope.get("mscale"), rope.get("mscale_all_dim")
        attention = mscale(factor, m) / mscale(factor, m_all) if m and m_all else mscale(factor)

    def correction_dim(rotations: float) -> float:
        return head_dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = correction_dim(rope.get("beta_fast") or 32), correction_dim(rope.get("beta_slow") or 1)
    if rope.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001
    factors = []
    for i in range(head_dim // 2):
        extrapolate = 1 - min(max((i - low) / (high - low), 0.0), 1.0)
        factors.append(1.0 / ((1 - extrapolate) / factor + extrapolate))
    return RopeScaling(kind="yarn", freq_factors=factors, attention_factor=float(attention))
