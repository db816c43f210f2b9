"""The policy updater (PU): takes P whole groups from the replay buffer, takes one RLOO step on them, publishes
its weights to the parameter server every sync_every updates, and checkpoints (the trainer's atomic format) with
the coordinator's state (buffer and tickets), so a killed PU resumes with the samples it had not used yet.

The step is RLRun's: leave-one-out advantages of the KL-shaped reward, the clipped policy-gradient loss,
accumulated over micro-batches. The only change is where log pi_old comes from: the behaviour log-probs the
generator recorded when it sampled (version v), so for a sample s = V - v versions stale the loss's ratio
pi_theta / pi_v is the importance ratio to the policy that actually sampled, clipped to [1 - eps, 1 + eps]
(PPO's pessimistic clip; the "clipped importance ratio" of the issue, and what AReaL's decoupled objective
reduces to when its proximal policy is the behaviour policy). At staleness 0 it is exactly the synchronous step.

    pu = PolicyUpdater(config, threads=1); pu.attach(coordinator, params)
    record = pu.step()             # None while the buffer holds fewer than P fresh-enough groups
"""

from __future__ import annotations

import os
import time

import ray
import torch

from openafm.errors import CheckpointError
from openafm.rl.config import RLConfig
from openafm.rl.rloo import group, leave_one_out_advantages, sequence_kl, shaped_rewards
from openafm.rl.rollout import pack_rows
from openafm.rl.run import RLRun
from openafm.rl.system.buffer import TrajectoryGroup
from openafm.rl.system.params import publishable
from openafm.runtime.threads import set_threads
from openafm.train import checkpoint as ckpt

COORDINATOR_KEY = "coordinator"


class PolicyUpdater:
    def __init__(self, config: RLConfig, *, threads: int | None = None):
        set_threads(threads)
        self.run = RLRun(config)
        self.coordinator = self.params = None
        self.busy_s = self.wait_s = self.publish_s = 0.0
        self.publishes, self.publish_bytes = 0, 0
        self.started = time.perf_counter()

    def attach(self, coordinator, params) -> None:
        self.coordinator, self.params = coordinator, params

    def pid(self) -> int:
        return os.getpid()

    def pool_sizes(self) -> list[int]:
        return [len(pool) for pool in self.run.mixture.pools]

    @property
    def version(self) -> int:
        return self.run.step

    # --- the update ------------------------------------------------------------------------------------------

    def train_on(self, groups: list[TrajectoryGroup]) -> dict:
        """One RLOO update on whole groups (rows in group order). -> the step's metrics."""
        run, c = self.run, self.run.config
        rows = [r for g in groups for r in g.rows]
        tokens, mask = pack_rows(rows)                                     # [N, T], [N, T - 1]
        old, ref = torch.zeros_like(mask), torch.zeros_like(mask)          # behaviour / reference log-probs
        for n, (lp, rf) in enumerate((lp, rf) for g in groups for lp, rf in zip(g.behaviour, g.reference)):
            where = mask[n].nonzero().squeeze(-1)
            old[n, where], ref[n, where] = torch.tensor(lp), torch.tensor(rf)
        rewards = torch.tensor([r for g in groups for r in g.rewards])      # [N]
        tokens, mask, old, ref = (t.to(run.device) for t in (tokens, mask, old, ref))
        seq_kl = sequence_kl(old, ref, mask)                                # [N]
        shaped = shaped_rewards(rewards.to(run.device), seq_kl, c.rloo.kl_coef)
        advantages = leave_one_out_advantages(group(shaped, c.rloo.k)).reshape(-1)
        metrics = run.update(tokens, mask, old, advantages)
        staleness = [self.version - g.version for g in groups]
        out = {"reward": float(rewards.mean()), "kl": float(seq_kl.mean()),
               "response_tokens": float(mask.sum(-1).mean()), **metrics,
               "staleness_mean": sum(staleness) / len(staleness), "staleness_max": max(staleness)}
        for s in sorted(set(staleness)):
            out[f"staleness/{s}"] = staleness.count(s)
        sets = [g.set_index for g in groups for _ in g.rows]
        for i, s in enumerate(c.prompt_sets):
            mine = [float(r) for r, k in zip(rewards, sets) if k == i]              # as RLRun: float32 values
            if mine:
                out[f"reward/{s.name}"] = sum(mine) / len(mine)
        return out

    def step(self, wait_s: float = 0.5) -> dict | None:
        """Wait up to wait_s for P groups, then update, publish and checkpoint as configured. -> the record, or
        None when the buffer did not fill in time (the wait is counted as idle)."""
        c = self.run.config
        start = time.perf_counter()
        while (groups := ray.get(self.coordinator.take.remote(c.prompts_per_step, self.version))) is None:
            if time.perf_counter() - start > wait_s:
                self.wait_s += time.perf_counter() - start
                return None
            time.sleep(0.002)
        began = time.perf_counter()
        waited = began - start
        self.wait_s += waited
        record = self.train_on(groups)
        self.run.step += 1
        took = time.perf_counter() - began
        self.busy_s += took
        record.update(step=self.version, pu_step_s=took, pu_wait_s=waited)
        if self.version % c.asynchronous.sync_every == 0 or self.version == c.steps:
            record.update(self.publish())
        if self.version % c.checkpoint.every == 0 or self.version == c.steps:
            self.save()
        return {**record, "pu_busy_s": self.busy_s, "pu_idle_s": self.wait_s}

    # --- weights, checkpoints, evaluation --------------------------------------------------------------------

    def publish(self) -> dict:
        """Put the trainable weights in the object store and tell the parameter server. -> seconds and bytes."""
        start = time.perf_counter()
        kind, weights = publishable(self.run.policy)
        ref = ray.put(weights)
        ray.get(self.params.publish.remote(self.version, [ref], kind))
        took = time.perf_counter() - start
        size = sum(t.numel() * t.element_size() for t in weights.values())
        self.publish_s += took
        self.publishes += 1
        self.publish_bytes = size
        return {"publish_s": took, "publish_mb": size / 2**20}

    def save(self) -> None:
        state = ray.get(self.coordinator.state_dict.remote())
        self.run.save(loader_state={COORDINATOR_KEY: state})

    def has_checkpoint(self) -> bool:
        return ckpt.latest_checkpoint(self.run.run_dir) is not None

    def restore(self) -> int:
        """Resume from the newest checkpoint (the coordinator's state too). -> the update count (0: none)."""
        def load(state: dict) -> None:
            if COORDINATOR_KEY not in state:
                raise CheckpointError(f"{self.run.run_dir}: the checkpoint has no replay-buffer state (written by "
                                      f"the synchronous `openafm rl`?); resume it without --async")
            ray.get(self.coordinator.load_state_dict.remote(state[COORDINATOR_KEY]))
        return self.run.restore_latest(load)

    def evaluate(self, reference: bool = False) -> dict:
        return self.run.evaluate(self.run.reference if reference else None)

    def finish(self, before: dict, after: dict) -> dict:
        return self.run.finish(before, after)

    def totals(self) -> dict:
        return {"pu_busy_s": self.busy_s, "pu_idle_s": self.wait_s, "publish_s": self.publish_s,
                "publishes": self.publishes, "publish_mb": self.publish_bytes / 2**20,
                "alive_s": time.perf_counter() - self.started}
