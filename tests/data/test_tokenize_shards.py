"""`openafm data tokenize`: JSONL Documents -> token shards per domain / language, read back by the loader."""

import hashlib
import json
import shutil

import pytest

from openafm.cli import main
from openafm.data.document import Document
from openafm.data.loader import LoaderConfig, PackedLoader, find_shards
from openafm.data.mixture import MixtureConfig
from openafm.data.shards import ShardError, TokenShard
from openafm.data.tokenize_shards import tokenize_dir

TEXTS = {
    ("general", "en"): ["In the beginning was the word.", "The quick brown fox jumps over the lazy dog.",
                        "A third, somewhat longer English sentence about lighthouses and the sea."],
    ("code", None): ["def add(a, b):\n    return a + b\n", "for i in range(3):\n    print(i)\n"],
    ("multilingual", "de"): ["Der schnelle braune Fuchs springt über den faulen Hund.", "Guten Morgen!"],
    ("multilingual", "fr"): ["Le renard brun saute par-dessus le chien paresseux."],
}


def _write_jsonl(root):
    docs = []
    for (domain, lang), texts in TEXTS.items():
        for i, text in enumerate(texts):
            docs.append(Document(id=f"{domain}-{lang}-{i}", text=text, source="test", licence="CC0", domain=domain,
                                 lang=lang))
    for domain in {d.domain for d in docs}:
        (root / domain).mkdir(parents=True)
        with open(root / domain / "part-0.jsonl", "w") as f:
            for d in docs:
                if d.domain == domain:
                    f.write(json.dumps(d.to_json()) + "\n")


def test_cli_tokenizes_per_domain_and_language(tmp_path, tokenizer, capsys):
    _write_jsonl(tmp_path / "in")
    assert main(["data", "tokenize", str(tmp_path / "in"), "--out", str(tmp_path / "out"),
                 "--max-tokens-per-shard", "12"]) == 0
    assert "total: 8 documents" in capsys.readouterr().out
    for (domain, lang), texts in TEXTS.items():
        group = tmp_path / "out" / domain / (lang or "und")
        shards = [TokenShard.open(p) for p in find_shards(group)]
        got = [shard[i].tolist() for shard in shards for i in range(len(shard))]
        assert got == [tokenizer.encode(t) for t in texts], (domain, lang)
        assert all(s.header.domain == domain and s.header.lang == lang for s in shards)
        # a shard closes once it reaches 12 tokens, so it holds 12 tokens or fewer plus one document
        assert all(s.header.n_tokens - int(s.doc_lengths()[-1]) < 12 for s in shards)
    assert len(find_shards(tmp_path / "out" / "general")) >= 2
    loader = PackedLoader.from_dir(tmp_path / "out", MixtureConfig(weights={"general": 0.5, "code": 0.3,
                                                                            "multilingual": 0.2}),
                                   LoaderConfig(batch_size=2, seq_len=16))
    batch = loader.next_batch()
    assert batch.input_ids.shape == (2, 16) and int(batch.input_ids.max()) < tokenizer.vocab_size


def test_refuses_to_overwrite_and_bad_input(tmp_path, tokenizer):
    _write_jsonl(tmp_path / "in")
    first = tokenize_dir(tmp_path / "in", tmp_path / "out", tokenizer, progress=False)
    assert tokenize_dir(tmp_path / "in", tmp_path / "out", tokenizer, progress=False) == first   # resumes: all done
    with pytest.raises(ShardError, match=r"other settings.*max_tokens_per_shard was 67108864, now 100"):
        tokenize_dir(tmp_path / "in", tmp_path / "out", tokenizer, max_tokens_per_shard=100, progress=False)
    assert tokenize_dir(tmp_path / "in", tmp_path / "out", tokenizer, max_tokens_per_shard=100, progress=False,
                        overwrite=True) == first
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "mine.txt").write_text("not shards")
    with pytest.raises(ShardError, match="exists and is not empty, and no earlier `data tokenize` run wrote it"):
        tokenize_dir(tmp_path / "in", tmp_path / "other", tokenizer, progress=False)
    (tmp_path / "in" / "poetry").mkdir()
    with pytest.raises(ShardError, match="'poetry' is not a domain"):
        tokenize_dir(tmp_path / "in", tmp_path / "o2", tokenizer, progress=False)
    (tmp_path / "in" / "poetry").rmdir()
    (tmp_path / "in" / "math").mkdir()
    with open(tmp_path / "in" / "math" / "x.jsonl", "w") as f:
        f.write(json.dumps(Document(id="m", text="1+1", source="t", licence="CC0", domain="code").to_json()) + "\n")
    with pytest.raises(ShardError, match=r"x.jsonl:1: document 'm' has domain 'code' but sits in the 'math'"):
        tokenize_dir(tmp_path / "in", tmp_path / "o3", tokenizer, progress=False)
    assert main(["data", "tokenize", str(tmp_path / "nope"), "--out", str(tmp_path / "o4")]) == 2


def shard_digest(out) -> dict[str, str]:
    """sha256 of every file of every token shard, by path under out."""
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for shard in find_shards(out) for p in sorted(shard.iterdir())}


def test_each_file_is_a_job_and_a_crashed_job_is_redone(tmp_path, tokenizer):
    """Files tokenize into their own shards; a job killed after writing a shard but before its marker (and one
    killed mid-shard, leaving a writer's temporary directory) is redone from scratch, to the same bytes."""
    _write_jsonl(tmp_path / "in")
    with open(tmp_path / "in" / "general" / "part-1.jsonl", "w") as f:
        f.write(json.dumps(Document(id="g9", text="Another file, another job.", source="t", licence="CC0",
                                    domain="general", lang="en").to_json()) + "\n")
    out = tmp_path / "out"
    groups = tokenize_dir(tmp_path / "in", out, tokenizer, max_tokens_per_shard=12, progress=False)
    assert {(g.domain, g.lang): g.docs for g in groups} == {("code", None): 2, ("general", "en"): 4,
                                                            ("multilingual", "de"): 2, ("multilingual", "fr"): 1}
    assert sorted(p.name for p in (out / "general" / "en").iterdir())[-1] == "part-1-00000"
    before = shard_digest(out)
    (out / ".done" / "general" / "part-0.json").unlink()           # the crash came before this file's marker
    shutil.rmtree(out / "general" / "en" / "part-0-00001")          # ... and after some of its shards
    (out / "general" / "en" / ".part-0-00002.tmp-0123abcd").mkdir()  # ... with one half written
    mtime = (out / "code" / "und" / "part-0-00000" / "shard.json").stat().st_mtime_ns
    assert tokenize_dir(tmp_path / "in", out, tokenizer, max_tokens_per_shard=12, progress=False) == groups
    assert shard_digest(out) == before
    assert not list((out / "general" / "en").glob(".*"))
    assert (out / "code" / "und" / "part-0-00000" / "shard.json").stat().st_mtime_ns == mtime   # not redone
