"""Tiny random-weight models of every supported family, made by transformers, and written as files users bring:
a Hugging Face directory (`save_pretrained`) and a GGUF file laid out the way llama.cpp's convert_hf_to_gguf.py
writes one (names, Llama's Q/K row permutation, Gemma's norms + 1, stacked experts, stored rotary factors),
with a small byte-level BPE tokenizer in both. Nothing is downloaded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import gguf as gguf_py
import numpy as np
import torch
import transformers as tf
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

from openafm.checkpoint.gguf import GGMLType
from openafm.checkpoint.gguf.quantize import quantize
from openafm.tokenizer.gguf_vocab import byte_alphabet

VOCAB_SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n")]
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
VOCAB = 256 + len(MERGES) + len(VOCAB_SPECIALS)          # 263
SHAPE = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=2048, rms_norm_eps=1e-6, bos_token_id=262, eos_token_id=261)


@dataclasses.dataclass(frozen=True)
class Family:
    name: str                      # test id
    arch: str                      # GGUF general.architecture
    build: callable                # () -> a transformers model (random init)
    gguf: bool = True              # transformers can read the GGUF form back (gguf_file=)


def _llama():
    return tf.LlamaForCausalLM(tf.LlamaConfig(**SHAPE, tie_word_embeddings=False, rope_scaling={
        "rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 32, "rope_theta": 10000.0}))


def _mistral():
    return tf.MistralForCausalLM(tf.MistralConfig(**SHAPE, sliding_window=6, head_dim=16))


def _qwen2():
    return tf.Qwen2ForCausalLM(tf.Qwen2Config(**SHAPE, tie_word_embeddings=True))


def _qwen3():
    return tf.Qwen3ForCausalLM(tf.Qwen3Config(**SHAPE, head_dim=24, tie_word_embeddings=True))


def _gemma2():
    return tf.Gemma2ForCausalLM(tf.Gemma2Config(**SHAPE, head_dim=16, query_pre_attn_scalar=16, sliding_window=6,
                                                attn_logit_softcapping=4.0, final_logit_softcapping=3.0))


def _gemma3():
    shape = SHAPE | {"num_hidden_layers": 6}              # Gemma 3's pattern: 5 local layers, then 1 global
    return tf.Gemma3ForCausalLM(tf.Gemma3TextConfig(
        **shape, head_dim=16, query_pre_attn_scalar=16, sliding_window=6,
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                         "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000000.0}}))


def _phi3():
    half = 8
    return tf.Phi3ForCausalLM(tf.Phi3Config(**SHAPE | {"max_position_embeddings": 8192}, pad_token_id=260,
                                            original_max_position_embeddings=2048, rope_scaling={
        "rope_type": "longrope", "short_factor": [1.0 + 0.25 * i for i in range(half)],
        "long_factor": [2.0 + i for i in range(half)], "original_max_position_embeddings": 2048}))


def _mixtral():
    return tf.MixtralForCausalLM(tf.MixtralConfig(**SHAPE, num_local_experts=4, num_experts_per_tok=2))


def _qwen2_moe():
    return tf.Qwen2MoeForCausalLM(tf.Qwen2MoeConfig(**SHAPE, num_experts=4, num_experts_per_tok=2,
                                                    moe_intermediate_size=32, shared_expert_intermediate_size=64,
                                                    norm_topk_prob=False, mlp_only_layers=[1]))


def _qwen3_moe():
    return tf.Qwen3MoeForCausalLM(tf.Qwen3MoeConfig(**SHAPE, head_dim=16, num_experts=4, num_experts_per_tok=2,
                                                    moe_intermediate_size=32, norm_topk_prob=True))


FAMILIES = [Family("llama", "llama", _llama), Family("mistral", "llama", _mistral), Family("qwen2", "qwen2", _qwen2),
            Family("qwen3", "qwen3", _qwen3), Family("gemma2", "gemma2", _gemma2), Family("gemma3", "gemma3", _gemma3),
            Family("phi3", "phi3", _phi3), Family("mixtral", "llama", _mixtral),
            Family("qwen2_moe", "qwen2moe", _qwen2_moe), Family("qwen3_moe", "qwen3moe", _qwen3_moe)]
BY_NAME = {f.name: f for f in FAMILIES}


def make(name: str, seed: int = 0) -> torch.nn.Module:
    """The family's tiny model with weights scaled so activations stay O(1) (HF's 0.02 init makes every
    logit nearly equal, which would let a wrong layer pass)."""
    torch.manual_seed(seed)
    model = BY_NAME[name].build().eval()
    gemma = name.startswith("gemma")
    with torch.no_grad():
        for key, p in model.named_parameters():
            if key.endswith("norm.weight"):
                p.uniform_(-0.2, 0.2) if gemma else p.uniform_(0.8, 1.2)     # Gemma stores w for (1 + w)
            elif key.endswith("bias"):
                p.normal_(0, 0.1)
            elif p.ndim >= 2:
                p.normal_(0, 1.0 if "embed" in key else 0.5 / p.shape[-1] ** 0.5)
    return model


# -- files -------------------------------------------------------------------------------------------------

def tokenizer_backend() -> Tokenizer:
    alphabet = list(byte_alphabet().values())
    vocab = {c: i for i, c in enumerate(alphabet)}
    for a, b in MERGES:
        vocab[a + b] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=list(MERGES)))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in VOCAB_SPECIALS])
    return backend


def save_hf(model: torch.nn.Module, directory: Path) -> Path:
    model.save_pretrained(directory)
    tf.PreTrainedTokenizerFast(tokenizer_object=tokenizer_backend(), eos_token="<|im_end|>",
                               bos_token="<|endoftext|>", chat_template=CHATML).save_pretrained(directory)
    return directory


def save_gguf(model: torch.nn.Module, name: str, path: Path,
              types: dict[str, gguf_py.GGMLQuantizationType] | None = None,
              extra: Callable[[gguf_py.GGUFWriter], None] | None = None) -> Path:
    """The model as llama.cpp's converter writes it. `types`: GGUF tensor name -> storage type (default F32);
    quantized by openafm's reference quantizer (gguf-py's for the types it has). `extra` adds metadata."""
    family, cfg = BY_NAME[name], model.config
    writer = gguf_py.GGUFWriter(str(path), family.arch)
    _metadata(writer, family.arch, cfg, name)
    if extra is not None:
        extra(writer)
    for gname, value in _tensors(model, name).items():
        qtype = (types or {}).get(gname, gguf_py.GGMLQuantizationType.F32)
        if qtype == gguf_py.GGMLQuantizationType.F32:
            data = value
        else:                                       # rows of the last dimension (stacked experts: [E, I, bytes])
            rows = quantize(value.reshape(-1, value.shape[-1]), GGMLType(int(qtype)))
            data = rows.reshape(*value.shape[:-1], -1)
        writer.add_tensor(gname, data, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def save_gguf_names(model: torch.nn.Module, name: str) -> dict[str, tuple[int, ...]]:
    """The GGUF tensor names save_gguf writes, with their shapes (torch order)."""
    return {k: v.shape for k, v in _tensors(model, name).items()}


def _metadata(w: gguf_py.GGUFWriter, arch: str, cfg, name: str) -> None:
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    rope = cfg.rope_parameters.get("full_attention", cfg.rope_parameters)
    w.add_rope_freq_base(rope["rope_theta"])
    if getattr(cfg, "sliding_window", None):
        w.add_sliding_window(cfg.sliding_window)
    if name == "gemma2":
        w.add_attn_logit_softcapping(cfg.attn_logit_softcapping)
        w.add_final_logit_softcapping(cfg.final_logit_softcapping)
    if name == "gemma3" and rope.get("rope_type") == "linear":
        w.add_rope_scaling_type(gguf_py.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(rope["factor"])
    if name == "phi3":
        w.add_rope_scaling_attn_factors(_longrope_attention_factor(cfg))
        w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
    if hasattr(cfg, "num_local_experts") or hasattr(cfg, "num_experts"):
        w.add_expert_count(getattr(cfg, "num_local_experts", None) or cfg.num_experts)
        w.add_expert_used_count(cfg.num_experts_per_tok)
    if hasattr(cfg, "moe_intermediate_size"):
        w.add_expert_feed_forward_length(cfg.moe_intermediate_size)
    if getattr(cfg, "shared_expert_intermediate_size", None):
        w.add_expert_shared_feed_forward_length(cfg.shared_expert_intermediate_size)
    backend = tokenizer_backend()
    vocab = sorted(backend.get_vocab(with_added_tokens=True).items(), key=lambda kv: kv[1])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")               # llama.cpp's name of GPT-2's split
    w.add_token_list([t for t, _ in vocab])
    w.add_token_types([3 if t in VOCAB_SPECIALS else 1 for t, _ in vocab])
    w.add_token_merges([f"{a} {b}" for a, b in MERGES])
    w.add_eos_token_id(backend.token_to_id("<|im_end|>"))
    w.add_bos_token_id(backend.token_to_id("<|endoftext|>"))
    w.add_chat_template(CHATML)


def _longrope_attention_factor(cfg) -> float:
    _, factor = tf.modeling_rope_utils.ROPE_INIT_FUNCTIONS["longrope"](cfg, "cpu")
    return float(factor)


def _permute(weight: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.permute."""
    return (weight.reshape(n_head, 2, weight.shape[0] // n_head // 2, *weight.shape[1:])
            .swapaxes(1, 2).reshape(weight.shape))


LAYER = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
         "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.qkv_proj": "attn_qkv",
         "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
         "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
         "mlp.down_proj": "ffn_down", "mlp.gate_up_proj": "ffn_up", "mlp.gate": "ffn_gate_inp",
         "mlp.shared_expert_gate": "ffn_gate_inp_shexp", "mlp.shared_expert.gate_proj": "ffn_gate_shexp",
         "mlp.shared_expert.up_proj": "ffn_up_shexp", "mlp.shared_expert.down_proj": "ffn_down_shexp"}
GEMMA_LAYER = {"post_attention_layernorm": "post_attention_norm", "pre_feedforward_layernorm": "ffn_norm",
               "post_feedforward_layernorm": "post_ffw_norm"}


def _tensors(model: torch.nn.Module, name: str) -> dict[str, np.ndarray]:
    cfg, out = model.config, {}
    gemma = name.startswith("gemma")
    for key, value in model.state_dict().items():
        v = value.float().numpy()
        if key == "model.embed_tokens.weight":
            out["token_embd.weight"] = v
        elif key == "model.norm.weight":
            out["output_norm.weight"] = v + 1 if gemma else v
        elif key == "lm_head.weight":
            if not cfg.tie_word_embeddings:
                out["output.weight"] = v
        else:
            out |= _layer_tensor(key, v, cfg, name)
    if name == "llama":
        inv = tf.modeling_rope_utils.ROPE_INIT_FUNCTIONS["llama3"](cfg, "cpu")[0]
        base = 1.0 / cfg.rope_parameters["rope_theta"] ** (torch.arange(0, 16, 2).float() / 16)
        out["rope_freqs.weight"] = (base / inv).numpy().astype(np.float32)
    if name == "phi3":
        rope = cfg.rope_parameters
        out["rope_factors_short.weight"] = np.array(rope["short_factor"], np.float32)
        out["rope_factors_long.weight"] = np.array(rope["long_factor"], np.float32)
    return out


def _layer_tensor(key: str, v: np.ndarray, cfg, name: str) -> dict[str, np.ndarray]:
    _, _, i, rest = key.split(".", 3)
    part, kind = rest.rsplit(".", 1) if rest.endswith((".weight", ".bias")) else (rest, "")
    if part.startswith(("mlp.experts", "block_sparse_moe.experts")):
        experts = part.rsplit(".", 1)[-1]
        if experts == "gate_up_proj":                                          # [E, 2I, D] -> gate, up [E, I, D]
            gate, up = np.split(v, 2, axis=1)
            return {f"blk.{i}.ffn_gate_exps.weight": gate, f"blk.{i}.ffn_up_exps.weight": up}
        return {f"blk.{i}.ffn_down_exps.weight": v}
    if name.startswith("gemma") and part in GEMMA_LAYER:
        return {f"blk.{i}.{GEMMA_LAYER[part]}.{kind}": v + 1}
    part = "mlp.gate" if part == "block_sparse_moe.gate" else part
    gname = f"blk.{i}.{LAYER[part]}.{kind}"
    if name.startswith("gemma") and part.endswith("norm"):
        v = v + 1
    if name in ("llama", "mistral", "mixtral") and part in ("self_attn.q_proj", "self_attn.k_proj"):
        v = _permute(v, cfg.num_attention_heads if part.endswith("q_proj") else cfg.num_key_value_heads)
    if part == "mlp.shared_expert_gate":
        v = v.reshape(-1)
    return {gname: v}
