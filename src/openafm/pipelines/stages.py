"""What each recipe stage kind does. `run_<kind>(recipe, stage, out_dir, outputs)` -> the stage's outputs
(a JSON-able dict: paths under out_dir and a few figures); `outputs` maps earlier stage names to theirs."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import torch

from openafm import config as cfg
from openafm.checkpoint.load import load_model
from openafm.checkpoint.native import load_checkpoint, save_checkpoint
from openafm.data.document import Document
from openafm.data.loader import find_shards
from openafm.data.pipeline.build import BuildConfig, build
from openafm.data.pipeline.executor import ExecutorConfig, ExecutorKind
from openafm.data.pipeline.inputs import InputSpec
from openafm.data.shards import TokenShard
from openafm.data.tokenize_shards import parse_document_line, tokenize_dir
from openafm.errors import ConfigError
from openafm.eval.perplexity import perplexity
from openafm.models.build import build_model
from openafm.models.presets import get_preset, kv_sharing_plan
from openafm.models.upcycle import upcycle_config, upcycle_state_dict
from openafm.pipelines.loader import TARGET
from openafm.pipelines.package import run_package
from openafm.pipelines.vision import run_vision
from openafm.pipelines.posttrain import run_rl, run_sft, run_synth, run_tasks
from openafm.pipelines.recipe import (
    CorpusStage,
    EvalStage,
    KDSpec,
    Recipe,
    ShardsStage,
    StageKind,
    Subset,
    TokenizerStage,
    TrainStage,
    UpcycleStage,
)
from openafm.tokenizer.tokenizer import Tokenizer
from openafm.tokenizer.train import BPETrainConfig, train_bpe
from openafm.train import checkpoint as ckpt
from openafm.train.config import TrainConfig
from openafm.train.loop import Trainer
from openafm.train.metrics import read_metrics

EOS = "<|endoftext|>"


# --- data ------------------------------------------------------------------------------------------

def run_corpus(recipe: Recipe, stage: CorpusStage, out: Path, outputs: dict) -> dict:
    if stage.jsonl_dir is not None:
        src = Path(stage.jsonl_dir)
        if not src.is_dir():
            raise ConfigError(f"stage {stage.name!r}: jsonl_dir={src} is not a directory")
        root = src.resolve()
    else:
        root = out / "corpus"
        spec = InputSpec(glob=stage.input) if stage.input is not None else None
        build(BuildConfig(out=str(root), sources=stage.sources or [], limit_per_source=stage.limit_per_source,
                          shard_size=stage.shard_size, input=spec),
              executor=ExecutorConfig(kind=ExecutorKind(stage.executor), workers=stage.workers, address=stage.address))
    counts: dict[str, int] = {}
    for doc in iter_documents(root):
        counts[doc.domain] = counts.get(doc.domain, 0) + 1
    return {"jsonl_dir": str(root), "documents": counts}


def iter_documents(jsonl_dir: str | Path):
    """Every Document of a curated corpus (its {domain}/*.jsonl files; other entries such as the build's
    work/ directory and report.json are not documents), in a fixed order."""
    root = Path(jsonl_dir)
    files = [p for domain in Document.DOMAINS for p in sorted((root / domain).glob("*.jsonl"))]
    if not files:
        raise ConfigError(f"{root}: no {{domain}}/*.jsonl files (domains: {Document.DOMAINS})")
    for path in files:
        with open(path, encoding="utf-8") as f:
            for line_no, line in enumerate(f, 1):
                if line.strip():
                    yield parse_document_line(line, path, line_no)


def run_tokenizer(recipe: Recipe, stage: TokenizerStage, out: Path, outputs: dict) -> dict:
    docs = iter_documents(outputs[stage.corpus]["jsonl_dir"])
    texts = (d.text for i, d in enumerate(docs) if stage.max_docs is None or i < stage.max_docs)
    tok = train_bpe(texts, BPETrainConfig(vocab_size=stage.vocab_size, min_frequency=stage.min_frequency,
                                          special_tokens=[EOS], bos_token=None, eos_token=EOS))
    tok.save(out / "tokenizer")
    return {"tokenizer_dir": str(out / "tokenizer"), "vocab_size": tok.vocab_size}


def heldout_bucket(doc_id: str) -> float:
    """A number in [0, 1) fixed by the document id alone (sha256): held out where it is < heldout_fraction."""
    return int.from_bytes(hashlib.sha256(doc_id.encode("utf-8")).digest()[:8], "big") / 2.0 ** 64


def split_documents(docs, heldout_fraction: float, hq_fraction: float,
                    whole_domains: tuple[str, ...] = ()) -> dict[Subset, list]:
    """-> {train, hq, heldout}: held out by id hash; hq = the train documents of whole_domains, and in every
    other domain the top hq_fraction of its scored documents by meta.quality_score (ties broken by id).
    The pipeline's quality model scores English general text only, so a general document that language
    identification labelled otherwise has no score and is not in hq (it was never judged high quality)."""
    split = {Subset.TRAIN: [], Subset.HQ: [], Subset.HELDOUT: []}
    for d in docs:
        split[Subset.HELDOUT if heldout_bucket(d.id) < heldout_fraction else Subset.TRAIN].append(d)
    by_domain: dict[str, list] = {}
    for d in split[Subset.TRAIN]:
        if d.domain in whole_domains:
            split[Subset.HQ].append(d)
            continue
        if not isinstance(d.meta.get("quality_score"), (int, float)):
            continue            # not judged by the quality model (e.g. langid said non-English): not in hq
        by_domain.setdefault(d.domain, []).append(d)
    for domain_docs in by_domain.values():
        ranked = sorted(domain_docs, key=lambda d: (-d.meta["quality_score"], d.id))
        split[Subset.HQ] += ranked[:max(1, round(hq_fraction * len(ranked)))]
    return split


def run_shards(recipe: Recipe, stage: ShardsStage, out: Path, outputs: dict) -> dict:
    tok = Tokenizer.from_files(outputs[stage.tokenizer]["tokenizer_dir"])
    split = split_documents(iter_documents(outputs[stage.corpus]["jsonl_dir"]), stage.heldout_fraction,
                            stage.hq_fraction, tuple(stage.hq_whole_domains))
    result = {"tokenizer_dir": outputs[stage.tokenizer]["tokenizer_dir"], "vocab_size": tok.vocab_size}
    for subset, docs in split.items():
        if not docs:
            raise ConfigError(f"stage {stage.name!r}: the {subset.value} subset is empty (heldout_fraction="
                              f"{stage.heldout_fraction}); use a larger corpus or fraction")
        jsonl = out / "jsonl" / subset.value
        for domain in sorted({d.domain for d in docs}):
            (jsonl / domain).mkdir(parents=True, exist_ok=True)
            with open(jsonl / domain / "docs.jsonl", "w", encoding="utf-8") as f:
                for d in docs:
                    if d.domain == domain:
                        f.write(json.dumps(d.to_json(), ensure_ascii=False) + "\n")
        tokens = out / "tokens" / subset.value
        if tokens.exists():
            shutil.rmtree(tokens)            # a half-written earlier attempt
        groups = tokenize_dir(jsonl, tokens, tok, progress=False)
        result[subset.value] = {"dir": str(tokens), "documents": len(docs),
                                "tokens": {f"{g.domain}/{g.lang or 'und'}": g.tokens for g in groups}}
    return result


# --- models ----------------------------------------------------------------------------------------

def fresh_config(stage: TrainStage, vocab_size: int):
    base = get_preset(stage.model.preset)
    changes = dict(stage.model.changes)
    if "vocab_size" in changes and changes["vocab_size"] != vocab_size:
        raise ConfigError(f"stage {stage.name!r}: model.changes.vocab_size={changes['vocab_size']} differs from the "
                          f"tokenizer's {vocab_size}; leave it out (the recipe sets it)")
    changes["vocab_size"] = vocab_size
    if "n_layers" in changes:
        changes["layers"] = kv_sharing_plan(int(changes.pop("n_layers")))
    return _replace(base, changes, stage.name)


def _replace(config, changes: dict, where: str):
    fields = {f.name for f in dataclasses.fields(config)}
    unknown = sorted(set(changes) - fields)
    if unknown:
        raise ConfigError(f"stage {where!r}: model changes {unknown} are not fields of {type(config).__name__}; "
                          f"accepted: {sorted(fields)} (and n_layers for a fresh model)")
    return dataclasses.replace(config, **changes)


def model_dir(outputs: dict, name: str) -> Path:
    return Path(outputs[name]["model_dir"])


def run_train(recipe: Recipe, stage: TrainStage, out: Path, outputs: dict) -> dict:


    shards = outputs[stage.data.shards]
    tok = Tokenizer.from_files(shards["tokenizer_dir"])
    init_dir = out / "init"
    if not init_dir.exists():
        if stage.model is not None:
            config = fresh_config(stage, shards["vocab_size"])
            torch.manual_seed(recipe.seed)
            state = build_model(config).state_dict()
        else:
            config, state, _ = load_checkpoint(model_dir(outputs, stage.from_))
            if stage.model_changes:
                config = _replace(config, stage.model_changes, stage.name)
        if config.vocab_size != shards["vocab_size"]:
            raise ConfigError(f"stage {stage.name!r}: the model's vocab_size {config.vocab_size} differs from the "
                              f"tokenizer's {shards['vocab_size']} (shards stage {stage.data.shards!r})")
        save_checkpoint(init_dir, config, state, tokenizer=tok)
    objective = {"kind": "lm"}
    if stage.kind is StageKind.DISTILL:
        objective = {"kind": "kd", "teacher": str(model_dir(outputs, stage.teacher)),
                     **dataclasses.asdict(stage.kd or KDSpec())}
    root = shards[stage.data.subset.value]["dir"]
    train = TrainConfig.from_dict({
        "seed": recipe.seed, "progress": True, **stage.train,
        "model": str(init_dir), "run_dir": str(out / "run"),
        "init": "scaled-normal" if stage.model is not None else "keep",
        "objective": objective,
        "data": {"kind": "callable", "target": TARGET,
                 "options": {"root": root, "mixture": cfg.to_dict(stage.data.mixture),
                             "skip_steps": stage.data.skip_steps}}})
    latest = ckpt.list_checkpoints(train.run_dir)
    resumed_from = latest[-1][0] if latest else 0      # a killed run continues from its newest checkpoint
    trainer = Trainer(train)
    records = trainer.run(resume=bool(latest))
    if trainer.step != train.steps:
        raise RuntimeError(f"stage {stage.name!r} stopped at step {trainer.step} of {train.steps}; rerun the "
                           f"recipe to resume it from {train.run_dir}")
    final = ckpt.latest_checkpoint(train.run_dir)
    config, state, _ = load_checkpoint(final / ckpt.MODEL)
    save_checkpoint(out / "model", config, state, tokenizer=tok)
    metrics = read_metrics(out / "run" / "metrics.jsonl")
    tail = metrics[-max(1, len(metrics) // 10):]
    return {"model_dir": str(out / "model"), "steps": train.steps, "tokens": train.steps * train.batch_size * train.seq_len,
            "resumed_from_step": resumed_from, "final_loss": float(np.mean([m["loss"] for m in tail])),
            "params": sum(v.numel() for v in state.values()),
            "tokens_per_s": float(np.median([m["tokens_per_s"] for m in metrics])) if metrics else None,
            "trained_steps_this_run": len(records)}


def run_upcycle(recipe: Recipe, stage: UpcycleStage, out: Path, outputs: dict) -> dict:
    src = model_dir(outputs, stage.from_)
    config, state, _ = load_checkpoint(src)
    moe = upcycle_config(config, n_experts=stage.n_experts, every=stage.every, top_k=stage.top_k)
    moe_state = upcycle_state_dict(state, moe, seed=recipe.seed, router_std=stage.router_std)
    save_checkpoint(out / "model", moe, moe_state, tokenizer=Tokenizer.from_files(src))
    return {"model_dir": str(out / "model"), "params": sum(v.numel() for v in moe_state.values()),
            "dense_params": sum(v.numel() for v in state.values())}


# --- eval ------------------------------------------------------------------------------------------

def heldout_streams(root: str | Path) -> dict[str, np.ndarray]:
    """{domain: [N] token ids}: every held-out document of that domain followed by EOS, in shard order."""
    streams: dict[str, list[np.ndarray]] = {}
    for path in find_shards(root):
        shard = TokenShard.open(path)
        eos = np.array([shard.header.eos_id], dtype=np.int64)
        for i in range(len(shard)):
            streams.setdefault(shard.header.domain, []).extend([np.asarray(shard[i], dtype=np.int64), eos])
    return {d: np.concatenate(parts) for d, parts in sorted(streams.items())}


def run_eval(recipe: Recipe, stage: EvalStage, out: Path, outputs: dict) -> dict:
    streams = heldout_streams(outputs[stage.shards]["heldout"]["dir"])
    results = {}
    for name in stage.models:
        model = load_model(model_dir(outputs, name)).model
        per_domain, nll, n = {}, 0.0, 0
        for domain, ids in streams.items():
            if len(ids) < stage.context:
                continue
            p = perplexity(model, ids, context=stage.context, max_tokens=stage.max_tokens)
            per_domain[domain] = {"ppl": p.ppl, "tokens": p.tokens}
            nll, n = nll + p.nll_sum, n + p.tokens
        if n == 0:
            raise ConfigError(f"stage {stage.name!r}: no held-out domain has {stage.context} tokens; lower context "
                              f"or raise heldout_fraction")
        results[name] = {"ppl": float(np.exp(nll / n)), "tokens": n, "per_domain": per_domain}
    return {"context": stage.context, "perplexity": results}


RUNNERS = {StageKind.CORPUS: run_corpus, StageKind.TOKENIZER: run_tokenizer, StageKind.SHARDS: run_shards,
           StageKind.TRAIN: run_train, StageKind.DISTILL: run_train, StageKind.UPCYCLE: run_upcycle,
           StageKind.EVAL: run_eval, StageKind.SYNTH: run_synth, StageKind.SFT: run_sft, StageKind.RL: run_rl,
           StageKind.TASKS: run_tasks, StageKind.PACKAGE: run_package, StageKind.VISION: run_vision}
