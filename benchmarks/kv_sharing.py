"""KV-cache sharing (report §2.1): cache bytes at 4k context and prefill time of a 1k-token prompt,
on-device preset vs the same model with every layer owning its K/V.

    python benchmarks/kv_sharing.py --json
"""

from __future__ import annotations

import dataclasses
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, interleaved, log, median, parser  # noqa: E402

from openafm.models.decoder import Decoder, Logits
from openafm.models.presets import get_preset, kv_sharing_plan
from openafm.runtime.kv_cache import KVCache


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--preset", default="afm-ondevice-small")
    p.add_argument("--context", type=int, default=4096)
    p.add_argument("--prompt-tokens", type=int, default=1024)
    args = p.parse_args()

    shared_cfg = get_preset(args.preset)
    plain_cfg = dataclasses.replace(shared_cfg, layers=kv_sharing_plan(shared_cfg.n_layers, share=False))
    torch.manual_seed(0)
    shared, plain = Decoder(shared_cfg).eval(), Decoder(plain_cfg).eval()
    # The same shared model with the prefill bypass switched off (its Block-2 layers run every position),
    # to separate the bypass's saving from that of the missing K/V projections.
    no_bypass = Decoder(shared_cfg).eval()
    no_bypass.load_state_dict(shared.state_dict())
    no_bypass.bypass_from = shared_cfg.n_layers

    bytes_shared = KVCache(shared_cfg, batch_size=1, capacity=args.context).nbytes()
    bytes_plain = KVCache(plain_cfg, batch_size=1, capacity=args.context).nbytes()

    ids = torch.randint(0, shared_cfg.vocab_size, (1, args.prompt_tokens), generator=torch.Generator().manual_seed(0))

    def prefill(model, logits):
        def run():
            cache = KVCache(model.config, batch_size=1, capacity=args.prompt_tokens)
            with torch.inference_mode():
                model(ids, cache=cache, logits=logits)
        return run

    log(f"prefill of {args.prompt_tokens} tokens, {args.repeats} interleaved rounds ...")
    times = interleaved({"shared": prefill(shared, Logits.LAST), "plain": prefill(plain, Logits.LAST),
                         "shared_no_bypass": prefill(no_bypass, Logits.LAST)}, args.repeats)
    t_shared, t_plain, t_nobypass = (median(times[k]) for k in ("shared", "plain", "shared_no_bypass"))
    result = {
        "preset": args.preset,
        "layers": shared_cfg.n_layers,
        "sharing_layers": sum(1 for s in shared_cfg.layers if not s.owns_kv),
        "threads": torch.get_num_threads(),
        "kv_cache_bytes": {"context": args.context, "shared": bytes_shared, "plain": bytes_plain,
                           "reduction": 1 - bytes_shared / bytes_plain, "target_reduction": 0.375},
        "prefill_seconds": {"prompt_tokens": args.prompt_tokens, "shared": t_shared, "plain": t_plain,
                            "shared_without_bypass": t_nobypass,
                            "reduction": 1 - t_shared / t_plain, "target_reduction": 0.30,
                            "bypass_share_of_reduction": (t_nobypass - t_shared) / max(t_plain - t_shared, 1e-9)},
    }
    emit(result, args.json)


if __name__ == "__main__":
    main()
