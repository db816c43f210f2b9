"""Every supported family, as a Hugging Face directory and as a GGUF file, computes what transformers computes."""

import gguf as gguf_py
import pytest
import torch

import openafm
from families import FAMILIES, make, save_gguf, save_gguf_names, save_hf
from openafm.checkpoint.load import load_model
from openafm.nn.block_linear import BlockLinear
from openafm.nn.moe import MoE
from openafm.runtime.generate import generate_tokens

IDS = torch.tensor([[5, 80, 13, 200, 7, 33, 101, 258, 4, 90, 61, 17, 44, 3]])      # 14 tokens, > the windows
NAMES = [f.name for f in FAMILIES]


@pytest.fixture(scope="module", params=NAMES)
def family(request, tmp_path_factory):
    name = request.param
    model = make(name)
    root = tmp_path_factory.mktemp(name)
    with torch.no_grad():
        logits = model(IDS).logits
    return name, model, logits, save_hf(model, root / "hf"), save_gguf(model, name, root / "model.gguf")


def _max_diff(lm, reference: torch.Tensor) -> float:
    with torch.no_grad():
        return (lm.model(IDS) - reference).abs().max().item()


def test_hf_directory_logits_equal_transformers(family):
    _, _, logits, hf_dir, _ = family
    assert _max_diff(load_model(hf_dir), logits) <= 1e-4


def test_gguf_file_logits_equal_transformers(family):
    _, _, logits, _, gguf_path = family
    assert _max_diff(load_model(gguf_path), logits) <= 1e-4


# What transformers' own GGUF reader (5.x) leaves out, so that it cannot check the test writer on these files
# (each found by reading its GGUF config mapping; strict: a reader that learns the feature turns the row green).
READER_GAPS = {
    "llama": "ignores rope_freqs (Llama 3's stored frequency factors)",
    "mistral": "reads a 'llama' file without its attention.sliding_window",
    "qwen3": "takes head_dim as hidden / heads, not attention.key_length",
    "gemma2": "does not read the soft-capping values (uses its defaults 50 / 30)",
    "gemma3": "does not read rope scaling of the global layers",
    "phi3": "fails building the embedding (padding id outside the vocabulary)",
    "mixtral": "reads a 'llama' file with experts as a dense Llama",
    "qwen2_moe": "assumes every layer is a mixture of experts",
    "qwen3_moe": "takes head_dim as hidden / heads, not attention.key_length",
}


def test_transformers_reads_the_written_gguf_alike(family, request):
    """The test's GGUF writer follows llama.cpp's converter: transformers' own GGUF reader agrees."""
    name, _, logits, _, gguf_path = family
    import transformers as tf
    if name in READER_GAPS:
        request.applymarker(pytest.mark.xfail(reason=f"transformers' GGUF reader {READER_GAPS[name]}", strict=True))
    ref = tf.AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name).eval()
    with torch.no_grad():
        assert (ref(IDS).logits - logits).abs().max().item() <= 1e-4


def test_greedy_decoding_equals_transformers(family):
    name, model, _, _, gguf_path = family
    lm = openafm.load(gguf_path)
    with torch.no_grad():
        want = model.generate(IDS, max_new_tokens=10, do_sample=False, min_new_tokens=10)[0, IDS.shape[1]:]
    got = generate_tokens(lm.model, [IDS[0].tolist()], max_new_tokens=10)[0].token_ids
    assert got == want.tolist()


def test_native_weights_equal_the_dequantized_model(family, tmp_path):
    """Every family runs from its GGUF blocks as stored (V in another type than Q and K: llama.cpp's _M mixes)."""
    name, model, _, _, _ = family
    q = gguf_py.GGMLQuantizationType
    names = save_gguf_names(model, name)
    types = {n: q.Q8_0 if ".attn_v." in n else q.Q4_0 for n, shape in names.items() if len(shape) >= 2}
    types["blk.0.attn_output.weight"] = q.Q3_K if model.config.hidden_size % 256 == 0 else q.Q5_1
    path = save_gguf(model, name, tmp_path / "q.gguf", types)
    native, dense = load_model(path, weights="native"), load_model(path)
    assert "Q4_0" in native.source and "dequantized" not in native.source
    moes = [m for m in native.model.modules() if isinstance(m, MoE)]
    assert all(isinstance(m.stored[0].gate_up, BlockLinear) for m in moes)      # experts kept as blocks too
    with torch.no_grad():
        assert torch.allclose(native.model(IDS), dense.model(IDS), atol=1e-3)
    tokens = [generate_tokens(lm.model, [IDS[0].tolist()], max_new_tokens=8)[0].token_ids for lm in (native, dense)]
    assert tokens[0] == tokens[1]
