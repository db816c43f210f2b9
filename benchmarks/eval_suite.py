"""The evaluation suite (`openafm eval`, report §8's formats) on the default model in fp32 and bf16 (and a packed
2-bit QAT checkpoint when one is given), with wall time per task, and multiple-choice throughput batched vs one
at a time.

    python benchmarks/eval_suite.py --json [--limit 20 --lang-limit 5 --gen-limit 10 --packed out/qat2/packed]

Per model and task: the headline metric with its 95% Wilson interval, the other metrics, per language for the
mmmlu_* tasks, the random-choice baseline, wall seconds and items/s (batch size --batch-size). Every task runs
through `openafm.eval.harness.run_eval` into its own folder under --work-dir, exactly as `openafm eval` does.

Throughput (fp32, --speed-items items of mmlu_wordnet_5shot, the same items each way after a warm-up, --rounds
interleaved rounds, the fastest kept):
  one_pass         the harness's way: each prompt prefilled once through the engine, whose last position scores
                   the four letters and starts the generated answer; 16 rows decode together
  batched          two passes: the four letter requests of an item share one row, 16 rows per forward, then the
                   generated letter for 16 prompts per decode step (its prompt prefilled again)
  one_at_a_time    one (context, letter) request per forward (4 forwards per item), then one prompt at a time
  shared_rows_b1   rows shared but one row per forward: how much of the gain is the sharing, not the batching
`batching_speedup_mc` = one_pass items/s / one_at_a_time items/s (log-likelihood + generated letter together);
`two_pass_speedup_mc` the same for `batched`; `loglik_speedup_mc` batched over one_at_a_time for the
log-likelihood part alone. `one_pass_letters_match` says whether both ways pick the same letters.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log  # noqa: E402

from openafm.checkpoint.load import load_model
from openafm.eval.harness import run_eval
from openafm.eval.mc import GEN_TOKENS, LETTERS, mc_prompt
from openafm.eval.registry import get_task
from openafm.eval.scoring import Rows, generate_batched, loglikelihoods, score_and_generate

MODEL = "smollm2-135m-instruct"
MC_TASKS = ("mmlu_wordnet", "mmlu_wordnet_5shot", "mmlu_reasoning", "mmlu_reasoning_5shot")
LANG_TASKS = ("mmmlu_debian_reference", "mmmlu_udhr")
GEN_TASKS = ("ifeval", "mgsm_gsm_symbolic", "mgsm_gsm_symbolic_3shot", "bfcl_simple", "bfcl_simple_constrained",
             "bfcl_multiple", "bfcl_parallel")
PPL_TASKS = ("perplexity_heldout",)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print one JSON object (and nothing else) to stdout")
    p.add_argument("--limit", type=int, default=20, help="items per multiple-choice task and perplexity windows")
    p.add_argument("--lang-limit", type=int, default=5, help="items per language of the mmmlu_* tasks")
    p.add_argument("--gen-limit", type=int, default=10, help="items per generation task (mgsm_*, bfcl_*)")
    p.add_argument("--speed-items", type=int, default=32, help="items of the throughput measurement")
    p.add_argument("--rounds", type=int, default=2, help="interleaved rounds of the throughput measurement")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--packed", default="out/qat2/packed", help="a packed 2-bit QAT checkpoint, run when present")
    p.add_argument("--work-dir", default=None, help="where the runs go (default: a temporary folder)")
    p.add_argument("--skip-suite", action="store_true", help="only the throughput measurement")
    args = p.parse_args()

    work = Path(args.work_dir or tempfile.mkdtemp(prefix="eval_suite_"))
    result = {"model": MODEL, "threads": torch.get_num_threads(), "batch_size": args.batch_size,
              "limits": {"multiple_choice": args.limit, "per_language": args.lang_limit,
                         "generation": args.gen_limit, "perplexity_windows": args.limit},
              "interval": "95% Wilson score interval from the item count", "variants": {}}
    variants = [(dtype, MODEL, dtype) for dtype in args.dtypes.split(",")]
    if Path(args.packed).is_dir():
        variants.append(("qat2_packed", args.packed, "float32"))
    else:
        result["qat2_packed"] = f"not run: no packed checkpoint at {args.packed}"
    started = time.perf_counter()
    result["throughput_fp32"] = throughput(args)
    result["batching_speedup_mc"] = result["throughput_fp32"]["batching_speedup_mc"]
    if not args.skip_suite:
        for label, model, dtype in variants:
            log(f"== {label}")
            loaded = load_model(model, dtype=dtype)
            tasks = {}
            for name, limit in [*((t, args.limit) for t in MC_TASKS), *((t, args.lang_limit) for t in LANG_TASKS),
                                *((t, args.gen_limit) for t in GEN_TASKS), *((t, args.limit) for t in PPL_TASKS)]:
                summary = run_eval(loaded, [get_task(name)], limit=limit, out=work / label / name,
                                   config={"model": model, "adapter": None, "dtype": dtype, "seed": 0},
                                   batch_size=args.batch_size, progress=not args.json)
                t = summary["tasks"][name]
                tasks[name] = {k: t.get(k) for k in ("n", "metric", "value", "ci95", "metrics", "chance", "shots",
                                                     "seconds", "items_per_second", "by_language",
                                                     "rejected_schema_ids")}
                log(f"   {name}: {t['metric']} {t['value']:.3f} (n {t['n']}, {t['seconds']:.1f} s)")
            result["variants"][label] = {"model": model, "dtype": dtype, "tasks": tasks}
    result["work_dir"] = str(work)
    result["wall_seconds"] = time.perf_counter() - started
    emit(result, args.json)


def throughput(args) -> dict:
    """Each way --rounds times, interleaved (round after round, so drift in machine speed hits all alike); the
    fastest round of each is kept (this machine is shared: the slower rounds are other processes' time)."""
    loaded = load_model(MODEL)
    model, tok = loaded.model, loaded.tokenizer
    built = get_task("mmlu_wordnet_5shot").build(args.speed_items, 0, tok)
    prompts = [mc_prompt(q, built.shots) for q in built.items]
    requests = [(p, f" {L}") for p in prompts for L in LETTERS]
    ways = {"one_at_a_time": (1, Rows.PER_REQUEST), "batched": (args.batch_size, Rows.SHARED),
            "shared_rows_b1": (1, Rows.SHARED)}
    letters = [tok.encode(f" {L}")[0] for L in LETTERS]
    for batch, share in ways.values():                                                  # warm-up
        loglikelihoods(model, tok, requests[:8], batch_size=batch, rows=share)
        generate_batched(model, tok, prompts[:2], max_tokens=GEN_TOKENS, batch_size=batch)
    score_and_generate(model, tok, prompts[:2], letters, max_tokens=GEN_TOKENS, batch_size=args.batch_size)
    times: dict[str, dict[str, list[float]]] = {name: {"loglik": [], "generate": []} for name in ways}
    checksums, scored, one_pass_s, one_pass = {}, {}, [], []
    for _ in range(args.rounds):
        t = time.perf_counter()
        one_pass = score_and_generate(model, tok, prompts, letters, max_tokens=GEN_TOKENS, batch_size=args.batch_size)
        one_pass_s.append(time.perf_counter() - t)
        log(f"   throughput one_pass: {one_pass_s[-1]:.1f} s")
        for name, (batch, share) in ways.items():
            t = time.perf_counter()
            scores = loglikelihoods(model, tok, requests, batch_size=batch, rows=share)
            times[name]["loglik"].append(time.perf_counter() - t)
            checksums[name], scored[name] = sum(s.logprob for s in scores), scores
            if name != "shared_rows_b1":
                t = time.perf_counter()
                generate_batched(model, tok, prompts, max_tokens=GEN_TOKENS, batch_size=batch)
                times[name]["generate"].append(time.perf_counter() - t)
            log(f"   throughput {name}: loglik {times[name]['loglik'][-1]:.1f} s"
                + (f", generate {times[name]['generate'][-1]:.1f} s" if times[name]["generate"] else ""))
    n = len(prompts)
    out: dict = {"items": n, "task": "mmlu_wordnet_5shot", "rounds": args.rounds, "kept": "fastest round",
                 "prompt_tokens_mean": sum(len(tok.encode(p)) for p in prompts) / n}
    for name, (batch, share) in ways.items():
        loglik_s = min(times[name]["loglik"])
        gen_s = min(times[name]["generate"]) if times[name]["generate"] else None
        out[name] = {"batch_size": batch, "shared_rows": share is Rows.SHARED, "loglik_seconds": loglik_s,
                     "loglik_items_per_second": n / loglik_s, "generate_seconds": gen_s,
                     "items_per_second": n / (loglik_s + gen_s) if gen_s is not None else None,
                     "all_rounds": times[name], "checksum": checksums[name]}
    picks = [max(range(4), key=lps.__getitem__) for lps, _ in one_pass]
    two_pass = scored["batched"]
    out["one_pass"] = {"batch_size": args.batch_size, "seconds": min(one_pass_s), "items_per_second":
                       n / min(one_pass_s), "all_rounds": one_pass_s, "checksum": sum(sum(lps) for lps, _ in one_pass)}
    out["one_pass_letters_match"] = picks == [max(range(4), key=lambda j: two_pass[4 * k + j].logprob)
                                              for k in range(n)]
    one, batched = out["one_at_a_time"], out["batched"]
    out["batching_speedup_mc"] = out["one_pass"]["items_per_second"] / one["items_per_second"]
    out["two_pass_speedup_mc"] = batched["items_per_second"] / one["items_per_second"]
    out["loglik_speedup_mc"] = batched["loglik_items_per_second"] / one["loglik_items_per_second"]
    out["loglik_speedup_from_sharing_alone"] = (out["shared_rows_b1"]["loglik_items_per_second"]
                                                / one["loglik_items_per_second"])
    out["generate_speedup"] = one["generate_seconds"] / batched["generate_seconds"]
    return out


if __name__ == "__main__":
    main()
