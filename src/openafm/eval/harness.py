"""The `openafm eval` run: tasks over one model, batched, seeded, resumable, into an output folder.

    OUT/run.json          what was run (model, adapter, dtype, seed, limit): a rerun must match it
    OUT/<task>.jsonl      one record per item (id, lang, prompt, output, score, metrics), appended and flushed
                          as each batch finishes; a killed run leaves whole lines (a torn last line is dropped)
    OUT/summary.json      per task: the metrics, per language, the 95% interval, the chance baseline, timing
    OUT/summary.md        the same as a markdown table

Resuming: a rerun into the same folder skips the items whose records are already there and scores only the
rest, so a run killed after k items and rerun gives the same records (no duplicates) and the same summary as
one uninterrupted run. Items are built from the seed, and decoding is greedy, so every run is deterministic.

    summary = run_eval(loaded, [get_task("mmlu_wordnet")], limit=20, out=Path("runs/base"), config=...)
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path

import torch
from tqdm import tqdm

from openafm.checkpoint.load import LoadedModel
from openafm.errors import ConfigError, MissingTokenizerError
from openafm.eval.registry import Aggregate, Task, chance_of, check_data
from openafm.eval.report import markdown_table, wilson_interval
from openafm.io import read_jsonl_log, write_text_atomic

RUN_FILE, SUMMARY_FILE, TABLE_FILE = "run.json", "summary.json", "summary.md"
MATCHED_KEYS = ("model", "adapter", "dtype", "seed", "limit")     # a rerun must agree on these


def check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigError(f"--limit {limit!r}: the number of items per task (per language for the per-language "
                          f"tasks) must be an integer >= 1")
    return limit


def run_eval(lm: LoadedModel, tasks: list[Task], *, limit: int, out: Path, config: dict, batch_size: int = 16,
             progress: bool = True, on_item: Callable[[Task, dict], None] | None = None) -> dict:
    """Score each task on lm into `out`; returns the summary of this folder (every task run into it)."""
    check_limit(limit)
    if lm.tokenizer is None:
        raise MissingTokenizerError(lm.name, "openafm eval")
    for task in tasks:
        check_data(task)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config = {**config, "limit": limit}
    _check_run_file(out, config)
    summary = _read_json(out / SUMMARY_FILE) or {"run": config, "tasks": {}}
    for task in tasks:
        torch.manual_seed(config["seed"])
        built = task.build(limit, config["seed"], lm.tokenizer)
        path = out / f"{task.name}.jsonl"
        done = read_records(path)
        todo = [item for item in built.items if item.id not in done]
        started, evaluated = time.perf_counter(), 0
        with tqdm(total=len(built.items), initial=len(built.items) - len(todo), desc=task.name, unit="item",
                  disable=not progress) as bar, open(path, "a", encoding="utf-8") as f:
            for start in range(0, len(todo), batch_size):
                chunk = todo[start:start + batch_size]
                for record in task.evaluate(lm.model, lm.tokenizer, chunk, built.shots, batch_size):
                    f.write(json.dumps(record, ensure_ascii=False) + "\n")
                    f.flush()
                    done[record["id"]] = record
                    evaluated += 1
                    bar.update(1)
                    if on_item is not None:
                        on_item(task, record)
                os.fsync(f.fileno())
        seconds = time.perf_counter() - started
        records = [done[item.id] for item in built.items]
        summary["tasks"][task.name] = {**summarize(task, records, chance_of(task, lm.tokenizer)), **built.notes,
                                       "seconds": seconds, "evaluated_now": evaluated,
                                       "items_per_second": evaluated / seconds if evaluated and seconds else None}
        _write_json(out / SUMMARY_FILE, summary)
        (out / TABLE_FILE).write_text(markdown_table(summary), encoding="utf-8")
    return summary


def summarize(task: Task, records: list[dict], chance: float) -> dict:
    """The summary of one task's records: headline metric, every metric, per language, 95% interval."""
    base = {"task": task.name, "kind": task.kind.value, "stands_in_for": task.stands_in_for, "shots": task.shots,
            "prompt_format": task.prompt_format, "n": len(records), "metric": task.metrics[0], "chance": chance,
            "higher_is_better": task.higher_is_better}
    if task.aggregate is Aggregate.PERPLEXITY:
        nll, tokens = sum(r["metrics"]["nll"] for r in records), sum(r["metrics"]["tokens"] for r in records)
        ppl = math.exp(nll / tokens) if tokens else float("nan")
        return {**base, "value": ppl, "metrics": {"perplexity": ppl, "tokens": tokens}, "ci95": None,
                "by_language": {}}
    metrics = _means(task, records)
    langs = sorted({r["lang"] for r in records})
    by_language = {lang: {"n": len(rs), **_means(task, rs), "ci95": _ci(task, rs)}
                   for lang in langs for rs in [[r for r in records if r["lang"] == lang]]} if len(langs) > 1 else {}
    return {**base, "value": metrics[task.metrics[0]], "metrics": metrics, "ci95": _ci(task, records),
            "by_language": by_language}


def _means(task: Task, records: list[dict]) -> dict:
    return {m: (sum(r["metrics"][m] for r in records) / len(records) if records else float("nan"))
            for m in task.metrics}


def _ci(task: Task, records: list[dict]) -> list[float]:
    return list(wilson_interval(sum(r["metrics"][task.metrics[0]] for r in records), len(records)))


def read_records(path: Path) -> dict[str, dict]:
    """id -> record of a task's JSONL file; a torn last line (a kill mid-write) is cut from the file."""
    return {record["id"]: record for record in read_jsonl_log(path, cut_torn_tail=True)}


def _check_run_file(out: Path, config: dict) -> None:
    previous = _read_json(out / RUN_FILE)
    if previous is not None:
        differ = {k: (previous.get(k), config.get(k)) for k in MATCHED_KEYS if previous.get(k) != config.get(k)}
        if differ:
            said = ", ".join(f"{k}: {a!r} there, {b!r} now" for k, (a, b) in differ.items())
            raise ConfigError(f"{out} holds a run with other settings ({said}); rerun with the same settings to "
                              f"resume it, or give another --out")
    _write_json(out / RUN_FILE, {k: config.get(k) for k in MATCHED_KEYS})


def _read_json(path: Path) -> dict | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _write_json(path: Path, value: dict) -> None:
    write_text_atomic(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n")
