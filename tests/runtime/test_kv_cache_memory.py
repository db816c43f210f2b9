import pytest
import torch
from tiny import make_tiny

from openafm.models.presets import get_preset
from openafm.runtime.kv_cache import FullLayerCache, KVCache, RingLayerCache


def expected_bytes(config, context, elem=4):
    per_slot = 2 * config.n_kv_heads * config.attn_head_dim * elem
    total = 0
    for s in config.layers:
        if s.owns_kv:
            total += per_slot * (min(s.window, context) if s.window else context)
    return total


@pytest.mark.parametrize("name", ["afm-ondevice-tiny", "afm-server-dense-tiny", "smollm2-tiny"])
def test_cache_bytes_follow_layer_kinds(name):
    config = get_preset(name)
    cache = KVCache(config, batch_size=1, capacity=200)
    assert cache.nbytes() == expected_bytes(config, 200)
    for spec, layer in zip(config.layers, cache.layers, strict=True):
        if not spec.owns_kv:
            assert layer is None                      # readers store nothing
        elif spec.window:
            assert isinstance(layer, RingLayerCache) and layer.k.shape[2] == spec.window
        else:
            assert isinstance(layer, FullLayerCache) and layer.k.shape[2] == 200


def test_sharing_saves_exactly_three_eighths():
    from openafm.models.plan import DecoderConfig
    from openafm.models.presets import kv_sharing_plan
    shared = get_preset("afm-ondevice-small")
    plain = DecoderConfig(**{**shared.__dict__, "layers": kv_sharing_plan(16, share=False)})
    a = KVCache(shared, batch_size=1, capacity=4096, dtype=torch.float16, device="meta").nbytes()
    b = KVCache(plain, batch_size=1, capacity=4096, dtype=torch.float16, device="meta").nbytes()
    assert a * 8 == b * 5


def test_capacity_beyond_context_window_raises():
    from openafm.errors import ContextWindowExceededError
    config = get_preset("smollm2-tiny")
    with pytest.raises(ContextWindowExceededError, match="300 tokens exceeds the context window of 256"):
        KVCache(config, batch_size=1, capacity=300)


def test_writing_past_capacity_raises():
    from openafm.errors import ContextWindowExceededError
    model = make_tiny("smollm2-tiny")
    cache = KVCache(model.config, batch_size=1, capacity=8)
    with torch.no_grad():
        model(torch.zeros(1, 6, dtype=torch.long), cache=cache)
        with pytest.raises(ContextWindowExceededError, match="prompt of 9 tokens"):
            model(torch.zeros(1, 3, dtype=torch.long), cache=cache)
