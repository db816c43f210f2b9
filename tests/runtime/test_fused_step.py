"""The fused C++ decode step against the eager module graph: the same logits and greedy tokens on every
dense family (global, sliding rings that wrap, NoPE, KV sharing), batches with padding, int8 K/V, packed
and block weights, LoRA beside them; and the reasons it gives for running eagerly."""

import pytest
import torch

from openafm.models.build import build_model
from openafm.models.plan import Features
from openafm.models.presets import get_preset
from openafm.nn.block_linear import BlockLinear
from openafm.nn.lora import apply_lora
from openafm.nn.packed_kernel import WeightFormat
from openafm.nn.packed_linear import PackedKernel
from openafm.nn.packed_model import QuantizedCodes, pack_model
from openafm.runtime.fused_step import FusedStepUnsupported, StepKind, fused_decoder, why_not_fused
from openafm.runtime.generate import GenerationStats, generate_tokens
from openafm.runtime.kv_cache import KVCache, KVStorage
from packed_codes import rtn_codes
from tiny import TINY_PRESETS, make_tiny

PROMPTS = [[5, 6, 7, 8, 9, 10, 11], [3, 4]]                       # unequal: the second row is left-padded


def rtn(model, bits: int) -> dict:
    """Every matrix (the tied embedding too) as per-channel round-to-nearest codes."""
    return {name: QuantizedCodes(*rtn_codes(p.detach(), bits), bits)
            for name, p in model.named_parameters() if p.ndim == 2}


def run(model, kind, new=40, prompts=PROMPTS, **kw):
    stats = GenerationStats()
    out = generate_tokens(model, prompts, max_new_tokens=new, stats=stats, step=kind, **kw)
    return [g.token_ids for g in out], stats


@pytest.mark.parametrize("name", TINY_PRESETS)
@pytest.mark.parametrize("storage", list(KVStorage))
def test_greedy_tokens_equal_the_eager_step(name, storage):
    model = make_tiny(name)
    # 60 new tokens wrap afm-server-dense-tiny's sliding rings (window 16) several times.
    eager, _ = run(model, StepKind.EAGER, new=60, kv_storage=storage)
    fused, stats = run(model, StepKind.FUSED, new=60, kv_storage=storage)
    assert stats.step == "fused"
    assert fused == eager


@pytest.mark.parametrize("name", TINY_PRESETS)
def test_one_step_logits_equal_the_eager_forward(name):
    model = make_tiny(name)
    ids = torch.tensor([[4, 9, 2, 7, 1, 30, 8, 8, 2, 5] * 3])                 # 30 tokens: rings of 16 wrapped
    caches = [KVCache(model.kv_plan, batch_size=1, capacity=40) for _ in range(2)]
    with torch.inference_mode():
        for cache in caches:
            model(ids, cache=cache)
        nxt = torch.tensor([[11]])
        pos = torch.tensor([[30]])
        eager = model(nxt, cache=caches[0], positions=pos)[:, -1]
        fused = fused_decoder(model)(nxt, caches[1], pos)
    assert torch.allclose(fused, eager, atol=1e-4, rtol=1e-4), (fused - eager).abs().max()
    for a, b in zip(caches[0].layers, caches[1].layers, strict=True):  # the step wrote the same K/V
        if a is not None:
            assert torch.allclose(a.k.data, b.k.data, atol=1e-5) and torch.allclose(a.v.data, b.v.data, atol=1e-5)


def test_packed_weights_and_lora_beside_them():
    model = make_tiny("smollm2-tiny")
    pack_model(model, rtn(model, bits=4))
    apply_lora(model, rank=4, alpha=8.0, targets=("qkv", "down"))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    assert run(model, StepKind.FUSED)[0] == run(model, StepKind.EAGER)[0]


def test_block_weights_with_lora_unmerged():
    model = make_tiny("smollm2-tiny")
    for block in model.layers:
        for parent, attr in ((block.attn, "qkv"), (block.ffn, "gate_up"), (block.ffn, "down")):
            dense = getattr(parent, attr)
            setattr(parent, attr, quantize_to_q8_0(dense.weight.detach()))
    apply_lora(model, rank=2, alpha=2.0, targets=("gate_up",))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    assert run(model, StepKind.FUSED)[0] == run(model, StepKind.EAGER)[0]


def quantize_to_q8_0(w: torch.Tensor) -> BlockLinear:
    """float [out, in] -> a Q8_0 BlockLinear (scale = max|w| / 127 per 32 values, float16)."""
    out, n = w.shape
    blocks = w.reshape(out, n // 32, 32)
    d = (blocks.abs().amax(-1, keepdim=True) / 127).to(torch.float16)
    q = torch.round(blocks / d.float().clamp_min(1e-12)).clamp(-127, 127).to(torch.int8)
    raw = torch.cat([d.view(torch.uint8), q.view(torch.uint8)], -1)          # [out, nb, 34]
    return BlockLinear(raw.reshape(out, -1).contiguous(), WeightFormat.Q8_0, n)


def test_threads_follow_torch():
    model = make_tiny("smollm2-tiny")
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert fused_decoder(model).native.threads == 1
        torch.set_num_threads(2)
        assert fused_decoder(model).native.threads == 2         # rebuilt for the new count
    finally:
        torch.set_num_threads(before)


def test_constrained_fast_forward_feeds_run_eagerly_in_between():
    # A feed of several tokens (fast-forward) runs the module graph; one-token steps run fused: the
    # tokens must not change.
    model = make_tiny("smollm2-tiny")
    cache_a = KVCache(model.kv_plan, batch_size=1, capacity=64)
    cache_b = KVCache(model.kv_plan, batch_size=1, capacity=64)
    ids = torch.tensor([[1, 2, 3]])
    with torch.inference_mode():
        model(ids, cache=cache_a)
        model(ids, cache=cache_b)
        fused = fused_decoder(model)
        for t, tok in enumerate([4, 5]):
            pos = torch.tensor([[3 + t]])
            fused(torch.tensor([[tok]]), cache_a, pos)
            model(torch.tensor([[tok]]), cache=cache_b, positions=pos)
        multi = torch.tensor([[6, 7, 8]])
        pos = torch.tensor([[5, 6, 7]])
        a = model(multi, cache=cache_a, positions=pos)[:, -1]
        b = model(multi, cache=cache_b, positions=pos)[:, -1]
    assert torch.allclose(a, b, atol=1e-4)


def test_what_runs_eagerly_says_why():
    ptmoe = build_model(get_preset("afm-server-tiny"))
    assert "PTMoE runs eagerly" in why_not_fused(ptmoe)
    _, stats = run(ptmoe, StepKind.AUTO, new=3, prompts=[[1, 2]])
    assert stats.step.startswith("eager (PTMoE")
    with pytest.raises(FusedStepUnsupported, match="step=fused cannot run this model: PTMoE"):
        run(ptmoe, StepKind.FUSED, new=3, prompts=[[1, 2]])
    bf16 = make_tiny("smollm2-tiny").to(torch.bfloat16)
    assert "runs float32 on the CPU; this model is torch.bfloat16" in why_not_fused(bf16)
    torch_kernel = make_tiny("smollm2-tiny")
    pack_model(torch_kernel, rtn(torch_kernel, bits=2), kernel=PackedKernel.TORCH)
    assert "kernel=torch run eagerly" in why_not_fused(torch_kernel)
    with pytest.raises(ValueError, match="step='fast' is not a StepKind"):
        run(make_tiny("smollm2-tiny"), "fast", new=2)


def test_eager_step_is_reported():
    _, stats = run(make_tiny("smollm2-tiny"), StepKind.EAGER, new=2)
    assert stats.step == "eager"


def test_no_avx2_means_eager_with_the_reason(monkeypatch):
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")
    reason = why_not_fused(make_tiny("smollm2-tiny"))
    assert "needs a CPU with AVX2, FMA and F16C; this CPU reports 'DEFAULT'" in reason
    assert "step=StepKind.EAGER" in reason


@pytest.mark.parametrize("name", TINY_PRESETS)
@pytest.mark.parametrize("chunk", [5, 20])                           # shorter and longer than a window of 16
def test_chunked_prefill_gives_the_same_tokens(name, chunk):
    model = make_tiny(name)
    prompts = [list(range(3, 40)), list(range(50, 61))]              # 37 and 11 tokens, left-padded batch
    whole, _ = run(model, StepKind.EAGER, new=12, prompts=prompts, prefill_chunk=512)
    chunked, _ = run(model, StepKind.EAGER, new=12, prompts=prompts, prefill_chunk=chunk)
    assert chunked == whole
    with pytest.raises(ValueError, match="prefill_chunk=0 is invalid"):
        run(model, StepKind.EAGER, new=2, prefill_chunk=0)


@pytest.mark.parametrize("features", [{"qkv_bias": True}, {"qk_norm": True}, {"qkv_bias": True, "qk_norm": True}],
                         ids=["qwen2-bias", "qwen3-qk-norm", "both"])
@pytest.mark.parametrize("base", ["smollm2-tiny", "afm-ondevice-tiny"])      # global; KV sharing (reader q norm)
def test_qwen_attention_features_run_fused_and_equal_eager(features, base):
    model = make_tiny(base, features=Features(**features))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("in_bias"):
                p.normal_(0, 0.3)
            elif name.endswith(("q_norm.weight", "k_norm.weight")):
                p.uniform_(0.5, 1.5)
    assert why_not_fused(model) is None
    eager, _ = run(model, StepKind.EAGER, new=30)
    fused, stats = run(model, StepKind.FUSED, new=30)
    assert stats.step == "fused" and fused == eager


def prompts_in_two_caches(model) -> tuple[list[KVCache], object]:
    """Two caches each holding PROMPTS (the second row left-padded), and the model's fused step."""
    ids = torch.tensor([PROMPTS[0], [0] * 5 + PROMPTS[1]])
    pos = torch.tensor([list(range(7)), [-1] * 5 + [0, 1]])
    caches = [KVCache(model.kv_plan, batch_size=2, capacity=12) for _ in range(2)]
    with torch.inference_mode():
        for cache in caches:
            model(ids, cache=cache, positions=pos)
    return caches, fused_decoder(model)


@pytest.mark.parametrize("name", [n for n in TINY_PRESETS if why_not_fused(make_tiny(n)) is None])
def test_several_tokens_per_row_in_one_pass_equal_one_at_a_time(name):
    """The engine's speculative step: T tokens of each row (the second row padded) in one fused pass give the
    logits and K/V of feeding them one step at a time."""
    model = make_tiny(name)
    feed, feed_pos = torch.tensor([[11, 12, 13], [14, 15, 0]]), torch.tensor([[7, 8, 9], [2, 3, -1]])
    caches, fused = prompts_in_two_caches(model)
    with torch.inference_mode():
        together = fused.rows(feed, caches[0], feed_pos)                                        # [2, 3, V]
        apart = torch.stack([fused(feed[:, j:j + 1], caches[1], feed_pos[:, j:j + 1]) for j in range(3)], 1)
    real = feed_pos >= 0
    assert torch.allclose(together[real], apart[real], atol=1e-5, rtol=1e-5), (together - apart)[real].abs().max()
    assert torch.equal(together[real].argmax(-1), apart[real].argmax(-1))
    for a, b in zip(caches[0].layers, caches[1].layers, strict=True):
        if a is not None:
            assert torch.allclose(a.k.data, b.k.data, atol=1e-6) and torch.allclose(a.v.data, b.v.data, atol=1e-6)


@pytest.mark.parametrize("name", [n for n in TINY_PRESETS if why_not_fused(make_tiny(n)) is None])
def test_prefill_in_one_pass_equals_the_graph(name):
    """The engine's short-prompt prefill: a chunk in one fused pass, the head on its last token only, gives the graph's
    last logits and K/V; a chunk that would wrap a sliding ring, or two sequences, is refused by name."""
    model = make_tiny(name)
    ids = torch.tensor([[4, 9, 2, 7, 1, 30, 8, 8, 2, 5, 6, 3]])                            # [1, 12]
    caches = [KVCache(model.kv_plan, batch_size=1, capacity=40) for _ in range(2)]
    fused = fused_decoder(model)
    with torch.inference_mode():
        graph = model(ids, cache=caches[0])[:, -1]                                           # [1, V]
        one_pass = fused.prefill(ids, caches[1], torch.arange(12)[None])                    # [1, V]
    assert one_pass.shape == graph.shape
    assert torch.allclose(one_pass, graph, atol=1e-4, rtol=1e-4), (one_pass - graph).abs().max()
    assert caches[1].steps == 12
    for a, b in zip(caches[0].layers, caches[1].layers, strict=True):
        if a is not None:
            assert torch.allclose(a.k.data, b.k.data, atol=1e-5) and torch.allclose(a.v.data, b.v.data, atol=1e-5)
    with pytest.raises(ValueError, match="one sequence; got 2 rows"):
        fused.prefill(ids.repeat(2, 1), KVCache(model.kv_plan, batch_size=2, capacity=40), torch.arange(12)[None])
    if any(s.window for s in model.config.layers):                   # rings of 16: 20 tokens would wrap
        long = torch.arange(1, 21)[None]
        with pytest.raises(ValueError, match="would wrap"):
            fused.prefill(long, KVCache(model.kv_plan, batch_size=1, capacity=40), torch.arange(20)[None])


@pytest.mark.parametrize("name", [n for n in TINY_PRESETS if why_not_fused(make_tiny(n)) is None])
def test_a_ragged_pass_equals_the_padded_one_on_its_real_tokens(name):
    """The engine's speculative step: rows feeding 1 and 3 tokens, padding skipped, logits of the chosen slots
    only, give bit for bit what the padded pass gives on those slots (and the same K/V)."""
    model = make_tiny(name)
    feed, feed_pos = torch.tensor([[11, 0, 0], [14, 15, 16]]), torch.tensor([[7, -1, -1], [2, 3, 4]])
    want = torch.tensor([[True, False, False], [False, False, True]])       # some of the fed slots
    caches, fused = prompts_in_two_caches(model)
    with torch.inference_mode():
        padded = fused.rows(feed, caches[0], feed_pos)                                          # [2, 3, V]
        ragged = fused.ragged(feed, caches[1], feed_pos, want)                                  # [2, V]
    assert torch.equal(ragged, padded[want])
    real = (feed_pos >= 0)[:, None, :, None]                                 # [2, 1, 3, 1] over [B, Hkv, S, Dh]
    for a, b in zip(caches[0].layers, caches[1].layers, strict=True):
        if a is not None:                                                    # padding slots are never read
            new_a, new_b = a.k.data[:, :, 7:10], b.k.data[:, :, 7:10]
            assert torch.equal(torch.where(real, new_a, 0), torch.where(real, new_b, 0))
    with pytest.raises(ValueError, match="padding slot"):
        fused.ragged(feed, caches[1], feed_pos, torch.ones(2, 3, dtype=torch.bool))


@pytest.mark.parametrize("head_dim", [64, 96, 128])
@pytest.mark.parametrize("storage", list(KVStorage))
def test_long_context_attention_equals_the_eager_forward(head_dim, storage):
    """A step over 301 visible slots (the vector softmax's 8-lane chunks and a tail; head widths that are one, one and
    a half and two 64-value register blocks of the weighted sum of V) gives the eager forward's logits."""
    model = make_tiny("smollm2-tiny", head_dim=head_dim, max_seq_len=512)
    ids = torch.randint(1, 500, (1, 300), generator=torch.Generator().manual_seed(head_dim))
    caches = [KVCache(model.kv_plan, batch_size=1, capacity=320, storage=storage) for _ in range(2)]
    with torch.inference_mode():
        for cache in caches:
            model(ids, cache=cache)
        nxt, pos = torch.tensor([[7]]), torch.tensor([[300]])
        eager = model(nxt, cache=caches[0], positions=pos)[:, -1]
        fused = fused_decoder(model)(nxt, caches[1], pos)
    assert torch.allclose(fused, eager, atol=1e-4, rtol=1e-4), (fused - eager).abs().max()
