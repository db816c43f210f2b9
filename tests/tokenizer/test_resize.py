"""resize_embeddings: old rows untouched, new rows = mean of the old rows of their decomposition (checked
against a loop), head resized when untied, config in step, and old-token logits unchanged when tied."""

from __future__ import annotations

import pytest
import torch
from tiny import make_tiny

from openafm.models.resize_vocab import resize_embeddings

DECOMP = {512: [1, 2], 513: [3, 3, 4], 514: [7], 515: [500, 1, 2, 511]}


def expected_rows(weight: torch.Tensor) -> torch.Tensor:
    return torch.stack([sum(weight[i] for i in DECOMP[k]) / len(DECOMP[k]) for k in sorted(DECOMP)])


def test_tied_model_rows_and_logits():
    model = make_tiny("smollm2-tiny")
    assert model.config.vocab_size == 512 and model.lm_head is None
    old = model.embed.weight.detach().clone()
    ids = torch.tensor([[5, 9, 100, 511, 3]])
    with torch.no_grad():
        before = model(ids)                                                   # [1, 5, 512]
    assert resize_embeddings(model, DECOMP) == 516
    w = model.embed.weight.detach()
    assert w.shape == (516, old.shape[1]) and torch.equal(w[:512], old)
    torch.testing.assert_close(w[512:], expected_rows(old), rtol=1e-6, atol=1e-6)
    assert model.config.vocab_size == 516
    with torch.no_grad():
        after = model(ids)                                                    # [1, 5, 516]
        model(torch.tensor([[512, 515, 3]]))                                  # new ids embed
    torch.testing.assert_close(after[..., :512], before, rtol=1e-5, atol=1e-5)
    # Tied head: a new token's logit is the mean of its pieces' logits (the head is linear in its rows).
    for k, parts in DECOMP.items():
        torch.testing.assert_close(after[..., k], after[..., parts].mean(-1), rtol=1e-5, atol=1e-5)


def test_untied_head_resized_too():
    model = make_tiny("smollm2-tiny", tie_embeddings=False)
    old_head = model.lm_head.weight.detach().clone()
    resize_embeddings(model, DECOMP)
    head = model.lm_head.weight.detach()
    assert head.shape == (516, old_head.shape[1]) and torch.equal(head[:512], old_head)
    torch.testing.assert_close(head[512:], expected_rows(old_head), rtol=1e-6, atol=1e-6)
    assert model(torch.tensor([[1, 513]])).shape == (1, 2, 516)


def test_bad_decompositions_raise():
    model = make_tiny("smollm2-tiny")
    with pytest.raises(ValueError, match="new token ids must be 512..512"):
        resize_embeddings(model, {600: [1]})
    with pytest.raises(ValueError, match=r"new token 512 decomposes into \[512\]"):
        resize_embeddings(model, {512: [512]})
    with pytest.raises(ValueError, match=r"decomposes into \[\]"):
        resize_embeddings(model, {512: []})
