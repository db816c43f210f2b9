"""Track parallelism (PT-MoE, report §2.2) vs Megatron tensor parallelism on 2 gloo processes: counted
all-reduces per forward pass (L/D vs 2L), per training step and their bytes, and the median step time
(forward + backward) of each, for two models of the same total width with dense FFNs everywhere.

    python benchmarks/track_parallel.py --json

Run plainly, it re-launches itself under `torchrun --standalone --nproc_per_node 2` and prints rank 0's
result. Each process runs with 1 thread (2 processes on a 2-core machine).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time

import torch
import torch.distributed as dist
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, log, median, parser  # noqa: E402

from openafm.distributed.collectives import CollectiveCounter, backend_for
from openafm.distributed.tensor_parallel import TensorParallelDecoder
from openafm.distributed.track_parallel import TrackParallel
from openafm.models.decoder import Decoder
from openafm.models.plan import FFNKind
from openafm.models.presets import afm_server_small
from openafm.models.pt_moe import PTMoE, PTMoEConfig, server_track_plan

WORLD_SIZE = 2


def arguments():
    p = parser(__doc__)
    p.add_argument("--tracks", type=int, default=2)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--layers", type=int, default=8, help="layers per track = decoder layers")
    p.add_argument("--block-depth", type=int, default=4)
    p.add_argument("--heads-per-track", type=int, default=4)
    p.add_argument("--kv-heads-per-track", type=int, default=2)
    p.add_argument("--ffn-per-track", type=int, default=512)
    p.add_argument("--window", type=int, default=128)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=4)
    return p.parse_args()


def configs(args):
    """The PT config (n tracks of h heads and FFN f, all dense) and a dense decoder of the same total width
    (n h heads, FFN n f) and depth, so each rank does the same arithmetic in both."""
    dense_plan = [dataclasses.replace(s, ffn=FFNKind.DENSE) for s in server_track_plan(args.layers, window=args.window)]
    track = dataclasses.replace(afm_server_small().track, vocab_size=args.vocab, dim=args.dim,
                                n_heads=args.heads_per_track, n_kv_heads=args.kv_heads_per_track,
                                head_dim=args.dim // args.heads_per_track, ffn_hidden=args.ffn_per_track,
                                max_seq_len=args.seq, layers=dense_plan, moe=None)
    pt = PTMoEConfig(n_tracks=args.tracks, block_depth=args.block_depth, track=track)
    decoder = dataclasses.replace(track, n_heads=args.tracks * args.heads_per_track,
                                  n_kv_heads=args.tracks * args.kv_heads_per_track,
                                  ffn_hidden=args.tracks * args.ffn_per_track)
    return pt, decoder


def train_step(model, ids, targets) -> None:
    model.zero_grad(set_to_none=True)
    logits = model(ids)                                                        # [B, T, V]
    F.cross_entropy(logits.flatten(0, 1), targets.flatten()).backward()


def counted_step(model, ids, targets) -> dict:
    with CollectiveCounter() as counted:
        train_step(model, ids, targets)
    return counted.as_dict()


def timed(variants: dict, repeats: int, warmup: int = 1) -> dict[str, list[float]]:
    """Interleaved rounds; both ranks start each step together (barrier, untimed); a step's time is the
    slower rank's."""
    local = {name: [] for name in variants}
    for round_ in range(warmup + repeats):
        for name, fn in variants.items():
            dist.barrier()
            t = time.perf_counter()
            fn()
            if round_ >= warmup:
                local[name].append(time.perf_counter() - t)
    out = {}
    for name, times in local.items():
        t = torch.tensor(times, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        out[name] = t.tolist()
    return out


def run_rank(args) -> dict | None:
    torch.set_num_threads(1)
    device = torch.device("cpu")
    dist.init_process_group(backend_for(device))
    rank, world = dist.get_rank(), dist.get_world_size()
    pt_config, dec_config = configs(args)

    torch.manual_seed(0)
    pt_full, dec_full = PTMoE(pt_config), Decoder(dec_config)
    n_pt, n_dec = pt_full.num_parameters(), dec_full.num_parameters()
    track = TrackParallel(pt_full)                  # takes pt_full over, releases the other rank's track
    tensor = TensorParallelDecoder.from_decoder(dec_full)
    del dec_full
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), generator=gen)
    targets = torch.randint(0, args.vocab, (args.batch, args.seq), generator=gen)

    counts = {"track_parallel": counted_step(track, ids, targets),
              "tensor_parallel": counted_step(tensor, ids, targets)}
    if rank == 0:
        log(f"{args.repeats} interleaved training steps of each (batch {args.batch} x seq {args.seq}) ...")
    times = timed({"track_parallel": lambda: train_step(track, ids, targets),
                   "tensor_parallel": lambda: train_step(tensor, ids, targets)}, args.repeats)
    dist.destroy_process_group()
    if rank != 0:
        return None

    wire = 2 * (world - 1) / world                   # a ring all-reduce's traffic per rank, x payload
    def report(name: str, per_rank_params: int, total_params: int) -> dict:
        c = counts[name]
        step_bytes = c["forward_bytes"] + c["backward_bytes"]
        return {"total_params": total_params, "params_per_rank": per_rank_params,
                "forward_all_reduces_per_forward": c["forward_calls"],
                "backward_all_reduces_per_step": c["backward_calls"],
                "all_reduce_payload_bytes_per_step": step_bytes,
                "ring_bytes_sent_per_rank_per_step": int(wire * step_bytes),
                "step_seconds_median": median(times[name]), "step_seconds": times[name]}

    tracks = report("track_parallel", sum(p.numel() for p in track.parameters()), n_pt)
    megatron = report("tensor_parallel", tensor.num_parameters(), n_dec)
    return {
        "world_size": world, "backend": backend_for(device), "device": device.type,
        "threads_per_process": torch.get_num_threads(),
        "note": "2 processes x 1 thread on a 2-core CPU; gloo all-reduce over loopback. Both models have the "
                "same total width and depth with dense FFNs, so each rank does the same arithmetic; the "
                "difference is communication. Step = forward + cross-entropy + backward, no optimizer.",
        "shape": {"tracks": args.tracks, "dim": args.dim, "layers": args.layers, "block_depth": args.block_depth,
                  "heads_per_track": args.heads_per_track, "kv_heads_per_track": args.kv_heads_per_track,
                  "ffn_per_track": args.ffn_per_track, "decoder_heads": dec_config.n_heads,
                  "decoder_kv_heads": dec_config.n_kv_heads, "decoder_ffn": dec_config.ffn_hidden,
                  "window": args.window, "vocab": args.vocab, "batch": args.batch, "seq": args.seq},
        "expected_forward_all_reduces": {"track_parallel": args.layers // args.block_depth,
                                         "tensor_parallel": 2 * args.layers},
        "track_parallel": tracks,
        "tensor_parallel": megatron,
        "ratio": {"forward_all_reduces_tensor_over_track": megatron["forward_all_reduces_per_forward"]
                  / tracks["forward_all_reduces_per_forward"],
                  "bytes_per_step_tensor_over_track": megatron["all_reduce_payload_bytes_per_step"]
                  / tracks["all_reduce_payload_bytes_per_step"],
                  "step_time_tensor_over_track": megatron["step_seconds_median"] / tracks["step_seconds_median"]},
    }


def relaunch_under_torchrun() -> dict:
    """Run this script on 2 processes with torchrun; rank 0 prints its result as one JSON line."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(WORLD_SIZE),
           os.path.abspath(__file__), *sys.argv[1:]]
    log("launching: " + " ".join(cmd[1:]))
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if done.returncode:
        raise SystemExit(f"torchrun exited with status {done.returncode}; see the ranks' errors above")
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if len(lines) != 1:
        raise SystemExit(f"expected one JSON line from rank 0, got stdout:\n{done.stdout}")
    return json.loads(lines[0])


def main() -> None:
    args = arguments()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        result = run_rank(args)
        if result is not None:
            print(json.dumps(result), flush=True)
        return
    emit(relaunch_under_torchrun(), args.json)


if __name__ == "__main__":
    main()
