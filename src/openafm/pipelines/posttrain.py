"""Post-training stages of a recipe (report §5): synth -> sft -> rl, and `tasks` (held-out evaluation on the
evaluation registry's tasks). Each stage takes its model from an earlier model stage (`from`) or names one that
openafm.load accepts (`model`), and each model stage writes a native checkpoint to OUT/model.

    - {name: synth-math, kind: synth, model: smollm2-135m-instruct, n: 64, k: 8, reward: reasoning-gym,
       prompts: {source: reasoning-gym, options: {dataset: chain_sum}}}
    - {name: sft, kind: sft, model: smollm2-135m-instruct, data: [synth-math, bfcl, tools.jsonl], sft: {steps: 100}}
    - {name: rl, kind: rl, from: sft, rl: {steps: 40, prompt_sets: [...]}}          # any RLConfig keys
    - {name: rl, kind: rl, from: sft, trains: adapter, rl: {...}}     # RL continues sft's adapter on sft's base
    - {name: eval, kind: tasks, models: [base:smollm2-135m-instruct, sft, rl], tasks: [ifeval], limit: 32}

sft's data: synth stages, JSONL files of chat examples, and the built-in sets of pipelines/sft_data.py (bfcl, guided,
tool-rounds, udhr; `sizes` says how many of a sized set). sft trains a LoRA adapter on the one trainer
(train/sft.py), writes it as OUT/adapter.safetensors (tied to the base's fingerprint) and merges it into the
weights, so the next stage loads a plain checkpoint. An rl stage that trains: adapter continues an adapter on its
base instead of training every weight (an sft stage's, or a bundled model's named by model) and writes its own
OUT/run/adapter.safetensors, which a package stage ships. A killed SFT or RL stage resumes from its newest
checkpoint on the next run.
"""

from __future__ import annotations

from pathlib import Path

from openafm.checkpoint.adapter import ADAPTER_FILE, AdapterFile, read_adapter
from openafm.checkpoint.load import load_model
from openafm.checkpoint.native import save_checkpoint
from openafm.checkpoint.packaged import BUNDLED
from openafm.errors import CheckpointError, ConfigError
from openafm.eval.harness import run_eval
from openafm.eval.registry import get_task
from openafm.nn.lora import merge_lora
from openafm.pipelines.recipe import (BASE_PREFIX, DEFAULT_SFT_RANK, RLStage, RLTrains, SFTAdapter, SFTStage,
                                      SynthStage, TasksStage)
from openafm.pipelines.sft_data import sft_conversations
from openafm.rl.config import RLConfig
from openafm.rl.prompts import build_prompts
from openafm.rl.run import RLRun
from openafm.rl.synthesis.rejection import SynthPrompt, Verifier, model_sampler, rejection_sample, write_synth_jsonl
from openafm.splits import Split
from openafm.train import checkpoint as ckpt
from openafm.train.adapter_toolkit import ConversationLoader
from openafm.train.config import TrainConfig
from openafm.train.lora import save_lora_adapter
from openafm.train.loop import METRICS_FILE
from openafm.train.metrics import read_metrics
from openafm.train.sft import TooLong, build_sft_trainer


def _model(stage, outputs: dict) -> str:
    return stage.model if stage.model is not None else outputs[stage.from_]["model_dir"]


# --- runners -----------------------------------------------------------------------------------------------

def run_synth(recipe, stage: SynthStage, out: Path, outputs: dict) -> dict:
    # weights "auto": a GGUF model samples from its blocks as openafm.load serves it (inference only; ~4x fewer bytes a
    # token than float32 weights); other sources load as before
    lm = load_model(_model(stage, outputs), seed=recipe.seed, weights="auto")
    records = build_prompts(stage.prompts.source, stage.prompts.options, Split.TRAIN, size=stage.n, seed=recipe.seed)
    prompts = [SynthPrompt(r.prompt, r.target, r.where) for r in records]
    verifier = Verifier.from_reward(stage.reward, threshold=stage.threshold, **stage.reward_options)
    sampler = model_sampler(lm.model, lm.tokenizer, max_new_tokens=stage.max_tokens, temperature=stage.temperature,
                            top_p=stage.top_p)
    kept, summary = rejection_sample(prompts, sampler, verifier, k=stage.k, seed=recipe.seed, progress=True)
    path = write_synth_jsonl(out / "synth.jsonl", kept)
    return {"data": str(path), **summary}


def _sft_adapter(stage: SFTStage, outputs: dict) -> tuple[str, dict, AdapterFile | None]:
    """-> (the model the adapter trains on, build_sft_trainer's LoRA options, the adapter continued or None)."""
    if stage.adapter is SFTAdapter.NEW:
        rank = stage.rank if stage.rank is not None else DEFAULT_SFT_RANK
        return _model(stage, outputs), {"rank": rank, "alpha": stage.alpha}, None
    bundle = BUNDLED[stage.model]
    adapter = read_adapter(bundle.adapter_path)
    return bundle.base, {"rank": adapter.rank, "alpha": adapter.alpha, "targets": adapter.targets,
                         "init_state": adapter.tensors}, adapter


def run_sft(recipe, stage: SFTStage, out: Path, outputs: dict) -> dict:
    base, lora, continued = _sft_adapter(stage, outputs)
    lm = load_model(base, seed=recipe.seed)
    examples, counts = sft_conversations(stage.data, stage.sizes, outputs, seed=recipe.seed)
    if not examples:
        raise ConfigError(f"stage {stage.name!r}: its data {stage.data} holds no examples (did every synth sample "
                          f"fail its verifier?)")
    config = TrainConfig.from_dict({"steps": 100, "batch_size": 4, "seq_len": 512, "seed": recipe.seed,
                                    "optimizer": {"lr": 5e-4, "weight_decay": 0.0, "grad_clip": 1.0},
                                    "schedule": {"kind": "warmup-cosine", "warmup_steps": 5},
                                    **stage.sft, "model": base, "run_dir": str(out / "run"), "init": "keep"})
    loader = ConversationLoader(examples, lm.tokenizer, seq_len=config.seq_len, global_batch=config.rows_per_rank(1),
                                seed=recipe.seed, too_long=TooLong.SKIP)
    trainer, fingerprint = build_sft_trainer(config, base=lm.model, loader=loader, **lora)
    if continued is not None and continued.base_fingerprint != fingerprint:
        raise CheckpointError(f"stage {stage.name!r}: the adapter of {stage.model!r} ({continued.path}) was trained "
                              f"on weights {continued.base_fingerprint}; its base {base!r} loads as {fingerprint}")
    trainer.run(resume=ckpt.latest_checkpoint(config.run_dir) is not None)
    adapter = save_lora_adapter(trainer, out / ADAPTER_FILE, fingerprint)
    with trainer.eval_model() as model:
        merged = merge_lora(model)
        save_checkpoint(out / "model", model.config, model.state_dict(), tokenizer=lm.tokenizer,
                        extra={"sft_steps": trainer.step, "lora_rank": lora["rank"]})
    losses = [r["loss"] for r in read_metrics(out / "run" / METRICS_FILE)]
    return {"model_dir": str(out / "model"), "adapter": str(adapter), "base_fingerprint": fingerprint,
            "examples": len(examples), "examples_per_source": counts, "skipped": loader.skipped,
            "steps": trainer.step, "loss_first": losses[0], "loss_last": losses[-1], "merged_layers": merged}


def adapted(recipe, stage: RLStage, outputs: dict) -> tuple[str, str]:
    """An rl stage that trains an adapter -> (the adapter's base model, the adapter: a file or a bundled model)."""
    if stage.from_ is None:
        return BUNDLED[stage.model].base, stage.model
    sft = recipe.stage(stage.from_)
    return _model(sft, outputs), outputs[sft.name]["adapter"]


def run_rl(recipe, stage: RLStage, out: Path, outputs: dict) -> dict:
    keys = {"model": _model(stage, outputs)}
    if stage.trains is RLTrains.ADAPTER:
        base, adapter = adapted(recipe, stage, outputs)
        keys = {"model": base, "adapter": {"init": adapter}}
    config = RLConfig.from_dict({"seed": recipe.seed, **stage.rl, **keys, "run_dir": str(out / "run")})
    summary = RLRun(config).run(resume=ckpt.latest_checkpoint(config.run_dir) is not None)
    return {"model_dir": summary["policy"], **{k: v for k, v in summary.items() if k != "policy"}}


def run_tasks(recipe, stage: TasksStage, out: Path, outputs: dict) -> dict:
    tasks = [get_task(t) for t in stage.tasks]
    results = {}
    for ref in stage.models:
        source = ref[len(BASE_PREFIX):] if ref.startswith(BASE_PREFIX) else outputs[ref]["model_dir"]
        lm = load_model(source, seed=recipe.seed)
        summary = run_eval(lm, tasks, limit=stage.limit, out=out / ref.replace(":", "_").replace("/", "_"),
                           config={"model": source, "adapter": None, "dtype": "float32", "seed": recipe.seed,
                                   "limit": stage.limit})
        results[ref] = {t: summary["tasks"][t] for t in stage.tasks}
    return {"tasks": results}
