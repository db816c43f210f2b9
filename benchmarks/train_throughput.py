"""Training throughput: openafm's Trainer step vs a minimal plain-PyTorch loop (AdamW, cross-entropy,
gradient clipping) on the same model, batch and sequence length, in interleaved rounds; tokens/s medians,
their ratio, and MFU (flops/token = 6 N + 12 sum_l heads * head_dim * min(window, T), see openafm.train.flops)
against this process's measured fp32 matmul peak. Also times the Trainer under bf16 autocast.

    python benchmarks/train_throughput.py --json
"""

from __future__ import annotations

import os
import sys
import tempfile

import torch
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, interleaved, log, median, parser  # noqa: E402

from openafm.models.build import build_model
from openafm.models.presets import get_preset
from openafm.train.config import TrainConfig
from openafm.train.flops import flops_per_token, measure_peak_flops
from openafm.train.init import scaled_normal_
from openafm.train.loop import Trainer
from openafm.train.synthetic import SyntheticLoader


def plain_loop(model, batches, lr: float):
    """The baseline: what a hand-written PyTorch loop does per step."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    it = iter(batches)

    def step():
        b = next(it)
        logits = model(b.input_ids, positions=b.positions)
        loss = F.cross_entropy(logits.flatten(0, 1), b.labels.flatten(), ignore_index=-100)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--preset", default="afm-ondevice-small")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--steps-per-round", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    config = get_preset(args.preset)
    peak = measure_peak_flops()
    run_dir = tempfile.mkdtemp(prefix="train-throughput-")

    def trainer(precision: str):
        torch.manual_seed(0)
        model = build_model(config)
        scaled_normal_(model)
        cfg = TrainConfig.from_dict(dict(model=args.preset, run_dir=run_dir, steps=10_000, batch_size=args.batch,
                                         seq_len=args.seq_len, peak_flops=peak, precision=precision, progress=False,
                                         optimizer=dict(lr=1e-3, grad_clip=1.0)))
        t = Trainer(cfg, model=model)
        batches = iter(t.loader)
        return lambda: t.train_step(batches)

    torch.manual_seed(0)
    base_model = build_model(config)
    scaled_normal_(base_model)
    base_model.train()
    base_step = plain_loop(base_model, SyntheticLoader(vocab_size=config.vocab_size, seq_len=args.seq_len,
                                                       global_batch=args.batch, seed=0), 1e-3)
    steps = {"openafm": trainer("float32"), "plain_pytorch": base_step,
             "openafm_bf16_autocast": trainer("bfloat16-autocast")}
    log(f"timing {list(steps)} on {args.preset}, batch {args.batch} x {args.seq_len}, {args.threads} thread(s)")

    def rounds(fn):
        return lambda: [fn() for _ in range(args.steps_per_round)]
    times = interleaved({k: rounds(v) for k, v in steps.items()}, repeats=args.repeats)
    tokens = args.batch * args.seq_len * args.steps_per_round
    tok_s = {k: tokens / median(v) for k, v in times.items()}
    fpt = flops_per_token(config, args.seq_len)
    emit({
        "preset": args.preset, "params": config.param_count(), "batch": args.batch, "seq_len": args.seq_len,
        "threads": args.threads, "repeats": args.repeats, "steps_per_round": args.steps_per_round,
        "tokens_per_s": tok_s,
        "ratio_openafm_over_plain": tok_s["openafm"] / tok_s["plain_pytorch"],
        "ratio_bf16_autocast_over_fp32": tok_s["openafm_bf16_autocast"] / tok_s["openafm"],
        "flops_per_token": fpt, "peak_flops_measured": peak,
        "mfu": {k: fpt * v / peak for k, v in tok_s.items()},
    }, args.json)


if __name__ == "__main__":
    main()
