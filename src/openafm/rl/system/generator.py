"""The trajectory generator (TG): samples a ticket's prompts with the policy weights of a known version, rewards
the samples, scores them (behaviour and reference log-probs, recorded now so the updater never re-scores a stale
sample), and writes them to the replay buffer as whole groups.

It is RLRun's sampling, verbatim: the same prompt pools, chat rendering, per-budget batches, seed (the ticket's
batch number plays the synchronous step), rewards and micro-batched log-probs. One replica is one Ray actor
(rl/system/actors.py); `generate` is plain and needs no Ray.

    tg = TrajectoryGenerator(config, replica=0, coordinator=handle, params=handle, threads=1)
    report = tg.generate_one()      # poll the version, pull weights if it moved, take a ticket, sample, write
    groups = tg.generate(ticket)    # the work itself: [TrajectoryGroup] of P prompts x k rows
"""

from __future__ import annotations

import os
import time

import ray
import torch

from openafm.rl.config import RLConfig
from openafm.rl.rollout import pack_rows, row_logprobs
from openafm.rl.run import RLRun, render
from openafm.rl.system.buffer import TrajectoryGroup
from openafm.rl.system.params import load_published
from openafm.rl.system.tickets import Ticket
from openafm.runtime.threads import set_threads


class TrajectoryGenerator:
    def __init__(self, config: RLConfig, *, replica: int, coordinator=None, params=None, threads: int | None = None):
        set_threads(threads)
        self.run = RLRun(config)
        self.run.policy.requires_grad_(False).eval()
        self.replica, self.coordinator, self.params = replica, coordinator, params
        self.version = 0                      # the base weights the run starts from
        self.busy_s = self.sync_s = 0.0
        self.tokens = self.batches = self.pulls = 0
        self.started = time.perf_counter()

    def pid(self) -> int:
        return os.getpid()

    def pool_sizes(self) -> list[int]:
        return [len(pool) for pool in self.run.mixture.pools]

    # --- the work --------------------------------------------------------------------------------------------

    @torch.no_grad()
    def generate(self, ticket: Ticket) -> list[TrajectoryGroup]:
        """A ticket's P prompts x k rows, rewarded and scored under the current weights (self.version)."""
        run, c, k = self.run, self.run.config, self.run.config.rloo.k
        batch, picks = ticket
        drawn = [(s, run.mixture.pools[s][i]) for s, i in picks]
        rows = run.sample(drawn, [render(run.tokenizer, record) for _, record in drawn], batch)
        rewards = [run.reward(drawn[n // k][0], drawn[n // k][1], row) for n, row in enumerate(rows)]
        tokens, mask = pack_rows(rows)
        tokens = tokens.to(run.device)
        with run.autocast():
            old = row_logprobs(run.policy, tokens, mask, temperature=c.temperature, micro_batch=c.micro_batch).cpu()
            ref = row_logprobs(run.reference, tokens, mask, temperature=c.temperature, micro_batch=c.micro_batch).cpu()
        sampled = mask.bool()
        now = time.time()
        groups = []
        for j, (s, _) in enumerate(drawn):
            mine = range(j * k, (j + 1) * k)
            groups.append(TrajectoryGroup(
                ticket=batch, index=j, set_index=s, version=self.version, rows=[rows[n] for n in mine],
                rewards=[rewards[n] for n in mine], behaviour=[old[n][sampled[n]].tolist() for n in mine],
                reference=[ref[n][sampled[n]].tolist() for n in mine],
                generator=self.replica, finished_at=now))
        return groups

    # --- the actor's loop step -------------------------------------------------------------------------------

    def sync_weights(self) -> float | None:
        """Pull the published weights if their version moved. -> seconds the pull took, or None (no change)."""
        if ray.get(self.params.version.remote()) == self.version:
            return None
        start = time.perf_counter()
        version, [ref], kind, _ = ray.get(self.params.latest.remote())
        load_published(self.run.policy, kind, ray.get(ref))
        self.version = version
        self.pulls += 1
        took = time.perf_counter() - start
        self.sync_s += took
        return took

    def generate_one(self, wait_s: float = 0.01) -> dict:
        """One batch if a ticket is free (else wait_s of sleep). -> what happened, with the running totals."""
        pulled = self.sync_weights()
        ticket = ray.get(self.coordinator.issue.remote(generator=self.replica, version=self.version))
        out = {"replica": self.replica, "pull_s": pulled, "batch": None}
        if ticket is None:
            time.sleep(wait_s)
        else:
            start = time.perf_counter()
            groups = self.generate(ticket)
            took = time.perf_counter() - start
            ray.get(self.coordinator.put.remote(ticket[0], groups))
            tokens = sum(len(r.response) for g in groups for r in g.rows)
            self.busy_s += took
            self.tokens += tokens
            self.batches += 1
            out.update(batch=ticket[0], version=self.version, tokens=tokens, generate_s=took)
        return {**out, "busy_s": self.busy_s, "sync_s": self.sync_s, "tokens_total": self.tokens,
                "alive_s": time.perf_counter() - self.started}
