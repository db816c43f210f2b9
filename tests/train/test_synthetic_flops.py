"""The synthetic loader (determinism, rank split, resumable position) and the FLOP formula."""

import pytest
import torch

from openafm.models.build import build_model
from openafm.models.presets import get_preset
from openafm.train.batch_protocol import Batch, Loader
from openafm.train.flops import attention_flops_per_token, flops_per_token, matmul_params, mfu
from openafm.train.synthetic import SyntheticLoader


def _take(loader, n):
    it = iter(loader)
    return [next(it) for _ in range(n)]


def test_synthetic_loader_is_deterministic_and_resumable():
    a = SyntheticLoader(vocab_size=50, seq_len=16, global_batch=4, seed=3)
    assert isinstance(a, Loader)
    first = _take(a, 5)
    assert isinstance(first[0], Batch)
    b = SyntheticLoader(vocab_size=50, seq_len=16, global_batch=4, seed=3)
    _take(b, 2)
    state = b.state_dict()
    c = SyntheticLoader(vocab_size=50, seq_len=16, global_batch=4, seed=3)
    c.load_state_dict(state)
    for x, y in zip(first[2:], _take(c, 3), strict=True):
        assert torch.equal(x.input_ids, y.input_ids) and torch.equal(x.labels, y.labels)


def test_ranks_split_the_global_micro_batch():
    whole = _take(SyntheticLoader(vocab_size=50, seq_len=16, global_batch=4, seed=1), 2)
    parts = [_take(SyntheticLoader(vocab_size=50, seq_len=16, global_batch=4, seed=1, rank=r, world_size=2), 2)
             for r in range(2)]
    for i in range(2):
        assert torch.equal(torch.cat([parts[0][i].input_ids, parts[1][i].input_ids]), whole[i].input_ids)


def test_labels_are_next_tokens_within_a_document_and_ignored_across():
    (b,) = _take(SyntheticLoader(vocab_size=50, seq_len=64, global_batch=2, seed=0, max_doc_len=20), 1)
    ids, labels, seg, pos = b.input_ids, b.labels, b.segment_ids, b.positions
    for r in range(2):
        for j in range(63):
            if seg[r, j] == seg[r, j + 1]:
                assert labels[r, j] == ids[r, j + 1] and pos[r, j + 1] == pos[r, j] + 1
            else:
                assert labels[r, j] == -100 and pos[r, j + 1] == 0
    assert (seg.max() >= 3)   # documents of <= 20 tokens in 64


@pytest.mark.parametrize("preset", ["smollm2-tiny", "afm-ondevice-tiny", "afm-server-dense-tiny", "afm-server-tiny"])
def test_matmul_params_are_the_modules_parameters(preset):
    config = get_preset(preset)
    model = build_model(config, device="meta")
    total = sum(p.numel() for p in model.parameters())
    if hasattr(config, "n_tracks"):
        moe = config.track.moe
        n_moe = sum(1 for s in config.track.layers if s.ffn.value == "moe") * config.n_tracks
        total -= n_moe * (moe.n_experts - moe.top_k) * 3 * config.track.dim * moe.hidden
    assert matmul_params(config) == total


def test_flops_per_token_formula():
    c = get_preset("afm-server-dense-tiny")     # 8 layers: 6 sliding (window 16) + 2 global NoPE
    t = 64
    attn = 12 * c.n_heads * c.attn_head_dim * (6 * 16 + 2 * 64)
    assert attention_flops_per_token(c, t) == attn
    assert flops_per_token(c, t) == 6 * matmul_params(c) + attn
    assert mfu(1000, 2.0, 4000.0) == 0.5
