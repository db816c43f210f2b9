"""weights="native" for a K-quant mix (what llama-quantize's Q4_K_M makes): a tiny Llama GGUF whose matrices
are Q4_K / Q6_K / Q5_0 / Q8_0 / F16, with q/k/v of one layer in different formats, loads with every matrix
kept as stored, and gives the dequantized model's logits (prefill, eager and fused decode)."""

import gguf as gguf_py
import numpy as np
import pytest
import torch

from openafm.checkpoint.block_model import load_block_model
from openafm.checkpoint.gguf import GGMLType, load_gguf_hf
from openafm.checkpoint.gguf.quantize import quantize
from openafm.checkpoint.families import config_from_hf
from openafm.checkpoint.family_weights import state_dict_from_hf
from openafm.checkpoint.load import build_with_weights
from openafm.nn.block_linear import BlockEmbedding, BlockLinear, BlockRows
from openafm.runtime.fused_step import fused_decoder
from openafm.runtime.kv_cache import KVCache

H, HEADS, KV_HEADS, FFN, VOCAB = 256, 4, 2, 512, 96
# GGUF tensor (per layer) -> (shape [out, in], type in layer 0, type in layer 1): layer 0's v has more bits
# than its q and k, as Q4_K_M gives some layers.
LAYER = {"attn_q": ((H, H), "Q5_0", "Q5_0"), "attn_k": ((KV_HEADS * 64, H), "Q5_0", "Q5_0"),
         "attn_v": ((KV_HEADS * 64, H), "Q8_0", "Q5_0"), "attn_output": ((H, H), "Q4_K", "F16"),
         "ffn_gate": ((FFN, H), "Q4_K", "Q4_K"), "ffn_up": ((FFN, H), "Q4_K", "Q4_K"),
         "ffn_down": ((H, FFN), "Q6_K", "Q4_K")}


def write_kquant_llama(path, layer: dict = LAYER) -> None:
    g = np.random.default_rng(0)
    writer = gguf_py.GGUFWriter(str(path), "llama")
    u32, f32 = gguf_py.GGUFValueType.UINT32, gguf_py.GGUFValueType.FLOAT32
    for key, value, vtype in (("block_count", 2, u32), ("context_length", 128, u32), ("embedding_length", H, u32),
                              ("feed_forward_length", FFN, u32), ("attention.head_count", HEADS, u32),
                              ("attention.head_count_kv", KV_HEADS, u32), ("rope.freq_base", 10000.0, f32),
                              ("attention.layer_norm_rms_epsilon", 1e-5, f32)):
        writer.add_key_value(f"llama.{key}", value, vtype)

    def add(name: str, values: np.ndarray, qtype: str) -> None:
        writer.add_tensor(name, quantize(values.astype(np.float32), GGMLType[qtype]),
                          raw_dtype=gguf_py.GGMLQuantizationType[qtype])

    def norm(name: str) -> None:   # 1-D float32
        writer.add_tensor(name, g.uniform(0.8, 1.2, H).astype(np.float32))

    add("token_embd.weight", g.standard_normal((VOCAB, H)), "Q6_K")
    norm("output_norm.weight")
    for i in range(2):
        norm(f"blk.{i}.attn_norm.weight")
        norm(f"blk.{i}.ffn_norm.weight")
        for name, (shape, *types) in layer.items():
            add(f"blk.{i}.{name}.weight", g.standard_normal(shape) * 0.5 / shape[1] ** 0.5, types[i])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    path = tmp_path_factory.mktemp("kq") / "kquant.gguf"
    write_kquant_llama(path)
    native, types = load_block_model(path)
    hf_sd, hf_config, _ = load_gguf_hf(path)
    config = config_from_hf(hf_config, str(path))
    return native, types, build_with_weights(config, state_dict_from_hf(hf_sd, config, str(path))[0], str(path))


def test_every_matrix_is_kept_as_stored(models):
    native, types, _ = models
    qkv0, qkv1 = native.layers[0].attn.qkv, native.layers[1].attn.qkv
    assert isinstance(qkv0, BlockRows) and [p.format.name for p in qkv0.parts] == ["Q5_0", "Q5_0", "Q8_0"]
    assert isinstance(qkv1, BlockLinear) and qkv1.format.name == "Q5_0"
    assert native.layers[0].ffn.down.format.name == "Q6_K" and native.layers[1].attn.out.format.name == "F16"
    assert isinstance(native.embed, BlockEmbedding) and native.embed.table.format.name == "Q6_K"
    assert types == "Q4_K x 6, Q5_0 x 5, F32 x 5, Q6_K x 2, Q8_0 x 1, F16 x 1"


def test_logits_equal_the_dequantized_model(models):
    native, _, dense = models
    ids = torch.tensor([[5, 17, 3, 88, 41, 2, 9, 60, 12, 7, 33]])                 # 11 rows: prefill path
    with torch.inference_mode():
        assert torch.allclose(native(ids), dense(ids), atol=1e-4, rtol=1e-4)
        caches = [KVCache(m.kv_plan, batch_size=1, capacity=16) for m in (native, native, dense)]
        for model, cache in zip((native, native, dense), caches, strict=True):
            model(ids, cache=cache)
        nxt, pos = torch.tensor([[4]]), torch.tensor([[11]])
        eager = native(nxt, cache=caches[0], positions=pos)[:, -1]                  # kernels, one row
        fused = fused_decoder(native)(nxt, caches[1], pos)
        ref = dense(nxt, cache=caches[2], positions=pos)[:, -1]
    assert torch.allclose(fused, eager, atol=1e-4, rtol=1e-4)
    assert torch.allclose(eager, ref, atol=1e-4, rtol=1e-4)


def test_types_the_kernels_do_not_read_are_dequantized_and_the_source_says_so(tmp_path):
    path = tmp_path / "q3.gguf"
    write_kquant_llama(path, LAYER | {"ffn_down": ((H, FFN), "Q3_K", "Q2_K")})
    model, types = load_block_model(path)
    assert "Q3_K dequantized to F32 x 1" in types and "Q2_K dequantized to F32 x 1" in types
    assert isinstance(model.layers[0].ffn.down, torch.nn.Linear) and model.layers[0].ffn.down.weight.dtype == torch.float32
