"""`openafm qat MODEL OUT` (2-bit QAT on the trainer) and `openafm recover BASE OUT.safetensors` (LoRA
quality recovery on the compressed base)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from openafm.checkpoint.load import load_model
from openafm.compress.qat import QATSpec
from openafm.compress.qat_train import build_qat_trainer, save_qat_outputs
from openafm.compress.recovery import build_recovery_trainer, save_recovery_adapter
from openafm.eval.texts import english_text
from openafm.train.config import TrainConfig
from openafm.train.token_loader import TokenArrayLoader

QAT_EPILOG = """writes:
  OUT/model/                  native checkpoint of the QAT model, fake-quant baked in (EMA weights unless
                              --ema-decay none); `openafm.load(OUT/model)` and `openafm recover` read it
  OUT/quantized.safetensors   the exported QuantizedWeights (codes uint8, scales, metadata) for packing
  OUT/run/                    the trainer's run dir: metrics.jsonl, checkpoints (--resume continues them)

example:
  openafm qat smollm2-135m-instruct out/qat2 --bits 2 --steps 300 --batch-size 8 --seq-len 256
  openafm recover out/qat2/model out/qat2/recovery.safetensors --rank 16 --steps 200
"""


def _common(p) -> None:
    p.add_argument("--data", default="english-train",
                   help="training text: 'english-train' (the train split of openafm.eval.texts; the held-out "
                        "split is never trained on) or a UTF-8 text file, tokenized with the model's tokenizer")
    p.add_argument("--steps", type=int, default=200, help="optimizer steps (default 200)")
    p.add_argument("--batch-size", type=int, default=8, help="sequences per step (default 8)")
    p.add_argument("--seq-len", type=int, default=256, help="tokens per sequence (default 256)")
    p.add_argument("--lr", type=float, default=None, help="peak AdamW learning rate")
    p.add_argument("--warmup", type=int, default=10, help="linear warm-up steps, then cosine decay (default 10)")
    p.add_argument("--kd-top-k", type=int, default=None,
                   help="distil over the teacher's top-k tokens only (default: the full distribution)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N (default cpu)")
    p.add_argument("--checkpoint-every", type=int, default=50, help="training checkpoint every n steps (default 50)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--resume", action="store_true", help="continue the run from its newest checkpoint")


def register(sub) -> None:
    q = sub.add_parser("qat", help="quantization-aware training (2-bit weights, learnable clipping, KD, EMA)",
                       description="QAT of MODEL on the project's trainer (report §6): every weight fake-quantized "
                                   "with a learnable clipping factor (Newton-Raphson init), the embedding table at "
                                   "4 bits per row, distilled from the unquantized model, AdamW with weight decay 0 "
                                   "on the QAT parameters, and an EMA of the weights used for the outputs.",
                       epilog=QAT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("model", help="the fp32 model: a packaged name, preset or checkpoint path")
    q.add_argument("out", help="output directory")
    q.add_argument("--bits", type=int, default=2, help="weight bits (2, 3, 4 or 8; default 2)")
    q.add_argument("--levels", default="balanced", choices=["balanced", "unbalanced"],
                   help="level set: balanced {-1.5,-0.5,0.5,1.5}·s (default) or unbalanced {-2,-1,0,1}·s")
    q.add_argument("--embed-bits", default="4", help="embedding-table bits, per row (default 4; 'none' keeps fp32)")
    q.add_argument("--kernel", default="compiled", choices=["compiled", "eager"],
                   help="fake-quant kernel: compiled (torch.compile, fused; default) or eager (plain torch ops)")
    q.add_argument("--ema-decay", default="0.99", help="EMA decay of the weights (default 0.99; 'none': no EMA)")
    _common(q)
    q.set_defaults(run=_cmd_qat)

    r = sub.add_parser("recover", help="train LoRA quality-recovery adapters on a compressed base",
                       description="Train rank-r LoRA adapters on every linear layer of the frozen compressed BASE "
                                   "(a native checkpoint, e.g. `openafm qat`'s OUT/model or an RTN model), distilled "
                                   "from the unquantized teacher on the same text; writes an adapter file tied to "
                                   "BASE's weights fingerprint (fm.SystemLanguageModel(adapter=...) runs it).",
                       epilog=QAT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("base", help="the compressed base model (checkpoint directory)")
    r.add_argument("out", help="adapter file to write (.safetensors)")
    r.add_argument("--rank", type=int, default=16, help="LoRA rank (default 16)")
    r.add_argument("--alpha", type=float, default=None, help="LoRA alpha (default 2 x rank)")
    r.add_argument("--teacher", default=None,
                   help="the unquantized model (default: the source model recorded by `openafm qat` in BASE)")
    r.add_argument("--run-dir", default=None, help="trainer run dir (default OUT without suffix + '.run')")
    _common(r)
    r.set_defaults(run=_cmd_recover)


def _none_or(value: str, kind):
    return None if value.lower() == "none" else kind(value)


def train_config(args, *, model: str, teacher: str, run_dir: str, lr: float, weight_decay: float):
    return TrainConfig.from_dict(dict(
        model=model, run_dir=run_dir, steps=args.steps, batch_size=args.batch_size, seq_len=args.seq_len,
        seed=args.seed, device=args.device, init="keep",
        objective=dict(kind="kd", teacher=teacher, kd_kind="top-k" if args.kd_top_k else "full", top_k=args.kd_top_k),
        optimizer=dict(lr=lr, weight_decay=weight_decay, grad_clip=1.0),
        schedule=dict(kind="warmup-cosine", warmup_steps=min(args.warmup, args.steps - 1)),
        checkpoint=dict(every=args.checkpoint_every, keep=2)))


def text_loader(args, config, tokenizer_model: str):
    """A TokenArrayLoader over --data tokenized with `tokenizer_model`'s tokenizer."""
    if args.data == "english-train":
        text = english_text("train")
    elif Path(args.data).is_file():
        text = Path(args.data).read_text(encoding="utf-8")
    else:
        raise ValueError(f"--data {args.data!r} is neither 'english-train' nor a text file")
    lm = load_model(tokenizer_model)
    if lm.tokenizer is None:
        raise ValueError(f"model {tokenizer_model!r} has no tokenizer to tokenize --data with")
    return TokenArrayLoader(lm.tokenizer.encode(text), seq_len=config.seq_len, global_batch=config.batch_size, seed=config.seed)


def _cmd_qat(args) -> int:
    spec = QATSpec(bits=args.bits, levels=args.levels, embed_bits=_none_or(args.embed_bits, int), kernel=args.kernel)
    out = Path(args.out)
    config = train_config(args, model=args.model, teacher=args.model, run_dir=str(out / "run"),
                          lr=args.lr or 1e-4, weight_decay=0.1)
    lm = load_model(args.model, seed=args.seed)
    loader = text_loader(args, config, args.model)
    trainer = build_qat_trainer(config, spec=spec, ema_decay=_none_or(args.ema_decay, float), loader=loader,
                                model=lm.model)
    records = trainer.run(resume=args.resume)
    paths = save_qat_outputs(trainer, out, tokenizer=lm.tokenizer,
                             info={"bits": spec.bits, "levels": spec.levels.value, "embed_bits": spec.embed_bits,
                                   "ema_decay": args.ema_decay})
    last = records[-1] if records else {}
    print(f"QAT {spec.bits}-bit {spec.levels.value}: {trainer.step} steps, last loss {last.get('loss', float('nan')):.4f}; "
          f"wrote {', '.join(str(p) for p in paths.values())}")
    return 0


def _cmd_recover(args) -> int:

    base = Path(args.base)
    teacher = args.teacher
    if teacher is None:
        meta = json.loads((base / "config.json").read_text()) if (base / "config.json").is_file() else {}
        teacher = meta.get("qat", {}).get("source_model")
        if teacher is None:
            raise ValueError(f"{base} records no QAT source model; pass --teacher (the unquantized model)")
    out = Path(args.out)
    run_dir = args.run_dir or str(out.with_suffix("")) + ".run"
    config = train_config(args, model=str(base), teacher=teacher, run_dir=run_dir, lr=args.lr or 1e-3,
                          weight_decay=0.0)
    loader = text_loader(args, config, str(base))
    trainer, fingerprint = build_recovery_trainer(config, rank=args.rank, alpha=args.alpha, loader=loader)
    records = trainer.run(resume=args.resume)
    path = save_recovery_adapter(trainer, out, fingerprint)
    last = records[-1] if records else {}
    print(f"recovery LoRA rank {args.rank}: {trainer.step} steps, last loss {last.get('loss', float('nan')):.4f}; "
          f"wrote {path}")
    return 0
