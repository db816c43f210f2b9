"""Growing a cache and continuing generation on it, as sessions do."""

import pytest
import torch
from tiny import TINY_PRESETS, make_tiny

from openafm.runtime.generate import GenerationStats, generate_tokens
from openafm.runtime.kv_cache import KVCache, RingLayerCache


@pytest.mark.parametrize("name", TINY_PRESETS)
def test_grown_cache_continues_exactly(name):
    model = make_tiny(name)
    ids = torch.randint(0, 512, (1, 48), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        full = model(ids)
        cache = KVCache(model.config, batch_size=1, capacity=12)     # below the sliding window (16)
        model(ids[:, :12], cache=cache)
        cache = cache.grown(48)                                       # sliding layers become rings
        assert cache.steps == 12
        if any(s.window for s in model.config.layers):
            assert any(isinstance(layer, RingLayerCache) for layer in cache.layers)
        out = [model(ids[:, 12:30], cache=cache)]
        for t in range(30, 48):
            out.append(model(ids[:, t:t + 1], cache=cache))
    assert (torch.cat(out, 1) - full[:, 12:]).abs().max().item() < 1e-4


@pytest.mark.parametrize("name", TINY_PRESETS)
def test_generation_continuing_a_cache_equals_generation_from_scratch(name):
    model = make_tiny(name)
    first, second = [5, 6, 7, 8, 9, 10, 11], [20, 21, 22]
    stats = GenerationStats()
    turn1 = generate_tokens(model, [first], max_new_tokens=6, stats=stats)[0].token_ids
    cache = stats.cache                                               # holds first + turn1[:-1]
    assert cache.steps == len(first) + len(turn1) - 1
    stats2 = GenerationStats()
    new = [turn1[-1]] + second
    turn2 = generate_tokens(model, [new], max_new_tokens=10, cache=cache, stats=stats2)[0].token_ids
    assert stats2.prompt_tokens == len(new)                           # only the new tokens were prefilled
    scratch = generate_tokens(model, [first + turn1 + second], max_new_tokens=10)[0].token_ids
    assert turn2 == scratch
