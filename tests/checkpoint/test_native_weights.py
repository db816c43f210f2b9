"""weights="native": the packaged GGUF's Q4_1 / Q8_0 matrices kept as stored, against the dequantized model."""

import pytest
import torch

import openafm
from openafm.checkpoint.load import Weights, load_model
from openafm.nn.block_linear import BlockEmbedding, BlockLinear
from openafm.nn.packed_kernel import KernelUnavailableError
from openafm.runtime.fused_step import StepKind
from openafm.runtime.generate import GenerationStats, generate_tokens

PROMPTS = ["The capital of France is", "def fibonacci(n):", "Water boils at"]


@pytest.fixture(scope="module")
def models():
    return load_model("smollm2-135m-instruct", weights="native"), load_model("smollm2-135m-instruct")


@pytest.mark.real_model
def test_native_layers_hold_the_file_bytes(models):
    native, _ = models
    layer = native.model.layers[0]
    assert isinstance(layer.attn.qkv, BlockLinear) and layer.attn.qkv.format.name == "Q4_1"
    assert isinstance(native.model.embed, BlockEmbedding) and native.model.embed.table.format.name == "Q8_0"
    assert "native weights: Q4_1 x 210" in native.source and "Q8_0 x 1" in native.source
    held = sum(b.numel() * b.element_size() for b in native.model.buffers() if b.dtype == torch.uint8)
    assert 0.95 < held / 98_362_432 < 1.0              # the GGUF file's bytes, less its metadata and norms


@pytest.mark.real_model
def test_prefill_logits_equal_the_dequantized_model(models):
    native, ref = models
    ids = torch.tensor([native.tokenizer.encode(" ".join(PROMPTS))])      # > 8 rows: dequantize, then matmul
    assert ids.shape[1] > 8
    with torch.inference_mode():
        a, b = native.model(ids), ref.model(ids)
    assert torch.allclose(a, b, atol=1e-3), (a - b).abs().max()        # the same floats, summed alike


@pytest.mark.real_model
# Greedy agreement measured on these prompts: 72/72 tokens (native), 54/72 (native-int8).
@pytest.mark.parametrize("weights, tolerance, agreement", [("native", 1e-4, 0.95), ("native-int8", 0.1, 0.6)])
def test_decode_logits_within_tolerance_and_greedy_tokens_agree(models, weights, tolerance, agreement):
    native = models[0] if weights == "native" else load_model("smollm2-135m-instruct", weights=weights)
    ref = models[1]
    agree = total = 0
    for prompt in PROMPTS:
        ids = native.tokenizer.encode(prompt)
        got = [generate_tokens(lm.model, [ids], max_new_tokens=24, step=StepKind.FUSED)[0].token_ids
               for lm in (native, ref)]
        agree += sum(x == y for x, y in zip(*got, strict=True))
        total += len(got[1])
        with torch.inference_mode():                 # one decode step after the prompt, int8-activation kernels
            x = torch.tensor([ids])
            la = native.model(x[:, :1])[0, -1]
            lb = ref.model(x[:, :1])[0, -1]
        # float32 activations: only the summation order differs; int8 ones (llama.cpp's scheme) round x:
        # 2.4% and 5.0% relative error measured on these prompts
        assert ((la - lb).norm() / lb.norm()) < tolerance
    assert agree / total >= agreement, (agree, total)


@pytest.mark.real_model
def test_front_door_defaults_to_native_and_says_so():
    lm = openafm.load()
    assert isinstance(lm.model.layers[0].ffn.down, BlockLinear)
    assert lm.model.layers[0].ffn.down.activations.value == "float32"
    stats = GenerationStats()
    generate_tokens(lm.model, [lm.encode("Hi")], max_new_tokens=3, stats=stats)
    assert stats.step == "fused"


def test_weights_choices_that_cannot_apply_raise():
    with pytest.raises(ValueError, match=r"weights='turbo' is not a weights choice; use one of \['dequantized', "):
        load_model("smollm2-tiny", weights="turbo")
    with pytest.raises(ValueError, match="weights='native' applies to GGUF files and packaged models; 'smollm2-tiny'"):
        load_model("smollm2-tiny", weights="native")
    with pytest.raises(ValueError, match="weights='native' runs float32 on the CPU; got dtype=torch.bfloat16"):
        load_model("smollm2-135m-instruct", weights="native", dtype="bfloat16")
    with pytest.raises(ValueError, match="weights='float32' contradicts dtype=torch.bfloat16"):
        load_model("smollm2-135m-instruct", weights="float32", dtype="bfloat16")
    assert Weights("auto") is Weights.AUTO
    assert isinstance(openafm.load("smollm2-tiny").model.layers[0].attn.qkv, torch.nn.Linear)   # auto: not GGUF


def test_native_weights_without_avx2_raise_a_typed_error_naming_the_choice(monkeypatch):
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")
    with pytest.raises(KernelUnavailableError, match=r"needs a CPU with AVX2, FMA and F16C; this CPU reports "
                                                     r"'DEFAULT'. Use weights='float32'"):
        load_model("smollm2-135m-instruct", weights="native")
