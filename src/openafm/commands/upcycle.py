"""`openafm upcycle DENSE OUT`: sparse upcycling (report §4.3): a dense model's FFNs copied into experts with a router."""

from __future__ import annotations

from openafm.checkpoint.native import save_checkpoint
from openafm.commands.common import load_timed
from openafm.models.upcycle import upcycle_config, upcycle_state_dict


def register(subparsers) -> None:
    u = subparsers.add_parser("upcycle", help="sparse-upcycle a dense model into an MoE checkpoint (report §4.3)",
                       description="Turn every EVERY-th layer's dense FFN into EXPERTS copies of it with a top-k "
                                   "router. At step 0 the MoE model computes the dense model's function; train it "
                                   "to let the experts diverge. Writes a native openafm checkpoint.")
    u.add_argument("dense", help="dense model: preset, packaged model, .gguf file or checkpoint directory")
    u.add_argument("out", help="output checkpoint directory (written atomically)")
    u.add_argument("--experts", type=int, default=64, help="experts per MoE layer (default 64)")
    u.add_argument("--every", type=int, default=2, help="make every N-th layer MoE (default 2: every other layer)")
    u.add_argument("--top-k", type=int, default=2, help="experts per token (default 2)")
    u.add_argument("--seed", type=int, default=0, help="seed of the router's random initialisation")
    u.set_defaults(run=run_upcycle)


def run_upcycle(args) -> int:
    lm, _ = load_timed(args.dense)
    config = upcycle_config(lm.config, n_experts=args.experts, every=args.every, top_k=args.top_k)
    state = upcycle_state_dict({k: v.float() for k, v in lm.model.state_dict().items()}, config, seed=args.seed)
    save_checkpoint(args.out, config, state, tokenizer=lm.tokenizer,
                    extra={"upcycled_from": lm.source, "upcycle": {"experts": args.experts, "every": args.every,
                                                                   "top_k": args.top_k, "seed": args.seed}})
    moe_layers = [i for i, s in enumerate(config.layers) if s.ffn.value == "moe"]
    print(f"upcycled {lm.name}: {len(moe_layers)} MoE layers {moe_layers} x {args.experts} experts (top-{args.top_k}); "
          f"{lm.config.param_count() / 1e6:.1f}M -> {config.param_count() / 1e6:.1f}M parameters "
          f"({config.param_count(active=True) / 1e6:.1f}M active); wrote {args.out}")
    return 0
