"""`openafm train CONFIG.yaml [--resume]` and `openafm plot RUN_DIR`."""

from __future__ import annotations

import argparse

from openafm.train.config import load_train_config
from openafm.train.loop import Trainer
from openafm.rl.plot import is_rl_run, plot_rl_run
from openafm.train.plot import plot_run

EXAMPLE = """example CONFIG.yaml:
  model: afm-ondevice-tiny          # preset name or checkpoint path
  run_dir: runs/tiny
  steps: 200
  batch_size: 8                     # sequences per optimizer step (all ranks, all micro-batches)
  grad_accum: 2
  seq_len: 128
  optimizer: {lr: 1.0e-3, weight_decay: 0.1, grad_clip: 1.0}
  schedule: {kind: wsd, warmup_steps: 20, decay_steps: 40}
  checkpoint: {every: 50, keep: 3}

distributed: torchrun --nproc_per_node 2 -m openafm.cli train CONFIG.yaml  (with parallel: ddp or fsdp2)
"""


def register(sub) -> None:
    t = sub.add_parser("train", help="train a model from a YAML config (checkpoints, resume, metrics JSONL)",
                       description="Train a model as a TrainConfig YAML file describes (see openafm.train.config). "
                                   "Writes RUN_DIR/metrics.jsonl and atomic checkpoints under RUN_DIR/checkpoints; "
                                   "--resume continues from the newest checkpoint exactly as if never stopped.",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("config", help="path of the YAML train config")
    t.add_argument("--resume", action="store_true",
                   help="continue from RUN_DIR's newest checkpoint (from step 0 if there is none yet)")
    t.set_defaults(run=_cmd_train)

    p = sub.add_parser("plot", help="draw a run's curves to PNG (training: loss, lr, grad-norm, throughput; RL: "
                                    "reward per set, held-out reward, KL, length, entropy)",
                       description="Read RUN_DIR/metrics.jsonl and write RUN_DIR/curves.png (or --out).")
    p.add_argument("run_dir", help="a run directory written by `openafm train`, `openafm sft` or `openafm rl`")
    p.add_argument("--out", default=None, help="PNG path (default RUN_DIR/curves.png)")
    p.set_defaults(run=_cmd_plot)


def _cmd_train(args) -> int:
    config = load_train_config(args.config)
    trainer = Trainer(config)
    records = trainer.run(resume=args.resume)
    if trainer.rank == 0 and records:
        last = records[-1]
        print(f"step {last['step']}: loss {last['loss']:.4f}, {last['tokens_per_s']:.0f} tokens/s, "
              f"MFU {last['mfu']:.1%}; run dir {config.run_dir}")
    return 0


def _cmd_plot(args) -> int:
    out = (plot_rl_run if is_rl_run(args.run_dir) else plot_run)(args.run_dir, args.out)
    print(f"wrote {out}")
    return 0
