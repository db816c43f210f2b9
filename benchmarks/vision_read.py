"""How well the reading phase (train/vision/read.py) teaches a fresh encoder the rendered tasks' labels: a
vision-small tower from random weights (per-image pixel norm, as the vision recipe builds it) trained by
`train_read` on images rendered afresh every step, and every --every steps its heads scored on --n held-out
renderings per task (fonts, palettes and the emoji style never trained on), rapid mode. No decoder is involved:
this is what the encoder can tell apart, the ceiling for what the tower can then say.

    python benchmarks/vision_read.py --json --steps 2000 --every 250     # ~45 min on 2 cores; resumable (--out)

Writes docs/results/vision_read.json with --json: the curve (held-out accuracy per task at each look, the mean
loss and step seconds of the last 20 steps), chance per task, 95% Wilson intervals at the last look, and the
CPU seconds.
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
from openafm.models.vision import get_vision_preset  # noqa: E402
from openafm.models.vl_adapter import AdapterConfig, AdapterKind  # noqa: E402
from openafm.models.vlm import PixelNorm, VisionTower, VisionTowerConfig  # noqa: E402
from openafm.splits import Split  # noqa: E402
from openafm.train.vision.read import ReadConfig, ReadHeads, read_accuracy, train_read  # noqa: E402
from openafm.train.vision.tasks import chance  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DECODER_DIM = 576          # the default model's width (the adapter is built, not trained, here)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--steps", type=int, default=2000, help="steps of the reading phase (its schedule's length)")
    p.add_argument("--every", type=int, default=250, help="steps between held-out looks")
    p.add_argument("--batch", type=int, default=40, help="images per rapid-mode step")
    p.add_argument("--n", type=int, default=100, help="held-out renderings per task at each look")
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    p.add_argument("--out", default=str(ROOT / "runs" / "vision-read"), help="work folder (checkpoint, looks)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    vision = get_vision_preset("vision-small")
    tower = VisionTower(VisionTowerConfig(vision=vision, adapter=AdapterConfig(
        in_dim=vision.width, out_dim=DECODER_DIM, kind=AdapterKind.PIXEL_SHUFFLE, hidden=128),
        pixel_norm=PixelNorm.PER_IMAGE))
    config = ReadConfig(steps=args.steps, batch=args.batch)
    heads = ReadHeads(vision.width, config.tasks)
    looks_path = out / "looks.jsonl"
    looks = [json.loads(line) for line in looks_path.read_text().splitlines()] if looks_path.is_file() else []
    for until in range(args.every, args.steps + 1, args.every):
        history = train_read(tower, heads, config, checkpoint=out / "read_state.pt", every=args.every, log=log,
                             until=until)
        if any(x["step"] == until for x in looks):
            continue
        start = time.perf_counter()
        scored = read_accuracy(tower, heads, config.tasks, Split.HELDOUT, args.n, seed=0)
        last = history[-20:]
        looks.append({"step": until, "held_out": {k: v["accuracy"] for k, v in scored.items()},
                      "loss_last_20": sum(r["loss"] for r in last) / len(last),
                      "step_seconds_last_20": sum(r["seconds"] for r in last) / len(last),
                      "train_seconds": sum(r["seconds"] for r in history), "eval_seconds": time.perf_counter() - start})
        log(json.dumps(looks[-1]))
        with looks_path.open("a") as f:
            f.write(json.dumps(looks[-1]) + "\n")
    final = looks[-1]
    chances = {t.value: chance(t) for t, _ in config.tasks}
    emit({"command": "python benchmarks/vision_read.py " + " ".join(sys.argv[1:]), "encoder": "vision-small",
          "steps": args.steps, "batch": args.batch, "n": args.n, "threads": args.threads, "mode": "rapid",
          "chance": chances, "curve": looks,
          "final": {k: {"accuracy": v, "ci95": [round(x, 4) for x in wilson_interval(round(v * args.n), args.n)]}
                    for k, v in final["held_out"].items()},
          "cpu_hours": round(final["train_seconds"] * args.threads / 3600, 2)}, args.json)


if __name__ == "__main__":
    main()
