"""The reward model (report §5) on the default model: held-out pairwise accuracy per source with and without the
single-sided grading term (same pairs, same seed, same cached frozen-layer features), and agreement with the
verifiers. Target: >= 0.90 pairwise accuracy on verifiable pairs (all sources pooled, with grading).

    OMP_NUM_THREADS=2 python benchmarks/reward_model.py --json > docs/results/reward_model.json
"""

from __future__ import annotations

import copy
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _common import emit, parser  # noqa: E402
from openafm.checkpoint.load import load_model  # noqa: E402
from openafm.checkpoint.packaged import RAW_MODEL  # noqa: E402
from openafm.rl.preference.fit import FitConfig, fit  # noqa: E402
from openafm.rl.preference.model import RewardModel  # noqa: E402
from openafm.rl.preference.pairs import N_GRADES, all_pairs  # noqa: E402
from openafm.rl.preference.sources import build_groups  # noqa: E402
from openafm.rl.preference.training import evaluate, prepare  # noqa: E402

TARGET = 0.90


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--model", default=RAW_MODEL)
    p.add_argument("--sources", default="math,instructions,tool-call")
    p.add_argument("--n", type=int, default=48, help="training prompts per source")
    p.add_argument("--heldout", type=int, default=16, help="held-out prompts per source")
    p.add_argument("--train-layers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--grading-weight", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=3e-4, help="learning rate of the trained trunk layers")
    p.add_argument("--head-lr", type=float, default=1e-3, help="learning rate of the heads")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    t0 = time.perf_counter()
    groups, skipped = build_groups(args.sources.split(","), args.n, heldout=args.heldout, seed=args.seed)
    pairs = all_pairs(groups)
    lm = load_model(args.model)
    torch.manual_seed(args.seed)
    model = RewardModel(lm.model, N_GRADES)
    initial = copy.deepcopy(model.state_dict())
    t1 = time.perf_counter()
    prepared = prepare(model, lm.tokenizer, pairs, train_layers=args.train_layers, progress=True)
    t_features = time.perf_counter() - t1
    runs = {}
    for name, weight in (("with_grading", args.grading_weight), ("without_grading", 0.0)):
        model.load_state_dict(initial)                                         # the same start for both
        config = FitConfig(train_layers=args.train_layers, epochs=args.epochs, grading_weight=weight, seed=args.seed,
                           lr=args.lr, head_lr=args.head_lr)
        t = time.perf_counter()
        records = fit(model, prepared.split, prepared.train_features, prepared.train, config, progress=True)
        runs[name] = {"grading_weight": weight, "steps": len(records), "train_loss_last": records[-1]["loss"],
                      "fit_seconds": round(time.perf_counter() - t, 1), **evaluate(model, prepared)}
    with_g, without = runs["with_grading"], runs["without_grading"]
    result = {
        "model": args.model,
        "pair_accuracy_verifiable": with_g["pair_accuracy"]["all"],
        "target": TARGET,
        "target_met": with_g["pair_accuracy"]["all"] >= TARGET,
        "pair_accuracy_per_source": {k: v for k, v in with_g["pair_accuracy"].items() if k != "all"},
        "ablation_pair_accuracy_verifiable": without["pair_accuracy"]["all"],
        "ablation_pair_accuracy_per_source": {k: v for k, v in without["pair_accuracy"].items() if k != "all"},
        "verifier_order_agreement": with_g["verifier_order"],
        "verifier_spearman": with_g["verifier_spearman"],
        "ablation_verifier_order_agreement": without["verifier_order"],
        "runs": runs,
        "data": {"train_prompts_per_source": args.n, "heldout_prompts_per_source": args.heldout,
                 "train_pairs": len(prepared.train.tags), "heldout_pairs": len(prepared.heldout_pairs),
                 "train_responses": len(prepared.train.texts), "skipped_prompts": skipped,
                 "split": "one rule for every pool (openafm.splits.split_of): math/instructions by question text, tool-call by BFCL id"},
        "fit": {"train_layers": args.train_layers, "epochs": args.epochs, "seed": args.seed, "lr": args.lr,
                "head_lr": args.head_lr,
                "trained": "top layers + final norm + heads; bottom layers frozen, their output cached (bf16)"},
        "seconds": {"features": round(t_features, 1), "total": round(time.perf_counter() - t0, 1)},
        "threads": torch.get_num_threads(), "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
