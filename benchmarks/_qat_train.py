"""The training phase of benchmarks/qat.py: QAT curves on the trainer, loss spikes, LoRA recovery, and a small
on-device model trained from scratch then QAT'd. Imported by qat.py (kept apart so qat.py stays readable)."""

from __future__ import annotations

import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

import torch
from _common import log

import openafm
from openafm.compress.clip_init import ClipInit
from openafm.compress.fake_quant import Granularity
from openafm.compress.levels import Levels
from openafm.compress.qat import QATSpec
from openafm.compress.qat_train import baked_state_dict, build_qat_trainer, save_qat_outputs
from openafm.compress.recovery import build_recovery_trainer, save_recovery_adapter
from openafm.compress.rtn import quantize_model_rtn
from openafm.eval.perplexity import perplexity
from openafm.train.config import TrainConfig
from openafm.train.hooks import TrainHooks
from openafm.train.init import InitKind
from openafm.train.token_loader import TokenArrayLoader

SPIKE_WINDOW = 20        # a loss spike: loss > (1 + SPIKE_REL) x the median of the previous SPIKE_WINDOW losses
SPIKE_REL = 0.25


class EvalCurve(TrainHooks):
    """Held-out perplexity every `every` steps: with the eval weights (EMA) and with the raw trained weights."""
    name = "eval_curve"

    def __init__(self, ids: torch.Tensor, *, every: int, context: int, tokens_per_step: int, raw: bool):
        self.ids, self.every, self.context, self.tokens_per_step, self.raw = ids, every, context, tokens_per_step, raw
        self.points: list[dict] = []

    def measure(self, trainer) -> dict:
        point = {"step": trainer.step, "tokens": trainer.step * self.tokens_per_step}
        with trainer.eval_model() as m:
            point["ppl_ema"] = perplexity(m, self.ids, context=self.context, batch_size=4).ppl
        if self.raw:
            point["ppl_raw"] = perplexity(trainer.model, self.ids, context=self.context, batch_size=4).ppl
        self.points.append(point)
        log(f"  step {trainer.step}: " + ", ".join(f"{k} {v:.3f}" for k, v in point.items() if k.startswith("ppl")))
        return point

    def after_step(self, trainer) -> dict:
        if trainer.step % self.every == 0 or trainer.step == trainer.config.steps:
            return {k: v for k, v in self.measure(trainer).items() if k.startswith("ppl")}
        return {}

    def state_dict(self) -> dict:
        return {"points": self.points}

    def load_state_dict(self, state: dict) -> None:
        self.points = list(state["points"])


def count_spikes(losses: list[float]) -> int:
    return sum(1 for i in range(SPIKE_WINDOW, len(losses))
               if losses[i] > (1 + SPIKE_REL) * statistics.median(losses[i - SPIKE_WINDOW:i]))


def config(model: str, run_dir: str, args, *, steps: int, teacher: str | None, lr: float, wd: float,
           objective: str = "kd") -> TrainConfig:
    return TrainConfig.from_dict(dict(
        model=model, run_dir=run_dir, steps=steps, batch_size=args.batch_size, seq_len=args.seq_len,
        device=args.device, init="keep", progress=True, peak_flops=1e12,
        objective=dict(kind=objective, teacher=teacher) if objective == "kd" else dict(kind="lm"),
        optimizer=dict(lr=lr, weight_decay=wd, grad_clip=1.0),
        schedule=dict(kind="warmup-cosine", warmup_steps=min(5, steps - 1)), checkpoint=dict(every=10 ** 6, keep=1)))


def rtn_ppl(model, ids, context, bits: int) -> float:
    """The QAT spec's starting point without training: per-tensor NR-clipped RTN weights, 4-bit per-row embed."""
    state = {k: v.clone() for k, v in model.state_dict().items()}
    quantize_model_rtn(model, bits=bits, granularity=Granularity.TENSOR, clip=ClipInit.NEWTON_RAPHSON,
                       embed_bits=4, embed_granularity=Granularity.CHANNEL)
    value = perplexity(model, ids, context=context, batch_size=4).ppl
    model.load_state_dict(state)
    return value


def qat_run(source: str, model, train_ids, heldout, args, *, levels: Levels, steps: int, lr: float, raw: bool,
            work: Path, name: str, stop_after: int | None = None):
    """`steps` sets the lr schedule; `stop_after` ends the run early on that same schedule."""
    cfg = config(source, str(work / name), args, steps=steps, teacher=source, lr=lr, wd=0.1)
    loader = TokenArrayLoader(train_ids, seq_len=args.seq_len, global_batch=args.batch_size, seed=0)
    curve = EvalCurve(heldout, every=args.eval_every, context=args.context,
                      tokens_per_step=args.batch_size * args.seq_len, raw=raw)
    trainer = build_qat_trainer(cfg, spec=QATSpec(bits=2, levels=levels), ema_decay=args.ema_decay, loader=loader,
                                hooks=[curve], model=model)
    curve.measure(trainer)                                       # step 0: the NR-initialised fake-quant model
    t = time.perf_counter()
    records = trainer.run(stop_after=stop_after)
    seconds = time.perf_counter() - t
    if trainer.step < steps and curve.points[-1]["step"] != trainer.step:
        curve.measure(trainer)                                   # the early stop's end point
    losses = [r["loss"] for r in records]
    done = trainer.step
    return trainer, {"levels": levels.value, "steps": done, "schedule_steps": steps,
                     "train_tokens": done * args.batch_size * args.seq_len,
                     "train_seconds": seconds, "curve": curve.points, "losses": losses,
                     "loss_spikes": count_spikes(losses)}


def recovery_run(base_dir: str, teacher: str, train_ids, heldout, args, work: Path) -> dict:
    cfg = config(base_dir, str(work / "recovery"), args, steps=args.recovery_steps, teacher=teacher, lr=1e-3, wd=0.0)
    loader = TokenArrayLoader(train_ids, seq_len=args.seq_len, global_batch=args.batch_size, seed=1)
    trainer, fingerprint = build_recovery_trainer(cfg, rank=args.rank, loader=loader)
    t = time.perf_counter()
    trainer.run()
    seconds = time.perf_counter() - t
    adapter = save_recovery_adapter(trainer, work / "qat2_recovery.safetensors", fingerprint)
    with trainer.eval_model() as m:
        ppl = perplexity(m, heldout, context=args.context, batch_size=4).ppl
    return {"rank": args.rank, "steps": args.recovery_steps,
            "train_tokens": args.recovery_steps * args.batch_size * args.seq_len, "train_seconds": seconds,
            "ppl": ppl, "adapter": str(adapter)}


def save_raw(trainer, path: Path, tokenizer) -> str:
    """The baked model from the trained weights themselves (no EMA swapped in): the "without EMA" row."""
    from openafm.checkpoint.native import save_checkpoint
    state = baked_state_dict(trainer.model)
    save_checkpoint(path, trainer.model_config, {k: v.cpu() for k, v in state.items()}, tokenizer)
    return str(path)


def smollm2_phase(args, lm, train_ids, heldout, work: Path) -> dict:
    model = lm.model
    fp32_ppl = perplexity(model, heldout, context=args.context, batch_size=4).ppl
    rtn = {f"rtn{b}": rtn_ppl(model, heldout, args.context, b) for b in (2, 3)}
    log(f"SmolLM2 fp32 {fp32_ppl:.3f}, " + ", ".join(f"{k} {v:.3f}" for k, v in rtn.items()))
    fp32_state = {k: v.clone() for k, v in model.state_dict().items()}
    result = {"fp32_ppl": fp32_ppl, **{f"{k}_ppl": v for k, v in rtn.items()}}
    log("QAT 2-bit balanced (EMA and raw from one run)")
    trainer, result["qat_balanced"] = qat_run(args.model, model, train_ids, heldout, args, levels=Levels.BALANCED,
                                              steps=args.steps, lr=args.lr, raw=True, work=work, name="balanced")
    base_dir = str(save_qat_outputs(trainer, work / "qat2_balanced", tokenizer=lm.tokenizer)["model"])
    save_raw(trainer, work / "qat2_balanced_noema_model", lm.tokenizer)
    del trainer
    if args.recovery_steps:
        log(f"LoRA recovery rank {args.rank} on the QAT-2-bit base")
        result["recovery"] = recovery_run(base_dir, args.model, train_ids, heldout, args, work)
    if not args.skip_unbalanced:
        fresh = openafm.load(args.model, weights="float32").model
        fresh.load_state_dict(fp32_state)
        log("QAT 2-bit unbalanced")
        n = min(args.unbalanced_steps or args.steps, args.steps)
        trainer, result["qat_unbalanced"] = qat_run(args.model, fresh, train_ids, heldout, args, levels=Levels.UNBALANCED,
                                              steps=args.steps, lr=args.lr, raw=False, work=work, name="unbalanced",
                                              stop_after=n)
        save_qat_outputs(trainer, work / "qat2_unbalanced", tokenizer=lm.tokenizer)
        result["spikes_first_steps"] = {"steps": n, **{k: count_spikes(result[k]["losses"][:n])
                                                       for k in ("qat_balanced", "qat_unbalanced")}}
    return result


def scratch_phase(args, tokenizer, train_ids, heldout, work: Path) -> dict:
    """A small on-device preset (at the SmolLM2 vocabulary) trained from scratch in fp32, then QAT-2-bit'd."""
    from openafm.checkpoint.native import save_checkpoint
    from openafm.models.build import build_model
    from openafm.models.presets import get_preset
    from openafm.train.loop import Trainer
    pcfg = dataclasses.replace(get_preset(args.scratch_preset), vocab_size=tokenizer.vocab_size)
    torch.manual_seed(0)
    model = build_model(pcfg)
    init_dir = save_checkpoint(work / "scratch_init", pcfg, model.state_dict(), tokenizer)
    cfg = dataclasses.replace(config(str(init_dir), str(work / "scratch_fp32"), args, steps=args.scratch_steps,
                                     teacher=None, lr=3e-3, wd=0.1, objective="lm"), init=InitKind.SCALED_NORMAL)
    loader = TokenArrayLoader(train_ids, seq_len=args.seq_len, global_batch=args.batch_size, seed=2)
    log(f"scratch {args.scratch_preset} fp32 pretraining, {args.scratch_steps} steps")
    t = time.perf_counter()
    trainer = Trainer(cfg, loader=loader)
    trainer.run()
    pretrain_s = time.perf_counter() - t
    fp32_dir = save_checkpoint(work / "scratch_fp32_model", pcfg,
                               {k: v.detach().cpu() for k, v in trainer.model.state_dict().items()}, tokenizer)
    fp32_model = openafm.load(str(fp32_dir)).model
    fp32_ppl = perplexity(fp32_model, heldout, context=args.context, batch_size=4).ppl
    rtn2 = rtn_ppl(fp32_model, heldout, args.context, 2)
    log(f"scratch fp32 {fp32_ppl:.3f}, rtn2 {rtn2:.3f}; QAT 2-bit")
    _, qat = qat_run(str(fp32_dir), fp32_model, train_ids, heldout, args, levels=Levels.BALANCED,
                     steps=args.scratch_qat_steps, lr=1e-3, raw=True, work=work, name="scratch_qat")
    final = qat["curve"][-1]["ppl_ema"]
    return {"preset": args.scratch_preset, "params": sum(p.numel() for p in fp32_model.parameters()),
            "pretrain_steps": args.scratch_steps, "pretrain_seconds": pretrain_s, "fp32_ppl": fp32_ppl,
            "rtn2_ppl": rtn2, "qat2": qat, "qat2_ppl": final, "qat2_ratio_to_fp32": final / fp32_ppl,
            "target_ratio": 1.3}


def plot(result: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    a, b = result.get("smollm2"), result.get("scratch")
    panels = [x for x in (a, b) if x]
    if not panels:
        raise ValueError("nothing to plot: the result has neither a smollm2 nor a scratch part")
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 5), squeeze=False)
    axes = list(axes[0])
    if a:
        ax = axes.pop(0)
        for key, label in (("qat_balanced", "QAT-2 balanced"), ("qat_unbalanced", "QAT-2 unbalanced")):
            if key in a:
                c = a[key]["curve"]
                ax.plot([p["tokens"] for p in c], [p["ppl_ema"] for p in c], marker="o", label=f"{label} (EMA)")
                if "ppl_raw" in c[0]:
                    ax.plot([p["tokens"] for p in c], [p["ppl_raw"] for p in c], marker=".", ls="--",
                            label=f"{label} (no EMA)")
        for key, label, style in (("fp32_ppl", "fp32", "k-"), ("rtn2_ppl", "RTN-2", "r:"), ("rtn3_ppl", "RTN-3", "g:")):
            ax.axhline(a[key], ls=style[1:], color=style[0], label=f"{label} {a[key]:.4g}")
        ax.set_title("SmolLM2-135M: held-out ppl vs QAT tokens")
        if "recovery" in a:
            r = a["recovery"]
            x = a["qat_balanced"]["train_tokens"] + r["train_tokens"]
            ax.scatter([x], [r["ppl"]], marker="*", s=150, color="red", label=f"+ LoRA r{r['rank']} recovery")
        ax.set_xlabel("training tokens")
        ax.set_ylabel("perplexity")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    if b:
        ax = axes.pop(0)
        c = b["qat2"]["curve"]
        ax.plot([p["tokens"] for p in c], [p["ppl_ema"] for p in c], marker="o", label="QAT-2 balanced (EMA)")
        ax.plot([p["tokens"] for p in c], [p["ppl_raw"] for p in c], marker=".", ls="--", label="no EMA")
        ax.axhline(b["fp32_ppl"], color="k", label=f"fp32 {b['fp32_ppl']:.1f}")
        ax.axhline(1.3 * b["fp32_ppl"], color="k", ls=":", label="1.3 x fp32")
        ax.set_title(f"{b['preset']} from scratch ({b['params'] / 1e6:.1f}M params)")
        ax.set_xlabel("QAT tokens")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def training_phase(args) -> dict:
    from openafm.eval.texts import english_text
    lm = openafm.load(args.model, weights="float32")
    train_ids = torch.tensor(lm.encode(english_text("train")))
    heldout = torch.tensor(lm.encode(english_text("heldout"))[: args.tokens])
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="qat_bench_"))
    result = {"model": args.model, "threads": torch.get_num_threads(), "device": args.device,
              "batch_size": args.batch_size, "seq_len": args.seq_len, "heldout_tokens": len(heldout),
              "context": args.context, "ema_decay": args.ema_decay, "lr": args.lr,
              "spike_rule": f"loss > {1 + SPIKE_REL} x median of the previous {SPIKE_WINDOW} step losses",
              "text": "debian-reference (train split for training, heldout split scored)", "work_dir": str(work)}
    if not args.skip_smollm2:
        result["smollm2"] = smollm2_phase(args, lm, train_ids, heldout, work)
    if args.scratch_steps:
        result["scratch"] = scratch_phase(args, lm.tokenizer, train_ids, heldout, work)
    if args.plot:
        plot(result, args.plot)
        result["plot"] = args.plot
    return result
