"""Asynchronous vs synchronous RLOO on Ray (issue 13): the same job (same prompts, k, number of updates, seed) on
the synchronous schedule and the asynchronous one, 1 trajectory generator + 1 policy updater, one core and one
torch thread each; then the weight-sync latency per publish, full weights vs a LoRA's.

Reported per schedule: wall time of the training loop (held-out evaluations apart), trajectories per second,
generator tokens/s, idle share of each side, the staleness distribution of the groups used, the buffer's
accounting, and the held-out score at the end (greedy; reasoning-gym's scorer, 0.5 for a wrong sign). Then
wall_speedup = sync wall / async wall and accuracy_diff_points = 100 * (async - sync) held-out accuracy.
With --generators 2 (needs >= 3 usable cores) it adds an asynchronous run with two generators.

Weight sync: the updater's publish (copy the weights, ray.put, tell the parameter server) and a generator's pull
(ray.get, load), timed apart, for every weight of the model and for a rank-16 LoRA on attention and MLP.

    python benchmarks/rl_async.py --json                  # ~10 min on the shared 2-core machine;
                                                          # writes docs/results/rl_async.json
    python benchmarks/rl_async.py --json --steps 4 --heldout 16 --out /tmp/x.json     # a quick look

The default job: smollm2-135m-instruct, reasoning-gym chain_sum (two 2-digit terms), P=8 prompts x k=4 samples,
12 new tokens, bf16 autocast, lr 2e-5, 10 updates, max_staleness 1, up to 128 held-out prompts (chain_sum's
held-out slice has 110 distinct ones). Measured on a quiet 2-core machine: 1.75x; beside another engineer's
compiles (load 4-6): 1.03x (docs/results/rl_async_loaded.json): run it on a machine with two free cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import ray
import torch

from openafm.checkpoint.load import load_model
from openafm.nn.lora import apply_lora
from openafm.rl.config import RLConfig
from openafm.rl.system.async_run import AsyncRLRun, Schedule
from openafm.rl.system.params import ParameterServer, load_published, publishable
from openafm.runtime.threads import usable_cores

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"


def job(args, run_dir: Path, generators: int) -> RLConfig:
    return RLConfig.from_dict({
        "model": args.model, "run_dir": str(run_dir), "steps": args.steps, "prompts_per_step": args.prompts,
        "rloo": {"k": args.k, "clip": 0.2, "kl_coef": 0.02}, "max_new_tokens": 12, "temperature": 0.7,
        "micro_batch": 32, "optimizer": {"lr": args.lr, "weight_decay": 0.0, "grad_clip": 1.0},
        "heldout": {"every": args.steps, "size": args.heldout}, "checkpoint": {"every": args.steps, "keep": 1},
        "precision": "bfloat16-autocast", "seed": args.seed, "progress": False,
        "prompt_sets": [{"name": "math", "source": "reasoning-gym", "weight": 1.0, "reward": "reasoning-gym",
                         "reward_options": {"extract": "last-number"}, "pool": 2000,
                         "options": {"dataset": "chain_sum", "config": {"min_terms": 2, "max_terms": 2,
                                                                        "max_digits": 2}, "hint": ""}}],
        "asynchronous": {"generators": generators, "max_staleness": args.max_staleness, "sync_every": 1,
                         "generator_cpus": 1, "updater_cpus": 1, "generator_threads": 1, "updater_threads": 1,
                         "object_store_mb": args.object_store_mb}})


def one_run(args, root: Path, schedule: Schedule, generators: int) -> dict:
    name = f"{schedule.value}_{generators}tg"
    log(f"rl_async: {name} ...")
    started = time.perf_counter()
    summary = AsyncRLRun(job(args, root / name, generators), schedule).run()
    acct = summary["asynchronous"]
    out = {"total_s": time.perf_counter() - started, **{k: v for k, v in acct.items() if k != "schedule"},
           "heldout_before": summary["heldout_before"]["heldout/math"],
           "heldout_after": summary["heldout_after"]["heldout/math"]}
    log(f"rl_async: {name}: wall {out['wall_s']:.1f} s, held-out {out['heldout_after']:.3f}, "
        f"staleness {out['staleness']}")
    return out


def sync_latency(model_name: str, repeats: int) -> dict:
    """Publish (copy + ray.put + tell the server) and pull (ray.get + load) times, full weights vs LoRA-only."""
    server = ray.remote(ParameterServer).options(num_cpus=0).remote()
    out, version = {}, 0
    for what in ("full", "lora"):
        policy, follower = load_model(model_name).model.requires_grad_(True), load_model(model_name).model
        if what == "lora":
            for m in (policy, follower):
                apply_lora(m, rank=16, alpha=32.0)
        publish, pull = [], []
        for _ in range(repeats):
            version += 1
            start = time.perf_counter()
            kind, weights = publishable(policy)
            ray.get(server.publish.remote(version, [ray.put(weights)], kind))
            publish.append(time.perf_counter() - start)
            start = time.perf_counter()
            _, [ref], kind, _ = ray.get(server.latest.remote())
            load_published(follower, kind, ray.get(ref))
            pull.append(time.perf_counter() - start)
        out[what] = {"mb": sum(t.numel() * t.element_size() for t in weights.values()) / 2**20,
                     "tensors": len(weights), "publish_s": statistics.median(publish),
                     "pull_s": statistics.median(pull)}
    out["lora_over_full_publish"] = out["lora"]["publish_s"] / out["full"]["publish_s"]
    ray.kill(server)
    return out


def scaling_model(sync: dict, steps: int, generators: list[int]) -> dict:
    """The README's model from the synchronous run's phase times: per update G (generate a batch), U (update),
    S_pu (publish), S_tg (pull). Sync: G + U + S_pu + S_tg; async with N generators (max_staleness >= N):
    max((G + S_tg) / N, U + S_pu). -> predicted seconds per update and speed-ups, to set beside the measured."""
    g, u = sync["tg_busy_s"] / steps, sync["pu_busy_s"] / steps
    s_pu, s_tg = sync["publish_s_mean"] or 0.0, sync["pull_s_mean"] or 0.0
    t_sync = g + u + s_pu + s_tg
    out = {"G_s": g, "U_s": u, "S_pu_s": s_pu, "S_tg_s": s_tg, "sync_s_per_update": t_sync,
           "measured_sync_s_per_update": sync["wall_s"] / steps}
    for n in generators:
        t = max((g + s_tg) / n, u + s_pu)
        out[f"async_{n}tg_s_per_update"] = t
        out[f"async_{n}tg_speedup"] = t_sync / t
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true")
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--heldout", type=int, default=128)
    p.add_argument("--max-staleness", type=int, default=1)
    p.add_argument("--generators", type=int, default=1, help="also run async with this many generators if > 1")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sync-repeats", type=int, default=5)
    p.add_argument("--object-store-mb", type=int, default=2048)
    p.add_argument("--out", default=str(RESULTS / "rl_async.json"))
    args = p.parse_args()
    torch.set_num_threads(1)
    cores = usable_cores()
    ray.init(num_cpus=max(2, min(cores, 1 + args.generators)), object_store_memory=args.object_store_mb * 2**20,
             include_dashboard=False, log_to_driver=False)
    partial = Path(args.out).with_suffix(".partial.json")          # each run as it finishes (a long job)
    try:
        with tempfile.TemporaryDirectory(prefix="rl_async_") as tmp:
            root = Path(tmp)
            sync = one_run(args, root, Schedule.SYNC, 1)
            partial.write_text(json.dumps({"sync": sync}, indent=2) + "\n")
            asynchronous = one_run(args, root, Schedule.ASYNC, 1)
            partial.write_text(json.dumps({"sync": sync, "async": asynchronous}, indent=2) + "\n")
            scaling = {}
            if args.generators > 1:
                if cores >= 1 + args.generators:
                    scaling[f"async_{args.generators}tg"] = one_run(args, root, Schedule.ASYNC, args.generators)
                else:
                    scaling["skipped"] = f"{args.generators} generators + 1 updater need {1 + args.generators} " \
                                         f"cores; this machine lets the process use {cores}"
        latency = sync_latency(args.model, args.sync_repeats)
    finally:
        ray.shutdown()
    result = {
        "job": {"model": args.model, "task": "reasoning-gym chain_sum, 2 terms of 2 digits", "steps": args.steps,
                "prompts_per_step": args.prompts, "k": args.k, "max_new_tokens": 12, "lr": args.lr,
                "heldout_prompts": args.heldout, "max_staleness": args.max_staleness, "precision": "bf16 autocast",
                "actors": "1 generator + 1 updater, 1 Ray CPU and 1 torch thread each", "usable_cores": cores},
        "wall_speedup": sync["wall_s"] / asynchronous["wall_s"],
        "accuracy_diff_points": 100 * (asynchronous["heldout_after"] - sync["heldout_after"]),
        "sync": sync, "async": asynchronous, **scaling, "weight_sync": latency,
        "scaling_model": {**scaling_model(sync, args.steps, [1, 2, 4]),
                          "measured_async_1tg_s_per_update": asynchronous["wall_s"] / args.steps},
        "note": "timings from a shared 2-core machine (another engineer compiling and benchmarking): provisional",
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    partial.unlink(missing_ok=True)
    emit(result, args.json)


if __name__ == "__main__":
    main()
