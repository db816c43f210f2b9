"""train_bpe: every merge the trainer chose is a most frequent pair at its step (naive recount), ids are
laid out as documented, any text round-trips byte-exactly, and the saved files load back identically."""

from __future__ import annotations

from collections import Counter

import pytest

from openafm.errors import ConfigError
from openafm.tokenizer import Tokenizer
from openafm.tokenizer.train import BPETrainConfig, PreTokenizerKind, train_bpe

CORPUS = [
    "the cat sat on the mat with the other cat",
    "a theory of the thermal theatre: there, then, the theme",
    "catalogue categories scatter; mathematics matters 1234 5678",
    "Der Mann sah den Hund. Die Katze schläft. Über alles.",
] * 3


def _config(**changes) -> BPETrainConfig:
    return BPETrainConfig(**{"vocab_size": 330, "min_frequency": 1, "special_tokens": ["<s>", "</s>", "<pad>"],
                             "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>",
                             "show_progress": False, **changes})


def test_every_merge_is_a_most_frequent_pair():
    tok = train_bpe(CORPUS, _config())
    pieces = Counter(p for text in CORPUS for p, _ in tok.backend.pre_tokenizer.pre_tokenize_str(text))
    words = {piece: list(piece) for piece in pieces}                 # naive reference: symbols as strings
    merges = [tuple(m) for m in __import__("json").loads(tok.backend.to_str())["model"]["merges"]]
    assert len(merges) == tok.vocab_size - 3 - 256
    for a, b in merges:
        counts = Counter()
        for piece, symbols in words.items():
            for pair in zip(symbols, symbols[1:], strict=False):  # consecutive pairs
                counts[pair] += pieces[piece]
        assert counts[(a, b)] == max(counts.values()), (a, b)
        for piece, symbols in words.items():                         # apply the merge, left to right
            out, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == (a, b):
                    out.append(a + b)
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            words[piece] = out


def test_ids_round_trip_and_files(tmp_path):
    tok = train_bpe(CORPUS, _config(pre_tokenizer=PreTokenizerKind.GPT2))
    assert [tok.id_to_token(i) for i in range(3)] == ["<s>", "</s>", "<pad>"]
    assert (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id) == (0, 1, 2)
    assert tok.special_token_ids == {0, 1, 2}
    assert tok.vocab_size == 330
    unseen = "Ελληνικά 中文 emoji 🦙 tabs\t\tand   spaces\n"
    for text in CORPUS + [unseen, "<s>the cat</s>"]:
        assert tok.decode(tok.encode(text)) == text
    assert tok.encode("<s>")[0] == 0
    tok.save(tmp_path)
    again = Tokenizer.from_files(tmp_path)
    assert again.encode(unseen + CORPUS[1]) == tok.encode(unseen + CORPUS[1])
    assert (again.bos_token, again.eos_token, again.pad_token) == ("<s>", "</s>", "<pad>")


def test_smollm_kind_splits_digits():
    gpt2 = train_bpe(CORPUS, _config(pre_tokenizer="gpt2"))
    smollm = train_bpe(CORPUS, _config(pre_tokenizer="smollm"))
    assert [gpt2.decode([i]) for i in gpt2.encode("1234")] != ["1", "2", "3", "4"]
    assert [smollm.decode([i]) for i in smollm.encode("1234")] == ["1", "2", "3", "4"]


def test_bad_configs_raise():
    with pytest.raises(ConfigError, match="vocab_size 100 is below 259"):
        _config(vocab_size=100)
    with pytest.raises(ConfigError, match="bos_token '<bos>' is not one of"):
        _config(bos_token="<bos>")
    with pytest.raises(ValueError, match="'bpe' is not a valid PreTokenizerKind"):
        _config(pre_tokenizer="bpe")
