"""Does a vision tower keep what its reading phase taught? The reading heads (train/vision/read.py, from a stage's
read_state.pt) are scored on the encoder of each tower given, on fresh renderings of the TRAIN split (training fonts
and styles, images never drawn in training: a validation look, no held-out image is used), next to the held-out
answers the tower's stage recorded through the decoder (its sidecar's `held_out_rapid`, rapid mode) with 95% Wilson
intervals. With --answers N, each tower also answers N questions per task (and N absent-object ones) of those
validation renderings through its decoder: the look that chooses between towers without touching held-out images.

    python benchmarks/vision_carry.py --json --read-state runs/vision-read/stages/align/read_state.pt \\
        --towers after-answer=runs/vision-read/stages/answer/tower.safetensors

The encoder the reading phase left is always scored first (`after-read`). A tower whose heads fall back towards
chance lost the features on the way (an alignment warm-up that trains the encoder at a high rate does this).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, log, parser  # noqa: E402
from openafm.checkpoint.load import load_model  # noqa: E402
from openafm.checkpoint.vision import load_tower  # noqa: E402
from openafm.eval.report import wilson_interval  # noqa: E402
from openafm.models.image_views import Resolution  # noqa: E402
from openafm.pipelines.vision import answerable_refusal_rate, headline_rates, held_out_figures  # noqa: E402
from openafm.splits import Split  # noqa: E402
from openafm.train.vision.read import ReadHeads, read_accuracy  # noqa: E402
from openafm.train.vision.tasks import Task  # noqa: E402

VALIDATION_SEED = 7         # renderings no training run draws (training pools and reading steps use seed 0)


def heads_from(state: dict, width: int) -> tuple[ReadHeads, tuple]:
    """The reading phase's heads, from its checkpoint, and its tasks (named by the heads' keys: heads.<task>.weight;
    the weights only matter to training, so each is given 1)."""
    tasks = tuple((Task(k.split(".")[1]), 1.0) for k in state["heads"] if k.endswith(".weight"))
    heads = ReadHeads(width, tasks)
    heads.load_state_dict(state["heads"])
    return heads.eval(), tasks


def stage_answers(tower_path: Path) -> dict:
    """The held-out answers the tower's stage recorded (rapid mode), with 95% Wilson intervals."""
    sidecar = json.loads(tower_path.with_suffix(".json").read_text())
    out = {}
    rates = headline_rates(sidecar["held_out_rapid"])
    for task, v in sidecar["held_out_rapid"].items():
        rate = rates[task]
        hits = round(rate * v["n"])
        lo, hi = wilson_interval(hits, v["n"])
        out[task] = {"rate": rate, "hits": hits, "n": v["n"], "ci95": [round(lo, 4), round(hi, 4)]}
    return {"held_out_rapid": out, "train": sidecar.get("train"), "loss_mean_last_50": sidecar.get("loss_mean_last_50"),
            "step_seconds_sum": sidecar.get("step_seconds_sum")}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--read-state", required=True, help="a vision stage's read_state.pt (its reading phase)")
    p.add_argument("--towers", required=True, help="comma-separated label=tower.safetensors (each with its sidecar)")
    p.add_argument("--n", type=int, default=64, help="TRAIN-split renderings per task for the heads")
    p.add_argument("--answers", type=int, default=0, help="validation questions per task each tower answers through "
                                                           "its decoder (0: none)")
    p.add_argument("--mode", default="rapid", choices=[m.value for m in Resolution],
                   help="the image mode of the --answers look (default rapid, as the stages record theirs)")
    p.add_argument("--decoder", default="openafm-135m", help="the decoder the towers were trained against (--answers)")
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    items = [item.strip() for item in args.towers.split(",") if item.strip()]
    if not items or any("=" not in item or not Path(item.split("=", 1)[1]).is_file() for item in items):
        raise SystemExit(f"--towers: give label=path pairs of existing tower files, got {args.towers!r}")
    towers = dict(item.split("=", 1) for item in items)
    state = torch.load(args.read_state, weights_only=False)
    first = load_tower(next(iter(towers.values())))
    heads, tasks = heads_from(state, first.config.vision.width)
    first.encoder.load_state_dict(state["encoder"])
    result = {"command": "python benchmarks/vision_carry.py " + " ".join(sys.argv[1:]), "split": "train (validation "
              f"renderings, seed {VALIDATION_SEED})", "n": args.n, "answers_mode": args.mode, "heads": {}, "towers": {}}
    result["heads"]["after-read"] = _heads(first, heads, tasks, args.n)
    lm = load_model(args.decoder) if args.answers else None
    for label, path in towers.items():
        log(f"== {label}")
        tower = load_tower(path)
        result["heads"][label] = _heads(tower, heads, tasks, args.n)
        result["towers"][label] = stage_answers(Path(path))
        if lm is not None:
            looked = held_out_figures(lm, tower, list(Task), args.answers, VALIDATION_SEED, split=Split.TRAIN,
                                      mode=Resolution(args.mode))
            result["towers"][label]["validation_answers"] = {**headline_rates(looked),
                                                             "answerable_refused": answerable_refusal_rate(looked)}
    emit(result, args.json)


def _heads(tower, heads, tasks, n: int) -> dict:
    return {k: v["accuracy"] for k, v in read_accuracy(tower, heads, tasks, Split.TRAIN, n, seed=VALIDATION_SEED).items()}


if __name__ == "__main__":
    main()
