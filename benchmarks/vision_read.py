"""How well the reading phase (train/vision/read.py) teaches a fresh encoder the rendered tasks' labels: a
vision-small tower from random weights (per-image pixel norm, as the vision recipe builds it) trained by
`train_read` on images rendered afresh every step, and every --every steps its heads scored on --n held-out
renderings per task (fonts, palettes and the emoji style never trained on), rapid mode. No decoder is involved:
this is what the encoder can tell apart, the ceiling for what the tower can then say.

    python benchmarks/vision_read.py --json --steps 2000 --every 250     # ~45 min on 2 cores; resumable (--out)

Choosing a reading setting (task weights, steps) is done on `--look validation`: fresh renderings of the TRAIN
split (its fonts, palettes and emoji styles) from seed 7, which the phase never draws (its renderings take seeds
from READ_SEED up), so the held-out renderings stay unlooked-at until a setting is chosen. `--weights` shares a
step's images out by task (default: ReadConfig's); `--evaluate CHECKPOINT` scores a reading phase's saved state
(a recipe's `read_state.pt`, on the tasks it was trained on) on the same look without training, the baseline a new
setting is compared with:

    python benchmarks/vision_read.py --json --look validation --evaluate runs/vision-default/stages/align/read_state.pt
    python benchmarks/vision_read.py --json --look validation --steps 1500 --every 500 \
        --weights name-emoji=0.1,read-word=0.45,read-digit=0.35,chart-value=0.05,count=0.05 --out runs/read-text

`--mode balanced` trains every step in balanced mode (the 672-px overview, where a glyph is three to five 28-px
patches tall instead of about one) and looks in it, the mode the word-reading target is read in:

    python benchmarks/vision_read.py --json --look validation --n 200 --steps 400 --every 100 --batch 80 \
        --weights read-word=1 --mode balanced --out runs/read-word-balanced

Prints the result as JSON with --json (docs/results/vision_read.json was made this way): the curve (held-out
accuracy per task at each look, the mean loss and step seconds of the last 20 steps), chance per task, 95% Wilson
intervals at the last look, and the CPU seconds.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, log, parser  # noqa: E402
from openafm.eval.report import wilson_interval  # noqa: E402
from openafm.models.image_views import Resolution  # noqa: E402
from openafm.models.vision import get_vision_preset  # noqa: E402
from openafm.models.vl_adapter import AdapterConfig, AdapterKind  # noqa: E402
from openafm.models.vlm import PixelNorm, VisionTower, VisionTowerConfig  # noqa: E402
from openafm.splits import Split  # noqa: E402
from openafm.train.vision.mix import ResolutionMix  # noqa: E402
from openafm.train.vision.read import ReadConfig, ReadHeads, read_accuracy, train_read  # noqa: E402
from openafm.train.vision.tasks import Task, chance  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DECODER_DIM = 576          # the default model's width (the adapter is built, not trained, here)


# --look -> (split, seed of the renderings, the key a look's accuracies are written under)
LOOKS = {"heldout": (Split.HELDOUT, 0, "held_out"), "validation": (Split.TRAIN, 7, "validation")}
# --mode -> (the steps' resolution mix, the mode a look scores in): the recipe's mix (three quarters of the steps
# rapid, 224 px in 28-px patches: a glyph about one patch) scored in rapid mode, or every step balanced (the 672-px
# overview: a glyph three to five patches tall; a quarter of --batch images a step) scored in balanced mode
MODES = {"mixed": (ReadConfig().mix, Resolution.RAPID),
         "balanced": (ResolutionMix(low_rapid=0.0, balanced_of_rest=1.0), Resolution.BALANCED)}


def parse_weights(text: str | None) -> tuple[tuple[Task, float], ...]:
    """'read-word=0.45,read-digit=0.35,...' -> ReadConfig.tasks (tasks named at most once, each weight > 0; a task
    left out is neither trained nor scored: `read-digit=1` is a digit-only probe)."""
    if text is None:
        return ReadConfig().tasks
    names = {t.value: t for t in Task}
    pairs = []
    for part in text.split(","):
        name, _, value = part.partition("=")
        if name.strip() not in names:
            raise SystemExit(f"--weights: {name.strip()!r} is not a task; use {sorted(names)}")
        try:
            weight = float(value)
        except ValueError:
            raise SystemExit(f"--weights: {part!r} needs task=weight with a number") from None
        if not weight > 0:
            raise SystemExit(f"--weights: {name.strip()}={value} must be > 0")
        pairs.append((names[name.strip()], weight))
    named = [t.value for t, _ in pairs]
    if len(set(named)) != len(named):
        raise SystemExit(f"--weights names a task twice: {named}")
    return tuple(pairs)


def look(tower, heads, tasks, where: str, n: int, mode: str = "mixed") -> dict[str, float]:
    split, seed, _ = LOOKS[where]
    return {k: v["accuracy"] for k, v in read_accuracy(tower, heads, tasks, split, n, seed=seed,
                                                       mode=MODES[mode][1]).items()}


def evaluate(args, tower: VisionTower, width: int) -> None:
    """Score a saved reading state on the look, with the heads of the tasks it was trained on."""
    if args.weights is not None:
        raise SystemExit("--evaluate scores the saved state's own tasks; --weights does not apply to it")
    path = Path(args.evaluate)
    if not path.is_file():
        raise SystemExit(f"--evaluate {path}: no such file (a reading phase's read_state.pt)")
    state = torch.load(path, weights_only=False)
    trained = sorted({key.split(".")[1] for key in state["heads"]})                 # heads.<task>.weight / .bias
    tasks = tuple((Task(name), 1.0) for name in trained)
    heads = ReadHeads(width, tasks)
    tower.encoder.load_state_dict(state["encoder"])
    heads.load_state_dict(state["heads"])
    emit({"command": "python benchmarks/vision_read.py " + " ".join(sys.argv[1:]), "evaluated": args.evaluate,
          "steps_done": state["done"], "config": state["config"], "look": args.look, "n": args.n,
          "mode": MODES[args.mode][1].value, "accuracy": look(tower, heads, tasks, args.look, args.n, args.mode)},
         args.json)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--steps", type=int, default=2000, help="steps of the reading phase (its schedule's length)")
    p.add_argument("--every", type=int, default=250, help="steps between looks (--look)")
    p.add_argument("--batch", type=int, default=40, help="images per rapid-mode step")
    p.add_argument("--n", type=int, default=100, help="renderings per task at each look")
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    p.add_argument("--out", default=str(ROOT / "runs" / "vision-read"), help="work folder (checkpoint, looks)")
    p.add_argument("--weights", help="task=weight,... sharing a step's images; tasks left out are not trained "
                                     "(default: ReadConfig's five)")
    p.add_argument("--look", choices=sorted(LOOKS), default="heldout",
                   help="renderings each look scores: heldout (the figures) or validation (choosing settings)")
    p.add_argument("--evaluate", metavar="READ_STATE", help="score this saved reading state once; no training")
    p.add_argument("--mode", choices=sorted(MODES), default="mixed",
                   help="mixed: the recipe's resolution mix, looks in rapid mode; balanced: every step and look in "
                        "balanced mode (the 672-px overview)")
    args = p.parse_args()
    tasks = parse_weights(args.weights)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    vision = get_vision_preset("vision-small")
    tower = VisionTower(VisionTowerConfig(vision=vision, adapter=AdapterConfig(
        in_dim=vision.width, out_dim=DECODER_DIM, kind=AdapterKind.PIXEL_SHUFFLE, hidden=128),
        pixel_norm=PixelNorm.PER_IMAGE))
    config = ReadConfig(steps=args.steps, batch=args.batch, tasks=tasks, mix=MODES[args.mode][0])
    heads = ReadHeads(vision.width, config.tasks)
    if args.evaluate:
        evaluate(args, tower, vision.width)
        return
    looks_path = out / "looks.jsonl"
    looks = [json.loads(line) for line in looks_path.read_text().splitlines()] if looks_path.is_file() else []
    for until in range(args.every, args.steps + 1, args.every):
        history = train_read(tower, heads, config, checkpoint=out / "read_state.pt", every=args.every, log=log,
                             until=until)
        if any(x["step"] == until for x in looks):
            continue
        start = time.perf_counter()
        scored = look(tower, heads, config.tasks, args.look, args.n, args.mode)
        last = history[-20:]
        looks.append({"step": until, LOOKS[args.look][2]: scored,
                      "loss_last_20": sum(r["loss"] for r in last) / len(last),
                      "step_seconds_last_20": sum(r["seconds"] for r in last) / len(last),
                      "train_seconds": sum(r["seconds"] for r in history), "eval_seconds": time.perf_counter() - start})
        log(json.dumps(looks[-1]))
        with looks_path.open("a") as f:
            f.write(json.dumps(looks[-1]) + "\n")
    final = looks[-1]
    chances = {t.value: chance(t) for t, _ in config.tasks}
    emit({"command": "python benchmarks/vision_read.py " + " ".join(sys.argv[1:]), "encoder": "vision-small",
          "steps": args.steps, "batch": args.batch, "n": args.n, "threads": args.threads,
          "mode": MODES[args.mode][1].value, "steps_mix": args.mode,
          "look": args.look, "weights": {t.value: w for t, w in config.tasks}, "chance": chances, "curve": looks,
          "final": {k: {"accuracy": v, "ci95": [round(x, 4) for x in wilson_interval(round(v * args.n), args.n)]}
                    for k, v in final[LOOKS[args.look][2]].items()},
          "cpu_hours": round(final["train_seconds"] * args.threads / 3600, 2)}, args.json)


if __name__ == "__main__":
    main()
