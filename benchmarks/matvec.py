"""The CPU kernels' matrix-vector throughput per weight format, and the same against the kernels of an earlier git
revision, interleaved, with a check that both give the same outputs.

A decode step is ~75% matrix-vector products (perf, SmolLM2-135M Q4_1: the Q4_1 layers ~60%, the Q8_0 head ~15%),
so this is where kernel changes show first. Each measurement multiplies one random weight of `--out` x `--in`
(`--in` x 8/3 for the K-quants, whose super-blocks hold 256 values) by 1 or 4 rows of activations, float32 or
rounded to int8 per block of 32, on `--threads` threads: median seconds of `--repeats` timings of 20 calls, as
billions of weights per second (Gw/s).

    python benchmarks/matvec.py --json --against HEAD~2       # writes docs/results/matvec.json

With `--against REV` the kernels of REV (its src/openafm, from `git archive`) are built in a temporary directory
and each round runs this tree's kernels and REV's, each in a fresh subprocess, alternately; `speedup` is REV's
median seconds over this tree's. `same_outputs` says whether every configuration's output checksum (the float64 sum
of y) is identical: a kernel change that only reorders instructions must keep it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _common import add_settle, emit, log, median, parser, revision_tree, settle  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results" / "matvec.json"
FORMATS = ("Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q6_K")
BLOCK = {"Q4_0": (32, 18, 2), "Q4_1": (32, 20, 4), "Q8_0": (32, 34, 2), "Q4_K": (256, 144, 4),
         "Q6_K": (256, 210, 0)}      # values per block, bytes per block, leading bytes of f16 scales (set to 0.01)
ROWS = (1, 4)


def kquant_width(inp: int) -> int:
    """The K-quants' input width for `--in`: inp x 8/3 rounded down to whole super-blocks of 256 (576 -> 1536)."""
    return inp * 8 // 3 // 256 * 256


def worker(out: int, inp: int, threads: int, repeats: int) -> dict:
    """Every (format, activations, rows) timed with the kernels this interpreter imports -> {key: {s, checksum}}."""
    import torch

    from openafm.nn.packed_kernel import Activations, WeightFormat, matvec, weight_spec
    torch.set_num_threads(threads)
    result = {}
    for name in FORMATS:
        values, nbytes, scales = BLOCK[name]
        n_in = inp if values == 32 else kquant_width(inp)
        blocks = n_in // values
        data = torch.randint(0, 256, (out, blocks, nbytes), dtype=torch.uint8,
                             generator=torch.Generator().manual_seed(0))
        if scales:
            data[:, :, :scales] = torch.full((out, blocks, scales // 2), 0.01, dtype=torch.float16).view(torch.uint8)
        else:                                       # Q6_K: its f16 d is the block's last two bytes
            data[:, :, -2:] = torch.full((out, blocks, 1), 0.01, dtype=torch.float16).view(torch.uint8)
        data = data.reshape(out, blocks * nbytes)
        for acts in (Activations.FLOAT32, Activations.INT8):
            spec = weight_spec(WeightFormat[name], out, n_in, data, activations=acts)
            for m in ROWS:
                x = torch.randn(m, n_in, generator=torch.Generator().manual_seed(1))
                y = matvec(x, spec)
                times = []
                for _ in range(repeats):
                    t = time.perf_counter()
                    for _ in range(20):
                        matvec(x, spec)
                    times.append((time.perf_counter() - t) / 20)
                result[f"{name}/{acts.value}/rows{m}"] = {"s": median(times), "weights": out * n_in,
                                                          "checksum": float(y.double().sum())}
    return result


def run_worker(src: Path, args) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, __file__, "--worker", "--out", str(args.out), "--in", str(args.inp), "--threads",
           str(args.threads), "--repeats", str(args.repeats)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"matvec worker on {src} failed ({done.returncode}): {done.stderr[-1500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def summarize(runs: dict[str, list[dict]]) -> dict:
    keys = list(runs["this"][0])
    table = {}
    for key in keys:
        row = {}
        for version, rs in runs.items():
            s = median([r[key]["s"] for r in rs])
            row[version] = {"ms": round(1e3 * s, 3), "gw_s": round(rs[0][key]["weights"] / s / 1e9, 2)}
        if "against" in runs:
            row["speedup"] = round(row["against"]["ms"] / row["this"]["ms"], 3)
            row["same_output"] = runs["this"][0][key]["checksum"] == runs["against"][0][key]["checksum"]
        table[key] = row
    return table


def main() -> None:
    p = add_settle(parser(__doc__))
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)    # time this interpreter's kernels
    p.add_argument("--against", metavar="REV", help="also time the kernels of this git revision, interleaved")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds (each version once per round)")
    p.add_argument("--out", type=int, default=30720, help="output rows of the weight (default 30720)")
    p.add_argument("--in", dest="inp", type=int, default=576, help="input width of the 32-value block formats")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(args.out, args.inp, args.threads, args.repeats)))
        return
    if args.inp % 32 or kquant_width(args.inp) < 256:
        raise SystemExit(f"--in {args.inp}: use a multiple of 32 of at least 96 (the K-quants run --in x 8/3 rounded "
                         f"down to super-blocks of 256)")
    for name in ("out", "rounds", "repeats", "threads"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name} {getattr(args, name)}: use an integer >= 1")
    load, t0 = settle(args.settle), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="openafm-matvec-") as tmp:
        trees = {"this": ROOT / "src"}
        if args.against:
            trees["against"] = revision_tree(args.against, Path(tmp))
        runs: dict[str, list[dict]] = {name: [] for name in trees}
        for name, src in trees.items():                       # builds each version's kernels once, untimed
            log(f"building / warming the kernels of {name} ...")
            run_worker(src, argparse.Namespace(**{**vars(args), "repeats": 1}))
        for r in range(args.rounds):
            log(f"round {r + 1} of {args.rounds}")
            for name, src in trees.items():
                runs[name].append(run_worker(src, args))
    table = summarize(runs)
    result = {"table": table, "against": args.against, "threads": args.threads, "rounds": args.rounds,
              "repeats": args.repeats, "out": args.out, "in": args.inp, "load_at_start": round(load, 2),
              "seconds": round(time.perf_counter() - t0),
              "command": "python benchmarks/matvec.py --json" + (f" --against {args.against}" if args.against else "")}
    if args.against:
        result["same_outputs"] = all(row["same_output"] for row in table.values())
    emit(result, args.json)
    if args.json:
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
