"""Per-block activation checkpointing gives the same loss and gradients, KV-sharing layers included."""

import pytest
import torch

from openafm.train.activation import apply_activation_checkpointing
from openafm.train.objective import LMObjective
from openafm.train.synthetic import SyntheticLoader
from tiny import make_tiny


@pytest.mark.parametrize("preset", ["afm-ondevice-tiny", "afm-server-dense-tiny"])
def test_checkpointed_blocks_match_plain_backward(preset):
    batch = next(iter(SyntheticLoader(vocab_size=512, seq_len=24, global_batch=2, seed=0)))
    grads = []
    for checkpointed in (False, True):
        model = make_tiny(preset).train()
        if checkpointed:
            assert apply_activation_checkpointing(model) == 8
        calls = []
        model.layers[-1].attn.register_forward_hook(lambda *a: calls.append(1))
        loss, _ = LMObjective()(model, batch)
        loss.backward()
        assert len(calls) == (2 if checkpointed else 1)       # the block ran again in the backward pass
        grads.append((float(loss.detach()), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (plain_loss, plain), (ckpt_loss, ckpt) = grads
    assert ckpt_loss == plain_loss
    assert plain.keys() == ckpt.keys()
    for name in plain:
        torch.testing.assert_close(ckpt[name], plain[name], rtol=0, atol=0, msg=name)
