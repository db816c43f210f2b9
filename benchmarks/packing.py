"""Sequence packing (report §3 data, §4 pretraining): how much of a training row carries a loss target when
documents are packed (openafm.data.loader) versus one padded, truncated document per row, and the loader's
throughput beside a plain-Python packer producing the same rows.

Documents: the sections of the Debian Reference (real English text), tokenized with the default tokenizer
into a token shard.

    python benchmarks/packing.py --json
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from _common import emit, interleaved, log, median, parser  # noqa: E402

from openafm.data.batch import IGNORE_INDEX, Batch
from openafm.data.loader import LoaderConfig, PackedLoader
from openafm.data.mixture import MixtureConfig
from openafm.data.shards import TokenShard, write_shard
from openafm.checkpoint.load import load_tokenizer
from openafm.eval.texts import debian_reference_sections


def naive_batches(shard: TokenShard, order: list[int], eos: int, batch: int, seq_len: int, n_batches: int):
    """Baseline packer: Python lists, one token at a time."""
    stream, first = [], []
    for d in order:
        ids = shard[d].tolist() + [eos]
        stream += ids
        first += [True] + [False] * (len(ids) - 1)
        if len(stream) >= n_batches * batch * (seq_len + 1):
            break
    out = []
    for b in range(n_batches):
        rows = []
        for r in range(batch):
            a = (b * batch + r) * (seq_len + 1)
            tok, f = stream[a:a + seq_len + 1], first[a:a + seq_len + 1]
            seg, pos = [0], [0]
            for j in range(1, seq_len + 1):
                seg.append(seg[-1] + f[j])
                pos.append(0 if f[j] else pos[-1] + 1)
            labels = [IGNORE_INDEX if f[j + 1] else tok[j + 1] for j in range(seq_len)]
            rows.append((tok[:seq_len], labels, pos[:seq_len], seg[:seq_len]))
        out.append(Batch(**{k: torch.tensor([r[i] for r in rows]) for i, k in
                            enumerate(("input_ids", "labels", "positions", "segment_ids"))}))
    return out


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--batches", type=int, default=20)
    args = p.parse_args()

    tokenizer = load_tokenizer("default")
    texts = [text for _, text in debian_reference_sections() if text.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        log(f"tokenizing {len(texts)} Debian Reference sections")
        write_shard(Path(tmp) / "general", texts, tokenizer, domain="general", lang="en")
        shard = TokenShard.open(Path(tmp) / "general")
        lengths = shard.doc_lengths()
        t = args.seq_len
        mix = MixtureConfig(weights={"general": 1.0})
        config = LoaderConfig(batch_size=args.batch_size, seq_len=t, seed=0)

        # Utilisation: the share of row slots that carry a loss target.
        loader = PackedLoader([shard], mix, config)
        batches = [loader.next_batch() for _ in range(args.batches)]
        packed_util = float(np.mean([(b.labels != IGNORE_INDEX).float().mean() for b in batches]))
        targets_padded = np.minimum(lengths, t + 1) - 1                      # one document per row, truncated
        padded_util = float(targets_padded.sum() / (len(lengths) * t))
        truncated = float(np.maximum(lengths - (t + 1), 0).sum() / lengths.sum())

        # The naive packer sees the loader's document order (one source, one epoch), so rows are identical.
        order = [loader.sources[0].doc_at(0, 0, i) for i in range(loader.sources[0].n_docs)]
        ref = naive_batches(shard, order, tokenizer.eos_token_id, args.batch_size, t, args.batches)
        same = all(torch.equal(getattr(a, f), getattr(b, f)) for a, b in zip(batches, ref)
                   for f in ("input_ids", "labels", "positions", "segment_ids"))
        if not same:
            raise SystemExit("the naive packer and PackedLoader disagree")

        def run_loader():
            ld = PackedLoader([shard], mix, config)
            for _ in range(args.batches):
                ld.next_batch()

        times = interleaved({"openafm": run_loader,
                             "naive": lambda: naive_batches(shard, order, tokenizer.eos_token_id, args.batch_size, t,
                                                            args.batches)}, args.repeats)
        tokens = args.batches * args.batch_size * t
        result = {
            "documents": int(len(lengths)), "tokens": int(lengths.sum()),
            "doc_tokens_median": float(np.median(lengths)), "seq_len": t,
            "utilisation": {"packed": packed_util, "padded_one_doc_per_row": padded_util,
                            "ratio": packed_util / padded_util, "padded_tokens_truncated": truncated},
            "loader_tokens_per_s": {"openafm": tokens / median(times["openafm"]),
                                    "naive_python": tokens / median(times["naive"]),
                                    "ratio": median(times["naive"]) / median(times["openafm"])},
            "identical_rows": same,
        }
    emit(result, args.json)


if __name__ == "__main__":
    main()
