"""The reward model (report §5) on the default model's base: pairwise accuracy per source with and without the
single-sided grading term (same pairs, same seed, same cached frozen-layer features), and agreement with the
verifiers; every accuracy with its pair count n and a 95% Wilson interval. Target: >= 0.85 pooled and >= 0.75 on
math, on the held-out pairs.

Settings are chosen on the validation slice of the training pairs (rl/preference/pairs.carve_validation), never on
the held-out pairs: `--judge validation` fits on the rest of the training pairs and judges on the slice (the
held-out pairs are not even scored); `--judge heldout` (the reported figures) fits on every training pair.

    OMP_NUM_THREADS=1 python benchmarks/reward_model.py --judge validation --json > val.json     # choosing
    OMP_NUM_THREADS=1 python benchmarks/reward_model.py --json > docs/results/reward_model.json  # reporting
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _common import emit, log, parser  # noqa: E402
from openafm.checkpoint.load import load_model  # noqa: E402
from openafm.checkpoint.packaged import RAW_MODEL  # noqa: E402
from openafm.io import write_text_atomic  # noqa: E402
from openafm.rl.preference.fit import FIT_FILE, FitConfig, fit  # noqa: E402
from openafm.rl.preference.model import RewardModel  # noqa: E402
from openafm.rl.preference.pairs import N_GRADES, VALIDATION_PERCENT, all_pairs  # noqa: E402
from openafm.rl.preference.sources import build_groups  # noqa: E402
from openafm.rl.preference.training import Judge, evaluate, prepare  # noqa: E402
from openafm.train.config import Precision  # noqa: E402

TARGET, TARGET_MATH = 0.85, 0.75
EPOCHS_FILE = "epochs.json"


def source_counts(text: str, sources: list[str]) -> dict[str, int]:
    """"48" (every source) or "math=192,instructions=48,tool-call=48" -> prompts per source."""
    if "=" not in text:
        return {s: int(text) for s in sources}
    counts = {k.strip(): int(v) for k, v in (part.split("=", 1) for part in text.split(",") if part)}
    if set(counts) != set(sources):
        raise SystemExit(f"--n names {sorted(counts)}; give a count for each of --sources {sources}")
    return counts


def fit_by_epoch(model: RewardModel, prepared, config: FitConfig, run_dir: Path) -> dict:
    """Fit epoch by epoch (the same steps as one fit), judging after each; a checkpoint and the judged figures are
    kept in run_dir at each epoch's end, and a rerun resumes from them."""
    run_dir.mkdir(parents=True, exist_ok=True)
    epochs = json.loads((run_dir / EPOCHS_FILE).read_text()) if (run_dir / EPOCHS_FILE).exists() else []
    steps_per_epoch = -(-len(prepared.train.prompts) // config.batch_prompts)
    config = dataclasses.replace(config, checkpoint_every=steps_per_epoch)      # checkpoints at epoch ends only
    done = torch.load(run_dir / FIT_FILE, weights_only=True)["step"] // steps_per_epoch \
        if (run_dir / FIT_FILE).exists() else 0
    fit(model, prepared.split, prepared.train_features, prepared.train, config, run_dir=run_dir, resume=True,
        stop_after=0)                                                  # the checkpoint's weights, if any
    epochs = epochs[:done] + [{"epoch": e + 1, "pair_accuracy": None} for e in range(len(epochs), done)]
    t = time.perf_counter()
    for epoch in range(done, config.epochs):
        records = fit(model, prepared.split, prepared.train_features, prepared.train, config, run_dir=run_dir,
                      resume=True, progress=True, stop_after=steps_per_epoch)
        figures = evaluate(model, prepared)
        epochs.append({"epoch": epoch + 1, "train_loss_last": records[-1]["loss"] if records else None,
                       "pair_accuracy": figures["pair_accuracy"],
                       "pair_accuracy_by_grades": {k: v["value"] for k, v in figures["pair_accuracy_by_grades"].items()},
                       "fit_seconds": round(time.perf_counter() - t, 1)})
        log(f"epoch {epoch + 1}: " + ", ".join(f"{k} {v:.3f}" for k, v in figures["pair_accuracy"].items())
            + "; " + ", ".join(f"{k} {v:.2f}" for k, v in epochs[-1]["pair_accuracy_by_grades"].items()))
        write_text_atomic(run_dir / EPOCHS_FILE, json.dumps(epochs, indent=1) + "\n")
    return {"grading_weight": config.grading_weight, "steps": steps_per_epoch * config.epochs,
            "train_loss_last": epochs[-1].get("train_loss_last"), "fit_seconds": epochs[-1].get("fit_seconds"),
            "per_epoch": epochs, **evaluate(model, prepared)}


def selection(paths: list[str]) -> list[dict]:
    """The validation runs that chose the settings (this script's --judge validation outputs), in brief."""
    out = []
    for path in paths:
        run = json.loads(Path(path).read_text())
        if run.get("judged_on") != Judge.VALIDATION.value:
            raise SystemExit(f"--selection {path}: judged on {run.get('judged_on')!r}; only validation runs choose")
        fitted = run["runs"]["with_grading"]
        out.append({"command": run["command"], "prompts_per_source": run["data"]["train_prompts_per_source"],
                    "fit": run["fit"], "grading_weight": fitted["grading_weight"],
                    "pair_accuracy": run["pair_accuracy_interval"],
                    "pair_accuracy_by_grades": fitted["pair_accuracy_by_grades"],
                    "per_epoch": [{k: v for k, v in e.items() if k in ("epoch", "pair_accuracy")}
                                  for e in fitted.get("per_epoch", [])],
                    "fit_seconds": fitted["fit_seconds"]})
    return out


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--model", default=RAW_MODEL)
    p.add_argument("--sources", default="math,instructions,tool-call")
    p.add_argument("--n", default="math=384,instructions=96,tool-call=96",
                   help='training prompts per source: one count, or "source=count,..."')
    p.add_argument("--heldout", type=int, default=32, help="held-out prompts per source")
    p.add_argument("--judge", default=Judge.HELDOUT.value, choices=[j.value for j in Judge],
                   help="heldout (the reported figures) or validation (choosing settings)")
    p.add_argument("--train-layers", type=int, default=8)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--grading-weight", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=3e-4, help="learning rate of the trained trunk layers")
    p.add_argument("--head-lr", type=float, default=1e-3, help="learning rate of the heads")
    p.add_argument("--batch-prompts", type=int, default=8, help="prompts per step")
    p.add_argument("--ablation", default="yes", choices=["yes", "no"],
                   help="also fit without the grading term (the ablation; doubles the fitting time)")
    p.add_argument("--precision", default=Precision.FLOAT32.value, choices=[k.value for k in Precision],
                   help="float32 (default: on a CPU without bf16 instructions, bf16 autocast is ~7x slower) or bf16 "
                        "autocast")
    p.add_argument("--features-cache", default=None, help="keep the frozen layers' output here for later runs")
    p.add_argument("--work", default=None,
                   help="keep each fit's checkpoint and per-epoch figures here; a rerun resumes from them "
                        "(default: a temporary folder)")
    p.add_argument("--selection", nargs="*", default=[],
                   help="JSON outputs of --judge validation runs that chose the settings, recorded in brief")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    t0 = time.perf_counter()
    scratch = tempfile.TemporaryDirectory(prefix="reward-model-")
    work = Path(args.work) if args.work else Path(scratch.name)
    sources = args.sources.split(",")
    counts = source_counts(args.n, sources)
    groups, skipped = [], {}
    for source in sources:
        g, s = build_groups([source], counts[source], heldout=args.heldout, seed=args.seed)
        groups += g
        skipped |= s
    pairs = all_pairs(groups)
    lm = load_model(args.model)
    torch.manual_seed(args.seed)
    model = RewardModel(lm.model, N_GRADES)
    initial = copy.deepcopy(model.state_dict())
    t1 = time.perf_counter()
    prepared = prepare(model, lm.tokenizer, pairs, train_layers=args.train_layers, judge=Judge(args.judge),
                       precision=Precision(args.precision), features_cache=args.features_cache, progress=True)
    t_features = time.perf_counter() - t1
    runs = {}
    weights = {"with_grading": args.grading_weight} | ({"without_grading": 0.0} if args.ablation == "yes" else {})
    for name, weight in weights.items():
        model.load_state_dict(initial)                                         # the same start for both
        config = FitConfig(train_layers=args.train_layers, epochs=args.epochs, grading_weight=weight, seed=args.seed,
                           lr=args.lr, head_lr=args.head_lr, batch_prompts=args.batch_prompts,
                           precision=Precision(args.precision))
        runs[name] = fit_by_epoch(model, prepared, config, work / name)
    with_g, without = runs["with_grading"], runs.get("without_grading")
    accuracy = with_g["pair_accuracy"]
    per_source = sorted(k for k in accuracy if k != "all")
    result = {
        "model": args.model,
        "judged_on": args.judge,
        "pair_accuracy_verifiable": accuracy["all"],
        "pair_accuracy_math": accuracy.get("math"),
        "pair_accuracy_interval": with_g["pair_accuracy_interval"],
        "target": TARGET,
        "target_math": TARGET_MATH,
        "target_met": accuracy["all"] >= TARGET and accuracy.get("math", 0.0) >= TARGET_MATH,
        "pair_accuracy_per_source": {k: accuracy[k] for k in per_source},
        "ablation_pair_accuracy_verifiable": without["pair_accuracy"]["all"] if without else None,
        "ablation_pair_accuracy_per_source": {k: without["pair_accuracy"][k] if without else None
                                              for k in per_source},
        "verifier_order_agreement": with_g["verifier_order"],
        "verifier_spearman": with_g["verifier_spearman"],
        "ablation_verifier_order_agreement": without["verifier_order"] if without else None,
        "runs": runs,
        "selection": selection(args.selection),
        "data": {"train_prompts_per_source": counts, "heldout_prompts_per_source": args.heldout,
                 "validation_percent": VALIDATION_PERCENT,
                 "fit_pairs": len(prepared.train.tags), "judged_pairs": len(prepared.judged_pairs),
                 "fit_responses": len(prepared.train.texts), "skipped_prompts": skipped,
                 "split": "one rule for every pool (openafm.splits.split_of): math/instructions by question text, "
                          "tool-call by BFCL id; the validation slice: training prompts by "
                          "sha256('reward-validation:' + prompt) (pairs.carve_validation)"},
        "fit": {"train_layers": args.train_layers, "epochs": args.epochs, "seed": args.seed, "lr": args.lr,
                "head_lr": args.head_lr, "batch_prompts": args.batch_prompts,
                "precision": args.precision,
                "trained": "top layers + final norm + heads; bottom layers frozen, their output cached"},
        "command": "python benchmarks/reward_model.py " + " ".join(sys.argv[1:]),
        "seconds": {"features": round(t_features, 1), "total": round(time.perf_counter() - t0, 1)},
        "threads": torch.get_num_threads(), "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
