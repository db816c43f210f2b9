"""`openafm reward train OUT_DIR`: a reward model (report §5) from graded, verified preference pairs;
`openafm reward score OUT_DIR`: a trained reward model's score of one response."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from openafm.checkpoint.fingerprint import weights_fingerprint
from openafm.checkpoint.load import load_model
from openafm.checkpoint.packaged import RAW_MODEL
from openafm.io import read_jsonl, write_jsonl
from openafm.rl.preference.fit import FIT_FILE, FitConfig, fit
from openafm.rl.preference.model import PreferenceKind, RewardModel
from openafm.rl.preference.pairs import N_GRADES, Source, all_pairs, read_pairs, write_pairs
from openafm.rl.preference.saved import REWARD_FILE, load_reward_model, save_reward_model
from openafm.rl.preference.sources import build_groups
from openafm.rl.preference.training import Judge, evaluate, prepare
from openafm.train.config import Precision

PAIRS_FILE, SUMMARY_FILE, METRICS_FILE = "pairs.jsonl", "summary.json", "metrics.jsonl"
JUDGED_ON = {Judge.HELDOUT: "held-out", Judge.VALIDATION: "validation"}

EPILOG = f"""pairs (--pairs FILE.jsonl, or built from --sources with --n train and --heldout held-out prompts each):
  math          reasoning-gym arithmetic: correct and marked "Answer: X" > correct, unmarked > wrong
  instructions  IFEval-style constraints: all met > some > none (graded by the checkers)
  tool-call     BFCL: exact call > right function, wrong arguments > wrong function (AST match)
  each response carries a grade 0..{N_GRADES - 1} (the single-sided term) and each pair a level and a reason

training: the trunk's bottom layers are frozen and run once per response (--features-cache keeps their output for
later runs); the top --train-layers layers, the final norm and the heads are trained (float32 by default; bf16
autocast pays on hardware with bf16 instructions). --grading-weight 0 is the ablation without the
single-sided grading term.

choosing settings: --judge validation fits on the training pairs outside a validation slice (a fifth of the
training prompts, by a hash of the prompt) and judges on the slice; the held-out pairs are left untouched. The
default, --judge heldout, fits on every training pair and judges on the held-out pairs.

writes OUT_DIR/:
  {REWARD_FILE:<26} the trained tensors + base fingerprint + tokenizer digest (load_reward_model)
  {PAIRS_FILE:<26} the pairs used (when built from --sources)
  {SUMMARY_FILE:<26} judged pairwise accuracy per source (n, 95% Wilson interval), agreement with the verifiers
  {METRICS_FILE:<26} one line per step; {FIT_FILE} the checkpoint --resume continues

example:
  openafm reward train rm --sources math,instructions,tool-call --n 64 --epochs 4
  openafm reward score rm --prompt "Calculate 2 + 3." --response "2 + 3 = 5.\\nAnswer: 5"
"""


def register(sub) -> None:
    r = sub.add_parser("reward", help="train or query a reward model (report §5)")
    rs = r.add_subparsers(dest="reward_command", required=True)
    t = rs.add_parser("train", help="train a reward model on graded, verified preference pairs",
                      description="The decoder trunk with a scalar head, trained with a level-aware preference "
                                  "loss plus single-sided grading on pairs whose every label has a verified reason.",
                      epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("out", help="output directory")
    t.add_argument("--pairs", default=None, help="a pairs JSONL file (see openafm.rl.preference.pairs); else built")
    t.add_argument("--sources", default="math,instructions,tool-call",
                   help=f"comma-separated sources to build pairs from ({', '.join(s.value for s in Source)})")
    t.add_argument("--n", type=int, default=64, help="training prompts per source (default 64)")
    t.add_argument("--heldout", type=int, default=None, help="held-out prompts per source (default n // 4)")
    t.add_argument("--model", default=RAW_MODEL, help=f"the trunk (default {RAW_MODEL}, the pipeline's base); the policy's "
                                                          f"tokenizer must be this model's")
    t.add_argument("--train-layers", type=int, default=8,
                   help="top trunk layers trained (default 8, chosen on the validation slice)")
    t.add_argument("--epochs", type=int, default=4, help="passes over the training pairs (default 4)")
    t.add_argument("--batch-prompts", type=int, default=8, help="prompts per step, all their pairs (default 8)")
    t.add_argument("--lr", type=float, default=3e-4, help="learning rate of the trunk layers (default 3e-4)")
    t.add_argument("--head-lr", type=float, default=1e-3, help="learning rate of the heads (default 1e-3)")
    t.add_argument("--grading-weight", type=float, default=0.1,
                   help="weight of the single-sided grading term (default 0.1; 0 = the ablation)")
    t.add_argument("--kind", default=PreferenceKind.SOFT_LABEL.value, choices=[k.value for k in PreferenceKind],
                   help="level-aware preference loss: soft labels (default) or margins")
    t.add_argument("--precision", default=Precision.FLOAT32.value, choices=[k.value for k in Precision],
                   help="float32 (default; bf16 autocast is ~7x slower on a CPU without bf16 instructions) or bf16 "
                        "autocast")
    t.add_argument("--judge", default=Judge.HELDOUT.value, choices=[j.value for j in Judge],
                   help="judge on the held-out pairs (default) or on the validation slice of the training pairs")
    t.add_argument("--features-cache", default=None, help="a folder keeping the frozen layers' output between runs")
    t.add_argument("--checkpoint-every", type=int, default=50, help="checkpoint every n steps (default 50)")
    t.add_argument("--seed", type=int, default=0, help="seed of the pairs, the heads' init and the data order")
    t.add_argument("--resume", action="store_true", help="continue from OUT_DIR's checkpoint")
    t.add_argument("--quiet", action="store_true", help="no progress bars")
    t.set_defaults(run=_cmd_train)

    s = rs.add_parser("score", help="score one (prompt, response) with a trained reward model")
    s.add_argument("model_dir", help="a directory written by `openafm reward train`")
    s.add_argument("--prompt", required=True)
    s.add_argument("--response", required=True)
    s.add_argument("--policy", default=None, help="a policy model whose tokenizer must match the reward model's")
    s.set_defaults(run=_cmd_score)


def _pairs(args, out: Path):
    if args.pairs:
        return read_pairs(args.pairs), {}
    sources = [s for s in args.sources.split(",") if s]
    groups, skipped = build_groups(sources, args.n, heldout=args.heldout, seed=args.seed)
    pairs = all_pairs(groups)
    write_pairs(out / PAIRS_FILE, pairs)
    return pairs, skipped


def _cmd_train(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config = FitConfig(train_layers=args.train_layers, epochs=args.epochs, batch_prompts=args.batch_prompts,
                       lr=args.lr, head_lr=args.head_lr, grading_weight=args.grading_weight, kind=args.kind,
                       precision=args.precision, seed=args.seed, checkpoint_every=args.checkpoint_every)
    if (out / FIT_FILE).exists() and not args.resume:
        raise ValueError(f"{out / FIT_FILE} exists; pass --resume to continue the run or choose a new OUT_DIR")
    t0 = time.perf_counter()
    pairs, skipped = _pairs(args, out)
    lm = load_model(args.model, seed=args.seed)
    if lm.tokenizer is None or lm.tokenizer.chat_template is None:
        raise ValueError(f"model {args.model!r} has no tokenizer with a chat template; the reward model renders "
                         f"chat turns")
    fingerprint = weights_fingerprint(lm.model)            # before the top layers change
    torch.manual_seed(args.seed)
    model = RewardModel(lm.model, N_GRADES)
    prepared = prepare(model, lm.tokenizer, pairs, train_layers=args.train_layers, precision=config.precision,
                       judge=Judge(args.judge), features_cache=args.features_cache, progress=not args.quiet)
    records = fit(model, prepared.split, prepared.train_features, prepared.train, config, run_dir=out,
                  resume=args.resume, progress=not args.quiet)
    if records:
        first = records[0]["step"]
        kept = [r for r in read_jsonl(out / METRICS_FILE) if r["step"] < first] \
            if args.resume and (out / METRICS_FILE).exists() else []
        write_jsonl(out / METRICS_FILE, kept + records)            # a resumed run keeps the lines before it
    report = evaluate(model, prepared)
    path = save_reward_model(out, model, prepared.split, base_name=args.model, base_fingerprint=fingerprint,
                             tokenizer=lm.tokenizer, settings=config.to_dict())
    summary = {"reward_model": str(path), "base_model": args.model, "base_fingerprint": fingerprint,
               "pairs": args.pairs or str(out / PAIRS_FILE), "train_pairs": len(prepared.train.tags),
               "train_responses": len(prepared.train.texts), "skipped_prompts": skipped, "fit": config.to_dict(),
               "train_loss_last": records[-1]["loss"] if records else None, **report,
               "seconds": time.perf_counter() - t0}
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    accuracy = report.get("pair_accuracy", {})
    intervals = report.get("pair_accuracy_interval", {})
    judged = ", ".join(f"{k} {v:.3f} (n={intervals[k]['n']}, 95% {intervals[k]['ci95'][0]:.2f}-"
                       f"{intervals[k]['ci95'][1]:.2f})" for k, v in accuracy.items())
    print(f"reward model: {len(prepared.train.tags)} training pairs, "
          f"{JUDGED_ON[Judge(args.judge)]} pairwise accuracy {judged}; "
          f"wrote {path} and {out / SUMMARY_FILE}")
    return 0


def _cmd_score(args) -> int:
    policy = load_model(args.policy).tokenizer if args.policy else None
    scorer = load_reward_model(args.model_dir, policy_tokenizer=policy)
    print(f"{scorer(args.prompt, args.response):.6f}")
    return 0
