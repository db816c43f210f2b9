"""A run's curves — loss, learning rate, gradient norm, throughput (tokens/s and MFU) — from its metrics JSONL
to one PNG."""

from __future__ import annotations

from pathlib import Path

from openafm.train.loop import METRICS_FILE
from openafm.train.metrics import read_metrics

PANELS = [("loss", "loss"), ("lr", "learning rate"), ("grad_norm", "gradient norm (before clipping)"),
          ("tokens_per_s", "tokens / s")]


def plot_run(run_dir: str | Path, out: str | Path | None = None) -> Path:
    import matplotlib  # on use: matplotlib costs ~0.4 s to import and only plotting needs it
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    records = read_metrics(run_dir / METRICS_FILE)
    if not records:
        raise ValueError(f"{run_dir / METRICS_FILE}: no metrics to plot (missing or empty)")
    steps = [r["step"] for r in records]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), constrained_layout=True)
    for ax, (key, title) in zip(axes.flat, PANELS):
        ax.plot(steps, [r[key] for r in records], lw=1.2)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    mfu_ax = axes.flat[3].twinx()
    mfu_ax.plot(steps, [100 * r["mfu"] for r in records], lw=0.8, color="tab:orange", alpha=0.7)
    mfu_ax.set_ylabel("MFU %", color="tab:orange")
    axes.flat[0].set_yscale("log")
    fig.suptitle(f"{run_dir.name}: {len(records)} logged steps")
    out = Path(out) if out is not None else run_dir / "curves.png"
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
