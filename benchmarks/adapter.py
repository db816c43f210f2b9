"""The adapter toolkit on a held-out task: reasoning-gym's basic_arithmetic (two one-digit terms, +, with signs and
parentheses; the answer as a bare number), written as toolkit JSONL; base vs base + adapter exact-match accuracy on held-out questions, training
time, adapter size; and the draft acceptance rate on the task with the general draft vs an adapter-matched draft
(`openafm draft train --adapter`), speculative decoding on the base + adapter target.

    python benchmarks/adapter.py --json --draft out/drafts/smollm2 [--train 240 --heldout 60 --epochs 2]

Train and held-out questions are distinct questions of one seeded reasoning-gym draw (no question text shared).
Everything runs in this process on the default model in float32; timing figures depend on the machine's load.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log, parser  # noqa: E402

import reasoning_gym  # noqa: E402

from openafm.checkpoint.adapter import attach_adapter, read_adapter  # noqa: E402
from openafm.checkpoint.load import load_model  # noqa: E402
from openafm.data.conversations import read_conversations  # noqa: E402
from openafm.runtime.draft import load_draft, save_draft  # noqa: E402
from openafm.runtime.generate import GenerationStats, generate_tokens  # noqa: E402
from openafm.runtime.proposers import ProposerKind  # noqa: E402
from openafm.train.adapter_toolkit import AdapterConfig, answer_accuracy, train_adapter  # noqa: E402
from openafm.train.draft import DraftTrainConfig, train_draft  # noqa: E402

HINT = " Reply with the number only."
TASK = dict(min_terms=2, max_terms=2, min_digits=1, max_digits=1, operators=("+",))


def task_lines(n_train: int, n_heldout: int) -> tuple[list, list]:
    """Distinct questions of one seeded reasoning-gym draw: the first n_train train, the next n_heldout held out."""
    data = reasoning_gym.create_dataset("basic_arithmetic", size=3 * (n_train + n_heldout), seed=1, **TASK)
    seen, lines = set(), []
    for e in data:
        if e["question"] not in seen:
            seen.add(e["question"])
            lines.append([{"role": "user", "content": e["question"] + HINT},
                          {"role": "assistant", "content": e["answer"]}])
    if len(lines) < n_train + n_heldout:
        raise SystemExit(f"only {len(lines)} distinct questions; ask for fewer")
    return lines[:n_train], lines[n_train:n_train + n_heldout]


def acceptance(target, draft, tokenizer, convs, gamma: int) -> dict:
    proposed = accepted = 0
    for conv in convs:
        ids = tokenizer.encode(tokenizer.apply_chat_template(list(conv.messages[:-1]), add_generation_prompt=True))
        stats = GenerationStats()
        generate_tokens(target, [ids], max_new_tokens=12, gamma=gamma, stats=stats, speculate=ProposerKind.DRAFT,
                        draft=draft, eos_token_ids=set(tokenizer.eos_token_ids))
        proposed, accepted = proposed + stats.proposed, accepted + stats.accepted
    return {"acceptance_rate": accepted / proposed if proposed else float("nan"), "proposed": proposed}


def main() -> None:
    p = parser(__doc__.split("\n")[0])
    p.add_argument("--draft", default="out/drafts/smollm2", help="the general draft (openafm draft train)")
    p.add_argument("--train", type=int, default=120)
    p.add_argument("--heldout", type=int, default=60)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--gamma", type=int, default=4)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="openafm-adapter-bench-"))
    train_lines, held_lines = task_lines(args.train, args.heldout)
    for name, lines in (("train", train_lines), ("heldout", held_lines)):
        (work / f"{name}.jsonl").write_text("".join(json.dumps(c) + "\n" for c in lines))
    train, held = read_conversations(work / "train.jsonl"), read_conversations(work / "heldout.jsonl")
    lm = load_model("smollm2-135m-instruct", weights="float32")
    log(f"base accuracy on {len(held)} held-out questions")
    base_acc = answer_accuracy(lm.model, lm.tokenizer, held, max_new_tokens=12)
    base_model = lm.model
    config = AdapterConfig(epochs=args.epochs, batch_size=4, seq_len=128, lr=5e-4, patience=1)
    log(f"training the adapter: {len(train)} conversations, {args.epochs} epochs")
    t = time.perf_counter()
    fresh = load_model("smollm2-135m-instruct", weights="float32")        # training wraps its base in LoRA
    report = train_adapter(fresh, train, held, config, out=work / "task.safetensors", run_dir=work / "task.run",
                           base_name="smollm2-135m-instruct")
    train_s = time.perf_counter() - t
    adapted = attach_adapter(base_model, read_adapter(work / "task.safetensors"))
    adapter_acc = answer_accuracy(adapted, lm.tokenizer, held, max_new_tokens=12)
    log("adapter-matched draft")
    t = time.perf_counter()
    matched, draft_report = train_draft(adapted, lm.tokenizer, [c.prompt_text() for c in train],
                                        DraftTrainConfig(answer_tokens=12, epochs=4, minutes=3), target_name="task")
    draft_s = time.perf_counter() - t
    save_draft(work / "matched", matched)
    general = load_draft(args.draft, adapted)
    result = {
        "task": {"reasoning_gym": "basic_arithmetic", **{k: list(v) if isinstance(v, tuple) else v
                                                          for k, v in TASK.items()},
                 "hint": HINT, "train": len(train), "heldout": len(held), "seed": 1, "split": "distinct questions, first N train"},
        "base_accuracy": base_acc["accuracy"], "adapter_accuracy": adapter_acc["accuracy"],
        "examples": {"base": base_acc["examples"][:3], "adapter": adapter_acc["examples"][:3]},
        "adapter": {"rank": config.rank, "alpha": config.alpha, "targets": list(config.targets),
                    "bytes": report["adapter_bytes"], "train_seconds": train_s, "epochs": report["epochs"],
                    "best_epoch": report["best_epoch"], "train_tokens": report["train_tokens"]},
        "draft_acceptance_on_task": {
            "gamma": args.gamma,
            "general_draft": acceptance(adapted, general, lm.tokenizer, held, args.gamma),
            "adapter_matched_draft": acceptance(adapted, matched, lm.tokenizer, held, args.gamma)},
        "matched_draft": {"train_seconds": draft_s, "final_loss": draft_report["final_loss"],
                          "head_rows": draft_report["head_rows"]},
    }
    emit(result, args.json)
    if args.json:
        Path("docs/results").mkdir(parents=True, exist_ok=True)
        Path("docs/results/adapter.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
