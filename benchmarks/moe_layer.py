"""Mixture-of-experts layer (report §2.2): forward+backward time of the dropless grouped MoE
(openafm.nn.moe.MoE) against a naive per-expert loop over boolean masks, and against a dense SwiGLU
with the same active parameters (hidden = k * expert hidden), for E in {8, 16, 64} and k in {1, 2}.

    python benchmarks/moe_layer.py --json
"""

from __future__ import annotations

import os
import sys

import torch
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, interleaved, log, median, parser  # noqa: E402

from openafm.nn.mlp import SwiGLU
from openafm.nn.moe import MoE, MoEKernel


def naive_moe(moe: MoE, x: torch.Tensor) -> torch.Tensor:
    """The MoE as it is often first written: for every expert, a boolean mask of the tokens that chose it."""
    tokens = x.reshape(-1, moe.dim)  # [N, D]
    probs = F.linear(tokens, moe.router.weight).float().softmax(-1)  # [N, E]
    top_p, top_e = probs.topk(moe.top_k, dim=-1)  # [N, k]
    top_p = top_p / top_p.sum(-1, keepdim=True)
    # one weight tensor per expert, as with an nn.ModuleList of experts (indexing the stacked parameter
    # inside the loop would add a full-size zero gradient per expert to the backward, which is not the point)
    gate_ups, downs = moe.gate_up.unbind(0), moe.down.unbind(0)
    out = torch.zeros_like(tokens)
    for e in range(moe.n_experts):
        chose = top_e == e  # [N, k]
        mask = chose.any(-1)  # [N]
        if not mask.any():
            continue
        h = F.linear(tokens[mask], gate_ups[e])  # [n_e, 2H]
        gate, up = h.split(moe.hidden, dim=-1)
        y = F.linear(F.silu(gate) * up, downs[e])  # [n_e, D]
        weight = (top_p * chose).sum(-1)[mask].unsqueeze(-1)  # [n_e, 1]
        out[mask] += weight * y
    return out.view(x.shape)


def fwd_bwd(fn, x: torch.Tensor, grad: torch.Tensor, params: list[torch.nn.Parameter]):
    def run():
        for p in params:
            p.grad = None
        fn(x).backward(grad)
    return run


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--hidden", type=int, default=512, help="hidden width of one expert")
    p.add_argument("--tokens", type=int, default=2048)
    p.add_argument("--experts", type=int, nargs="+", default=[8, 16, 64])
    p.add_argument("--top-k", type=int, nargs="+", default=[1, 2])
    args = p.parse_args()

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, args.tokens, args.dim, generator=gen)
    grad = torch.randn(1, args.tokens, args.dim, generator=gen)
    runs = {}
    for n_experts in args.experts:
        for top_k in args.top_k:
            torch.manual_seed(0)
            moe = MoE(args.dim, args.hidden, n_experts, top_k)
            dense = SwiGLU(args.dim, top_k * args.hidden)
            params = [*moe.parameters(), *dense.parameters()]
            auto_kernel = moe.kernel

            def with_kernel(kernel):
                def fn(inp):
                    moe.kernel = kernel
                    return moe(inp)
                return fn

            with torch.no_grad():  # the grouped layer and the naive loop compute the same function
                diff = (with_kernel(None)(x) - naive_moe(moe, x)).abs().max().item()
            variants = {kernel.value: fwd_bwd(with_kernel(kernel), x, grad, params) for kernel in MoEKernel
                        if kernel is MoEKernel.SEGMENT_LOOP or auto_kernel is MoEKernel.GROUPED_MM}
            variants["naive_masks"] = fwd_bwd(lambda inp: naive_moe(moe, inp), x, grad, params)
            variants["dense_swiglu"] = fwd_bwd(dense, x, grad, params)
            log(f"E={n_experts} k={top_k}: {args.repeats} interleaved rounds of {', '.join(variants)} ...")
            times = {name: median(ts) for name, ts in interleaved(variants, args.repeats).items()}
            moe.kernel = None
            t_moe = times[auto_kernel.value]
            runs[f"E{n_experts}_k{top_k}"] = {
                "n_experts": n_experts, "top_k": top_k, "kernel": auto_kernel.value,
                "max_abs_diff_vs_naive": diff,
                "tokens_per_expert_max": int(moe.last_stats.tokens_per_expert.max()),
                "seconds": times,
                "naive_over_moe": times["naive_masks"] / t_moe, "target_naive_over_moe_at_E64": 2.0,
                "moe_over_dense": t_moe / times["dense_swiglu"], "target_moe_over_dense": 1.5,
                "segment_loop_over_moe": times[MoEKernel.SEGMENT_LOOP.value] / t_moe,
            }
    emit({"what": "forward+backward seconds, median", "dim": args.dim, "expert_hidden": args.hidden,
          "tokens": args.tokens, "dtype": "float32", "threads": torch.get_num_threads(),
          "grads": "set to None before each step (as optimizer.zero_grad() does): each backward allocates them anew",
          "torch": torch.__version__, "runs": runs}, args.json)


if __name__ == "__main__":
    main()
