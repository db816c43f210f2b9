"""`openafm rl CONFIG.yaml`: synchronous RLOO over a mixture of prompt sets, each with its reward (report §5)."""

from __future__ import annotations

import argparse
import json

from openafm.rl.config import load_rl_config
from openafm.rl.prompts import PromptSource
from openafm.rl.rewards.registry import REWARDS
from openafm.rl.run import METRICS_FILE, POLICY_DIR, SUMMARY_FILE, RLRun
from openafm.rl.system.async_run import AsyncRLRun, Schedule

EPILOG = f"""config (YAML; see openafm.rl.config for every key):
  model: smollm2-135m-instruct        # or a checkpoint directory (an SFT run's export)
  run_dir: runs/rl-math
  steps: 40
  prompts_per_step: 8                 # P prompts, k samples each
  rloo: {{k: 4, clip: 0.2, kl_coef: 0.05}}
  prompt_sets:
    - {{name: math, source: reasoning-gym, weight: 0.8, reward: reasoning-gym, reward_options: {{marker: "="}},
       options: {{dataset: chain_sum, config: {{max_terms: 2, max_digits: 2}}, hint: ""}}}}
    - {{name: ifeval, source: instructions, weight: 0.2, reward: instructions}}

prompt sources: {", ".join(s.value for s in PromptSource)} (file: JSONL of {{prompt, target, system?}};
  options per source in openafm.rl.prompts)
rewards: {", ".join(sorted(REWARDS))} (reward-model: reward_options.path, a trained reward model)

writes RUN/{METRICS_FILE} (reward per set, KL, response length, entropy, clip fraction, held-out reward),
RUN/checkpoints/ (--resume continues bit-exactly), RUN/{POLICY_DIR}/ (the trained policy, a native checkpoint),
RUN/{SUMMARY_FILE} (held-out reward per set before and after); `openafm plot RUN` draws the curves.

--async: trajectory generators and a policy updater on Ray actors, overlapped (an embedded local Ray, or the
cluster at asynchronous.address); metrics add staleness, buffer depth, tokens/s and idle shares.

example (the config above saved as rl-math.yaml):
  openafm rl rl-math.yaml && openafm eval --model runs/rl-math/policy --tasks ...
  openafm rl rl-math.yaml --async --run-dir runs/rl-math-async
"""


def register(sub) -> None:
    p = sub.add_parser("rl", help="RLOO post-training over prompt sets with verifiable rewards or a reward model",
                       description="Synchronous RLOO (REINFORCE leave-one-out): each step samples k responses for "
                                   "P prompts drawn from the config's prompt sets by weight, rewards them with each "
                                   "set's reward, shapes the rewards with the KL to the frozen starting policy, and "
                                   "takes one clipped policy-gradient step.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", help="RL config YAML")
    p.add_argument("--run-dir", default=None, help="override the config's run_dir")
    p.add_argument("--steps", type=int, default=None, help="override the config's steps")
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint of the run dir")
    schedule = p.add_mutually_exclusive_group()
    schedule.add_argument("--async", dest="schedule", action="store_const", const=Schedule.ASYNC,
                          help="generate and update concurrently on Ray actors (config key `asynchronous`: "
                               "generators, max_staleness, sync_every, address of a Ray cluster, ...)")
    schedule.add_argument("--sync-actors", dest="schedule", action="store_const", const=Schedule.SYNC,
                          help="the same actors on the synchronous schedule (generate a batch, update, repeat)")
    p.set_defaults(run=_cmd_rl, schedule=None)


def _cmd_rl(args) -> int:
    config = load_rl_config(args.config, run_dir=args.run_dir, steps=args.steps)
    if args.schedule is None:
        summary = RLRun(config).run(resume=args.resume)
    else:
        summary = AsyncRLRun(config, args.schedule).run(resume=args.resume)
    print(json.dumps(summary))
    return 0
