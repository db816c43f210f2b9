"""The results page's plots, drawn from docs/results/*.json with matplotlib at build time (PNG bytes).

Each plot is a function of the results files only; PLOTS names them by the file name they get in the site.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")                     # before pyplot is imported: no display here
import matplotlib.pyplot as plt
from results_data import load
from results_tables import DECODE_VARIANTS

BLUE, GREY, ORANGE, GREEN = "#3f51b5", "#9e9e9e", "#ef6c00", "#2e7d32"


def png(fig) -> bytes:
    out = io.BytesIO()
    fig.tight_layout()
    fig.savefig(out, format="png", dpi=110)
    plt.close(fig)
    return out.getvalue()


def decode() -> bytes:
    data = load("decode.json")
    labels = [DECODE_VARIANTS[k].replace("`", "") for k in DECODE_VARIANTS]
    speeds = [data[k]["decode_tok_s"] for k in DECODE_VARIANTS]
    colours = [BLUE if k.startswith("openafm") else GREY for k in DECODE_VARIANTS]
    fig, ax = plt.subplots(figsize=(8, 3.4))
    bars = ax.barh(labels[::-1], speeds[::-1], color=colours[::-1])
    ax.bar_label(bars, fmt="%.1f", padding=3)
    ax.set_xlabel(f"decode tokens/s, {data['threads']} threads")
    ax.set_xlim(0, max(speeds) * 1.2)
    return png(fig)


def compression() -> bytes:
    rows = load("compression_table.json")["rows"]
    fig, ax = plt.subplots(figsize=(9, 4.2))
    colours = plt.get_cmap("tab20").colors
    markers = "osD^v<>"
    for i, (name, r) in enumerate(rows.items()):
        ax.scatter(r["file_mb"], r["ppl"], color=colours[i % len(colours)], marker=markers[i % len(markers)], s=40,
                   label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("file MB (log)")
    ax.set_ylabel("held-out perplexity (log)")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return png(fig)


def serving() -> bytes:
    data = load("serve_load.json")
    fig, ax = plt.subplots(figsize=(7, 3.4))
    for mode, colour, label in (("batched", BLUE, "continuous batching"),
                                ("one_at_a_time", GREY, "one at a time (--max-batch 1)"),
                                ("fm_session", ORANGE, "fm session per request")):
        runs = sorted(data[mode].values(), key=lambda r: r["concurrency"])
        ax.plot([r["concurrency"] for r in runs], [r["tokens_per_s"] for r in runs], "o-", color=colour,
                label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent requests")
    ax.set_ylabel("aggregate output tokens/s")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    return png(fig)


def speculative() -> bytes:
    data = load("speculative.json")
    fig, ax = plt.subplots(figsize=(7, 3.4))
    for weights, colour, label in (("float32", BLUE, "float32 target"), ("native", GREY, "Q4_1 target")):
        greedy = data[weights]["greedy"]
        ax.plot(data["gammas"], [greedy[f"gamma_{g}"]["speedup"] for g in data["gammas"]], "o-", color=colour,
                label=label)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
    ax.set_xlabel("γ (tokens drafted per round)")
    ax.set_ylabel("speedup over plain greedy decoding")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    return png(fig)


def rloo() -> bytes:
    runs = load("rloo.json")["training"]["runs"]
    fig, ax = plt.subplots(figsize=(7, 3.4))
    for (name, run), colour in zip(runs.items(), (BLUE, ORANGE, GREY), strict=True):
        ax.plot(range(len(run["median_curve"])), run["median_curve"], color=colour, label=name)
    ax.set_xlabel("step")
    ax.set_ylabel("mean reward (median over seeds)")
    ax.set_ylim(0, 1.05)
    ax.legend(title="baseline", fontsize=8)
    return png(fig)


def flip() -> bytes:
    ratios = list(load("flip.json")["ratios"].values())
    fig, ax = plt.subplots(figsize=(7, 3.2))
    x = range(len(ratios))
    for offset, key, colour in ((-0.2, "top1", BLUE), (0.2, "top5", GREY)):
        bars = ax.bar([i + offset for i in x], [r["zero_shot_held_out"][key] * 100 for r in ratios], width=0.4,
                      color=colour, label=key.replace("top", "top-"))
        ax.bar_label(bars, fmt="%.1f", padding=2, fontsize=8)
    ax.set_xticks(list(x), [f"{r['mask_ratio']:.0%} masked" for r in ratios])
    ax.set_ylabel("held-out zero-shot accuracy (%)")
    ax.set_xlabel("FLIP mask ratio, equal training time")
    ax.legend(fontsize=8)
    return png(fig)


PLOTS = {"decode.png": decode, "compression.png": compression, "serving.png": serving,
         "speculative.png": speculative, "rloo.png": rloo, "flip.png": flip}
