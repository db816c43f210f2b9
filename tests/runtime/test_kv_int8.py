"""The int8 KV storage kind: per-token, per-head scales, quantized on write, dequantized on read."""

import pytest
import torch
from tiny import TINY_PRESETS, make_tiny

from openafm.runtime.generate import GenerationStats, generate_tokens
from openafm.runtime.kv_cache import Int8Slots, KVCache, KVStorage, quantize_int8


def test_error_per_element_is_at_most_half_a_step():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 10, 16) * torch.logspace(-3, 2, 10)[None, None, :, None]   # tokens of very different size
    x[0, 0, 0] = 0                                                                    # an all-zero head
    slots = Int8Slots(2, 3, 10, 16, torch.float32, "cpu")
    slots.set(slice(0, 10), x)
    back = slots.get(slice(0, 10))
    step = x.abs().amax(-1, keepdim=True) / 127                                       # the formula's scale
    assert torch.equal(slots.scale, step)
    assert ((back - x).abs() <= step / 2 + 1e-7 * x.abs()).all()
    assert torch.equal(back[0, 0, 0], torch.zeros(16))
    codes, _ = quantize_int8(x)
    assert codes.dtype == torch.int8 and int(codes.abs().max()) == 127


@pytest.mark.parametrize("name", TINY_PRESETS)
def test_int8_greedy_generation_matches_native(name):
    model = make_tiny(name)
    prompts = [[3, 14, 15, 92, 65, 35, 89, 79, 32, 38]]
    native = generate_tokens(model, prompts, max_new_tokens=12)[0].token_ids
    stats = GenerationStats()
    int8 = generate_tokens(model, prompts, max_new_tokens=12, kv_storage=KVStorage.INT8, stats=stats)[0].token_ids
    assert stats.cache.storage is KVStorage.INT8
    assert int8 == native


@pytest.mark.parametrize("name", TINY_PRESETS)
def test_int8_logits_stay_close_through_rings_chunks_and_growth(name):
    """Chunked prefill past the sliding window (16), single steps and a grown cache, against a cache-free
    forward of the whole sequence."""
    model = make_tiny(name)
    ids = torch.randint(0, 512, (1, 60), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(ids)
        cache = KVCache(model.config, batch_size=1, capacity=30, storage=KVStorage.INT8)
        out = [model(ids[:, :10], cache=cache), model(ids[:, 10:25], cache=cache)]
        cache = cache.grown(60)
        assert cache.storage is KVStorage.INT8
        out.append(model(ids[:, 25:45], cache=cache))
        out += [model(ids[:, t:t + 1], cache=cache) for t in range(45, 60)]
    got = torch.cat(out, 1)
    rel = (got - full).norm() / full.norm()
    assert rel < 0.02, rel
    assert (got.argmax(-1) == full.argmax(-1)).float().mean() > 0.9


def test_nbytes_is_a_quarter_of_fp32_plus_scales():
    model = make_tiny("afm-server-dense-tiny")                      # full, ring and (no) shared layers
    fp32 = KVCache(model.config, batch_size=2, capacity=100)
    int8 = KVCache(model.config, batch_size=2, capacity=100, storage=KVStorage.INT8)
    dh = model.config.attn_head_dim
    slots = fp32.nbytes() // (4 * dh)                               # K and V slots over all heads and layers
    assert int8.nbytes() == slots * dh + slots * 4                  # int8 codes + one fp32 scale per slot
    assert int8.nbytes() / fp32.nbytes() == pytest.approx(0.25 + 1 / dh)
    shared = make_tiny("afm-ondevice-tiny")
    assert KVCache(shared.config, batch_size=1, capacity=64, storage=KVStorage.INT8).nbytes() == \
        5 * 2 * 2 * 64 * (dh + 4)                                   # 5 owners x (K, V) x 2 heads x 64 slots


def test_storage_must_be_a_kind():
    model = make_tiny("smollm2-tiny")
    with pytest.raises(ValueError, match="storage='int8' is not a KVStorage"):
        KVCache(model.config, batch_size=1, capacity=8, storage="int8")
    stats = GenerationStats()
    generate_tokens(model, [[1, 2]], max_new_tokens=2, stats=stats)
    with pytest.raises(ValueError, match="differs from the continued cache"):
        generate_tokens(model, [[3]], max_new_tokens=2, cache=stats.cache, kv_storage=KVStorage.INT8)


def test_cli_generate_takes_kv_int8(capsys):
    from openafm.cli import build_parser
    args = build_parser().parse_args(["generate", "--kv", "int8", "hi"])
    assert args.kv == "int8" and KVStorage(args.kv) is KVStorage.INT8
    with pytest.raises(SystemExit):
        build_parser().parse_args(["generate", "--kv", "int4", "hi"])
    assert "invalid choice: 'int4'" in capsys.readouterr().err
