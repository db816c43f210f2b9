"""Fault tolerance: a run SIGKILLed mid-way and resumed gives a metrics JSONL identical (timing aside) to an
uninterrupted run; checkpoints are atomic, pruned to the newest K, and refuse an incompatible config."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch

from openafm.errors import CheckpointError
from openafm.train import checkpoint as ckpt
from openafm.train.config import TrainConfig
from openafm.train.loop import METRICS_FILE, Trainer
from openafm.train.metrics import read_metrics, without_timing
from train._runs import tiny_config, train_and_kill, train_cli, write_config


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run, in this process."""
    run = tmp_path_factory.mktemp("ref")
    records = Trainer(TrainConfig.from_dict(tiny_config(run))).run()
    return run, records


def test_uninterrupted_run_learns_and_keeps_the_newest_checkpoints(reference):
    run, records = reference
    assert [r["step"] for r in records] == list(range(1, 25))
    # scaled-normal init: near-uniform predictions over the 512-token vocabulary at the start
    assert records[0]["loss"] == pytest.approx(math.log(512), abs=0.1)
    assert [s for s, _ in ckpt.list_checkpoints(run)] == [20, 24]
    assert read_metrics(run / METRICS_FILE) == json.loads(json.dumps(records))


def test_sigkill_then_resume_is_bit_identical(reference, tmp_path):
    _, expected = reference
    run = tmp_path / "run"
    cfg = write_config(tmp_path / "c.yaml", tiny_config(run))
    seen = train_and_kill(cfg, run / METRICS_FILE, kill_at_line=10)
    assert seen < 24
    done = train_cli(cfg, "--resume")
    assert done.returncode == 0, done.stderr[-3000:]
    got = read_metrics(run / METRICS_FILE)
    assert without_timing(got) == without_timing(json.loads(json.dumps(expected)))   # exact floats


def test_resumed_checkpoint_holds_the_same_weights(reference, tmp_path):
    run, _ = reference
    cfg = tiny_config(tmp_path / "r2", steps=24)
    first = Trainer(TrainConfig.from_dict(cfg))
    first.run(stop_after=8)
    resumed = Trainer(TrainConfig.from_dict(cfg))
    resumed.run(resume=True)
    final = ckpt.load_training_checkpoint(ckpt.latest_checkpoint(run))
    mine = ckpt.load_training_checkpoint(ckpt.latest_checkpoint(tmp_path / "r2"))
    assert mine.step == final.step == 24
    for k, v in final.model.items():
        assert torch.equal(v, mine.model[k]), k
    assert mine.loader == final.loader == {"kind": "synthetic", "next_micro_batch": 48}


def test_incompatible_config_names_the_differing_keys(reference, tmp_path):
    run, _ = reference
    changed = tiny_config(run, seq_len=16, optimizer=dict(lr=1e-3), checkpoint=dict(every=5, keep=9))
    with pytest.raises(CheckpointError, match=r"optimizer.lr: checkpoint 0.003 vs config 0.001; seq_len: "
                                              r"checkpoint 32 vs config 16$"):
        Trainer(TrainConfig.from_dict(changed)).run(resume=True)


def test_fresh_run_refuses_a_run_dir_with_checkpoints(reference):
    run, _ = reference
    with pytest.raises(CheckpointError, match="pass --resume"):
        Trainer(TrainConfig.from_dict(tiny_config(run))).run()


def test_partial_checkpoint_is_ignored_and_removed(tmp_path):
    cfg = tiny_config(tmp_path / "p", steps=8, checkpoint=dict(every=4, keep=1),
                      schedule=dict(kind="constant", warmup_steps=2))
    Trainer(TrainConfig.from_dict(cfg)).run(stop_after=4)
    partial = tmp_path / "p" / "checkpoints" / ".step_00000008.tmp-x"
    partial.mkdir()
    (partial / "train_state.pt").write_bytes(b"half a file")
    t = Trainer(TrainConfig.from_dict(cfg))
    assert t.restore_latest() == 4
    assert not partial.exists()


def test_truncated_last_metrics_line_is_dropped_on_resume(tmp_path):
    cfg = tiny_config(tmp_path / "m", steps=8, checkpoint=dict(every=4, keep=1),
                      schedule=dict(kind="constant", warmup_steps=2))
    Trainer(TrainConfig.from_dict(cfg)).run(stop_after=6)
    path = tmp_path / "m" / METRICS_FILE
    path.write_text(path.read_text() + '{"step": 7, "lo')          # a kill in the middle of a write
    Trainer(TrainConfig.from_dict(cfg)).run(resume=True)
    assert [r["step"] for r in read_metrics(path)] == list(range(1, 9))


class _Payload:                              # any class: unpickling it is what weights_only=True refuses
    pass


def test_a_checkpoint_holding_pickled_objects_is_refused_not_loaded(reference, tmp_path):
    """Training state holds tensors, numbers and strings only (RNG states included) and loads weights-only; a
    state file carrying any other object (someone else's run directory) raises instead of unpickling it."""
    run, _ = reference
    latest = ckpt.latest_checkpoint(run)
    state = torch.load(latest / ckpt.STATE, weights_only=True)            # ours loads weights-only
    assert isinstance(state["rng"]["numpy"]["key"], torch.Tensor)
    copy = tmp_path / latest.name
    shutil.copytree(latest, copy)
    torch.save({**state, "extra": _Payload()}, copy / ckpt.STATE)
    with pytest.raises(CheckpointError, match=r"train_state.pt: holds objects other than tensors, numbers and "
                                              r"strings .* it is not loaded"):
        ckpt.load_training_checkpoint(copy)
