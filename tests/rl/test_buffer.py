"""The asynchronous RL system's pieces without Ray: the replay buffer (staleness drops counted, groups kept whole,
FIFO / freshest order, eviction, duplicates, state), the tickets' staleness gate and re-issue, the parameter
server's full and LoRA-only weights, and the updater's importance ratio on stale groups."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch

from openafm.checkpoint.native import save_checkpoint
from openafm.errors import CheckpointError, ConfigError
from openafm.nn.lora import apply_lora
from openafm.rl.config import RLConfig, Sampling
from openafm.rl.rollout import Row
from openafm.rl.run import PromptMixture
from openafm.rl.system.buffer import ReplayBuffer, TrajectoryGroup
from openafm.rl.system.coordinator import Coordinator
from openafm.rl.system.generator import TrajectoryGenerator
from openafm.rl.system.params import ParameterServer, WeightSet, load_published, publishable
from openafm.rl.system.tickets import Tickets
from openafm.rl.system.updater import PolicyUpdater
from tiny import make_tiny

K = 3


def grp(ticket: int, index: int, version: int, k: int = K) -> TrajectoryGroup:
    rows = [Row([1, 2], [3 + i, 4], stopped=i % 2 == 0) for i in range(k)]
    return TrajectoryGroup(ticket=ticket, index=index, set_index=0, version=version, rows=rows,
                           rewards=[float(i) for i in range(k)], behaviour=[[-0.5, -1.0]] * k,
                           reference=[[-0.4, -1.1]] * k)


def accounted(buffer: ReplayBuffer) -> bool:
    s = buffer.stats
    return s.put == s.taken + s.stale_dropped + s.evicted + buffer.depth()


def test_stale_groups_are_dropped_and_counted():
    buffer = ReplayBuffer(capacity=10, k=K, max_staleness=1)
    buffer.put([grp(0, 0, version=0), grp(0, 1, version=0), grp(1, 0, version=1), grp(2, 0, version=2)])
    taken = buffer.take(2, version=2)                  # version 0 is 2 behind: both its groups dropped
    assert [g.key for g in taken] == [(1, 0), (2, 0)]
    assert buffer.stats.stale_dropped == 2 and buffer.stats.staleness == {1: 1, 0: 1}
    assert buffer.take(1, version=2) is None and accounted(buffer)


def test_take_waits_for_enough_groups_and_takes_nothing_meanwhile():
    buffer = ReplayBuffer(capacity=10, k=K, max_staleness=0)
    buffer.put([grp(0, 0, 0)])
    assert buffer.take(2, version=0) is None and buffer.depth() == 1 and buffer.stats.taken == 0


def test_groups_are_whole_and_never_split():
    buffer = ReplayBuffer(capacity=10, k=K, max_staleness=3)
    with pytest.raises(ValueError, match="k=3"):
        buffer.put([grp(0, 0, 0, k=2)])                 # a group of 2 where k is 3
    bad = grp(0, 1, 0)
    bad.behaviour = [[-0.5]] * K                        # one log-prob for a 2-token response
    with pytest.raises(ValueError, match="2 response tokens has 1 behaviour"):
        buffer.put([grp(0, 0, 0), bad])
    assert buffer.depth() == 0                          # checked before anything is stored
    rng = random.Random(0)
    for t in range(30):
        buffer.put([grp(t, j, version=t // 3) for j in range(rng.randint(1, 3))])
        taken = buffer.take(rng.randint(1, 4), version=t // 3) or []
        assert all(len(g.rows) == len(g.rewards) == len(g.behaviour) == K for g in taken)
        assert accounted(buffer)


def test_fifo_and_freshest_order():
    groups = [grp(0, 0, 2), grp(1, 0, 0), grp(2, 0, 1), grp(3, 0, 2)]
    fifo = ReplayBuffer(capacity=10, k=K, max_staleness=5, sampling=Sampling.FIFO)
    fifo.put(groups)
    assert [g.key for g in fifo.take(3, version=2)] == [(0, 0), (1, 0), (2, 0)]
    fresh = ReplayBuffer(capacity=10, k=K, max_staleness=5, sampling=Sampling.FRESHEST)
    fresh.put([grp(*g.key, g.version) for g in groups])
    assert [g.key for g in fresh.take(3, version=2)] == [(0, 0), (3, 0), (2, 0)]


def test_full_buffer_evicts_the_oldest_and_duplicates_are_counted_once():
    buffer = ReplayBuffer(capacity=2, k=K, max_staleness=5)
    assert buffer.put([grp(0, 0, 0), grp(0, 1, 0), grp(1, 0, 0)]) == 3
    assert [g.key for g in buffer.groups] == [(0, 1), (1, 0)] and buffer.stats.evicted == 1
    assert buffer.put([grp(0, 1, 0), grp(0, 0, 0)]) == 0        # seen before (also the evicted one)
    assert buffer.stats.duplicates == 2 and buffer.stats.put == 3 and accounted(buffer)


def test_accounting_matches_a_naive_replay_of_random_operations():
    """Against a naive model: a list of (key, version) and plain counters."""
    rng = random.Random(1)
    buffer = ReplayBuffer(capacity=5, k=K, max_staleness=1)
    model, dropped, evicted, taken, version = [], 0, 0, 0, 0
    for t in range(200):
        if rng.random() < 0.5:
            g = grp(t, 0, version=max(0, version - rng.randint(0, 3)))
            buffer.put([g])
            if len(model) == 5:
                model.pop(0)
                evicted += 1
            model.append((g.key, g.version))
        else:
            n = rng.randint(1, 3)
            got = buffer.take(n, version)
            fresh = [m for m in model if version - m[1] <= 1]
            dropped += len(model) - len(fresh)
            model = fresh
            if len(model) >= n:
                assert [g.key for g in got] == [m[0] for m in model[:n]]
                model, taken = model[n:], taken + n
                version += 1
            else:
                assert got is None
    s = buffer.stats
    assert (s.stale_dropped, s.evicted, s.taken, buffer.depth()) == (dropped, evicted, taken, len(model))
    assert dropped > 0 and evicted > 0 and accounted(buffer)


def test_buffer_state_round_trips_through_json():
    buffer = ReplayBuffer(capacity=4, k=K, max_staleness=1)
    buffer.put([grp(0, 0, 0), grp(0, 1, 0), grp(1, 0, 1)])
    buffer.take(1, version=1)
    again = ReplayBuffer(capacity=4, k=K, max_staleness=1)
    again.load_state_dict(json.loads(json.dumps(buffer.state_dict())))
    assert again.groups == buffer.groups and again.stats == buffer.stats and again.seen == buffer.seen
    assert again.put([grp(0, 0, 0)]) == 0                         # still knows what it has seen
    with pytest.raises(ConfigError, match="k=3"):
        ReplayBuffer(capacity=4, k=2, max_staleness=1).load_state_dict(buffer.state_dict())


def test_tickets_draw_the_synchronous_runs_prompts_and_bound_staleness():
    tickets = Tickets(pool_sizes=[5, 7], weights=[1.0, 2.0], seed=3, prompts_per_batch=4, max_staleness=1)
    mixture = PromptMixture([list(range(5)), list(range(7))], [1.0, 2.0], seed=3)
    assert tickets.issue(generator=0, version=0, dropped_groups=0) == (0, mixture.draw(0, 4))
    assert tickets.issue(generator=0, version=0, dropped_groups=0) == (1, mixture.draw(1, 4))
    assert tickets.issue(generator=0, version=0, dropped_groups=0) is None      # batch 2 at version 0: 2 stale
    assert tickets.issue(generator=0, version=0, dropped_groups=4)[0] == 2      # a dropped batch frees room
    assert tickets.issue(generator=1, version=2, dropped_groups=4)[0] == 3
    synchronous = Tickets(pool_sizes=[5], weights=[1.0], seed=0, prompts_per_batch=2, max_staleness=0)
    assert synchronous.issue(generator=0, version=0, dropped_groups=0)[0] == 0
    assert synchronous.issue(generator=1, version=0, dropped_groups=0) is None  # one batch alive at a time


def test_a_dead_generators_ticket_is_issued_again_with_the_same_prompts():
    tickets = Tickets(pool_sizes=[9], weights=[1.0], seed=0, prompts_per_batch=3, max_staleness=2)
    first = tickets.issue(generator=0, version=0, dropped_groups=0)
    second = tickets.issue(generator=1, version=0, dropped_groups=0)
    tickets.done(second[0])
    assert tickets.release(1) == [] and tickets.release(0) == [0]
    assert tickets.issue(generator=1, version=0, dropped_groups=0) == first
    saved = json.loads(json.dumps(tickets.state_dict()))            # a leased ticket is saved as returned
    resumed = Tickets(pool_sizes=[9], weights=[1.0], seed=0, prompts_per_batch=3, max_staleness=2)
    resumed.load_state_dict(saved)
    assert resumed.issue(generator=0, version=0, dropped_groups=0) == first
    assert resumed.issue(generator=0, version=0, dropped_groups=0) == \
        tickets.issue(generator=0, version=0, dropped_groups=0)


def test_coordinator_closes_the_ticket_with_its_groups_and_rejects_a_sync_checkpoint():
    tickets = Tickets(pool_sizes=[9], weights=[1.0], seed=0, prompts_per_batch=2, max_staleness=0)
    coord = Coordinator(ReplayBuffer(capacity=8, k=K, max_staleness=0), tickets)
    b, _ = coord.issue(generator=0, version=0)
    with pytest.raises(ValueError, match="put as batch 0"):
        coord.put(b, [grp(1, 0, 0)])
    assert coord.put(b, [grp(b, 0, 0), grp(b, 1, 0)]) == 2
    assert coord.release(0) == [] and coord.summary()["batches_leased"] == 0
    with pytest.raises(CheckpointError, match="without --async|cannot resume with --async"):
        coord.load_state_dict({"positions": [0]})


def test_parameter_server_publishes_all_weights_or_only_the_lora():
    model = make_tiny("smollm2-tiny")
    kind, weights = publishable(model)
    assert kind is WeightSet.FULL and weights.keys() == model.state_dict().keys()
    apply_lora(model, rank=2, alpha=4.0)
    kind, lora = publishable(model)
    assert kind is WeightSet.TRAINABLE and lora and all("lora_" in n for n in lora)
    assert sum(t.numel() for t in lora.values()) < 0.2 * sum(t.numel() for t in weights.values())
    other = make_tiny("smollm2-tiny")
    apply_lora(other, rank=2, alpha=4.0)
    lora = {n: torch.full_like(t, 0.01) for n, t in lora.items()}
    load_published(other, kind, lora)
    assert all(torch.equal(dict(other.named_parameters())[n], t) for n, t in lora.items())
    with pytest.raises(CheckpointError, match="same LoRA"):
        load_published(make_tiny("smollm2-tiny"), kind, lora)
    server = ParameterServer()
    with pytest.raises(RuntimeError, match="nothing has been published"):
        server.latest()
    server.publish(3, ["ref"], kind)
    assert server.version() == 3 and server.latest()[:3] == (3, ["ref"], WeightSet.TRAINABLE)
    with pytest.raises(ValueError, match="versions only grow"):
        server.publish(2, ["old"], kind)


def test_updater_ratio_is_to_the_behaviour_policy_and_exactly_1_when_fresh(tmp_path, tokenizer):
    """A generator's groups trained on twice: fresh (ratio 1, nothing clipped), then one version stale, where the
    ratio is pi_now / pi_behaviour, checked against a naive one-row-at-a-time forward pass."""
    model = make_tiny("smollm2-tiny", vocab_size=tokenizer.vocab_size, max_seq_len=256)
    save_checkpoint(tmp_path / "base", model.config, model.state_dict(), tokenizer)
    (tmp_path / "p.jsonl").write_text("".join(json.dumps({"prompt": f"Say {w}", "target": w}) + "\n"
                                              for w in ("red fox", "blue sky", "old tree")))
    config = RLConfig.from_dict({
        "model": str(tmp_path / "base"), "run_dir": str(tmp_path / "run"), "steps": 2, "prompts_per_step": 2,
        "max_new_tokens": 4, "temperature": 5.0, "micro_batch": 4, "progress": False, "rloo": {"k": 3},
        "optimizer": {"lr": 3e-3, "weight_decay": 0.0, "grad_clip": 1.0}, "heldout": {"size": 0},
        "prompt_sets": [{"name": "echo", "source": "file", "weight": 1.0, "reward": "chrf",
                         "options": {"path": str(tmp_path / "p.jsonl")}}]})
    groups = TrajectoryGenerator(config, replica=0).generate((0, [(0, 0), (0, 2)]))
    assert [g.key for g in groups] == [(0, 0), (0, 1)] and all(g.version == 0 for g in groups)
    updater = PolicyUpdater(config)
    fresh = updater.train_on(groups)
    assert fresh["ratio"] == pytest.approx(1.0, abs=1e-6) and fresh["clip_fraction"] == 0.0
    assert fresh["staleness_mean"] == 0 and fresh["staleness/0"] == 2
    updater.run.step += 1
    naive, n = 0.0, 0
    with torch.no_grad():
        for g in groups:
            for row, behaviour in zip(g.rows, g.behaviour, strict=True):
                ids = torch.tensor([row.prompt + row.response])
                logp = torch.log_softmax(updater.run.policy(ids[:, :-1]).float() / config.temperature, -1)[0]
                for t, token in enumerate(row.response):
                    naive += math.exp(float(logp[len(row.prompt) - 1 + t, token]) - behaviour[t])
                    n += 1
    stale = updater.train_on(groups)
    assert stale["staleness_mean"] == 1 and stale["staleness/1"] == 2
    assert stale["ratio"] == pytest.approx(naive / n, rel=1e-4) and abs(stale["ratio"] - 1) > 1e-3
