import pytest
import torch
from packed_codes import rtn_codes
from tiny import make_tiny

from openafm.checkpoint.fingerprint import weights_fingerprint
from openafm.checkpoint.compressed import load_compressed, read_metadata, save_compressed
from openafm.nn.packed_linear import PackedEmbedding, PackedKernel, PackedLinear
from openafm.nn.packed_model import QuantizedCodes, pack_model
from openafm.errors import CheckpointError
from openafm.runtime.generate import generate_tokens


def quantize(model, bits=2, embed_bits=4):
    """Every linear weight at `bits`, the (tied) embedding at `embed_bits`, by per-channel RTN."""
    out = {}
    for name, p in model.named_parameters():
        if p.ndim == 2:
            b = embed_bits if name == "embed.weight" else bits
            out[name] = QuantizedCodes(*rtn_codes(p.detach(), b), b)
    return out



@pytest.mark.parametrize("name", ["smollm2-tiny", "afm-ondevice-tiny"])
def test_round_trip_loads_and_matches_the_dequantized_model(name, tmp_path):
    base = make_tiny(name)
    q = quantize(base)
    path = save_compressed(base, q, tmp_path / "model.safetensors")
    model = load_compressed(path, base=base, kernel=PackedKernel.TORCH)
    assert isinstance(model.embed, PackedEmbedding) and isinstance(model.layers[0].attn.qkv, PackedLinear)
    ref = make_tiny(name)
    with torch.no_grad():
        for wname, qc in q.items():
            ref.get_parameter(wname).copy_(qc.scale[:, None] * (qc.codes.float() - qc.zero[:, None]))
    ids = torch.randint(0, 512, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(model(ids), ref(ids), rtol=1e-4, atol=1e-4)
    # generation from the compressed checkpoint, with the CPU kernel, equals the dense dequantized model's
    fast = load_compressed(path, kernel=PackedKernel.CPU)
    prompt = [[5, 17, 99, 240, 7, 31]]
    got = generate_tokens(fast, prompt, max_new_tokens=10)[0].token_ids
    want = generate_tokens(ref, prompt, max_new_tokens=10)[0].token_ids
    assert got == want


def test_packed_tensors_are_an_eighth_of_fp16(tmp_path):
    base = make_tiny("smollm2-tiny")
    q = quantize(base, bits=2, embed_bits=2)
    path = save_compressed(base, q, tmp_path / "m.safetensors")
    meta = read_metadata(path)
    from safetensors import safe_open
    with safe_open(str(path), framework="pt") as f:
        for mpath, info in meta["quantized"].items():
            packed = f.get_tensor(f"{mpath}.packed")
            assert info["bits"] == 2 and packed.dtype == torch.uint8
            weight = base.get_parameter(f"{mpath}.weight")
            assert packed.numel() * 8 == weight.numel() * 2          # in dims of the tiny model are multiples of 32
        stored = {k: f.get_tensor(k).nbytes for k in f.keys()}
    header = int.from_bytes(path.read_bytes()[:8], "little")           # safetensors: u64 header length
    assert path.stat().st_size == 8 + header + sum(stored.values())    # nothing but header and tensors
    quantized_fp16 = sum(base.get_parameter(n).numel() * 2 for n in q)
    packed = sum(v for k, v in stored.items() if k.endswith(".packed"))
    scales = sum(v for k, v in stored.items() if k.endswith((".scale", ".zero")))
    assert packed * 8 == quantized_fp16
    assert scales == sum(base.get_parameter(n).shape[0] * 8 for n in q)   # fp32 scale + zero per row


def test_wrong_base_raises_naming_both_hashes(tmp_path):
    base = make_tiny("smollm2-tiny")
    path = save_compressed(base, quantize(base), tmp_path / "m.safetensors")
    other = make_tiny("smollm2-tiny", seed=1)
    with pytest.raises(CheckpointError, match=f"{weights_fingerprint(base)}.*{weights_fingerprint(other)}"):
        load_compressed(path, base=other)


def test_save_is_atomic_and_errors_are_loud(tmp_path):
    base = make_tiny("smollm2-tiny")
    q = quantize(base)
    path = save_compressed(base, q, tmp_path / "m.safetensors")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors"]    # no temporary left behind
    with pytest.raises(KeyError, match="'layers.0.nope.weight'"):
        save_compressed(base, {"layers.0.nope.weight": q["embed.weight"]}, tmp_path / "x.safetensors")
    with pytest.raises(ValueError, match="already holds packed layers"):
        save_compressed(pack_model(make_tiny("smollm2-tiny"), q), q, tmp_path / "y.safetensors")
    (tmp_path / "bad.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match="bad.safetensors"):
        load_compressed(tmp_path / "bad.safetensors")
    assert not (tmp_path / "x.safetensors").exists()


@pytest.mark.real_model
def test_real_model_compressed_checkpoint_generates(tmp_path):
    """SmolLM2-135M with every matrix at 4 bits (per-channel RTN: quality is the QAT worker's business)
    generates from its compressed checkpoint exactly what the dense model with the dequantized weights does."""
    import openafm
    lm = openafm.load("smollm2-135m-instruct", weights="float32")
    q = quantize(lm.model, bits=4, embed_bits=4)
    path = save_compressed(lm.model, q, tmp_path / "smollm2-int4.safetensors")
    assert path.stat().st_size < sum(p.numel() * 2 for p in lm.model.parameters()) / 3.5
    model = load_compressed(path, base=lm.model, kernel=PackedKernel.TORCH)
    with torch.no_grad():
        for name, qc in q.items():
            lm.model.get_parameter(name).copy_(qc.scale[:, None] * (qc.codes.float() - qc.zero[:, None]))
    prompt = lm.encode("The capital of France is")
    got = generate_tokens(model, [prompt], max_new_tokens=8)[0].token_ids
    assert got == generate_tokens(lm.model, [prompt], max_new_tokens=8)[0].token_ids
