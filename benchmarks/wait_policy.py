"""Decode speed on a quiet and on a busy machine, per OpenMP wait policy and thread count.

Each variant runs `openafm generate --chat PROMPT --max-tokens N` in a fresh process (OpenMP reads its wait policy
once, when torch loads it) and reads decode tokens/s from the timing line; "busy" runs the same beside one
CPU-bound process that this script starts and stops. Variants: the openafm default (idle workers sleep:
OMP_WAIT_POLICY=PASSIVE, set by openafm unless the environment chooses), OMP_WAIT_POLICY=ACTIVE (workers spin:
close to what OpenMP's default did to us), and --threads 1.

    python benchmarks/wait_policy.py --json --repeats 3      (--repeats: runs per variant and condition)
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import time

from _common import emit, parser

PROMPT = "Write a short story about a robot."
VARIANTS = {"default (passive)": ({}, []), "active (spinning)": ({"OMP_WAIT_POLICY": "ACTIVE"}, []),
            "threads 1": ({}, ["--threads", "1"])}
DECODE = re.compile(r"decode ([0-9.]+) tok/s")


def decode_rate(env: dict, extra: list[str], max_tokens: int) -> float:
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-m", "openafm.cli", "generate", PROMPT, "--chat", "--max-tokens",
                          str(max_tokens), *extra], env={**base, **env}, capture_output=True, text=True, check=True)
    found = DECODE.search(out.stderr)
    if found is None:
        raise RuntimeError(f"no decode rate in the timing line: {out.stderr[-300:]!r}")
    return float(found.group(1))


def measure(repeats: int, max_tokens: int) -> dict[str, list[float]]:
    rates: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for _ in range(repeats):                                   # interleaved: drift hits every variant alike
        for name, (env, extra) in VARIANTS.items():
            rates[name].append(decode_rate(env, extra, max_tokens))
    return rates


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--max-tokens", type=int, default=64, help="tokens to decode per run (default 64)")
    args = p.parse_args()
    quiet = measure(args.repeats, args.max_tokens)
    busy_proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(1.0)
        busy = measure(args.repeats, args.max_tokens)
    finally:
        busy_proc.kill()
    result = {"cores_usable": len(os.sched_getaffinity(0)), "repeats": args.repeats, "max_tokens": args.max_tokens,
              "decode_tok_s": {name: {"quiet": quiet[name], "busy": busy[name],
                                      "quiet_median": statistics.median(quiet[name]),
                                      "busy_median": statistics.median(busy[name])} for name in VARIANTS}}
    for name, row in result["decode_tok_s"].items():
        row["contended_over_quiet"] = row["busy_median"] / row["quiet_median"]
    result["contended_over_quiet"] = result["decode_tok_s"]["default (passive)"]["contended_over_quiet"]
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
