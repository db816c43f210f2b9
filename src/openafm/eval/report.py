"""Tables and charts of eval runs: the summary as markdown, runs side by side, and a bar chart with intervals.

Intervals are 95% Wilson score intervals of a proportion from the item count (not the normal approximation,
which collapses to a point at 0 or 1 and spills outside [0, 1] for the small item counts used here).
Perplexity has no interval (it is not a proportion).

    print(compare_table([summary_a, summary_b], ["base", "bf16"]))
    compare_chart([summary_a, summary_b], ["base", "bf16"], Path("compare.png"))
"""

from __future__ import annotations

import json
import math
from pathlib import Path

Z95 = 1.959963984540054


def wilson_interval(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """95% Wilson score interval of a proportion successes / n; (0, 1) when n is 0."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # the interval always holds p; rounding can put a bound a hair past it (0 successes: a low of 7e-18)
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.{digits}f}" if abs(value) < 1000 else f"{value:,.0f}"


def _value(t: dict) -> str:
    lo_hi = t.get("ci95")
    return _fmt(t["value"]) + (f" [{_fmt(lo_hi[0], 2)}, {_fmt(lo_hi[1], 2)}]" if lo_hi else "")


def markdown_table(summary: dict) -> str:
    """One row per task (and one per language under a per-language task): metric, value [95% CI], chance."""
    run = summary.get("run", {})
    lines = [f"model `{run.get('model')}`" + (f" + adapter `{run['adapter']}`" if run.get("adapter") else "")
             + f", {run.get('dtype')}, seed {run.get('seed')}, limit {run.get('limit')}", "",
             "| task | shots | n | metric | value [95% CI] | other metrics | chance |",
             "| --- | ---: | ---: | --- | --- | --- | ---: |"]
    for name, t in summary["tasks"].items():
        others = ", ".join(f"{k} {_fmt(v)}" for k, v in t["metrics"].items() if k != t["metric"])
        lines.append(f"| {name} | {t['shots']} | {t['n']} | {t['metric']} | {_value(t)} | {others} | "
                     f"{_fmt(t['chance'])} |")
        for lang, row in t.get("by_language", {}).items():
            lines.append(f"| &nbsp;&nbsp;{name} [{lang}] | {t['shots']} | {row['n']} | {t['metric']} | "
                         f"{_value({'value': row[t['metric']], 'ci95': row['ci95']})} | | {_fmt(t['chance'])} |")
    return "\n".join(lines) + "\n"


def load_summary(run_dir: str | Path) -> dict:
    path = Path(run_dir) / "summary.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: {run_dir} is not an `openafm eval` output folder")
    return json.loads(path.read_text(encoding="utf-8"))


def _rows(summaries: list[dict]) -> list[tuple[str, str | None]]:
    """(task, language or None) of every row any run has, in first-seen order."""
    rows: list[tuple[str, str | None]] = []
    for s in summaries:
        for name, t in s["tasks"].items():
            for row in [(name, None), *((name, lang) for lang in t.get("by_language", {}))]:
                if row not in rows:
                    rows.append(row)
    return rows


def _cell(summary: dict, task: str, lang: str | None) -> dict | None:
    t = summary["tasks"].get(task)
    if t is None or (lang is not None and lang not in t.get("by_language", {})):
        return None
    if lang is None:
        return {"value": t["value"], "ci95": t.get("ci95"), "n": t["n"]}
    row = t["by_language"][lang]
    return {"value": row[t["metric"]], "ci95": row["ci95"], "n": row["n"]}


def compare_table(summaries: list[dict], labels: list[str]) -> str:
    """Markdown: one row per task (and language), one column per run: value [95% CI]."""
    lines = ["| task | metric | chance | " + " | ".join(labels) + " |",
             "| --- | --- | ---: | " + " | ".join("---" for _ in labels) + " |"]
    for task, lang in _rows(summaries):
        meta = next(s["tasks"][task] for s in summaries if task in s["tasks"])
        cells = [(_value(c) if c else "—") for c in (_cell(s, task, lang) for s in summaries)]
        name = task if lang is None else f"{task} [{lang}]"
        lines.append(f"| {name} | {meta['metric']} | {_fmt(meta['chance'])} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def compare_chart(summaries: list[dict], labels: list[str], path: Path) -> Path:
    """Grouped bars of each task's headline proportion per run, 95% Wilson intervals as error bars, chance as a
    tick; perplexity rows are left out (not a proportion)."""
    import matplotlib  # on use: ~0.5 s to import, only `openafm eval compare` draws
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(t, lang) for t, lang in _rows(summaries) if lang is None and
            next(s["tasks"][t] for s in summaries if t in s["tasks"])["ci95"] is not None]
    width = 0.8 / max(len(summaries), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(rows) * len(summaries) + 2), 4.5))
    for k, (summary, label) in enumerate(zip(summaries, labels)):
        xs, ys, err = [], [], [[], []]
        for i, (task, lang) in enumerate(rows):
            c = _cell(summary, task, lang)
            if c is None:
                continue
            xs.append(i + (k - (len(summaries) - 1) / 2) * width)
            ys.append(c["value"])
            err[0].append(max(0.0, c["value"] - c["ci95"][0]))       # a stored bound may be a hair past
            err[1].append(max(0.0, c["ci95"][1] - c["value"]))       # the value (float rounding)
        ax.bar(xs, ys, width, yerr=err, capsize=3, label=label)
    for i, (task, _) in enumerate(rows):
        chance = next(s["tasks"][task] for s in summaries if task in s["tasks"])["chance"]
        ax.hlines(chance, i - 0.45, i + 0.45, colors="black", linestyles="dotted", linewidth=1)
    ax.set_xticks(range(len(rows)), [t for t, _ in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("score (95% Wilson interval; dotted: chance)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
