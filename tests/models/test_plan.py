import pytest
import torch

from openafm.errors import ConfigError
from openafm.models.decoder import Decoder
from openafm.models.plan import AttentionKind, DecoderConfig, LayerSpec
from openafm.models.presets import CONFIG_ONLY, PRESETS, get_preset, interleaved_plan, kv_sharing_plan


def test_kv_sharing_split_is_five_to_three_and_reads_last_block1_layer():
    plan = kv_sharing_plan(16)
    owners = [s for s in plan if s.owns_kv]
    assert len(owners) == 10 and all(s.owns_kv for s in plan[:10])
    assert [s.kv_source for s in plan[10:]] == [9] * 6


def test_kv_sharing_plan_rejects_inexact_split():
    with pytest.raises(ConfigError, match="n_layers=10"):
        kv_sharing_plan(10)


def test_interleaved_pattern():
    plan = interleaved_plan(8, window=32)
    kinds = [s.attention for s in plan]
    S, G = AttentionKind.SLIDING_ROPE, AttentionKind.GLOBAL_NOPE
    assert kinds == [S, S, S, G, S, S, S, G]
    assert all(s.window == 32 for s in plan if s.attention is S)
    with pytest.raises(ConfigError, match="n_layers=6"):
        interleaved_plan(6)


def test_sharing_layers_have_no_kv_parameters():
    model = Decoder(get_preset("afm-ondevice-tiny"))
    for i, spec in enumerate(model.config.layers):
        names = {n for n, _ in model.layers[i].attn.named_parameters()}
        assert names == ({"qkv.weight", "out.weight"} if spec.owns_kv else {"q.weight", "out.weight"})
        if not spec.owns_kv:
            q_rows = model.config.n_heads * model.config.attn_head_dim
            assert model.layers[i].attn.q.weight.shape[0] == q_rows


@pytest.mark.parametrize("name", sorted(set(PRESETS) - CONFIG_ONLY))
def test_param_count_formula_matches_module(name):
    from openafm.models.build import build_model
    config = get_preset(name)
    model = build_model(config, device="meta")
    assert model.num_parameters() == config.param_count()


@pytest.mark.parametrize("bad, match", [
    (dict(layers=[LayerSpec(attention=AttentionKind.SLIDING_ROPE)]), "needs a positive window"),
    (dict(layers=[LayerSpec(window=8)]), "window=8 is only valid"),
    (dict(layers=[LayerSpec(), LayerSpec(kv_source=1)]), "kv_source=1 must name an earlier layer"),
    (dict(layers=[LayerSpec(), LayerSpec(kv_source=0), LayerSpec(kv_source=1)]), "has no KV cache of its own"),
    (dict(layers=[LayerSpec(attention=AttentionKind.GLOBAL_NOPE),
                  LayerSpec(kv_source=0)]), "kinds must match"),
    (dict(n_kv_heads=3), "multiple of n_kv_heads=3"),
    (dict(layers=[]), "at least one layer"),
])
def test_invalid_plans_raise_naming_the_value(bad, match):
    base = dict(vocab_size=32, dim=16, n_heads=4, n_kv_heads=2, ffn_hidden=32, layers=[LayerSpec()])
    with pytest.raises(ConfigError, match=match):
        DecoderConfig(**{**base, **bad})


def test_config_round_trips_through_dict():
    config = get_preset("afm-server-dense-tiny")
    assert DecoderConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ConfigError, match="unknown keys \\['bogus'\\]"):
        DecoderConfig.from_dict({**config.to_dict(), "bogus": 1})
