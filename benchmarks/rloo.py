"""RLOO vs plain REINFORCE with a moving-average baseline, at equal samples (P prompts x k samples per step): the
reward curve, the steps to a reward threshold, and the variance of the policy-gradient estimate (RLOO's reason to
exist), on a tiny random decoder and a synthetic task with a known reward.

Task: 4 prompts of different difficulty. Prompt p rewards the fraction of its 8 sampled tokens that fall in its
own target set, {t : (t - offset_p) mod 16 < width_p} with widths 8, 4, 2, 1 (disjoint sets: the policy has to
read the prompt), so a random policy earns about 1/2, 1/4, 1/8, 1/16 on them. Rewards that differ by prompt are
what a per-prompt baseline (leave-one-out) removes and one scalar (the moving average) cannot.

Training: RLOOStep (k = 4, no KL, Adam), one run per baseline kind and seed; a seed fixes the initial weights and
the rollout seeds, the same for every kind.

Gradient variance: at fixed parameters (the first seed's initial weights, and its leave-one-out and moving-average
runs at a middle step), M independent batches are drawn; for each, the policy gradient of the loss (ratio 1, so
REINFORCE's estimate) is taken under each baseline on the same samples, and tr Cov = sum_m |g_m - mean g|^2 /
(M - 1) is reported, raw, relative to |mean g|^2 (mean over all kinds' draws: every kind is unbiased), and as a
ratio to leave-one-out's (90% paired-bootstrap interval).
Kinds: none; moving-average at fixed parameters in steady state (decay d, run over the draws in order, each draw
centred by the average of the draws before it); the ideal scalar baseline (the mean reward, known only after all
draws: the best any moving average could do); leave-one-out; the ideal per-prompt baseline (each prompt's mean
reward: what leave-one-out estimates from k - 1 samples).

    python benchmarks/rloo.py --json    # ~3 min of CPU on one thread (9 min wall on a loaded 2-core machine);
                                        # writes docs/results/rloo.{json,png}
"""

from __future__ import annotations

import copy
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from openafm.models.decoder import Decoder
from openafm.models.presets import get_preset
from openafm.rl.rloo import Baseline, RLOOConfig, advantages, group, rloo_loss
from openafm.rl.step import RLOOStep, rollout, sequence_token_logprobs

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
PROMPTS = [[5, 17, 3], [9, 2, 44], [71, 6, 13], [30, 88, 21]]
WIDTHS, OFFSETS, PERIOD = (8, 4, 2, 1), (0, 8, 12, 14), 16
RESPONSE_TOKENS = 8
TRAIN_KINDS = [Baseline.LEAVE_ONE_OUT, Baseline.MOVING_AVERAGE, Baseline.NONE]
# gradient-variance estimators: name -> how the advantages [P, k] of one draw are made
VARIANCE_KINDS = ["none", "moving-average", "ideal-scalar", "leave-one-out", "ideal-per-prompt"]


def reward(prompt_index: int, response: list[int]) -> float:
    """The fraction of response tokens in prompt_index's target set."""
    width, offset = WIDTHS[prompt_index], OFFSETS[prompt_index]
    return sum((t - offset) % PERIOD < width for t in response) / max(len(response), 1)


def make_policy(seed: int) -> Decoder:
    """smollm2-tiny (181k params), random weights scaled so activations stay O(1) and the next-token
    distribution is broad (embeddings x 0.1), as tests/rl/test_step.py builds its policy."""
    torch.manual_seed(seed)
    model = Decoder(get_preset("smollm2-tiny"))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 2:
                p.normal_(0, 0.1 if "embed" in name else 0.5 / p.shape[1] ** 0.5)
            else:
                p.uniform_(0.8, 1.2)
    return model.eval()


# --- training curves -------------------------------------------------------------------------------------------

def train(kind: Baseline, seed: int, steps: int, *, k: int, lr: float, decay: float, keep_at: tuple[int, ...] = ()
          ) -> tuple[list[float], dict[int, dict], Decoder]:
    """Reward per step of one run; the policy's state_dict at the steps in keep_at (before that step's update);
    the trained policy."""
    policy = make_policy(seed)
    config = RLOOConfig(k=k, kl_coef=0.0, baseline=kind, baseline_decay=decay)
    step = RLOOStep(policy, copy.deepcopy(policy), torch.optim.Adam(policy.parameters(), lr=lr), config,
                    reward=reward, max_new_tokens=RESPONSE_TOKENS)
    rewards, kept = [], {}
    for s in range(steps):
        if s in keep_at:
            kept[s] = copy.deepcopy(policy.state_dict())
        rewards.append(step(PROMPTS, seed=seed * 100_000 + s)["reward"])
    return rewards, kept, policy


def prompt_rewards(policy, samples: int, seed: int) -> list[float]:
    """Each prompt's mean reward over `samples` fresh samples (how a run ended, prompt by prompt)."""
    roll = rollout(policy, PROMPTS, reward, k=samples, max_new_tokens=RESPONSE_TOKENS, temperature=1.0, seed=seed)
    return [round(float(x), 4) for x in group(roll.rewards, samples).mean(1)]


def steps_to(curve: list[float], threshold: float, window: int) -> int | None:
    """The first step whose trailing `window`-step mean reward reaches threshold (None: never)."""
    for s in range(window - 1, len(curve)):
        if sum(curve[s - window + 1:s + 1]) / window >= threshold:
            return s
    return None


def median_steps(reach: list[int | None]) -> float | None:
    """The median over seeds with a run that never reached counted as infinitely slow (None when that is the
    median)."""
    m = statistics.median([float("inf") if r is None else r for r in reach])
    return None if m == float("inf") else m


# --- gradient variance -----------------------------------------------------------------------------------------

def trace_covariance(grads: torch.Tensor) -> float:
    """grads [M, D] (M independent draws of a gradient estimate) -> the unbiased estimate of tr Cov:
    sum_m |g_m - mean g|^2 / (M - 1)."""
    return float(squared_distances(grads).sum() / (grads.shape[0] - 1))


def squared_distances(grads: torch.Tensor) -> torch.Tensor:
    """grads [M, D] -> [M]: |g_m - mean g|^2."""
    if grads.ndim != 2 or grads.shape[0] < 2:
        raise ValueError(f"grads {tuple(grads.shape)}: need [M, D] with M >= 2 draws")
    g = grads.double()
    return ((g - g.mean(0)) ** 2).sum(-1)


def ratio_interval(num: torch.Tensor, den: torch.Tensor, *, resamples: int = 2000, seed: int = 0
                   ) -> tuple[float, float]:
    """A 90% paired-bootstrap interval of sum(num) / sum(den) over draws (num, den [M]: the squared distances of two
    estimators on the same draws; the mean gradient is held fixed, a small approximation)."""
    idx = torch.randint(0, num.shape[0], (resamples, num.shape[0]), generator=torch.Generator().manual_seed(seed))
    ratios = num[idx].sum(1) / den[idx].sum(1)
    return float(ratios.quantile(0.05)), float(ratios.quantile(0.95))


def policy_gradient(model, params: list[torch.Tensor], tokens: torch.Tensor, mask: torch.Tensor,
                    advs: list[torch.Tensor]) -> list[torch.Tensor]:
    """One batch: tokens [N, T], mask [N, T - 1], advantages [N] per estimator -> one flat policy-gradient estimate
    [D] per estimator: minus the gradient of rloo_loss at ratio 1, i.e. REINFORCE's (1 / #tokens) sum_n A_n
    grad log pi(y_n), token-mean normalised as in training."""
    logp = sequence_token_logprobs(model, tokens)                                      # [N, T - 1]
    out = []
    for i, adv in enumerate(advs):
        loss, _ = rloo_loss(logp, logp.detach(), adv, mask)
        grads = torch.autograd.grad(loss, params, retain_graph=i < len(advs) - 1)
        out.append(-torch.cat([g.reshape(-1) for g in grads]))
    return out


def estimator_advantages(rewards: torch.Tensor, *, k: int, ma_state: float, scalar_mean: float,
                         prompt_means: torch.Tensor) -> dict[str, torch.Tensor]:
    """rewards [N] of one draw -> advantages [N] per VARIANCE_KINDS name."""
    grouped = group(rewards, k)                                                        # [P, k]
    return {"none": advantages(grouped, Baseline.NONE)[0].reshape(-1),
            "moving-average": (grouped - ma_state).reshape(-1),
            "ideal-scalar": (grouped - scalar_mean).reshape(-1),
            "leave-one-out": advantages(grouped, Baseline.LEAVE_ONE_OUT)[0].reshape(-1),
            "ideal-per-prompt": (grouped - prompt_means.unsqueeze(1)).reshape(-1)}


def gradient_variance(model, prompts, reward_fn, *, k: int, draws: int, decay: float, seed: int,
                      response_tokens: int = RESPONSE_TOKENS) -> dict:
    """tr Cov of the policy-gradient estimate per VARIANCE_KINDS name at the model's current parameters (see the
    module docstring), from `draws` batches of len(prompts) x k samples; draw 0 only starts the moving average."""
    model.eval()
    rolls = [rollout(model, prompts, reward_fn, k=k, max_new_tokens=response_tokens, temperature=1.0,
                     seed=seed * 1_000_000 + m) for m in range(draws + 1)]
    all_rewards = torch.stack([group(r.rewards, k) for r in rolls[1:]])               # [M, P, k]
    scalar_mean, prompt_means = float(all_rewards.mean()), all_rewards.mean((0, 2))
    params = [p for p in model.parameters() if p.requires_grad]
    ma = float(rolls[0].rewards.mean())
    grads: dict[str, list[torch.Tensor]] = {name: [] for name in VARIANCE_KINDS}
    for roll in rolls[1:]:
        advs = estimator_advantages(roll.rewards, k=k, ma_state=ma, scalar_mean=scalar_mean, prompt_means=prompt_means)
        ma = decay * ma + (1 - decay) * float(roll.rewards.mean())                     # after its use: unbiased
        for name, g in zip(advs, policy_gradient(model, params, roll.tokens, roll.mask, list(advs.values()))):
            grads[name].append(g)
    stacked = {name: torch.stack(gs) for name, gs in grads.items()}                   # [M, D] each
    mean_grad = torch.cat(list(stacked.values())).double().mean(0)
    signal = float((mean_grad ** 2).sum())
    traces = {name: trace_covariance(g) for name, g in stacked.items()}
    dists = {name: squared_distances(g) for name, g in stacked.items()}
    return {"draws": draws, "samples_per_draw": len(prompts) * k, "mean_reward": scalar_mean,
            "prompt_mean_rewards": [round(float(x), 4) for x in prompt_means],
            "mean_gradient_sq_norm": signal,
            "trace_cov": traces,
            "relative_variance": {name: t / signal for name, t in traces.items()},
            "ratio_to_leave_one_out": {name: t / traces["leave-one-out"] for name, t in traces.items()},
            "ratio_to_leave_one_out_ci90": {name: [round(x, 3) for x in ratio_interval(d, dists["leave-one-out"])]
                                            for name, d in dists.items() if name != "leave-one-out"}}


# --- plot ------------------------------------------------------------------------------------------------------

def plot(result: dict, path: Path) -> None:
    import matplotlib  # on use: only the figure needs it
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5))
    colors = {"leave-one-out": "tab:blue", "moving-average": "tab:orange", "none": "tab:gray"}
    for kind, run in result["training"]["runs"].items():
        for curve in run["curves"]:
            ax.plot(curve, color=colors[kind], lw=0.6, alpha=0.25)
        ax.plot(run["median_curve"], color=colors[kind], lw=2, label=f"{kind} (median of {len(run['curves'])})")
    for t in result["training"]["thresholds"]:
        ax.axhline(t, color="k", ls=":", lw=0.8)
    ax.set_xlabel("step")
    ax.set_ylabel("mean reward of the step's batch")
    ax.set_title(f"reward, {result['training']['samples_per_step']} samples / step "
                 f"({len(PROMPTS)} prompts x k={result['training']['k']})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    names = VARIANCE_KINDS
    width = 0.8 / len(result["gradient_variance"])
    for j, (label, stats) in enumerate(result["gradient_variance"].items()):
        xs = [i + (j - (len(result["gradient_variance"]) - 1) / 2) * width for i in range(len(names))]
        bx.bar(xs, [stats["relative_variance"][n] for n in names], width, label=label)
    bx.set_xticks(range(len(names)), names, rotation=15, fontsize=8)
    bx.set_yscale("log")
    bx.set_ylabel("tr Cov(g) / |E g|^2  (one batch)")
    bx.set_title("variance of the policy-gradient estimate")
    bx.grid(alpha=0.3, axis="y")
    bx.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    import argparse
    import json

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print one JSON object (and nothing else) to stdout")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--decay", type=float, default=0.9, help="the moving-average baseline's decay")
    p.add_argument("--thresholds", type=lambda v: [float(x) for x in v.split(",")], default=[0.5, 0.8],
                   help="rewards for steps-to-threshold (trailing 5-step mean), comma-separated")
    p.add_argument("--draws", type=int, default=128, help="independent batches per gradient-variance measurement")
    p.add_argument("--mid-step", type=int, default=None, help="the second variance point (default steps // 3)")
    p.add_argument("--out", type=Path, default=RESULTS, help="folder for rloo.json and rloo.png")
    args = p.parse_args()
    torch.set_num_threads(1)
    mid = args.steps // 3 if args.mid_step is None else args.mid_step
    t0 = time.perf_counter()
    runs, kept = {}, {}
    for kind in TRAIN_KINDS:
        curves, finals = [], []
        for seed in range(args.seeds):
            keep = (0, mid) if (kind is not Baseline.NONE and seed == 0) else ()
            curve, states, policy = train(kind, seed, args.steps, k=args.k, lr=args.lr, decay=args.decay,
                                          keep_at=keep)
            kept.update({(kind.value, s): state for s, state in states.items()})
            curves.append(curve)
            finals.append(prompt_rewards(policy, 32, seed=7_000_000 + seed))
            log(f"{kind.value} seed {seed}: reward {curve[0]:.3f} -> {sum(curve[-5:]) / 5:.3f}, by prompt {finals[-1]} "
                f"({time.perf_counter() - t0:.0f} s)")
        reach = {str(t): [steps_to(c, t, 5) for c in curves] for t in args.thresholds}
        runs[kind.value] = {
            "curves": [[round(r, 4) for r in c] for c in curves],
            "median_curve": [round(statistics.median(rs), 4) for rs in zip(*curves)],
            "final_reward_last5_per_seed": [round(sum(c[-5:]) / 5, 4) for c in curves],
            "final_reward_by_prompt_per_seed": finals,
            "steps_to_threshold_per_seed": reach,
            "steps_to_threshold_median": {t: median_steps(r) for t, r in reach.items()}}
    variance = {}
    points = {"init (step 0)": ("leave-one-out", 0), f"leave-one-out run, step {mid}": ("leave-one-out", mid),
              f"moving-average run, step {mid}": ("moving-average", mid)}
    for i, (label, key) in enumerate(points.items()):
        model = make_policy(0)
        model.load_state_dict(kept[key])
        variance[label] = gradient_variance(model, PROMPTS, reward, k=args.k, draws=args.draws, decay=args.decay,
                                            seed=i + 1)
        log(f"variance, {label}: " + ", ".join(f"{n} {r:.2f}x" for n, r in
                                               variance[label]["ratio_to_leave_one_out"].items()))
    result = {"task": {"prompts": PROMPTS, "target_widths_of_16": list(WIDTHS), "response_tokens": RESPONSE_TOKENS,
                       "model": "smollm2-tiny (random, embeddings x 0.1)",
                       "params": sum(q.numel() for q in make_policy(0).parameters())},
              "training": {"k": args.k, "samples_per_step": len(PROMPTS) * args.k, "steps": args.steps,
                           "lr": args.lr, "optimizer": "Adam", "kl_coef": 0.0, "moving_average_decay": args.decay,
                           "thresholds": args.thresholds, "threshold_window": 5, "runs": runs},
              "gradient_variance": variance,
              "seconds": round(time.perf_counter() - t0, 1),
              "command": "python benchmarks/rloo.py --json"}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "rloo.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.out / "rloo.png")
    emit(result, args.json)


if __name__ == "__main__":
    main()
