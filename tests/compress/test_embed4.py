import pytest
import torch
from torch import nn
from torch.nn.utils import parametrize

from tiny import make_tiny
from openafm.compress.fake_quant import Granularity, absmax
from openafm.compress.levels import Levels, level_set
from openafm.compress.qat import QATSpec, export_model, prepare_qat


def _ids(vocab, seed=0):
    return torch.randint(0, vocab, (2, 10), generator=torch.Generator().manual_seed(seed))


def test_tied_head_reads_the_same_quantized_table():
    model = make_tiny("smollm2-tiny")
    assert model.config.tie_embeddings and model.lm_head is None
    prepare_qat(model, QATSpec(bits=2, embed_bits=4))
    assert model.lm_head is None                                          # still tied: no second table
    tables = [p for n, p in model.named_parameters() if n.startswith("embed.")]
    assert len(tables) == 2                                               # latent table + its f
    table = export_model(model)["embed.weight"].dequantize()              # [V, D]
    ids = _ids(model.config.vocab_size)
    # reference: the head of a tied model is x_final @ table^T with the same dequantized table as the lookup
    captured = {}
    model.norm.register_forward_hook(lambda m, i, o: captured.__setitem__("x", o))
    with torch.no_grad():
        logits = model(ids)
        assert torch.equal(model.embed(ids), table[ids])                  # lookup uses the 4-bit table
    assert torch.allclose(logits, captured["x"] @ table.T, rtol=1e-5, atol=1e-5)


def test_embedding_is_four_bit_per_row():
    model = make_tiny("smollm2-tiny")
    prepare_qat(model, QATSpec(bits=2, embed_bits=4))
    q = export_model(model)["embed.weight"]
    v, d = model.config.vocab_size, model.config.dim
    assert q.bits == 4 and q.codes.shape == (v, d) and int(q.codes.max()) <= 15
    assert q.scale.shape == (v,)                                          # per-row scale
    fq = model.embed.parametrizations.weight[0]
    assert fq.f.shape == (v, 1) and fq.granularity is Granularity.CHANNEL
    ls = level_set(Levels.BALANCED, 4)
    latent = model.embed.parametrizations.weight.original
    assert torch.equal(q.scale, (fq.f * absmax(latent, Granularity.CHANNEL) / ls.level_max).reshape(-1).detach())
    # each row of the table lies on its own 16-level grid
    rows = model.embed.weight.detach() / q.scale[:, None]
    assert torch.allclose(rows, rows.sub(0.5).round().add(0.5), atol=1e-4)
    assert float(rows.abs().max()) <= 7.5 + 1e-4


def test_untied_head_quantized_like_the_embedding():
    model = make_tiny("smollm2-tiny", tie_embeddings=False)
    assert isinstance(model.lm_head, nn.Linear)
    prepare_qat(model, QATSpec(bits=2, embed_bits=4))
    exported = export_model(model)
    assert exported["lm_head.weight"].bits == 4 and exported["lm_head.weight"].scale.ndim == 1
    assert exported["layers.0.attn.out.weight"].bits == 2


def test_embed_bits_none_leaves_tables_fp32():
    model = make_tiny("smollm2-tiny")
    before = model.embed.weight.detach().clone()
    prepare_qat(model, QATSpec(bits=2, embed_bits=None))
    assert not parametrize.is_parametrized(model.embed)
    assert torch.equal(model.embed.weight, before)
    assert "embed.weight" not in export_model(model)
