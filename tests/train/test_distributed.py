"""Data parallelism under torchrun (gloo, 2 CPU processes): DDP and FSDP2 give the same losses as one process
with the same global batch (each rank runs half the rows), to float tolerance."""

from __future__ import annotations

import subprocess
import sys

import pytest

from openafm.train.config import TrainConfig
from openafm.train.loop import METRICS_FILE, Trainer
from openafm.train.metrics import read_metrics
from train._runs import env, tiny_config, write_config

STEPS = 6


def _config(run_dir, **changes):
    return tiny_config(run_dir, steps=STEPS, batch_size=8, grad_accum=2, checkpoint=dict(every=3, keep=1),
                       schedule=dict(kind="constant", warmup_steps=2), **changes)


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    return Trainer(TrainConfig.from_dict(_config(tmp_path_factory.mktemp("one")))).run()


@pytest.mark.parametrize("kind", ["ddp", "fsdp2"])
def test_two_ranks_match_one_rank_with_twice_the_rows(single, tmp_path, kind):
    run = tmp_path / kind
    cfg = write_config(tmp_path / "c.yaml", _config(run, parallel=kind))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "openafm.cli", "train", str(cfg)]
    done = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    got = read_metrics(run / METRICS_FILE)
    assert [r["step"] for r in got] == list(range(1, STEPS + 1))
    for mine, ref in zip(got, single, strict=True):
        assert mine["labelled_tokens"] == ref["labelled_tokens"]
        assert mine["loss"] == pytest.approx(ref["loss"], rel=1e-5, abs=1e-6)
        assert mine["grad_norm"] == pytest.approx(ref["grad_norm"], rel=1e-4)
