"""The decoder (cache-free and cached) against the naive reference, for every tiny plan."""

import pytest
import torch
from reference import naive_forward
from tiny import TINY_PRESETS, make_tiny

from openafm.models.decoder import Logits
from openafm.runtime.kv_cache import KVCache


@pytest.mark.parametrize("name", TINY_PRESETS)
def test_cache_free_forward_matches_naive_reference(name):
    model = make_tiny(name)
    ids = torch.randint(0, model.config.vocab_size, (40,), generator=torch.Generator().manual_seed(1))
    ref = naive_forward(model.config, model.state_dict(), ids)
    with torch.no_grad():
        out = model(ids[None])[0].double()
    assert (out - ref).abs().max().item() < 1e-4


@pytest.mark.parametrize("name", TINY_PRESETS)
def test_cached_prefill_chunks_and_decode_match_full_forward(name):
    model = make_tiny(name)
    ids = torch.randint(0, model.config.vocab_size, (2, 60), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = model(ids)
        cache = KVCache(model.config, batch_size=2, capacity=60)
        got = [model(ids[:, :25], cache=cache)]                 # prefill longer than the sliding window (16)
        got.append(model(ids[:, 25:45], cache=cache))           # a chunk appended to a warm cache
        for t in range(45, 60):                                 # one token at a time, wrapping the ring
            got.append(model(ids[:, t:t + 1], cache=cache))
    assert (torch.cat(got, 1) - full).abs().max().item() < 1e-4


@pytest.mark.parametrize("name", TINY_PRESETS)
def test_last_logits_equal_the_full_computation(name):
    model = make_tiny(name)
    ids = torch.randint(0, model.config.vocab_size, (3, 33), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full = model(ids)[:, -1]
        last = model(ids, logits=Logits.LAST)[:, 0]
        cached = model(ids, cache=KVCache(model.config, batch_size=3, capacity=40), logits=Logits.LAST)[:, 0]
    # 1e-4, as the tests above: on an AMD EPYC host the last-position path (a [B, 1, D] matmul) sums in a
    # different order than the full one and differs by up to 1.5e-5 on logits of magnitude ~15 (8 ulp).
    assert (last - full).abs().max().item() < 1e-4
    assert (cached - full).abs().max().item() < 1e-4


def left_pad(prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """-> ids [B, L] (pad id 0) and positions [B, L] with -1 on the left padding."""
    longest = max(len(p) for p in prompts)
    ids = torch.zeros(len(prompts), longest, dtype=torch.long)
    pos = torch.full((len(prompts), longest), -1, dtype=torch.long)
    for r, p in enumerate(prompts):
        ids[r, longest - len(p):] = torch.tensor(p)
        pos[r, longest - len(p):] = torch.arange(len(p))
    return ids, pos


def test_padded_batch_rows_equal_their_unpadded_runs():
    model = make_tiny("afm-server-dense-tiny")
    prompts = [[5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24], [3, 4, 5]]
    ids, pos = left_pad(prompts)
    with torch.no_grad():
        cache = KVCache(model.config, batch_size=2, capacity=30)
        batched = model(ids, cache=cache, positions=pos, logits=Logits.LAST)[:, 0]
        nxt = torch.tensor([[30], [31]])
        step = model(nxt, cache=cache, positions=pos[:, -1:] + 1)[:, 0]
        for r, p in enumerate(prompts):
            alone = model(torch.tensor([p + [int(nxt[r, 0])]]))[0]
            assert (batched[r] - alone[-2]).abs().max().item() < 1e-4
            assert (step[r] - alone[-1]).abs().max().item() < 1e-4


@pytest.mark.parametrize("name", TINY_PRESETS)
def test_chunked_appends_with_last_logits_only(name):
    model = make_tiny(name)
    ids = torch.randint(0, model.config.vocab_size, (2, 50), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        full = model(ids)
        cache = KVCache(model.config, batch_size=2, capacity=50)
        for start, end in ((0, 18), (18, 37), (37, 50)):      # the bypass runs on warm caches too
            last = model(ids[:, start:end], cache=cache, logits=Logits.LAST)[:, 0]
            assert (last - full[:, end - 1]).abs().max().item() < 1e-4


def test_padded_cache_needs_explicit_positions():
    model = make_tiny("smollm2-tiny")
    ids, pos = left_pad([[1, 2, 3], [4]])
    cache = KVCache(model.config, batch_size=2, capacity=8)
    with torch.no_grad():
        model(ids, cache=cache, positions=pos)
        with pytest.raises(ValueError, match="pass positions= explicitly"):
            model(torch.tensor([[5], [6]]), cache=cache)
