"""The packed loader: against a naive packer, bit-exact resume, data-parallel ranks, the curriculum."""

import json

import numpy as np
import pytest
import torch

from openafm.data.batch import IGNORE_INDEX
from openafm.data.loader import LoaderConfig, PackedLoader, source_order
from openafm.data.mixture import Curriculum, MixtureConfig, MixtureSampler
from openafm.data.shards import ShardWriter, TokenShard
from openafm.errors import ConfigError

EOS = 1
VOCAB = 1000


def _shard(path, domain, lang, n_docs, seed, lo=1, hi=30):
    rng = np.random.default_rng(seed)
    docs = [rng.integers(2, VOCAB, size=int(rng.integers(lo, hi))) for _ in range(n_docs)]
    with ShardWriter(path, vocab_size=VOCAB, eos_id=EOS, domain=domain, lang=lang) as w:
        for d in docs:
            w.add(d)
    return TokenShard.open(path)


@pytest.fixture
def shards(tmp_path):
    return [_shard(tmp_path / "general-a", "general", "en", 20, 0),
            _shard(tmp_path / "general-b", "general", "en", 7, 1),
            _shard(tmp_path / "code", "code", None, 9, 2, hi=60),
            _shard(tmp_path / "de", "multilingual", "de", 12, 3),
            _shard(tmp_path / "fr", "multilingual", "fr", 5, 4)]


MIX = MixtureConfig(weights={"general": 0.5, "code": 0.3, "multilingual": 0.2}, language_temperature=2.0)


def _naive_rows(loader: PackedLoader, n_rows: int, seq_len: int):
    """Reference: draw documents one by one, concatenate doc + EOS, cut into rows of T + 1 with naive loops."""
    sources = loader.sources
    sampler = MixtureSampler(MIX, [s.stats() for s in sources], seed=loader.config.seed)
    cursors = [[0, 0] for _ in sources]
    stream, doc_of, first = [], [], []
    draw = 0
    while len(stream) < n_rows * (seq_len + 1):
        i = sampler.choose(draw, 0.0)
        draw += 1
        epoch, p = cursors[i]
        doc = int(source_order(loader.config.seed, sources[i].name, epoch, sources[i].n_docs)[p])
        cursors[i] = [epoch, p + 1] if p + 1 < sources[i].n_docs else [epoch + 1, 0]
        ids = list(sources[i].tokens(doc)) + [EOS]
        stream += ids
        doc_of += [draw] * len(ids)
        first += [True] + [False] * (len(ids) - 1)
    rows = []
    for r in range(n_rows):
        a = r * (seq_len + 1)
        tok, d, f = stream[a:a + seq_len + 1], doc_of[a:a + seq_len + 1], first[a:a + seq_len + 1]
        seg, pos = [0], [0]
        for j in range(1, seq_len + 1):
            same = d[j] == d[j - 1]
            seg.append(seg[-1] + (0 if same else 1))
            pos.append(pos[-1] + 1 if same else 0)
        labels = [IGNORE_INDEX if f[j + 1] else tok[j + 1] for j in range(seq_len)]
        rows.append((tok[:seq_len], labels, pos[:seq_len], seg[:seq_len]))
    return rows


def test_packing_matches_naive_reference(shards):
    loader = PackedLoader(shards, MIX, LoaderConfig(batch_size=3, seq_len=16, seed=5))
    batches = [next(iter(loader)) for _ in range(40)]  # 120 rows: several epochs of the small sources
    want = _naive_rows(loader, 120, 16)
    got = [tuple(getattr(b, f)[i].tolist() for f in ("input_ids", "labels", "positions", "segment_ids"))
           for b in batches for i in range(3)]
    assert got == want
    b = batches[0]
    assert b.input_ids.dtype == torch.long and b.input_ids.shape == (3, 16)
    assert (b.input_ids == EOS).any() and (b.labels == IGNORE_INDEX).any()


def test_labels_are_next_tokens_inside_documents(shards):
    loader = PackedLoader(shards, MIX, LoaderConfig(batch_size=4, seq_len=32))
    b = loader.next_batch()
    for i in range(4):
        for j in range(31):
            same_doc = b.segment_ids[i, j + 1] == b.segment_ids[i, j]
            if same_doc:
                assert b.labels[i, j] == b.input_ids[i, j + 1] and b.positions[i, j + 1] == b.positions[i, j] + 1
            else:  # the token before a document start is its previous document's EOS and has no target
                assert b.input_ids[i, j] == EOS and b.labels[i, j] == IGNORE_INDEX and b.positions[i, j + 1] == 0


def test_resume_is_bit_exact(shards):
    config = LoaderConfig(batch_size=2, seq_len=24, seed=11)
    straight = PackedLoader(shards, MIX, config)
    want = [straight.next_batch() for _ in range(9)]
    first = PackedLoader(shards, MIX, config)
    for _ in range(4):
        first.next_batch()
    state = json.loads(json.dumps(first.state_dict()))
    assert len(json.dumps(state)) < 2000
    resumed = PackedLoader(shards, MIX, config)
    resumed.load_state_dict(state)
    for k in range(4, 9):
        got = resumed.next_batch()
        for f in ("input_ids", "labels", "positions", "segment_ids"):
            assert torch.equal(getattr(got, f), getattr(want[k], f)), (k, f)


def test_ranks_partition_the_global_batch(shards):
    one = PackedLoader(shards, MIX, LoaderConfig(batch_size=6, seq_len=10, seed=2))
    ranks = [PackedLoader(shards, MIX, LoaderConfig(batch_size=2, seq_len=10, seed=2, rank=r, world_size=3))
             for r in range(3)]
    for _ in range(5):
        whole = one.next_batch()
        parts = [r.next_batch() for r in ranks]
        for f in ("input_ids", "labels", "positions", "segment_ids"):
            assert torch.equal(torch.cat([getattr(p, f) for p in parts]), getattr(whole, f))
    # A rank resumed from its own state continues its own share.
    state = ranks[1].state_dict()
    again = PackedLoader(shards, MIX, LoaderConfig(batch_size=2, seq_len=10, seed=2, rank=1, world_size=3))
    again.load_state_dict(state)
    assert torch.equal(again.next_batch().input_ids, ranks[1].next_batch().input_ids)


def test_state_from_another_loader_is_rejected(shards):
    a = PackedLoader(shards, MIX, LoaderConfig(batch_size=2, seq_len=10, rank=0, world_size=2))
    b = PackedLoader(shards, MIX, LoaderConfig(batch_size=2, seq_len=12, rank=1, world_size=2))
    with pytest.raises(ConfigError, match=r"seq_len: 10 vs 12, rank: 0 vs 1"):
        b.load_state_dict(a.state_dict())


def test_curriculum_raises_multilingual_share(shards):
    mix = MixtureConfig(weights={"general": 0.62, "code": 0.30, "multilingual": 0.08},
                        curriculum=Curriculum(start=0.08, end=0.30))
    with pytest.raises(ConfigError, match="total_steps"):
        PackedLoader(shards, mix, LoaderConfig(batch_size=4, seq_len=32))
    loader = PackedLoader(shards, mix, LoaderConfig(batch_size=8, seq_len=64, total_steps=100, seed=1))
    ml = {s.name for s in loader.sources if s.name.startswith("multilingual")}
    ml_tokens = {tuple(loader.sources[i].tokens(d).tolist())
                 for i, s in enumerate(loader.sources) if s.name in ml for d in range(s.n_docs)}

    def share(batches):
        # Count tokens by the document each segment came from (multilingual documents are recognisable).
        hit = total = 0
        for b in batches:
            for row, seg in zip(b.input_ids.tolist(), b.segment_ids.tolist(), strict=True):
                pieces = {}
                for t, s in zip(row, seg, strict=True):
                    pieces.setdefault(s, []).append(t)
                for piece in pieces.values():
                    body = tuple(piece[:-1] if piece[-1] == EOS else piece)
                    total += len(piece)
                    hit += len(piece) * any(body == doc[:len(body)] or body == doc[-len(body):] for doc in ml_tokens
                                            if body)
        return hit / total
    early = share([loader.next_batch() for _ in range(15)])
    for _ in range(70):
        loader.next_batch()
    late = share([loader.next_batch() for _ in range(15)])
    assert 0.03 < early < 0.16 and 0.20 < late < 0.42 and late > early + 0.1, (early, late)


def test_bad_config_names_the_value():
    with pytest.raises(ConfigError, match="rank 2 must be in 0 .. world_size - 1 = 1"):
        LoaderConfig(batch_size=1, seq_len=8, rank=2, world_size=2)
    with pytest.raises(ConfigError, match="seq_len 0"):
        LoaderConfig(batch_size=1, seq_len=0)
