import pytest
import torch
from tiny import make_tiny

from openafm.errors import ConfigError
from openafm.models.decoder import Decoder
from openafm.models.plan import FFNKind
from openafm.models.upcycle import upcycle_config, upcycle_state_dict


@pytest.mark.parametrize("name", ["afm-ondevice-tiny", "afm-server-dense-tiny"])
def test_upcycled_model_computes_the_dense_function_at_init(name):
    dense = make_tiny(name)
    config = upcycle_config(dense.config, n_experts=8, every=2, top_k=2)
    assert [s.ffn for s in config.layers] == [FFNKind.DENSE, FFNKind.MOE] * (dense.config.n_layers // 2)
    moe = Decoder(config).eval()
    moe.load_state_dict(upcycle_state_dict(dense.state_dict(), config), strict=True)
    ids = torch.randint(0, 512, (2, 30), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        a, b = dense(ids), moe(ids)
    assert (a - b).abs().max().item() < 1e-4
    counts = sum(layer.ffn.last_stats.tokens_per_expert for layer in moe.layers if hasattr(layer.ffn, "last_stats"))
    assert (counts > 0).sum() > 2                  # the random router spreads tokens over several experts


def test_upcycling_rejects_bad_options():
    dense = make_tiny("smollm2-tiny")
    with pytest.raises(ConfigError, match="top_k=9 must be between 1 and n_experts=8"):
        upcycle_config(dense.config, n_experts=8, top_k=9)
    with pytest.raises(ConfigError, match="every=0"):
        upcycle_config(dense.config, every=0)
    once = upcycle_config(dense.config, n_experts=4)
    with pytest.raises(ConfigError, match="already have MoE FFNs"):
        upcycle_config(once, n_experts=4)
