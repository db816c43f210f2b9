"""Track parallelism (PT-MoE) and the tensor-parallel baseline against single-process models, on 2 real gloo
processes: same logits, same gradients for every parameter, and the counted collectives.

One spawned pair does all the distributed work (process start-up dominates on a 2-core machine); the
children save what they computed to files and each test below checks one property of it.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn import functional as F

from openafm.distributed.collectives import CollectiveCounter
from openafm.distributed.tensor_parallel import TensorParallelDecoder, check_splittable
from openafm.distributed.track_parallel import TrackParallel, owned_tracks
from openafm.errors import ConfigError
from openafm.models.decoder import Decoder
from openafm.models.presets import get_preset
from openafm.models.pt_moe import PTMoE

WORLD = 2
BATCH, SEQ = 2, 24            # SEQ > the tiny presets' sliding window of 16, so windows matter
SPAWN_DEADLINE_S = 180


def _loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def _step(model, ids, targets) -> dict:
    """Forward and backward of one training step under collective counters."""
    with CollectiveCounter() as forward:
        logits = model(ids)
    with CollectiveCounter() as backward:
        _loss(logits, targets).backward()
    return {"logits": logits.detach(), "forward": forward.as_dict(), "backward": backward.as_dict()}


def _grads(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.detach().clone() for name, p in module.named_parameters()}


# --- the spawned pair ---------------------------------------------------------------------------------

def _worker(rank: int, tmp: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{tmp}/rendezvous", rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=60))
    try:
        data = torch.load(f"{tmp}/inputs.pt")
        ids, targets = data["ids"], data["targets"]
        out = {}

        track = TrackParallel(PTMoE(get_preset("afm-server-tiny")))
        track.load_full_state_dict(data["pt_state"])
        out["track"] = _step(track, ids, targets) | {"grads": _grads(track.model), "owned": list(track.tracks)}
        other = next(t for t in range(track.config.n_tracks) if t not in track.tracks)
        try:
            track.model.run_track_block(other, 0, torch.zeros(1, 1, 64), None)
        except RuntimeError as e:
            out["released_error"] = str(e)

        tensor = TensorParallelDecoder(get_preset("afm-server-dense-tiny"))
        tensor.load_full_state_dict(data["dense_state"])
        out["tensor"] = _step(tensor, ids, targets) | {"grads": _grads(tensor)}

        try:
            TrackParallel(PTMoE(dataclasses.replace(get_preset("afm-server-tiny"), n_tracks=3)))
        except ConfigError as e:
            out["indivisible_error"] = str(e)
        torch.save(out, f"{tmp}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def _spawn(tmp: Path) -> None:
    """Run `_worker` on 2 processes; a child's exception fails the caller with the child's traceback."""
    context = mp.spawn(_worker, args=(str(tmp),), nprocs=WORLD, join=False)
    deadline = time.monotonic() + SPAWN_DEADLINE_S
    while not context.join(timeout=1):          # raises ProcessRaisedException carrying the child's traceback
        if time.monotonic() > deadline:
            for p in context.processes:
                p.terminate()
            pytest.fail(f"the gloo pair did not finish within {SPAWN_DEADLINE_S} s")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Single-process reference runs, and both ranks' results of the same steps from the same weights."""
    tmp = tmp_path_factory.mktemp("gloo")
    torch.manual_seed(0)
    pt, dense = PTMoE(get_preset("afm-server-tiny")), Decoder(get_preset("afm-server-dense-tiny"))
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 512, (BATCH, SEQ), generator=gen)
    targets = torch.randint(0, 512, (BATCH, SEQ), generator=gen)
    torch.save({"ids": ids, "targets": targets, "pt_state": pt.state_dict(), "dense_state": dense.state_dict()},
               tmp / "inputs.pt")
    try:
        _spawn(tmp)
    except mp.ProcessRaisedException as e:
        pytest.fail(f"a gloo child failed:\n{e}")
    ranks = [torch.load(tmp / f"rank{r}.pt") for r in range(WORLD)]
    reference = {}
    for key, model in (("track", pt), ("tensor", dense)):
        logits = model(ids)
        _loss(logits, targets).backward()
        reference[key] = {"logits": logits.detach(), "grads": _grads(model), "config": model.config}
    return reference, ranks


def _close(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5, msg=lambda m: f"{what}: {m}")


# --- (a) track parallelism ---------------------------------------------------------------------------

def test_track_parallel_logits_equal_single_process(runs):
    reference, ranks = runs
    for r, rank in enumerate(ranks):
        _close(rank["track"]["logits"], reference["track"]["logits"], f"rank {r} logits")


def test_track_parallel_gradients_equal_single_process(runs):
    reference, ranks = runs
    expected = reference["track"]["grads"]
    assert [rank["track"]["owned"] for rank in ranks] == [[0], [1]]
    seen = set()
    for r, rank in enumerate(ranks):
        for name, grad in rank["track"]["grads"].items():
            if name.startswith("tracks."):
                assert int(name.split(".")[1]) in rank["track"]["owned"], name
            else:                                            # replicated: bitwise the same on both ranks
                assert torch.equal(grad, ranks[1 - r]["track"]["grads"][name]), name
            _close(grad, expected[name], f"rank {r} grad of {name}")
            seen.add(name)
    assert seen == set(expected)                              # every parameter's gradient was checked
    # The released tracks hold nothing: each rank has the replicated parts and one track's parameters.
    n_track = sum(1 for n in expected if n.startswith("tracks.0."))
    assert all(len(rank["track"]["grads"]) == len(expected) - n_track for rank in ranks)


def test_released_track_refuses_to_run(runs):
    _, ranks = runs
    assert ranks[0]["released_error"] == "track 1 lives on rank 1; this rank released it"
    assert ranks[1]["released_error"] == "track 0 lives on rank 0; this rank released it"


# --- (b) tensor parallelism ---------------------------------------------------------------------------

def _unshard(name: str, shards: list[torch.Tensor], config) -> torch.Tensor:
    """The full weight (or gradient) from the ranks' slices, independently of the module's slicing code."""
    if name.endswith("attn.qkv.weight"):
        q, kv = config.n_heads * config.attn_head_dim // WORLD, config.n_kv_heads * config.attn_head_dim // WORLD
        parts = [s.split([q, kv, kv]) for s in shards]
        return torch.cat([p[i] for i in range(3) for p in parts])
    if name.endswith("ffn.gate_up.weight"):
        parts = [s.chunk(2) for s in shards]
        return torch.cat([p[i] for i in range(2) for p in parts])
    if name.endswith(("attn.out.weight", "ffn.down.weight")):
        return torch.cat(shards, dim=1)
    assert torch.equal(shards[0], shards[1]), f"replicated {name} differs across ranks"
    return shards[0]


def test_tensor_parallel_logits_equal_single_process(runs):
    reference, ranks = runs
    for r, rank in enumerate(ranks):
        _close(rank["tensor"]["logits"], reference["tensor"]["logits"], f"rank {r} logits")


def test_tensor_parallel_gradients_equal_single_process(runs):
    reference, ranks = runs
    expected = reference["tensor"]["grads"]
    assert set(ranks[0]["tensor"]["grads"]) == set(expected)
    for name, full in expected.items():
        got = _unshard(name, [rank["tensor"]["grads"][name] for rank in ranks], reference["tensor"]["config"])
        _close(got, full, f"grad of {name}")


# --- (c) counted collectives ---------------------------------------------------------------------------

def test_collectives_per_step(runs):
    reference, ranks = runs
    activation_bytes = BATCH * SEQ * reference["track"]["config"].track.dim * 4      # one fp32 [B, T, D]
    n_blocks, n_layers = reference["track"]["config"].n_blocks, reference["tensor"]["config"].n_layers
    for rank in ranks:
        track, tensor = rank["track"], rank["tensor"]
        assert track["forward"] == {"forward_calls": n_blocks, "forward_bytes": n_blocks * activation_bytes,
                                    "backward_calls": 0, "backward_bytes": 0}
        assert track["backward"] == {"forward_calls": 0, "forward_bytes": 0,
                                     "backward_calls": n_blocks, "backward_bytes": n_blocks * activation_bytes}
        assert tensor["forward"]["forward_calls"] == 2 * n_layers
        assert tensor["forward"]["forward_bytes"] == 2 * n_layers * activation_bytes
        assert tensor["backward"]["backward_calls"] == 2 * n_layers
    assert (n_blocks, n_layers) == (2, 8)


# --- (d) configuration errors ---------------------------------------------------------------------------

def test_indivisible_track_count_names_both_values(runs):
    _, ranks = runs
    for rank in ranks:
        assert rank["indivisible_error"].startswith("n_tracks=3 is not divisible by world size 2")
    with pytest.raises(ConfigError, match="n_tracks=5 is not divisible by world size 4"):
        owned_tracks(5, 4, 0)
    assert [owned_tracks(4, 2, r) for r in range(2)] == [range(0, 2), range(2, 4)]


def test_indivisible_heads_or_ffn_name_the_value():
    config = get_preset("afm-server-dense-tiny")
    with pytest.raises(ConfigError, match="n_kv_heads=3 is not divisible by world size 2"):
        check_splittable(dataclasses.replace(config, n_heads=6, n_kv_heads=3, head_dim=16), 2)
    with pytest.raises(ConfigError, match="ffn_hidden=100 is not divisible by world size 8"):
        check_splittable(dataclasses.replace(config, ffn_hidden=100, n_heads=8, n_kv_heads=8), 8)
    with pytest.raises(ConfigError, match="n_heads=4 is not divisible by world size 8"):
        check_splittable(config, 8)
