"""The results page's headline tables for training and evaluation: eval suite, post-training, RL, vision.

Each function reads its files in docs/results and returns Markdown; nothing here holds a measured number.
"""

from __future__ import annotations

from results_data import interval, load, num, table


def eval_suite() -> str:
    data = load("eval_suite.json")
    fp32, bf16 = (data["variants"][v]["tasks"] for v in ("float32", "bfloat16"))
    rows = []
    for task, r in fp32.items():
        chance = int(r["chance"]) if float(r["chance"]).is_integer() else r["chance"]
        rows.append([f"`{task}`", r["metric"], str(r["n"]), num(chance, ","),
                     interval(r["value"], r["ci95"]), interval(bf16[task]["value"], bf16[task]["ci95"])])
    return (table(["task", "metric", "n", "chance", "float32 [95% interval]", "bfloat16 [95% interval]"], rows,
                  "llrrll") + f"\n\nModel `{data['model']}`, {data['threads']} thread; intervals are "
            f"{data['interval']}.")


def posttrain() -> str:
    data = load("posttrain.json")
    math, exact = data["heldout_math_accuracy"], data["heldout_math_exact"]
    rows = [[f"math (chain_sum), reasoning-gym's score, n = {math['n']}", *(num(math[s], ".3f") for s in
                                                                            ("base", "sft", "rl"))],
            ["math, exact answers only", *(num(exact[s], ".3f") for s in ("base", "sft", "rl"))]]
    for task, scores in data["tasks"].items():
        base = next(v for k, v in scores.items() if k.startswith("base"))
        rows.append([f"`{task}`", num(base, ".3f"), num(scores["sft"], ".3f"), num(scores["rl"], ".3f")])
    targets = {k: v.replace(">=", "≥").replace("<=", "≤") for k, v in data["targets"].items()}
    gains = (f"RLOO over its SFT start: **+{data['math_gain_rloo_points']:.1f} points** (target "
             f"{targets['math_gain_rloo_points']}); SFT on BFCL multiple/parallel: "
             f"**+{data['bfcl_gain_sft_points']:.1f} points** (target {targets['bfcl_gain_sft_points']}); "
             f"held-out perplexity after RLOO over base: **{data['ppl_ratio_after']:.3f}** (target "
             f"{targets['ppl_ratio_after']}). Stage wall time: "
             + ", ".join(f"{k} {v:.0f} s" for k, v in data["stages_wall_s"].items()) + ".")
    return table(["held-out", "base", "after SFT", "after RLOO"], rows, "lrrr") + "\n\n" + gains


def tool_sft() -> str:
    data = load("tool_sft.json")
    rows = [[category, str(r["n"]), num(r["before"], ".3f"), num(r["after"], ".3f"), num(r["gain_points"], "+.1f")]
            for category, r in data["per_category"].items()]
    sft = data["sft"]
    return (table(["BFCL category (held-out ids, constrained)", "n", "before", "after", "gain (points)"], rows,
                  "lrrrr")
            + f"\n\nMean gain on multiple + parallel: **{data['bfcl_gain_sft_points']:.1f} points** (target "
            f"{data['target_points']}). LoRA rank {sft['rank']}, {sft['steps']} steps, "
            f"{sft['train_examples']} training examples, {sft['train_seconds'] / 60:.1f} min on {sft['threads']} "
            "thread.")


def reward_model() -> str:
    data = load("reward_model.json")
    sources = sorted(data["pair_accuracy_per_source"])
    rows = [["with single-sided grading", num(data["pair_accuracy_verifiable"], ".2f"),
             *(num(data["pair_accuracy_per_source"][s], ".2f") for s in sources)],
            ["without (ablation)", num(data["ablation_pair_accuracy_verifiable"], ".2f"),
             *(num(data["ablation_pair_accuracy_per_source"][s], ".2f") for s in sources)]]
    headers = ["reward model", "held-out pairwise accuracy, pooled", *sources]
    return (table(headers, rows, "l" + "r" * (len(headers) - 1))
            + f"\n\nTarget {data['target']}: {'met' if data['target_met'] else '**missed**'}.")


def rloo() -> str:
    data = load("rloo.json")
    runs = data["training"]["runs"]
    variance = data["gradient_variance"]["init (step 0)"]["ratio_to_leave_one_out"]
    rows = []
    for name, run in runs.items():
        last5 = sorted(run["final_reward_last5_per_seed"])
        median = last5[len(last5) // 2]
        steps = run["steps_to_threshold_median"]
        rows.append([name, num(median, ".2f"), num(steps.get("0.5"), "d"), num(steps.get("0.8"), "d"),
                     num(variance.get(name), ".2f", "×")])
    training = data["training"]
    return (table(["baseline", "median final reward (last 5 steps)", "median steps to 0.5", "median steps to 0.8",
                   "gradient variance vs leave-one-out, at step 0"], rows, "lrrrr")
            + f"\n\n{len(runs['leave-one-out']['final_reward_last5_per_seed'])} seeds, {training['steps']} steps, "
            f"{training['samples_per_step']} samples per step, k = {training['k']}; model: {data['task']['model']}. "
            "“—”: not reached by the median seed.")


def rl_async() -> str:
    data = load("rl_async.json")
    sync, run = data["sync"], data["async"]

    def both(key: str, spec: str) -> list[str]:
        return [num(sync[key], spec), num(run[key], spec)]

    rows = [["training wall, updates only (s)", *both("wall_s", ".1f")],
            ["trajectories / s", *both("trajectories_per_s", ".2f")],
            ["generator tokens / s while generating", *both("tg_tokens_per_s", ".1f")],
            ["idle share, generator", *both("tg_idle_share", ".2f")],
            ["idle share, updater", *both("pu_idle_share", ".2f")],
            ["staleness of the groups used", *(", ".join(f"{s}: {n}" for s, n in r["staleness"].items())
                                                for r in (sync, run))],
            ["held-out score before → after", *(f"{r['heldout_before']:.3f} → {r['heldout_after']:.3f}"
                                                 for r in (sync, run))]]
    job = data["job"]
    return (table(["", "synchronous (same actors)", "asynchronous, 1 generator"], rows, "lrr")
            + f"\n\nWall-clock speedup **{data['wall_speedup']:.2f}×**; held-out difference "
            f"**{data['accuracy_diff_points']:+.1f} points**. Job: {job['model']}, {job['task']}, {job['steps']} "
            f"updates of {job['prompts_per_step']} prompts × k = {job['k']}, max staleness {job['max_staleness']}, "
            f"{job['actors']}. Note recorded with the run: {data['note']}.")


def vlm() -> str:
    data = load("vlm.json")
    tasks = ("read-word", "read-digit", "chart-value", "count", "name-emoji")
    rows = []
    for mode, r in data["modes"].items():
        held = r["held_out"]
        cells = [f"{held[t]['accuracy'] * 100:.0f}% of {held[t]['n']} (chance {held[t]['chance'] * 100:.0f}%)"
                 for t in tasks]
        rows.append([mode, str(r["image_tokens"]), num(r["time_to_first_token_median"], ".2f"), *cells,
                     f"{held['absent']['accuracy'] * 100:.0f}% of {held['absent']['n']}",
                     f"{held['refusal_rate_answerable']['accuracy'] * 100:.0f}%"])
    return (table(["mode", "image tokens", "time to first token (s)", "read the word", "read the digit",
                   "tallest bar", "count circles", "name the emoji", "absent: refused", "answerable: refused"],
                  rows, "lrrllllllll")
            + f"\n\nRapid over high time to first token: **{data['rapid_ttft_speedup']:.1f}×**. Held-out text "
            f"perplexity after / before: {data['text_ppl_ratio']:.3f} (the decoder is frozen). Through openafm.fm, "
            f"{data['fm']['prompts'] - data['fm']['empty']} of {data['fm']['prompts']} held-out image prompts got a "
            f"non-empty answer.")


def vision_encoder() -> str:
    data = load("vision_encoder.json")
    flops, secs, acc = data["flops_672"]["report_vit_l_14"], data["seconds_per_image_672"], data["accuracy"]
    kinds = (("vitdet_rw", "ViTDet + Register-Window"), ("vitdet", "ViTDet"), ("global_vit", "global ViT"))
    rows = [[label, f"{flops[k]['params'] / 1e6:.1f}M", num(flops[k]["gflops_per_image_672"], ",.0f"),
             num(secs[k], ".3f"), num(acc[k]["zero_shot_top1"] * 100, ".1f", "%"),
             num(acc[k]["linear_probe_top1"] * 100, ".1f", "%")] for k, label in kinds]
    return (table(["encoder", "parameters (report scale)", "GFLOPs per 672×672 image (report scale)",
                   "s per 672×672 image (vision-small)", "held-out zero-shot top-1", "linear probe top-1"], rows,
                  "lrrrrr")
            + f"\n\nAccuracy: {acc['preset']}; {acc['classes']} classes, chance {acc['chance_top1'] * 100:.2f}%.")


def flip() -> str:
    data = load("flip.json")
    rows = [[f"{r['mask_ratio']:.0%}", str(r["patches_kept"]), num(r["seconds_per_image"] * 1000, ".1f"),
             num(r["speedup_vs_unmasked"], ".2f", "×"), num(r["equal_time_run"]["images_seen"], ","),
             num(r["zero_shot_held_out"]["top1"] * 100, ".1f", "%"), num(r["zero_shot_held_out"]["top5"] * 100,
                                                                         ".1f", "%")]
            for r in data["ratios"].values()]
    return (table(["FLIP mask", "patches kept", "ms per image", "speedup", "images in the time budget",
                   "held-out zero-shot top-1", "top-5"], rows, "lrrrrrr")
            + f"\n\nTarget ≥ {data['target_speedup_75']:.0f}× at 75%: {'met' if data['target_met'] else 'missed'}. "
            f"Chance top-1 {data['chance_top1'] * 100:.2f}%. {data['scale'].rstrip('.')}.")
