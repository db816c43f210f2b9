"""The curation build past one process: identical output on every executor, scaling, faults, dedup quality.

    python benchmarks/data_scale.py --json            # all of it, ~15 min on 2 cores; docs/results/data_scale.json

Every build is `openafm data build` in a subprocess over all built-in sources (``--limit`` documents each):
    local                  this process's executor, the reference output
    ray 1 / ray 2 workers  interleaved, ``--repeat`` times each; speedup = median wall time 1 worker / 2 workers
                           (end to end, and over the stages only: without Ray's start and the final regrouping)
    killed and resumed     the local build killed (SIGKILL) while its dedup segment runs, resumed on ray, 2 workers
    worker killed          ray with 2 workers; one worker process SIGKILLed while it runs a shard; Ray retries it
    two-node cluster       `ray start --head` + `ray start --address` on this machine, one CPU each; --address
Then the local build's output tokenized (`tokenize_dir`, the default tokenizer, one job per output file) in this
process and on a Ray of 1 and 2 CPUs started beforehand, interleaved, 3 times each: the same shard bytes, and the
2-worker speedup of the work alone (the tokenizer's own batch encoding already uses every core of one process).
Identical means the same sha256 for every output shard. Dedup quality: the documents the local build kept after
dedup (so free of duplicates by construction) with planted copies in other shards — exact copies, re-wrapped copies
(case, spacing, punctuation) and copies keeping a contiguous 80–95% of the words — through the dedup stage on the
local and the ray executor: recall = planted copies dropped / planted, precision = planted dropped / all dropped.
Run it alone (nothing else on the machine): scaling figures taken under load are noise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from openafm.data.document import Document
from openafm.data.jsonl import read_documents, write_documents
from openafm.checkpoint.load import load_tokenizer
from openafm.data.loader import find_shards
from openafm.data.tokenize_shards import tokenize_dir
from openafm.data.pipeline.dedup import DedupStage
from openafm.data.pipeline.executor import ExecutorConfig, ExecutorKind, open_executor

sys.path.insert(0, os.path.dirname(__file__))
from _common import add_settle, settle  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "data_scale.json"
PORT = 6391
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def digest(out: Path) -> str:
    """One sha256 over every output shard's name and bytes."""
    h = hashlib.sha256()
    for p in sorted(out.glob("*/shard-*.jsonl")):
        h.update(str(p.relative_to(out)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def command(out: Path, limit: int, *executor: str) -> list[str]:
    return [sys.executable, "-m", "openafm.cli", "data", "build", "--out", str(out), "--limit-per-source", str(limit),
            *executor]


def build(out: Path, limit: int, *executor: str) -> dict:
    t = time.perf_counter()
    proc = subprocess.run(command(out, limit, *executor), env=ENV, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command(out, limit, *executor))} failed:\n{proc.stderr[-3000:]}")
    wall = time.perf_counter() - t
    report = json.loads((out / "report.json").read_text())
    stages_s = sum(s["seconds"] for s in report["timing"])
    docs_in = [report["stages"][0]["out"]] + [s["in"] for s in report["stages"][1:]]
    first = {s["stage"]: n for s, n in zip(report["stages"], docs_in)}
    per_core = {t["segment"]: round(first[t["segment"].split(" + ")[0]] / t["seconds"] / report["workers"], 1)
                for t in report["timing"] if t["seconds"] >= 0.5}    # documents/s per worker by segment (not resumed)
    return {"wall_s": round(wall, 1), "stages_s": round(stages_s, 1), "documents": report["stages"][0]["out"],
            "digest": digest(out), "timing": report["timing"], "docs_per_s_per_worker": per_core}


def wait_for(predicate, timeout: float, what: str) -> None:
    t = time.time()
    while not predicate():
        if time.time() - t > timeout:
            raise TimeoutError(f"gave up waiting for {what} after {timeout} s")
        time.sleep(0.2)


def killed_and_resumed(out: Path, limit: int) -> dict:
    """SIGKILL the local build once the dedup segment has started, then resume on ray with 2 workers."""
    proc = subprocess.Popen(command(out, limit), env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sig_dir = out / "work" / "03-dedup" / "signatures"
    wait_for(lambda: len(list(sig_dir.glob("*.done"))) >= 3, 600, "the dedup signatures to start")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = len(list(sig_dir.glob("*.done")))
    resumed = build(out, limit, "--executor", "ray", "--workers", "2")
    return {**resumed, "killed_after_signature_shards": done_before}


def ray_workers_busy() -> list[int]:
    """Pids of Ray worker processes running a Ray Data map task (their title names the operator)."""
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [int(line.split()[0]) for line in out.splitlines()[1:] if "ray::" in line and "Map" in line]


def worker_killed(out: Path, limit: int) -> dict:
    proc = subprocess.Popen(command(out, limit, "--executor", "ray", "--workers", "2"), env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    extract = out / "work" / "01-extract"
    wait_for(lambda: len(list(extract.glob("*.done"))) >= 2 and ray_workers_busy(), 600, "a busy Ray worker")
    victim = ray_workers_busy()[0]
    os.kill(victim, signal.SIGKILL)
    if proc.wait() != 0:
        raise RuntimeError("the build did not survive a killed worker")
    report = json.loads((out / "report.json").read_text())
    return {"killed_pid": victim, "digest": digest(out), "documents": report["stages"][0]["out"]}


def two_node(out: Path, limit: int) -> dict:
    address = f"127.0.0.1:{PORT}"
    ray = [sys.executable, "-m", "ray.scripts.scripts"]
    try:
        subprocess.run([*ray, "start", "--head", f"--port={PORT}", "--num-cpus=1", "--include-dashboard=false"],
                       check=True, env=ENV, capture_output=True)
        subprocess.run([*ray, "start", f"--address={address}", "--num-cpus=1"], check=True, env=ENV,
                       capture_output=True)
        nodes = subprocess.run([sys.executable, "-c", "import ray; ray.init(address='%s', logging_level='ERROR'); "
                                "print(sum(n['Alive'] for n in ray.nodes()))" % address],
                               env=ENV, capture_output=True, text=True, check=True).stdout.split()[-1]
        result = build(out, limit, "--executor", "ray", "--workers", "2", "--address", address)
        return {**result, "nodes": int(nodes)}
    finally:
        subprocess.run([*ray, "stop", "--force"], env=ENV, capture_output=True)


def plant(base_dir: Path, out: Path, n_each: int, seed: int = 0) -> tuple[list[Path], set[str]]:
    """Write the base documents in their shards plus planted copies in separate shards; -> shards, copy ids."""
    rng = random.Random(seed)
    base = [d for p in sorted(base_dir.glob("*.jsonl")) for d in read_documents(p)]
    originals = rng.sample([d for d in base if d.lang == "en" and len(d.text.split()) >= 60], 3 * n_each)
    copies = []
    for i, d in enumerate(originals):
        words = d.text.split()
        if i < n_each:
            text = d.text
        elif i < 2 * n_each:
            text = "\n".join(" ".join(words[k:k + 9]).upper() + " ;" for k in range(0, len(words), 9))
        else:
            keep = int(len(words) * rng.uniform(0.80, 0.95))
            start = rng.randrange(len(words) - keep + 1)
            text = " ".join(words[start:start + keep])
        copies.append(Document(id=f"~copy-{i:04d}", text=text, source="planted", licence=d.licence, domain=d.domain,
                               lang=d.lang, meta={"original": d.id}))
    shards = []
    for k in range(0, len(base), 200):
        shards.append(out / f"base-{k:06d}.jsonl")
        write_documents(shards[-1], base[k:k + 200])
    rng.shuffle(copies)
    for k in range(0, len(copies), 50):
        shards.append(out / f"copy-{k:06d}.jsonl")
        write_documents(shards[-1], copies[k:k + 50])
    return shards, {c.id for c in copies}


def tokenize(corpus: Path, out: Path, workers: int) -> dict:
    """Tokenize a build's output (the default tokenizer, one job per file) in this process (workers 0) or on a
    Ray of ``workers`` CPUs started beforehand, so the time is the work's alone -> time, counts, shard digest."""
    import ray

    tokenizer = load_tokenizer("default")
    if workers:
        ray.init(num_cpus=workers, include_dashboard=False, logging_level="ERROR")
    try:
        executor = ExecutorConfig(kind=ExecutorKind.RAY, workers=workers) if workers else ExecutorConfig()
        t = time.perf_counter()
        groups = tokenize_dir(corpus, out, tokenizer, executor=executor, progress=False)
        seconds = time.perf_counter() - t
    finally:
        if workers:
            ray.shutdown()
    h = hashlib.sha256()
    for shard in find_shards(out):
        for p in sorted(shard.iterdir()):
            h.update(str(p.relative_to(out)).encode() + b"\0" + p.read_bytes())
    return {"seconds": round(seconds, 2), "files": len(list((out / ".done").glob("*/*.json"))),
            "documents": sum(g.docs for g in groups), "tokens": sum(g.tokens for g in groups), "digest": h.hexdigest()}


def dedup_quality(base_dir: Path, work: Path, n_each: int) -> dict:
    shards, planted = plant(base_dir, work / "in", n_each)
    out = {}
    for kind in (ExecutorKind.LOCAL, ExecutorKind.RAY):
        config = ExecutorConfig(kind=kind, workers=2 if kind is ExecutorKind.RAY else 1)
        stage = DedupStage()
        with open_executor(config, progress=False) as ex:
            stage.prepare(shards, work / kind.value, ex)
        dropped = set(stage.duplicates)
        hit = len(dropped & planted)
        out[kind.value] = {"recall": round(hit / len(planted), 4), "precision": round(hit / max(len(dropped), 1), 4),
                           "planted": len(planted), "dropped": len(dropped),
                           "missed_by_kind": _missed(planted - dropped, n_each)}
    out["identical_decisions"] = out["local"] == out["ray"]
    return out


def _missed(missed: set[str], n_each: int) -> dict[str, int]:
    kinds = ("exact", "rewrapped", "overlap")
    return {k: sum(1 for m in missed if int(m.split("-")[-1]) // n_each == i) for i, k in enumerate(kinds)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=300, help="documents per source (default 300, the build's default)")
    ap.add_argument("--repeat", type=int, default=1, help="ray 1- and 2-worker builds each, interleaved (default 1)")
    ap.add_argument("--planted", type=int, default=200, help="planted copies of each kind (default 200)")
    ap.add_argument("--json", action="store_true", help=f"write {RESULTS.relative_to(RESULTS.parents[2])}")
    args = add_settle(ap).parse_args()
    load = settle(args.settle)
    root = Path(tempfile.mkdtemp(prefix="data_scale-"))
    t0 = time.time()
    runs: dict = {"local": build(root / "local", args.limit)}
    print("local", runs["local"]["wall_s"], "s", flush=True)
    for r in range(args.repeat):
        for w in (1, 2):
            runs[f"ray{w}-{r}"] = build(root / f"ray{w}-{r}", args.limit, "--executor", "ray", "--workers", str(w))
            print(f"ray {w} workers", runs[f"ray{w}-{r}"]["wall_s"], "s", flush=True)
    tok = {"local": [], "ray1": [], "ray2": []}
    for r in range(max(3, args.repeat)):              # tokenizing takes seconds: at least 3 of each
        for name, workers in (("local", 0), ("ray1", 1), ("ray2", 2)):
            tok[name].append(tokenize(root / "local", root / f"tokens-{name}-{r}", workers))
            print(f"tokenize {name}", tok[name][-1]["seconds"], "s", flush=True)
    runs["resumed"] = killed_and_resumed(root / "resumed", args.limit)
    print("killed and resumed", flush=True)
    runs["worker_killed"] = worker_killed(root / "worker-killed", args.limit)
    print("worker killed", flush=True)
    runs["two_node"] = two_node(root / "two-node", args.limit)
    print("two nodes", runs["two_node"]["nodes"], flush=True)
    quality = dedup_quality(root / "local" / "work" / "03-dedup", root / "quality", args.planted)
    ref = runs["local"]["digest"]
    wall = {w: statistics.median(runs[f"ray{w}-{r}"]["wall_s"] for r in range(args.repeat)) for w in (1, 2)}
    stages = {w: statistics.median(runs[f"ray{w}-{r}"]["stages_s"] for r in range(args.repeat)) for w in (1, 2)}
    docs = runs["local"]["documents"]
    tok_wall = {k: statistics.median(t["seconds"] for t in ts) for k, ts in tok.items()}
    result = {
        "identical_outputs": all(runs[k]["digest"] == ref for k in runs if k.startswith("ray")),
        "resumed_identical": runs["resumed"]["digest"] == ref,
        "speedup_2_workers": round(wall[1] / wall[2], 3),
        "speedup_2_workers_stages": round(stages[1] / stages[2], 3),
        "docs_per_s": {"local": round(docs / runs["local"]["wall_s"], 1), "ray_1": round(docs / wall[1], 1),
                       "ray_2": round(docs / wall[2], 1)},
        "tokenize_identical": len({t["digest"] for ts in tok.values() for t in ts}) == 1,
        "tokenize_speedup_2_workers": round(tok_wall["ray1"] / tok_wall["ray2"], 3),
        "tokenize_docs_per_s": {k: round(tok["local"][0]["documents"] / v, 1) for k, v in tok_wall.items()},
        "tokenize": {"files": tok["local"][0]["files"], "documents": tok["local"][0]["documents"],
                     "tokens": tok["local"][0]["tokens"],
                     "seconds": {k: [t["seconds"] for t in ts] for k, ts in tok.items()}},
        "two_node_identical": runs["two_node"]["digest"] == ref and runs["two_node"]["nodes"] == 2,
        "fault_identical": runs["worker_killed"]["digest"] == ref,
        "dedup_recall": min(quality["local"]["recall"], quality["ray"]["recall"]),
        "dedup_precision": min(quality["local"]["precision"], quality["ray"]["precision"]),
        "dedup": quality, "documents": docs, "limit_per_source": args.limit, "repeat": args.repeat,
        "runs": {k: {kk: vv for kk, vv in v.items() if kk != "digest"} | {"identical": v["digest"] == ref}
                 for k, v in runs.items()},
        "cpus": os.cpu_count(), "load_at_start": load, "benchmark_s": round(time.time() - t0),
        "command": "python benchmarks/data_scale.py --json",
    }
    print(json.dumps({k: v for k, v in result.items() if k not in ("runs", "dedup")}, indent=2))
    if args.json:
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
