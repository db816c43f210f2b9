"""`openafm rl --async` on Ray with a tiny model: the asynchronous schedule at max_staleness 0 gives the same
updates as the synchronous one and as the plain synchronous `openafm rl`; staleness stays bounded and every
group is accounted for; a killed generator is restarted and the run still makes its updates; a stopped run
resumes from the updater's checkpoint with the buffer; no Ray process outlives the session.

One local Ray (2 CPUs, a 100 MB object store, no dashboard) serves the whole module; each run starts its own
actors (~10 s each, mostly loading torch in two worker processes)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import ray
import torch
import yaml
from ray.exceptions import ActorUnavailableError

from openafm.checkpoint.load import load_model
from openafm.checkpoint.native import save_checkpoint
from openafm.cli import main
from openafm.rl.config import RLConfig
from openafm.rl.run import METRICS_FILE, POLICY_DIR, RLRun
from openafm.rl.system.async_run import AsyncRLRun, Schedule
from openafm.train import checkpoint as ckpt
from openafm.train.metrics import read_metrics
from tiny import make_tiny

WORDS = ["red fox", "blue sky", "green tree", "old lighthouse", "warm bread", "cold river", "tall grass", "dark night"]
COMPARED = ("reward", "reward/echo", "kl", "loss", "clip_fraction", "ratio", "entropy", "grad_norm", "response_tokens")


@pytest.fixture(scope="module")
def ray_session():
    ray.init(num_cpus=2, object_store_memory=100 * 2**20, include_dashboard=False, log_to_driver=False)
    yield ray
    if ray.is_initialized():
        ray.shutdown()


@pytest.fixture(scope="module")
def files(tmp_path_factory, tokenizer) -> Path:
    root = tmp_path_factory.mktemp("rl_async")
    model = make_tiny("smollm2-tiny", vocab_size=tokenizer.vocab_size, max_seq_len=512)
    save_checkpoint(root / "base", model.config, model.state_dict(), tokenizer)
    (root / "train.jsonl").write_text("".join(json.dumps({"prompt": f"Say: {w}", "target": w}) + "\n" for w in WORDS))
    (root / "heldout.jsonl").write_text("".join(json.dumps({"prompt": f"Write: {w}", "target": w}) + "\n"
                                                for w in WORDS[:3]))
    return root


def config(root: Path, run: str, *, asynchronous: dict | None = None, **changes) -> dict:
    """A chrF reward against a short target: dense enough that a random model's samples differ in reward."""
    data = {"model": str(root / "base"), "run_dir": str(root / run), "steps": 4, "prompts_per_step": 2,
            "max_new_tokens": 5, "temperature": 5.0, "micro_batch": 3, "progress": False, "rloo": {"k": 3},
            "optimizer": {"lr": 1e-3, "weight_decay": 0.0, "grad_clip": 1.0},
            "heldout": {"every": 2, "size": 3}, "checkpoint": {"every": 2, "keep": 2},
            "prompt_sets": [{"name": "echo", "source": "file", "weight": 1.0, "reward": "chrf",
                             "options": {"path": str(root / "train.jsonl"),
                                         "heldout_path": str(root / "heldout.jsonl")}}],
            "asynchronous": {"object_store_mb": 100, "max_staleness": 0, **(asynchronous or {})}}
    data.update(changes)
    return data


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_model(str(run_dir / POLICY_DIR)).model.state_dict()


def updates(run_dir: Path) -> list[dict]:
    return [r for r in read_metrics(run_dir / METRICS_FILE) if "reward" in r]


def balanced(buffer: dict) -> bool:
    return buffer["put"] == buffer["taken"] + buffer["stale_dropped"] + buffer["evicted"] + buffer["depth"]


PIDS: list[int] = []                 # every actor process the module started (checked dead at the end)


def start(cfg: dict, schedule: Schedule, **kw) -> tuple[AsyncRLRun, dict]:
    run = AsyncRLRun(RLConfig.from_dict(cfg), schedule, **kw)
    try:
        return run, run.run()
    finally:
        PIDS.extend(run.pids)


def test_async_at_staleness_0_equals_sync_and_the_plain_run(ray_session, files):
    _, sync = start(config(files, "sync"), Schedule.SYNC)
    _, asynchronous = start(config(files, "async0"), Schedule.ASYNC)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)            # as a Ray actor with one CPU runs: float sums split alike, so bit-equal
    try:
        RLRun(RLConfig.from_dict(config(files, "plain"))).run()
    finally:
        torch.set_num_threads(threads)
    a, b, c = (weights(files / name) for name in ("sync", "async0", "plain"))
    start_weights = load_model(str(files / "base")).model.state_dict()
    assert any(not torch.equal(a[n], start_weights[n]) for n in a)           # the updates did something
    for name in a:
        assert torch.equal(a[name], b[name]) and torch.equal(a[name], c[name]), name
    ra, rb, rc = (updates(files / name) for name in ("sync", "async0", "plain"))
    assert len(ra) == len(rb) == 4
    for x, y, z in zip(ra, rb, rc, strict=True):
        assert [x[k] for k in COMPARED] == [y[k] for k in COMPARED] == [z[k] for k in COMPARED]
    assert len({x["reward"] for x in ra}) > 1 and ra[-1]["kl"] > 0                 # real, changing numbers
    for summary in (sync, asynchronous):
        acct = summary["asynchronous"]
        assert acct["staleness"] == {"0": 8} and balanced(acct["buffer"]) and acct["buffer"]["taken"] == 8
        assert 3 <= acct["pulls"] <= 4 and acct["generator_deaths"] == 0    # versions 1..3 (4: the last) pulled
        assert 0 <= acct["tg_idle_share"] < 1 and 0 <= acct["pu_idle_share"] < 1


def test_async_cli_bounds_staleness_and_accounts_for_every_group(ray_session, files, capsys):
    path = files / "async1.yaml"
    path.write_text(yaml.safe_dump(config(files, "async1", steps=5, asynchronous={"max_staleness": 1})))
    assert main(["rl", str(path), "--async"]) == 0
    acct = json.loads(capsys.readouterr().out)["asynchronous"]
    records = updates(files / "async1")
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5]
    assert all(r["staleness_max"] <= 1 for r in records)
    assert acct["staleness"].get("1", 0) > 0          # generation ran ahead of the updates: that is the point
    assert sum(acct["staleness"].values()) == acct["buffer"]["taken"] == 10 and balanced(acct["buffer"])
    for key in ("buffer_depth", "stale_dropped", "tg_tokens_per_s", "tg_idle_share", "pu_idle_share", "pu_step_s",
                "publish_s", "reward/echo", "staleness_mean"):
        assert key in records[-1], key
    assert main(["plot", str(files / "async1")]) == 0                  # 9 panels: RLRun's 6 and the async 3
    assert (files / "async1" / "curves.png").stat().st_size > 10_000


def pid_once_up(actor, timeout_s: float = 120.0) -> int:
    """The actor's pid, waiting while Ray still restarts it (on a loaded machine the reload can outlast two updates)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return ray.get(actor.pid.remote())
        except ActorUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_a_killed_generator_is_restarted_and_the_run_makes_every_update(ray_session, files):
    killed = {}

    def kill_generator(run: AsyncRLRun, record: dict) -> None:
        if record["step"] == 1:
            killed["pid"] = ray.get(run.actors.generators[0].pid.remote())
            ray.kill(run.actors.generators[0], no_restart=False)
        if record["step"] == 3:
            killed["after"] = pid_once_up(run.actors.generators[0])

    _, summary = start(config(files, "kill", asynchronous={"max_staleness": 1}), Schedule.ASYNC,
                         on_update=kill_generator)
    acct = summary["asynchronous"]
    assert summary["steps"] == 4 and [r["step"] for r in updates(files / "kill")] == [1, 2, 3, 4]
    assert acct["generator_deaths"] >= 1 and killed["after"] != killed["pid"]
    assert acct["buffer"]["taken"] == 8 and balanced(acct["buffer"])    # nothing counted twice or lost uncounted
    PIDS.append(killed["after"])


def test_a_stopped_run_resumes_from_the_updaters_checkpoint_with_the_buffer(ray_session, files):
    cfg = config(files, "resume0")
    run = AsyncRLRun(RLConfig.from_dict(cfg), Schedule.ASYNC)
    assert run.run(stop_after=3) == {"stopped_at": 3}                 # checkpoint at 2; update 3 is lost
    PIDS.extend(run.pids)
    run = AsyncRLRun(RLConfig.from_dict(cfg), Schedule.ASYNC)
    assert run.run(resume=True)["steps"] == 4
    PIDS.extend(run.pids)
    resumed, straight = weights(files / "resume0"), weights(files / "sync")
    assert all(torch.equal(resumed[n], straight[n]) for n in straight)         # bit-exact, as the sync run
    # staleness 1: the generator runs ahead, so the checkpoint holds groups not yet used
    cfg = config(files, "resume1", steps=5, asynchronous={"max_staleness": 1})
    run = AsyncRLRun(RLConfig.from_dict(cfg), Schedule.ASYNC)
    assert run.run(stop_after=3) == {"stopped_at": 3}
    PIDS.extend(run.pids)
    saved = ckpt.load_training_checkpoint(ckpt.latest_checkpoint(files / "resume1")).loader["coordinator"]
    assert saved["buffer"]["stats"]["taken"] == 4 and balanced({**saved["buffer"]["stats"],
                                                                "depth": len(saved["buffer"]["groups"])})
    run = AsyncRLRun(RLConfig.from_dict(cfg), Schedule.ASYNC)
    summary = run.run(resume=True)
    PIDS.extend(run.pids)
    acct = summary["asynchronous"]["buffer"]
    assert summary["steps"] == 5 and acct["taken"] == 10 and balanced(acct)
    assert acct["put"] >= saved["buffer"]["stats"]["put"]
    assert [r["step"] for r in updates(files / "resume1")] == [1, 2, 3, 4, 5]


def ray_processes(session_dir: str) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if session_dir in cmd or (int(entry) in PIDS):
                found.add(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_no_ray_process_outlives_the_session(ray_session):
    assert PIDS                                                        # the runs above recorded theirs
    deadline = time.time() + 10
    while any(alive(p) for p in PIDS) and time.time() < deadline:      # actors are killed at each run's end
        time.sleep(0.2)
    assert not [p for p in PIDS if alive(p)]
    session_dir = ray._private.worker._global_node.get_session_dir_path()
    assert ray_processes(session_dir)                                  # raylet and friends, while Ray runs
    ray.shutdown()
    deadline = time.time() + 15
    while [p for p in ray_processes(session_dir) if alive(p)] and time.time() < deadline:
        time.sleep(0.2)
    assert not [p for p in ray_processes(session_dir) if alive(p)]
