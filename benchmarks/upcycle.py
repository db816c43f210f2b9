"""Sparse upcycling (report §4.3): the upcycled model's loss at step 0 equals the dense model's, and after
N training steps the upcycled MoE vs continuing the dense model for the same compute.

Both start from the same dense model, first trained for --warmup-steps on the same synthetic-but-
structured token stream (a fixed random bigram process, so there is something to learn); then the dense
copy and the upcycled copy each train --steps more steps on identical batches. "Same compute" here
means the same tokens and steps: the MoE's active FFN compute per token is top_k experts of the dense
FFN's size, so it spends top_k x the dense FFN FLOPs on its MoE layers; the JSON reports the active
parameter counts so the comparison can be read either way. The real-data recipe is the pipeline issue's.

    python benchmarks/upcycle.py --json
"""

from __future__ import annotations

import copy
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log, parser  # noqa: E402

from openafm.models.decoder import Decoder
from openafm.models.presets import get_preset
from openafm.models.upcycle import upcycle_config, upcycle_state_dict


def bigram_stream(vocab: int, seed: int):
    """Batches from a fixed random bigram process: each token's successor distribution is peaked."""
    g = torch.Generator().manual_seed(seed)
    table = torch.randn(vocab, vocab, generator=g) * 3.0
    probs = table.softmax(-1)

    def batch(n: int, t: int, step_seed: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(step_seed)
        out = torch.empty(n, t, dtype=torch.long)
        out[:, 0] = torch.randint(0, vocab, (n,), generator=gen)
        for i in range(1, t):
            out[:, i] = torch.multinomial(probs[out[:, i - 1]], 1, generator=gen)[:, 0]
        return out
    return batch


def lm_loss(model, ids: torch.Tensor) -> torch.Tensor:
    logits = model(ids[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), ids[:, 1:].reshape(-1))


def moe_aux(model) -> torch.Tensor:
    stats = [layer.ffn.last_stats for layer in model.layers if hasattr(layer.ffn, "last_stats")]
    return sum(s.aux_loss for s in stats) / max(len(stats), 1)


def train(model, batches, steps: int, lr: float, aux_weight: float = 0.0) -> list[float]:
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    losses = []
    for ids in batches[:steps]:
        loss = lm_loss(model, ids)
        total = loss + aux_weight * moe_aux(model) if aux_weight else loss
        opt.zero_grad()
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    return losses


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--preset", default="afm-ondevice-tiny")
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--warmup-steps", type=int, default=150)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    args = p.parse_args()

    torch.manual_seed(0)
    config = get_preset(args.preset)
    stream = bigram_stream(config.vocab_size, seed=0)
    log(f"dense warm-up for {args.warmup_steps} steps ...")
    dense = Decoder(config)
    train(dense, [stream(args.batch, args.seq, 10_000 + i) for i in range(args.warmup_steps)], args.warmup_steps, args.lr)

    moe_config = upcycle_config(config, n_experts=args.experts, every=2, top_k=args.top_k)
    moe = Decoder(moe_config)
    moe.load_state_dict(upcycle_state_dict(dense.state_dict(), moe_config))
    held_out = stream(32, args.seq, 999)
    with torch.no_grad():
        step0 = {"dense": lm_loss(dense, held_out).item(), "upcycled": lm_loss(moe, held_out).item()}

    batches = [stream(args.batch, args.seq, 20_000 + i) for i in range(args.steps)]
    log(f"continuing dense and upcycled for {args.steps} steps on the same batches ...")
    dense_more = copy.deepcopy(dense)
    dense_curve = train(dense_more, batches, args.steps, args.lr)
    moe_curve = train(moe, batches, args.steps, args.lr, aux_weight=0.01)
    with torch.no_grad():
        final = {"dense": lm_loss(dense_more, held_out).item(), "upcycled": lm_loss(moe, held_out).item()}
    result = {
        "preset": args.preset, "experts": args.experts, "top_k": args.top_k, "every": 2,
        "params": {"dense": config.param_count(), "upcycled": moe_config.param_count(),
                   "upcycled_active": moe_config.param_count(active=True)},
        "held_out_loss_step0": step0,
        "step0_abs_difference": abs(step0["dense"] - step0["upcycled"]),
        "held_out_loss_after": {"steps": args.steps, **final},
        "train_loss_last10_mean": {"dense": sum(dense_curve[-10:]) / 10, "upcycled": sum(moe_curve[-10:]) / 10},
        "upcycled_minus_dense_after": final["upcycled"] - final["dense"],
    }
    emit(result, args.json)


if __name__ == "__main__":
    main()
