"""Packed rows with segment_ids: each document's logits equal those of the document run alone."""

import pytest
import torch

from openafm.models.decoder import Logits, segment_positions
from openafm.nn.mask import document_mask
from tiny import make_tiny


def _packed(doc_lengths: list[list[int]], vocab: int, seed: int = 0):
    """-> (docs per row, input_ids [B, T], segment_ids [B, T], positions [B, T]); rows of equal length."""
    g = torch.Generator().manual_seed(seed)
    rows, ids, segs, pos = [], [], [], []
    for lengths in doc_lengths:
        docs = [torch.randint(0, vocab, (n,), generator=g) for n in lengths]
        rows.append(docs)
        ids.append(torch.cat(docs))
        segs.append(torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)]))
        pos.append(torch.cat([torch.arange(n) for n in lengths]))
    return rows, torch.stack(ids), torch.stack(segs), torch.stack(pos)


@pytest.mark.parametrize("preset", ["smollm2-tiny", "afm-ondevice-tiny", "afm-server-dense-tiny"])
def test_packed_row_equals_documents_alone(preset):
    torch.manual_seed(0)
    model = make_tiny(preset)
    # Row 1 holds a 21-token document: longer than afm-server-dense-tiny's window of 16.
    rows, ids, segs, pos = _packed([[5, 9, 3, 7, 4], [21, 6, 1]], model.config.vocab_size)
    with torch.no_grad():
        packed = model(ids, positions=pos, segment_ids=segs)                       # [2, 28, V]
        derived = model(ids, segment_ids=segs)                                     # positions from segments
        for b, docs in enumerate(rows):
            start = 0
            for doc in docs:
                alone = model(doc[None])[0]                                         # [n, V]
                got = packed[b, start:start + len(doc)]
                torch.testing.assert_close(got, alone, atol=1e-5, rtol=1e-5)
                start += len(doc)
    torch.testing.assert_close(derived, packed, atol=0, rtol=0)
    # The same tokens without document masking see across documents: the logits differ.
    plain = model(ids)
    assert (plain[0, 5:] - packed[0, 5:]).abs().max() > 1e-2


def test_pt_moe_packed_row_equals_documents_alone():
    from openafm.models.build import build_model
    from openafm.models.presets import get_preset
    torch.manual_seed(0)
    model = build_model(get_preset("afm-server-tiny")).eval()
    rows, ids, segs, pos = _packed([[6, 18, 4]], 512)
    with torch.no_grad():
        packed = model(ids, positions=pos, segment_ids=segs)
        start = 0
        for doc in rows[0]:
            torch.testing.assert_close(packed[0, start:start + len(doc)], model(doc[None])[0], atol=1e-5, rtol=1e-5)
            start += len(doc)


def test_last_logits_with_segments():
    model = make_tiny("afm-ondevice-tiny")
    rows, ids, segs, pos = _packed([[5, 11]], model.config.vocab_size)
    with torch.no_grad():
        last = model(ids, segment_ids=segs, logits=Logits.LAST)                    # [1, 1, V]
        alone = model(rows[0][1][None])[:, -1:]
    torch.testing.assert_close(last, alone, atol=1e-5, rtol=1e-5)


def test_document_mask_matches_naive_loop():
    segs = torch.tensor([[0, 0, 0, 1, 1, 2, 2, 2, 2]])
    pos = segment_positions(segs)
    assert pos.tolist() == [[0, 1, 2, 0, 1, 0, 1, 2, 3]]
    for window in (None, 2):
        m = document_mask(segs, pos, 4, window)[0, 0]                               # last 4 queries
        for qi, q in enumerate(range(5, 9)):
            for k in range(9):
                want = k <= q and segs[0, k] == segs[0, q] and (window is None or pos[0, q] - pos[0, k] < window)
                assert bool(m[qi, k]) == bool(want), (window, q, k)


def test_packed_forward_rejects_bad_input():
    model = make_tiny("smollm2-tiny")
    ids = torch.zeros(1, 6, dtype=torch.long)
    with pytest.raises(ValueError, match="non-decreasing"):
        model(ids, segment_ids=torch.tensor([[0, 0, 1, 1, 0, 0]]))
    with pytest.raises(ValueError, match="shape"):
        model(ids, segment_ids=torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="cache-free"):
        model(ids, cache=object(), segment_ids=torch.zeros(1, 6, dtype=torch.long))
    with pytest.raises(ValueError, match=">= 0"):
        model(ids, positions=torch.full((1, 6), -1), segment_ids=torch.zeros(1, 6, dtype=torch.long))
