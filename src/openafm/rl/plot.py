"""An RL run's curves — reward per prompt set, held-out reward, KL to the reference, response length, entropy and
the clipped share of tokens — from its metrics JSONL to one PNG (`openafm plot RUN` picks this for an RL run)."""

from __future__ import annotations

from pathlib import Path

from openafm.rl.run import METRICS_FILE
from openafm.train.metrics import read_metrics

PANELS = [("reward", "sampled reward (train prompts)"), ("heldout/", "held-out greedy reward"),
          ("kl", "KL(policy || reference) per response"), ("response_tokens", "response tokens"),
          ("entropy", "entropy per sampled token"), ("clip_fraction", "clipped token share")]
# added for an asynchronous run (`openafm rl --async`): a tuple key draws those series in one panel
ASYNC_PANELS = [("staleness_mean", "mean staleness of the groups used (versions)"),
                ("buffer_depth", "replay buffer depth (groups)"),
                (("tg_idle_share", "pu_idle_share"), "idle share so far: generators, updater")]


def is_rl_run(run_dir: str | Path) -> bool:
    records = read_metrics(Path(run_dir) / METRICS_FILE)
    return any("reward" in r for r in records)


def plot_rl_run(run_dir: str | Path, out: str | Path | None = None) -> Path:
    import matplotlib  # on use: matplotlib costs ~0.4 s to import and only plotting needs it
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    records = read_metrics(run_dir / METRICS_FILE)
    steps = [r for r in records if "reward" in r]
    if not steps:
        raise ValueError(f"{run_dir / METRICS_FILE}: no RL steps to plot (missing, empty, or not an RL run)")
    panels = PANELS + (ASYNC_PANELS if any("staleness_mean" in r for r in steps) else [])
    fig, axes = plt.subplots(len(panels) // 3, 3, figsize=(14, 3.5 * (len(panels) // 3)), constrained_layout=True)
    for ax, (key, title) in zip(axes.flat, panels):
        if isinstance(key, tuple):
            series, pool = list(key), steps
        elif key == "reward":
            series = sorted({k for r in steps for k in r if k.startswith("reward/")}) or ["reward"]
            pool = steps
        elif key.endswith("/"):
            series = sorted({k for r in records for k in r if k.startswith(key)})
            pool = records
        else:
            series, pool = [key], steps
        for name in series:
            xs = [r["step"] for r in pool if name in r]
            marker = "o" if isinstance(key, str) and key.endswith("/") else None
            ax.plot(xs, [r[name] for r in pool if name in r], lw=1.2, marker=marker, label=name)
        if len(series) > 1 or (isinstance(key, str) and key.endswith("/")):
            ax.legend(fontsize=8)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    fig.suptitle(f"{run_dir.name}: {len(steps)} RLOO steps")
    out = Path(out) if out is not None else run_dir / "curves.png"
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
