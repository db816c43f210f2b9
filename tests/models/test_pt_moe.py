"""PT-MoE: tracks over a shared residual stream, synchronized at track-block boundaries."""

import dataclasses

import pytest
import torch
from tiny import make_tiny

from openafm.errors import ConfigError
from openafm.models.build import build_model
from openafm.models.decoder import Decoder, Logits
from openafm.models.plan import FFNKind
from openafm.models.presets import get_preset
from openafm.models.pt_moe import PTMoE, PTMoEConfig
from openafm.runtime.generate import generate_tokens
from openafm.runtime.kv_cache import KVCache


def tiny_ptmoe(seed: int = 0, **changes) -> PTMoE:
    config = get_preset("afm-server-tiny")
    if changes:
        config = dataclasses.replace(config, **changes)
    torch.manual_seed(seed)
    model = PTMoE(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("gate_up", "down")) and p.ndim == 3:
                p.normal_(0, 0.5 / p.shape[2] ** 0.5)
            elif p.ndim == 2:
                p.normal_(0, 0.5 / p.shape[1] ** 0.5 if "embed" not in name else 1.0)
            else:
                p.uniform_(0.8, 1.2)
    return model


def test_one_track_without_moe_equals_the_plain_decoder():
    dense = make_tiny("afm-server-dense-tiny")
    config = PTMoEConfig(n_tracks=1, block_depth=4, track=dense.config)
    pt = PTMoE(config).eval()
    state = {k.replace("layers.", "tracks.0.", 1) if k.startswith("layers.") else k: v
             for k, v in dense.state_dict().items()}
    pt.load_state_dict(state, strict=True)
    ids = torch.randint(0, 512, (2, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(pt(ids), dense(ids))


def test_identical_tracks_equal_one_track():
    two = tiny_ptmoe()
    with torch.no_grad():
        for a, b in zip(two.tracks[0].parameters(), two.tracks[1].parameters(), strict=True):
            b.copy_(a)
    one = PTMoE(dataclasses.replace(two.config, n_tracks=1)).eval()
    one.load_state_dict({k: v for k, v in two.state_dict().items() if not k.startswith("tracks.1.")})
    ids = torch.randint(0, 512, (2, 30), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert (two(ids) - one(ids)).abs().max().item() < 1e-5


def test_tracks_combine_by_mean_at_each_block_boundary():
    model = tiny_ptmoe()
    ids = torch.randint(0, 512, (1, 12), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        from openafm.nn.kv import FreshKV
        x, ctx = model.begin(ids, None, None)
        for block in range(model.config.n_blocks):                 # by hand: each track's layers, then a mean
            outs = []
            for t in range(model.config.n_tracks):
                h = x
                for layer in model.tracks[t][block * 4:(block + 1) * 4]:
                    h = layer(h, ctx)
                outs.append(h)
            x = (outs[0] + outs[1]) / 2
        expected = model.finish(x, ctx, Logits.ALL)
        assert torch.equal(model(ids), expected)


def test_cached_generation_matches_full_recompute():
    model = tiny_ptmoe()
    ids = torch.randint(0, 512, (2, 50), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full = model(ids)
        cache = KVCache(model.kv_plan, batch_size=2, capacity=50)
        got = [model(ids[:, :24], cache=cache)]                   # past the window of 16
        for t in range(24, 50):
            got.append(model(ids[:, t:t + 1], cache=cache))
    assert (torch.cat(got, 1) - full).abs().max().item() < 1e-4


def test_generate_tokens_runs_pt_moe_through_the_same_runtime():
    model = tiny_ptmoe()
    out = generate_tokens(model, [[1, 2, 3, 4], [9, 8]], max_new_tokens=12)
    for prompt, gen in zip([[1, 2, 3, 4], [9, 8]], out, strict=True):
        ids = list(prompt)
        with torch.no_grad():
            for _ in range(12):
                ids.append(int(model(torch.tensor([ids]))[0, -1].argmax()))
        assert gen.token_ids == ids[len(prompt):]


def test_every_other_layer_is_moe_and_experts_are_per_track():
    model = tiny_ptmoe()
    kinds = [s.ffn for s in model.config.track.layers]
    assert kinds == [FFNKind.DENSE, FFNKind.MOE] * 4
    assert model.tracks[0][1].ffn.gate_up is not model.tracks[1][1].ffn.gate_up
    assert len(model.moe_layers()) == 8


@pytest.mark.parametrize("name", ["afm-server-tiny", "afm-server-small", "afm-server-report"])
def test_param_counts_match_the_module(name):
    config = get_preset(name)
    model = build_model(config, device="meta")
    assert model.num_parameters() == config.param_count()
    assert config.param_count(active=True) < config.param_count()


def test_block_depth_must_divide_the_layers():
    config = get_preset("afm-server-tiny")
    with pytest.raises(ConfigError, match="block_depth=3 must divide the track's 8 layers"):
        dataclasses.replace(config, block_depth=3)
    with pytest.raises(ConfigError, match="n_tracks=0"):
        dataclasses.replace(config, n_tracks=0)


def test_top_k_above_expert_count_is_named():
    from openafm.models.plan import MoESpec
    with pytest.raises(ConfigError, match="top_k=5 must be between 1 and n_experts=4"):
        MoESpec(n_experts=4, top_k=5, hidden=8)


def test_native_checkpoint_round_trip(tmp_path):
    import openafm
    from openafm.checkpoint.native import save_checkpoint
    model = tiny_ptmoe()
    save_checkpoint(tmp_path / "pt", model.config, model.state_dict())
    lm = openafm.load(tmp_path / "pt")
    assert isinstance(lm.model, PTMoE) and lm.config == model.config
    ids = torch.randint(0, 512, (1, 20))
    with torch.no_grad():
        assert torch.equal(lm.model(ids), model(ids))
