"""`openafm rl CONFIG --async`: RLOO with generation and updates overlapped on Ray actors (report §5.2.1).

Trajectory generators (rl/system/generator.py) sample ticketed prompt batches with the weights of a known version and
write whole groups to the replay buffer (rl/system/buffer.py, behind rl/system/coordinator.py); the policy updater
(rl/system/updater.py) takes P groups per update and publishes its weights to the parameter server (rl/system/params.py),
which the generators poll between batches. This driver only starts the actors, relays calls, re-asks a
generator that died (Ray restarts it; its ticket is issued again), and logs.

Two schedules with the same actors:

    ASYNC   generators and updater run concurrently; a batch is sampled at most max_staleness versions behind
            the update that uses it (tickets.py's gate)
    SYNC    generate one batch, update, repeat (the baseline; the gate at max_staleness 0). ASYNC at
            max_staleness 0 produces the same updates, and both take the synchronous `openafm rl`'s prompts,
            samples and steps (tests/rl/test_async_run.py)

    run = AsyncRLRun(config, Schedule.ASYNC)
    summary = run.run(resume=False)       # RLRun's summary plus "asynchronous": wall, idle shares, staleness, ...

Metrics per update go to RUN/metrics.jsonl (RLRun's keys, and staleness_mean / staleness/<s> / pu_step_s /
pu_wait_s / publish_s / buffer_depth / stale_dropped / tg_tokens_per_s / tg_idle_share / pu_idle_share /
elapsed_s); `openafm plot RUN` draws them like a synchronous run's.
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Callable
from pathlib import Path

import ray
from ray.exceptions import ActorUnavailableError, RayActorError
from tqdm import tqdm

from openafm.errors import CheckpointError
from openafm.rl.config import RLConfig
from openafm.rl.run import METRICS_FILE, SUMMARY_FILE
from openafm.rl.system.actors import Actors, start_ray, stop_ray
from openafm.train.metrics import MetricsLog

GENERATOR_DIED = (RayActorError, ActorUnavailableError)


class Schedule(str, enum.Enum):
    ASYNC = "async"
    SYNC = "sync"


class AsyncRLRun:
    def __init__(self, config: RLConfig, schedule: Schedule = Schedule.ASYNC,
                 on_update: Callable[[AsyncRLRun, dict], None] | None = None):
        self.config, self.schedule, self.on_update = config, Schedule(schedule), on_update
        self.run_dir = Path(config.run_dir)
        self.actors: Actors | None = None
        self.step = 0
        self.generate_s = self.pull_s = 0.0
        self.tokens = self.batches = self.pulls = self.generator_deaths = 0
        self.window_tokens, self.window_s = 0, 0.0
        self.publish_s: list[float] = []
        self.eval_s = 0.0
        self.pids: list[int] = []

    def run(self, *, resume: bool = False, stop_after: int | None = None) -> dict:
        """Train to config.steps (stop_after: return after that many updates, as a kill would). -> the summary."""
        started = start_ray(self.config.asynchronous)
        try:
            bound = 0 if self.schedule is Schedule.SYNC else self.config.asynchronous.max_staleness
            self.actors = Actors.start(self.config, max_staleness=bound)
            self.pids = self.actors.pids()
            return self._run(resume, stop_after)
        finally:
            if self.actors is not None:
                self.actors.stop()
            stop_ray(started)

    # --- the loop --------------------------------------------------------------------------------------------

    def _run(self, resume: bool, stop_after: int | None) -> dict:
        c, pu = self.config, self.actors.updater
        if not resume and ray.get(pu.has_checkpoint.remote()):
            raise CheckpointError(f"{self.run_dir} already holds checkpoints; resume (--resume) or use a new run_dir")
        start = ray.get(pu.restore.remote()) if resume else 0
        self.step = start
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log = MetricsLog(self.run_dir / METRICS_FILE, keep_through_step=start if resume else None)
        before = _read_summary(self.run_dir).get("heldout_before") if start else None
        if before is None:
            before = ray.get(pu.evaluate.remote(reference=True))
            log.write({"step": 0, **before})
            (self.run_dir / SUMMARY_FILE).write_text(json.dumps({"heldout_before": before}, indent=2) + "\n")
        ray.get(pu.publish.remote())                       # the weights of version `start` (a resumed run's)
        target = c.steps if stop_after is None else min(c.steps, start + stop_after)
        bar = tqdm(total=c.steps, initial=start, desc=f"rl {self.schedule.value}", unit="update",
                   disable=not c.progress)
        self.t0 = time.perf_counter()
        after = None
        try:
            updates = self._async_updates(target) if self.schedule is Schedule.ASYNC else self._sync_updates(target)
            for record in updates:
                if self.step % c.heldout.every == 0 or self.step == c.steps:
                    began = time.perf_counter()
                    after = ray.get(pu.evaluate.remote())
                    self.eval_s += time.perf_counter() - began
                    record.update(after)
                log.write(record)
                bar.update(1)
                bar.set_postfix(reward=f"{record['reward']:.3f}", stale=f"{record['staleness_mean']:.2f}",
                                depth=record["buffer_depth"])
                if self.on_update is not None:
                    self.on_update(self, record)
        finally:
            bar.close()
            log.close()
        self.wall_s = time.perf_counter() - self.t0 - self.eval_s          # training only: held-out evals apart
        if self.step < c.steps:
            return {"stopped_at": self.step}
        summary = ray.get(pu.finish.remote(before, after if after is not None else ray.get(pu.evaluate.remote())))
        summary["asynchronous"] = self.totals()
        (self.run_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
        return summary

    def _async_updates(self, target: int):
        gens, pu = self.actors.generators, self.actors.updater
        calls = {g.generate_one.remote(): i for i, g in enumerate(gens)}
        pu_call = pu.step.remote()
        while self.step < target:
            ready, _ = ray.wait([pu_call, *calls], num_returns=1)
            if ready[0] == pu_call:
                record = ray.get(pu_call)
                if record is not None:
                    yield self._record(record)
                if self.step < target:
                    pu_call = pu.step.remote()
            else:
                i = calls.pop(ready[0])
                self._generated(i, ready[0])
                calls[gens[i].generate_one.remote()] = i

    def _sync_updates(self, target: int):
        gen, pu = self.actors.generators[0], self.actors.updater
        while self.step < target:
            while not self._generated(0, gen.generate_one.remote()):
                pass
            while (record := ray.get(pu.step.remote())) is None:
                pass
            yield self._record(record)

    def _generated(self, replica: int, call) -> bool:
        """Account one generator call. -> whether it produced a batch (a dead generator's ticket goes back)."""
        try:
            report = ray.get(call)
        except GENERATOR_DIED:
            self.generator_deaths += 1
            ray.get(self.actors.coordinator.release.remote(replica))
            time.sleep(0.05)
            return False
        if report["pull_s"] is not None:
            self.pull_s += report["pull_s"]
            self.pulls += 1
        if report["batch"] is None:
            return False
        self.batches += 1
        self.tokens += report["tokens"]
        self.generate_s += report["generate_s"]
        self.window_tokens += report["tokens"]
        self.window_s += report["generate_s"]
        return True

    def _record(self, pu_record: dict) -> dict:
        self.step = pu_record["step"]
        elapsed = time.perf_counter() - self.t0
        buffer = ray.get(self.actors.coordinator.summary.remote())
        n_tg = len(self.actors.generators)
        if "publish_s" in pu_record:
            self.publish_s.append(pu_record["publish_s"])
        record = {k: v for k, v in pu_record.items() if k not in ("pu_busy_s", "pu_idle_s")}
        record.update(buffer_depth=buffer["depth"], stale_dropped=buffer["stale_dropped"],
                      tg_tokens_per_s=self.window_tokens / self.window_s if self.window_s else 0.0,
                      tg_idle_share=max(0.0, 1 - self.generate_s / (n_tg * elapsed)),
                      pu_idle_share=max(0.0, 1 - pu_record["pu_busy_s"] / elapsed), elapsed_s=elapsed)
        self.window_tokens, self.window_s = 0, 0.0
        return record

    def totals(self) -> dict:
        """The run's account: wall time, idle shares, staleness, weight sync, the buffer's bookkeeping."""
        pu = ray.get(self.actors.updater.totals.remote())
        buffer = ray.get(self.actors.coordinator.summary.remote())
        n_tg, wall = len(self.actors.generators), self.wall_s
        k, p = self.config.rloo.k, self.config.prompts_per_step
        return {"schedule": self.schedule.value, "generators": n_tg, "wall_s": wall, "heldout_eval_s": self.eval_s,
                "trajectories_per_s": self.step * p * k / wall if wall else 0.0,
                "tg_tokens_per_s": self.tokens / self.generate_s if self.generate_s else 0.0,
                "tg_idle_share": max(0.0, 1 - self.generate_s / (n_tg * wall)) if wall else 0.0,
                "pu_idle_share": max(0.0, 1 - pu["pu_busy_s"] / wall) if wall else 0.0,
                "pu_busy_s": pu["pu_busy_s"], "tg_busy_s": self.generate_s, "batches_generated": self.batches,
                "staleness": {str(s): n for s, n in sorted(buffer["staleness"].items())},
                "publish_s_mean": sum(self.publish_s) / len(self.publish_s) if self.publish_s else None,
                "pull_s_mean": self.pull_s / self.pulls if self.pulls else None, "pulls": self.pulls,
                "publish_mb": pu["publish_mb"], "generator_deaths": self.generator_deaths,
                "buffer": {key: buffer[key] for key in ("put", "taken", "stale_dropped", "evicted", "duplicates",
                                                         "depth")}}


def _read_summary(run_dir: Path) -> dict:
    path = run_dir / SUMMARY_FILE
    return json.loads(path.read_text()) if path.is_file() else {}
