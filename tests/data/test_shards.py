"""Token shards: round trip through the real tokenizer, dtype choice, atomic writes, corruption detection."""

import json

import numpy as np
import pytest

from openafm.data.document import Document
from openafm.data.shards import ShardError, ShardWriter, TokenShard, Verify, token_dtype, write_shard


def _write(path, docs, vocab_size=1000, eos_id=0, **kw):
    with ShardWriter(path, vocab_size=vocab_size, eos_id=eos_id, **kw) as w:
        for d in docs:
            w.add(d)
    return w.header


def test_round_trip_with_real_tokenizer(tmp_path, tokenizer):
    docs = [Document(id=f"d{i}", text=t, source="test", licence="CC0", domain="general", lang="en")
            for i, t in enumerate(["Hello world.", "", "The quick brown fox jumps over the lazy dog.", "x = 1 + 2"])]
    header = write_shard(tmp_path / "s", docs, tokenizer, domain="general", lang="en")
    shard = TokenShard.open(tmp_path / "s")
    want = [tokenizer.encode(d.text) for d in docs if d.text]
    assert len(shard) == 3 and header.n_empty_skipped == 1
    assert [shard[i].tolist() for i in range(3)] == want
    assert shard.tokens.dtype == np.uint16 and isinstance(shard.tokens, np.memmap)
    assert header.n_tokens == sum(map(len, want)) and header.eos_id == tokenizer.eos_token_id
    assert shard.doc_lengths().tolist() == [len(w) for w in want]
    assert tokenizer.decode(shard[1].tolist()) == docs[2].text


def test_write_shard_rejects_wrong_domain(tmp_path, tokenizer):
    doc = Document(id="c1", text="print(1)", source="t", licence="CC0", domain="code")
    with pytest.raises(ShardError, match="'c1' has domain 'code'"):
        write_shard(tmp_path / "s", [doc], tokenizer, domain="general")
    assert not any(tmp_path.iterdir())  # nothing left behind, not even the temporary directory


def test_dtype_follows_vocab(tmp_path):
    assert token_dtype(65536) == np.uint16 and token_dtype(65537) == np.uint32
    _write(tmp_path / "big", [[70000, 3, 65535]], vocab_size=100_000)
    shard = TokenShard.open(tmp_path / "big")
    assert shard.tokens.dtype == np.uint32 and shard[0].tolist() == [70000, 3, 65535]
    assert (tmp_path / "big" / "tokens.bin").stat().st_size == 12


def test_token_outside_vocab_rejected_on_write(tmp_path):
    with pytest.raises(ShardError, match="token id 1000, outside the vocabulary 0 .. 999"):
        _write(tmp_path / "s", [[1, 2], [5, 1000]])
    assert not (tmp_path / "s").exists() and not any(tmp_path.iterdir())


def test_atomic_overwrite(tmp_path):
    _write(tmp_path / "s", [[1, 2, 3]])
    with pytest.raises(ShardError, match="already exists"):
        ShardWriter(tmp_path / "s", vocab_size=10, eos_id=0)
    with pytest.raises(RuntimeError):
        with ShardWriter(tmp_path / "s", vocab_size=1000, eos_id=0, overwrite=True) as w:
            w.add([9, 9])
            raise RuntimeError("interrupted")
    assert TokenShard.open(tmp_path / "s")[0].tolist() == [1, 2, 3]  # the old shard is untouched
    _write(tmp_path / "s", [[4]], overwrite=True)
    assert TokenShard.open(tmp_path / "s")[0].tolist() == [4]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]


def test_truncated_shard(tmp_path):
    _write(tmp_path / "s", [[1, 2, 3], [4, 5]])
    path = tmp_path / "s" / "tokens.bin"
    path.write_bytes(path.read_bytes()[:-2])
    with pytest.raises(ShardError, match=r"tokens.bin: 8 bytes, but the header says 5 tokens x 2 bytes = 10 \(truncated\)"):
        TokenShard.open(tmp_path / "s", verify=Verify.SIZES)


def test_checksum_mismatch(tmp_path):
    _write(tmp_path / "s", [[1, 2, 3], [4, 5]])
    path = tmp_path / "s" / "tokens.bin"
    data = bytearray(path.read_bytes())
    data[0] ^= 1
    path.write_bytes(bytes(data))
    TokenShard.open(tmp_path / "s", verify=Verify.SIZES)  # sizes alone cannot see it
    with pytest.raises(ShardError, match="tokens.bin: sha256 .* does not match"):
        TokenShard.open(tmp_path / "s")


def test_token_id_above_vocab_in_file(tmp_path):
    _write(tmp_path / "s", [[1, 2, 3]])
    header_path = tmp_path / "s" / "shard.json"
    header = json.loads(header_path.read_text())
    header["vocab_size"] = 3  # ids 1..3 now include 3 >= vocab
    header_path.write_text(json.dumps(header))
    with pytest.raises(ShardError, match="token id 3 near index 0 is >= vocab_size 3"):
        TokenShard.open(tmp_path / "s")


def test_bad_offsets_and_header(tmp_path):
    _write(tmp_path / "s", [[1, 2, 3], [4, 5]])
    (tmp_path / "s" / "offsets.bin").write_bytes(np.array([0, 4, 5], dtype="<u8").tobytes())
    TokenShard.open(tmp_path / "s", verify=Verify.SIZES)
    (tmp_path / "s" / "offsets.bin").write_bytes(np.array([0, 6, 5], dtype="<u8").tobytes())
    with pytest.raises(ShardError, match="offsets.bin: offsets must rise strictly"):
        TokenShard.open(tmp_path / "s", verify=Verify.SIZES)
    (tmp_path / "s" / "shard.json").write_text("{")
    with pytest.raises(ShardError, match="shard.json: not valid JSON"):
        TokenShard.open(tmp_path / "s")
    with pytest.raises(ShardError, match="missing"):
        TokenShard.open(tmp_path / "nothing")
