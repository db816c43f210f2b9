"""The fused decode step over a tiny decoder whose matrices are K-quant, Q5_0 and 16-bit float blocks (what a
Q4_K_M GGUF holds): the same one-step logits, batched rows and greedy tokens as the eager module graph."""

import numpy as np
import pytest
import torch

from openafm.checkpoint.gguf import GGMLType
from openafm.checkpoint.gguf.quantize import quantize
from openafm.nn.block_linear import BlockEmbedding, BlockLinear, BlockRows
from openafm.nn.lora import apply_lora
from openafm.nn.packed_kernel import Activations, WeightFormat
from openafm.runtime.fused_step import StepKind, fused_decoder
from openafm.runtime.generate import GenerationStats, generate_tokens
from openafm.runtime.kv_cache import KVCache
from tiny import make_tiny

# Per matrix kind, the format it is stored in (widths: dim 256, ffn 512, so K-quant rows are whole super-blocks).
FORMATS = {"qkv": WeightFormat.Q4_K, "out": WeightFormat.Q6_K, "gate_up": WeightFormat.Q5_0,
           "down": WeightFormat.Q4_K, "embed": WeightFormat.Q6_K}


def as_blocks(w: torch.Tensor, fmt: WeightFormat) -> torch.Tensor:  # float [out, in] -> uint8 [out, row bytes]
    return torch.from_numpy(quantize(w.detach().numpy().astype(np.float32), GGMLType[fmt.name]).copy())


def kquant_model(activations: Activations, formats: dict = FORMATS):
    model = make_tiny("smollm2-tiny", dim=256, ffn_hidden=512)
    for block in model.layers:
        for parent, attr in ((block.attn, "qkv"), (block.attn, "out"), (block.ffn, "gate_up"), (block.ffn, "down")):
            dense = getattr(parent, attr)
            fmt = formats[attr]
            setattr(parent, attr, BlockLinear(as_blocks(dense.weight, fmt), fmt, dense.in_features, activations))
    fmt = formats["embed"]
    model.embed = BlockEmbedding(as_blocks(model.embed.weight, fmt), fmt, 256, activations)   # tied head too
    return model


@pytest.mark.parametrize("activations", list(Activations), ids=lambda a: a.value)
def test_one_step_logits_equal_the_eager_forward(activations):
    model = kquant_model(activations)
    ids = torch.tensor([[4, 9, 2, 7, 1, 30, 8, 8], [3, 3, 5, 11, 2, 9, 1, 4]])
    caches = [KVCache(model.kv_plan, batch_size=2, capacity=16) for _ in range(2)]
    with torch.inference_mode():
        for cache in caches:
            model(ids, cache=cache)
        nxt, pos = torch.tensor([[11], [12]]), torch.tensor([[8], [8]])
        eager = model(nxt, cache=caches[0], positions=pos)[:, -1]                    # [2, V]
        fused = fused_decoder(model)(nxt, caches[1], pos)
    assert torch.allclose(fused, eager, atol=1e-4, rtol=1e-4), (fused - eager).abs().max()


def test_greedy_tokens_equal_the_eager_step_with_16_bit_float_matrices_beside():
    formats = dict(FORMATS, out=WeightFormat.F16, down=WeightFormat.Q6_K, embed=WeightFormat.BF16)
    model = kquant_model(Activations.FLOAT32, formats)
    runs = {}
    for kind in (StepKind.EAGER, StepKind.FUSED):
        stats = GenerationStats()
        out = generate_tokens(model, [[5, 6, 7, 8, 9], [3, 4]], max_new_tokens=16, stats=stats, step=kind)
        runs[kind] = [g.token_ids for g in out]
        assert stats.step == kind.value
    assert runs[StepKind.FUSED] == runs[StepKind.EAGER]


def test_qkv_in_several_formats_with_lora_beside_it():
    model = kquant_model(Activations.FLOAT32)
    for block in model.layers:   # q and k rows Q5_0, v rows Q8_0 (a Q4_K_M layer given more bits for v)
        w = block.attn.qkv.weight_dequantized()
        kv = model.config.n_kv_heads * model.config.attn_head_dim
        parts = [(w[:-kv], WeightFormat.Q5_0), (w[-kv:], WeightFormat.Q8_0)]
        block.attn.qkv = BlockRows([BlockLinear(as_blocks(p, f), f, 256) for p, f in parts])
    apply_lora(model, rank=2, alpha=2.0, targets=("qkv",))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    runs = [[g.token_ids for g in generate_tokens(model, [[5, 6, 7], [3]], max_new_tokens=12, step=kind)]
            for kind in (StepKind.EAGER, StepKind.FUSED)]
    assert runs[0] == runs[1]
