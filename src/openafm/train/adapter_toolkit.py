"""The adapter toolkit (report §7): train a rank-32 / alpha-16 LoRA adapter on a user's conversations (JSONL,
data/conversations.py), loss on every assistant turn, eval loss each epoch, early stop, resumable; measure task
accuracy before/after; export a self-describing bundle (adapter, metadata, base fingerprint, tokenizer hash, draft).

    convs = read_conversations("train.jsonl")
    report = train_adapter(lm, convs, eval_convs, AdapterConfig(epochs=3), out="task.safetensors", run_dir="task.run")

Each conversation is rendered with the model's chat template as a session renders it; an assistant turn's tokens
(through its end-of-turn token) carry labels, nothing else does. A conversation longer than --seq-len (the
context of one training row) raises naming file:line, or is skipped and counted with skip_bad.

Epochs are runs of the trainer (train/loop.py) of `steps_per_epoch` steps; its checkpoints make the run
resumable, and the per-epoch eval losses are kept in RUN_DIR/epochs.json, so a resumed run knows its best epoch.
The adapter file written is the best epoch's (lowest eval loss); training stops after `patience` epochs without
improvement.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import shutil
import time
from pathlib import Path

from openafm.checkpoint.adapter import ADAPTER_FILE, read_adapter
from openafm.io import write_text_atomic
from openafm.data.conversations import Conversation
from openafm.data.passages import Passage
from openafm.nn.lora import DEFAULT_TARGETS
from openafm.runtime.generate import generate_tokens
from openafm.train.config import TrainConfig
from openafm.train.lora import save_lora_adapter
from openafm.train.sft import ChatTokens, SFTLoader, TooLong, build_sft_trainer, heldout_loss

BUNDLE_FORMAT = "openafm-adapter-bundle"
EPOCHS_FILE = "epochs.json"


@dataclasses.dataclass(frozen=True)
class AdapterConfig:
    rank: int = 32               # the toolkit's rank and alpha (report §7)
    alpha: float = 16.0
    targets: tuple[str, ...] = DEFAULT_TARGETS    # every linear layer of attention and MLP
    epochs: int = 3
    patience: int = 1            # epochs without a better eval loss before stopping
    lr: float = 5e-4
    batch_size: int = 4          # rows per step
    seq_len: int = 512           # tokens per row; a longer conversation is bad data
    seed: int = 0
    skip_bad: bool = False       # skip (and count) conversations longer than seq_len instead of raising


def conversation_tokens(tokenizer, conv: Conversation) -> ChatTokens:
    """The conversation's tokens and which carry a loss: each assistant turn's content and end-of-turn token."""
    messages = list(conv.messages)
    full = tokenizer.apply_chat_template(messages, add_generation_prompt=False)
    cuts = []                                             # (start, end) character spans of assistant turns
    for i in conv.assistant_turns():
        before = tokenizer.apply_chat_template(messages[:i], add_generation_prompt=True)
        through = tokenizer.apply_chat_template(messages[:i + 1], add_generation_prompt=False)
        if not (full.startswith(before) and full.startswith(through)):
            raise ValueError(f"{conv.where}: the chat template renders turn {i} differently once later turns follow, "
                             f"so its tokens cannot be told apart")
        cuts.append((len(before), len(through)))
    ids, labeled, at = [], [], 0
    ends = tokenizer.eos_token_ids
    for start, end in cuts:
        head = tokenizer.encode(full[at:start]) if start > at else []
        turn = tokenizer.encode(full[start:end])
        stop = next((j for j, t in enumerate(turn) if t in ends), None)
        if stop is None:
            raise ValueError(f"{conv.where}: the chat template writes no end-of-turn token after an assistant turn")
        ids += head + turn
        labeled += [False] * len(head) + [j <= stop for j in range(len(turn))]
        at = end
    first = labeled.index(True)
    return ChatTokens(ids, first, tuple(labeled))


def passage_tokens(tokenizer, passage: Passage) -> ChatTokens:
    """A plain-text passage as a language model reads it (no chat template), every token with a loss."""
    return ChatTokens(tokenizer.encode(passage.text), 0)


class ConversationLoader(SFTLoader):
    """SFTLoader over toolkit conversations (several assistant turns each) and plain-text passages (data/passages.py:
    a fine-tune's text anchor)."""

    def piece(self, example: Conversation | Passage) -> ChatTokens:
        if isinstance(example, Passage):
            return passage_tokens(self.tokenizer, example)
        return conversation_tokens(self.tokenizer, example)


def train_adapter(lm, train: list[Conversation], evaluate: list[Conversation] | None, config: AdapterConfig, *,
                  out: str | Path, run_dir: str | Path, resume: bool = False, base_name: str = "") -> dict:
    """Train, eval each epoch, early stop; write the best epoch's adapter to `out` -> the run's report."""
    out, run_dir = Path(out), Path(run_dir)
    too_long = TooLong.SKIP if config.skip_bad else TooLong.ERROR
    loader = ConversationLoader(train, lm.tokenizer, seq_len=config.seq_len, global_batch=config.batch_size,
                                seed=config.seed, too_long=too_long)
    fits = loader.check_lengths()                      # a too-long conversation raises (file:line) before training
    tokens = sum(len(t.ids) for t in map(loader.piece, train) if len(t.ids) <= config.seq_len)
    steps_per_epoch = max(1, math.ceil(tokens / (config.batch_size * config.seq_len)))
    trainer_config = TrainConfig.from_dict(dict(
        model=base_name, run_dir=str(run_dir), steps=steps_per_epoch * config.epochs, batch_size=config.batch_size,
        seq_len=config.seq_len, seed=config.seed, device="cpu", init="keep", precision="float32",
        optimizer=dict(lr=config.lr, weight_decay=0.0, grad_clip=1.0),
        schedule=dict(kind="warmup-cosine", warmup_steps=min(10, steps_per_epoch * config.epochs - 1)),
        checkpoint=dict(every=steps_per_epoch, keep=2)))
    trainer, fingerprint = build_sft_trainer(trainer_config, base=lm.model, loader=loader, rank=config.rank,
                                             alpha=config.alpha, targets=config.targets)
    epochs_path = run_dir / EPOCHS_FILE
    history = json.loads(epochs_path.read_text()) if resume and epochs_path.is_file() else []

    def eval_loss(model) -> float | None:
        if not evaluate:
            return None
        return heldout_loss(model, evaluate, lm.tokenizer, seq_len=config.seq_len, too_long=too_long,
                            loader_class=ConversationLoader)["loss"]

    start = time.perf_counter()
    best = min((h for h in history if h["eval_loss"] is not None), key=lambda h: h["eval_loss"], default=None)
    stopped = None
    first = True
    while trainer.step < trainer_config.steps:
        trainer.run(resume=resume or not first, stop_after=steps_per_epoch)   # later epochs: from the checkpoint
        first = False
        epoch = math.ceil(trainer.step / steps_per_epoch)
        with trainer.eval_model() as model:
            loss = eval_loss(model)
        record = {"epoch": epoch, "step": trainer.step, "eval_loss": loss}
        history = [h for h in history if h["epoch"] != epoch] + [record]
        if best is None or loss is None or loss < best["eval_loss"]:
            best = record
            save_lora_adapter(trainer, out, fingerprint)
        write_text_atomic(epochs_path, json.dumps(history, indent=1))
        if loss is not None and epoch - best["epoch"] >= config.patience:
            stopped = epoch
            break
    if not out.is_file():                               # resumed after the last epoch: nothing left to train
        save_lora_adapter(trainer, out, fingerprint)
    return {"adapter": str(out), "base_fingerprint": fingerprint, "rank": config.rank, "alpha": config.alpha,
            "targets": list(config.targets), "conversations": len(train), "skipped_too_long": len(train) - fits,
            "train_tokens": tokens, "steps_per_epoch": steps_per_epoch, "epochs": history, "best_epoch": best["epoch"],
            "early_stopped_at": stopped, "seconds": time.perf_counter() - start,
            "adapter_bytes": out.stat().st_size}


def answer_accuracy(model, tokenizer, convs: list[Conversation], *, max_new_tokens: int = 64) -> dict:
    """Task accuracy: the model answers each conversation's last assistant turn from the turns before it (greedy);
    exact match after stripping whitespace -> {"accuracy", "n", "examples": [(expected, got)] (first 5)}."""
    right, shown = 0, []
    eos = set(tokenizer.eos_token_ids)
    for conv in convs:
        *context, last = conv.messages
        ids = tokenizer.encode(tokenizer.apply_chat_template(list(context), add_generation_prompt=True))
        out = generate_tokens(model, [ids], max_new_tokens=max_new_tokens, eos_token_ids=eos, tokenizer=tokenizer)[0]
        ok = out.text.strip() == last["content"].strip()
        right += ok
        if len(shown) < 5:
            shown.append((last["content"], out.text))
    return {"accuracy": right / max(len(convs), 1), "n": len(convs), "examples": shown}


def tokenizer_hash(tokenizer) -> str:
    """SHA-256 over the tokenizer's vocabulary (token strings in id order) and its end-of-sequence ids."""
    h = hashlib.sha256()
    for i in range(tokenizer.vocab_size):
        h.update(repr(tokenizer.decode([i])).encode() + b"\x00")
    h.update(repr(sorted(tokenizer.eos_token_ids)).encode())
    return f"sha256:{h.hexdigest()}"


def export_bundle(adapter: str | Path, out: str | Path, *, tokenizer, draft: str | Path | None = None,
                  metadata: dict | None = None) -> Path:
    """A self-describing adapter bundle directory: adapter.safetensors, bundle.json (format, base name and
    fingerprint, rank, alpha, targets, tokenizer hash, whatever `metadata` adds) and, optionally, draft/."""
    info = read_adapter(adapter)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(adapter, out / ADAPTER_FILE)
    if draft is not None:
        if not Path(draft, "draft.json").is_file():
            raise ValueError(f"--draft {draft}: not a draft directory (openafm draft train --out DIR makes one)")
        shutil.copytree(draft, out / "draft", dirs_exist_ok=True)
    meta = {"format": BUNDLE_FORMAT, "format_version": 1, "base_name": info.base_name,
            "base_fingerprint": info.base_fingerprint, "rank": info.rank, "alpha": info.alpha,
            "targets": list(info.targets), "tokenizer_hash": tokenizer_hash(tokenizer),
            "draft": "draft" if draft is not None else None, **(metadata or {})}
    write_text_atomic(out / "bundle.json", json.dumps(meta, indent=1) + "\n")
    return out
