"""Building a tokenizer from hand-written GGUF tokenizer metadata (no real model): added tokens,
BOS/EOS insertion, respelled tokens and the errors for inconsistent metadata."""

from __future__ import annotations

import pytest

from openafm.tokenizer import Tokenizer, TokenizerError
from openafm.tokenizer.gguf_vocab import byte_alphabet

BYTES = [byte_alphabet()[b] for b in range(256)]  # one token per byte, in byte order: id == byte value


def metadata(**overrides):
    tokens = [*BYTES, "hi", "<s>", "</s>", "<my special>", "<think>"]
    meta = {
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "gpt2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": [1] * 257 + [3, 3, 3, 4],
        "tokenizer.ggml.merges": ["h i"],
        "tokenizer.ggml.bos_token_id": 257, "tokenizer.ggml.eos_token_id": 258,
    }
    return meta | overrides


def test_byte_alphabet_is_gpt2s():
    alphabet = byte_alphabet()
    assert len(set(alphabet.values())) == 256
    assert alphabet[ord("a")] == "a" and alphabet[ord(" ")] == "Ġ" and alphabet[ord("\n")] == "Ċ"


def test_bytes_merges_and_added_tokens():
    tok = Tokenizer.from_gguf_metadata(metadata())
    assert tok.vocab_size == 261
    text = "hi <my special> <think> é"
    ids = tok.encode(text)
    assert ids == [256, 32, 259, 32, 260, 32, *"é".encode()]
    assert tok.decode(ids) == text
    # Control tokens are special (dropped on request); user-defined ones are text.
    assert tok.decode(ids, skip_special_tokens=True) == "hi  <think> é"


def test_add_bos_and_eos_tokens():
    tok = Tokenizer.from_gguf_metadata(metadata(**{"tokenizer.ggml.add_bos_token": True,
                                                   "tokenizer.ggml.add_eos_token": True}))
    assert tok.encode("hi", add_special_tokens=True) == [257, 256, 258]
    assert tok.encode("hi") == [256]


def test_decoded_text_tokens_are_respelled_in_the_byte_alphabet():
    meta = metadata()
    meta["tokenizer.ggml.tokens"] = [*BYTES, " h", *meta["tokenizer.ggml.tokens"][257:]]  # " h" spelled as text
    meta["tokenizer.ggml.merges"] = ["Ġ h"]
    tok = Tokenizer.from_gguf_metadata(meta)
    assert tok.encode(" h") == [256] and tok.id_to_token(256) == "Ġh"


@pytest.mark.parametrize("overrides, message", [
    ({"tokenizer.ggml.token_type": [1] * 3}, "token_type has 3 entries for 261 tokens"),
    ({"tokenizer.ggml.merges": ["h i x"]}, "not two tokens separated by one space, e.g. 'h i x'"),
    ({"tokenizer.ggml.merges": ["h q"]}, "do not form a BPE model: .*hq"),
    ({"tokenizer.ggml.bos_token_id": 999}, "bos_token_id = 999 is outside the vocabulary of 261 tokens"),
    ({"tokenizer.ggml.add_eos_token": True, "tokenizer.ggml.eos_token_id": None},
     "add_eos_token is set but tokenizer.ggml.eos_token_id is not"),
])
def test_inconsistent_metadata_is_named(overrides, message):
    with pytest.raises(TokenizerError, match=message):
        Tokenizer.from_gguf_metadata(metadata(**overrides))


def test_duplicate_tokens_are_named():
    meta = metadata()
    meta["tokenizer.ggml.tokens"] = [*BYTES, "hi", "<s>", "</s>", "<my special>", "hi"]
    with pytest.raises(TokenizerError, match=r"token 'hi' appears twice in the vocabulary \(ids 256 and 260\)"):
        Tokenizer.from_gguf_metadata(meta)
