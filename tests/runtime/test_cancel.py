"""A CancelToken stops generate_tokens before its next forward pass; a rewound cache continues exactly."""

import threading

import pytest
import torch
from tiny import TINY_PRESETS, make_tiny

from openafm.runtime.cancel import CancelToken, GenerationCancelled
from openafm.runtime.generate import GenerationStats, generate_tokens
from openafm.runtime.fused_step import StepKind
from openafm.runtime.kv_cache import KVCache

PROMPT = [5, 6, 7, 8, 9]
EAGER = StepKind.EAGER   # forward hooks count module-graph passes; the fused step shares the same loop


def count_forwards(model) -> list[int]:
    """A one-element list counting the model's forward passes (prefill and decode steps alike)."""
    count = [0]
    model.register_forward_hook(lambda *_: count.__setitem__(0, count[0] + 1))
    return count


def test_a_token_cancelled_before_the_call_runs_no_forward_pass():
    model = make_tiny("smollm2-tiny")
    forwards, token, stats = count_forwards(model), CancelToken(), GenerationStats()
    token.cancel()
    with pytest.raises(GenerationCancelled, match="generation cancelled before the prefill"):
        generate_tokens(model, [PROMPT], max_new_tokens=20, cancel=token, stats=stats, step=EAGER)
    assert forwards[0] == 0 and stats.new_tokens == 0


@pytest.mark.parametrize("k", [1, 2, 7])
def test_cancelled_at_the_kth_token_no_further_step_runs(k):
    model = make_tiny("smollm2-tiny")
    forwards, token, stats = count_forwards(model), CancelToken(), GenerationStats()
    seen = []

    def on_token(event):
        seen.append(event.token_id)
        if len(seen) == k:
            token.cancel()
            seen.append(forwards[0])              # forward passes run when the cancel landed
    with pytest.raises(GenerationCancelled, match=f"before decode step {k}"):
        generate_tokens(model, [PROMPT], max_new_tokens=20, on_token=on_token, cancel=token, stats=stats,
                        step=EAGER)
    at_cancel = seen[k]
    assert at_cancel == k                         # the prefill + k - 1 decode steps gave k tokens
    assert forwards[0] == at_cancel               # no forward pass after the cancel
    assert stats.decode_steps == k - 1 and stats.cache.steps == len(PROMPT) + k - 1
    free = generate_tokens(model, [PROMPT], max_new_tokens=20)[0].token_ids
    assert seen[:k] == free[:k]                   # the tokens before the cancel were the normal ones


def test_a_cancel_from_another_thread_mid_step_lets_only_that_step_finish():
    model = make_tiny("afm-server-dense-tiny")
    token, forwards = CancelToken(), [0]

    def hook(*_):
        forwards[0] += 1
        if forwards[0] == 5:                      # during the 4th decode step: cancel from another thread
            t = threading.Thread(target=token.cancel)
            t.start()
            t.join()
    model.register_forward_hook(hook)
    with pytest.raises(GenerationCancelled, match="before decode step 5"):
        generate_tokens(model, [PROMPT], max_new_tokens=50, cancel=token, step=EAGER)
    assert forwards[0] == 5


def test_a_token_runs_its_callbacks_once_and_at_once_when_already_cancelled():
    token, calls = CancelToken(), []
    forget = token.on_cancel(lambda: calls.append("a"))
    token.on_cancel(lambda: calls.append("b"))
    forget()
    token.cancel()
    token.cancel()
    token.on_cancel(lambda: calls.append("late"))
    assert calls == ["b", "late"] and token.cancelled
    with pytest.raises(GenerationCancelled, match="generation cancelled somewhere"):
        token.raise_if_cancelled("somewhere")
    CancelToken().raise_if_cancelled("never")     # not cancelled: nothing raised


@pytest.mark.parametrize("name", TINY_PRESETS)
def test_a_rewound_cache_continues_as_if_the_forgotten_steps_never_ran(name):
    model = make_tiny(name)
    ids = torch.randint(0, 512, (1, 30), generator=torch.Generator().manual_seed(1))
    a, forgotten, c = ids[:, :8], ids[:, 8:14], ids[:, 14:20]           # 14 steps: within the window of 16
    with torch.no_grad():
        fresh = model(torch.cat([a, c], 1))[:, 8:]
        cache = KVCache(model.config, batch_size=1, capacity=40)
        model(a, cache=cache)
        for t in range(forgotten.shape[1]):                                # one decode step at a time
            model(forgotten[:, t:t + 1], cache=cache)
        assert cache.can_rewind(8)
        cache.rewind(8)
        out = torch.cat([model(c[:, t:t + 1], cache=cache)
                         for t in range(c.shape[1])], 1)
    assert cache.steps == 14 and (out - fresh).abs().max().item() < 1e-4


def test_a_ring_that_wrapped_cannot_be_rewound():
    model = make_tiny("afm-server-dense-tiny")                          # sliding window 16
    ids = torch.randint(0, 512, (1, 20), generator=torch.Generator().manual_seed(2))
    cache = KVCache(model.config, batch_size=1, capacity=40)
    with torch.no_grad():
        model(ids[:, :16], cache=cache)
        assert cache.can_rewind(4)                                      # 16 steps: the ring is just full
        model(ids[:, 16:17], cache=cache)
    assert not cache.can_rewind(4) and cache.can_rewind(17) and not cache.can_rewind(18)
    with pytest.raises(ValueError, match=r"cannot rewind a cache of 17 steps to 4: .*\(windows \[16\]\) have wrapped"):
        cache.rewind(4)
    with pytest.raises(ValueError, match=r"cannot rewind a cache of 17 steps to 18: use 0 <= steps <= 17"):
        cache.rewind(18)


@pytest.mark.parametrize("k", [1, 4])
def test_the_fused_step_stops_at_the_kth_token_too(k):
    model, token, stats = make_tiny("smollm2-tiny"), CancelToken(), GenerationStats()
    seen = []

    def on_token(event):
        seen.append(event.token_id)
        if len(seen) == k:
            token.cancel()
    with pytest.raises(GenerationCancelled, match=f"before decode step {k}"):
        generate_tokens(model, [PROMPT], max_new_tokens=20, on_token=on_token, cancel=token, stats=stats,
                        step=StepKind.FUSED)
    assert stats.step == "fused" and stats.decode_steps == k - 1
    assert stats.cache.steps == len(PROMPT) + k - 1              # whole steps only
