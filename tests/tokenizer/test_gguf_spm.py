"""SentencePiece GGUF tokenizers (tokenizer.ggml.model 'llama': Llama 2, Mistral 7B, Gemma, Phi-3): a tiny
SentencePiece BPE with byte fallback is trained here, its pieces/scores/types written into GGUF metadata as
llama.cpp's convert_hf_to_gguf.py `_set_vocab_sentencepiece` writes them, and openafm's ids must equal
SentencePiece's own `encode` on multilingual text (with and without the dummy prefix, as Gemma has it)."""

from __future__ import annotations

import functools
import io

import gguf
import pytest
import sentencepiece as spm
from multilingual import CORPUS, TEXT

from openafm.checkpoint.gguf.reader import read_gguf
from openafm.tokenizer import StreamDecoder, Tokenizer, TokenizerError
from openafm.tokenizer.gguf_spm import derived_merges

USER_DEFINED = "<tool>"


@functools.cache
def sentencepiece(add_dummy_prefix: bool) -> spm.SentencePieceProcessor:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS), model_writer=model, model_type="bpe", vocab_size=1000,
        hard_vocab_limit=False, byte_fallback=True, character_coverage=1.0, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=add_dummy_prefix, split_digits=True,
        allow_whitespace_only_pieces=True, user_defined_symbols=[USER_DEFINED], minloglevel=2)
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


def gguf_metadata(sp: spm.SentencePieceProcessor, add_space_prefix: bool) -> dict:
    """tokenizer.ggml.* as `_set_vocab_sentencepiece` writes them (user-defined pieces typed 4, as it does
    for the added tokens a model's tokenizer_config.json lists)."""
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 5 if sp.is_unused(i)
                     else 6 if sp.is_byte(i) else 4 if tokens[-1] == USER_DEFINED else 1)
    return {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.scores": scores,
            "tokenizer.ggml.token_type": types, "tokenizer.ggml.add_space_prefix": add_space_prefix,
            "tokenizer.ggml.bos_token_id": sp.bos_id(), "tokenizer.ggml.eos_token_id": sp.eos_id(),
            "tokenizer.ggml.unknown_token_id": sp.unk_id()}


def tokenizer(add_space_prefix: bool, **overrides) -> Tokenizer:
    return Tokenizer.from_gguf_metadata(gguf_metadata(sentencepiece(add_space_prefix), add_space_prefix) | overrides)


@pytest.mark.parametrize("add_space_prefix", [True, False], ids=["llama", "gemma"])
def test_ids_match_sentencepiece(add_space_prefix):
    sp, tok = sentencepiece(add_space_prefix), tokenizer(add_space_prefix)
    ids = tok.encode(TEXT)
    assert ids == sp.encode(TEXT)
    assert sum(len(sp.id_to_piece(i)) >= 3 and not sp.is_byte(i) for i in ids) > 50  # merges are in use
    assert any(sp.is_byte(i) for i in ids)  # and byte fallback (emoji not in the training text)
    assert tok.decode(ids) == TEXT == sp.decode(ids)
    stream = StreamDecoder(tok)  # one id at a time: byte pieces of one character wait for each other
    assert "".join(stream.push(i) for i in ids) + stream.flush() == TEXT
    for line in TEXT.splitlines():  # each line alone: the prefix space and short texts
        assert tok.encode(line) == sp.encode(line) and tok.decode(tok.encode(line)) == line


def test_control_and_user_defined_tokens_stay_whole_and_bos_is_added():
    sp, tok = sentencepiece(True), tokenizer(True)
    assert tok.add_bos_token and not tok.add_eos_token  # llama.cpp's defaults for 'llama' files
    assert tok.encode("Hello world", add_special_tokens=True) == [sp.bos_id(), *sp.encode("Hello world")]
    # After a special token llama.cpp starts the next text with the prefix space again, as it does the first.
    ids = tok.encode("<s>Hello</s> world <tool> done")
    expected = [sp.bos_id(), *sp.encode("Hello"), sp.eos_id(), *sp.encode(" world "),
                sp.piece_to_id(USER_DEFINED), *sp.encode(" done")]
    assert ids == expected
    assert tok.decode(ids, skip_special_tokens=True) == "Hello  world <tool>  done"
    assert tokenizer(False).encode("<s>Hi") == [sp.bos_id(), *sentencepiece(False).encode("Hi")]


def test_add_bos_false_in_the_file_wins():
    tok = tokenizer(False, **{"tokenizer.ggml.add_bos_token": False})
    assert tok.encode("Hi", add_special_tokens=True) == sentencepiece(False).encode("Hi")


def test_merges_in_the_file_are_used():
    meta = gguf_metadata(sentencepiece(True), True)
    merges = derived_merges(meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.token_type"],
                            meta["tokenizer.ggml.scores"])
    tok = Tokenizer.from_gguf_metadata(meta | {"tokenizer.ggml.merges": [" ".join(m) for m in merges],
                                               "tokenizer.ggml.scores": None})
    assert tok.encode(TEXT) == sentencepiece(True).encode(TEXT)


NO_BYTES_NO_UNKNOWN = {"tokenizer.ggml.token_type": None, "tokenizer.ggml.tokens": ["a", "b", "ab"],
                       "tokenizer.ggml.scores": [0.0] * 3, "tokenizer.ggml.bos_token_id": None,
                       "tokenizer.ggml.eos_token_id": None, "tokenizer.ggml.unknown_token_id": None}


@pytest.mark.parametrize("overrides, message", [
    ({"tokenizer.ggml.scores": None}, "tokenizer.ggml.scores is missing"),
    ({"tokenizer.ggml.scores": [0.0]}, r"tokenizer.ggml.scores has 1 entries for \d+ tokens"),
    ({"tokenizer.ggml.remove_extra_whitespaces": True}, "remove_extra_whitespaces = True is not supported"),
    (NO_BYTES_NO_UNKNOWN, "neither the 256 byte pieces"),
    ({"tokenizer.ggml.bos_token_id": None}, "add_bos_token defaults to True for this kind but .*bos_token_id is not"),
])
def test_vocabularies_that_cannot_be_reproduced_are_named(overrides, message):
    with pytest.raises(TokenizerError, match=message):
        Tokenizer.from_gguf_metadata(gguf_metadata(sentencepiece(True), True) | overrides)


def test_a_written_gguf_file_reads_back_to_the_same_ids(tmp_path):
    meta, path = gguf_metadata(sentencepiece(False), False), tmp_path / "spm.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model("llama")
    writer.add_token_list(meta["tokenizer.ggml.tokens"])
    writer.add_token_scores(meta["tokenizer.ggml.scores"])
    writer.add_token_types(meta["tokenizer.ggml.token_type"])
    writer.add_add_space_prefix(False)
    writer.add_bos_token_id(meta["tokenizer.ggml.bos_token_id"])
    writer.add_eos_token_id(meta["tokenizer.ggml.eos_token_id"])
    writer.add_add_bos_token(True)
    for write in (writer.write_header_to_file, writer.write_kv_data_to_file, writer.write_tensors_to_file):
        write()
    writer.close()
    tok = Tokenizer.from_gguf_metadata(read_gguf(path).metadata)
    bos = meta["tokenizer.ggml.bos_token_id"]
    assert tok.encode(TEXT, add_special_tokens=True) == [bos, *sentencepiece(False).encode(TEXT)]
