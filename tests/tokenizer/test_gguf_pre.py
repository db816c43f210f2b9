"""Byte-level BPE GGUF tokenizers per `tokenizer.ggml.pre`: a small BPE is trained here with each model's
pre-tokenizer as its tokenizer.json has it, written into GGUF metadata as llama.cpp's convert_hf_to_gguf.py
writes it, loaded through openafm, and must give the reference tokenizer's ids on multilingual text. A
second check splits the text with llama.cpp's own regex lists (src/llama-vocab.cpp, its ASCII-only
rewrites included) and compares the words with openafm's pre-tokenizer."""

from __future__ import annotations

import difflib
import functools
import json

import pytest
import regex
from multilingual import CORPUS, TEXT
from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers, trainers
from tokenizers import Tokenizer as Backend

from openafm.tokenizer import Tokenizer, TokenizerError
from openafm.tokenizer.gguf_vocab import byte_alphabet

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
USER_DEFINED = "[[note]]"  # a non-special added token: convert_hf_to_gguf types it 4 (user-defined)

# The split regexes as the models' tokenizer.json files write them.
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")
TEKKEN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
          r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
          r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
GPT4O = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
DEEPSEEK_V3 = [r"\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
               r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"""
               r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"]
GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"


def _split_then_bytes(*patterns):
    return pre_tokenizers.Sequence([*(pre_tokenizers.Split(Regex(p), "isolated") for p in patterns),
                                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


# pre name -> (reference pre-tokenizer, normalizer, BPE ignore_merges), as in the models' tokenizer.json
REFERENCES = {
    "llama-bpe": (lambda: _split_then_bytes(LLAMA3), None, True),         # Llama 3.x
    "dbrx": (lambda: _split_then_bytes(LLAMA3), None, False),             # cl100k vocabularies
    "qwen2": (lambda: _split_then_bytes(QWEN2), normalizers.NFC, False),  # Qwen2 / 2.5 / 3
    "tekken": (lambda: _split_then_bytes(TEKKEN), None, True),            # Mistral Nemo
    "gpt-4o": (lambda: _split_then_bytes(GPT4O), None, False),
    "deepseek-v3": (lambda: _split_then_bytes(*DEEPSEEK_V3), None, False),
    "gpt-2": (lambda: pre_tokenizers.ByteLevel(add_prefix_space=False), None, False),
    "smollm": (lambda: pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                pre_tokenizers.ByteLevel(add_prefix_space=False)]), None, False),
}

# llama.cpp's regex lists (src/llama-vocab.cpp), applied in turn, each cutting the pieces of the one before.
LLAMA_CPP = {
    "llama-bpe": [r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                  r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "qwen2": [r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
              r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "tekken": [r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+"
               r"|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*"
               r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "gpt-4o": [r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+"
               r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
               r"|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*"
               r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
               r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "deepseek-v3": DEEPSEEK_V3,
    "gpt-2": [GPT2],
    "smollm": [r"\p{N}", GPT2],
}


@functools.cache
def reference(pre: str) -> Backend:
    """A byte-level BPE trained on CORPUS with `pre`'s pre-tokenizer, special and user-defined tokens."""
    build, normalizer, ignore_merges = REFERENCES[pre]
    backend = Backend(models.BPE(fuse_unk=False, ignore_merges=ignore_merges))
    backend.pre_tokenizer, backend.decoder = build(), decoders.ByteLevel()
    if normalizer is not None:
        backend.normalizer = normalizer()
    trainer = trainers.BpeTrainer(vocab_size=700, min_frequency=2, show_progress=False,
                                  special_tokens=[AddedToken(t, special=True, normalized=False) for t in SPECIAL],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    backend.train_from_iterator(CORPUS, trainer=trainer)
    backend.add_tokens([AddedToken(USER_DEFINED, special=False, normalized=False)])
    return backend


def gguf_metadata(backend: Backend, pre: str) -> dict:
    """tokenizer.ggml.* as convert_hf_to_gguf.py writes them (get_vocab_base + SpecialVocab's merges)."""
    vocab = backend.get_vocab(with_added_tokens=True)
    added = backend.get_added_tokens_decoder()
    tokens = sorted(vocab, key=vocab.get)
    types = [(3 if added[i].special else 4) if i in added else 1 for i in range(len(tokens))]
    merges = json.loads(backend.to_str())["model"]["merges"]
    return {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": pre, "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.token_type": types, "tokenizer.ggml.merges": [" ".join(pair) for pair in merges],
            "tokenizer.ggml.bos_token_id": vocab["<|endoftext|>"], "tokenizer.ggml.eos_token_id": vocab["<|im_end|>"]}


@pytest.mark.parametrize("pre", list(REFERENCES))
def test_ids_match_the_reference_tokenizer(pre):
    backend = reference(pre)
    tok = Tokenizer.from_gguf_metadata(gguf_metadata(backend, pre))
    text = f"<|im_start|>user\n{TEXT}{USER_DEFINED} more<|im_end|>\n"
    ids = tok.encode(text)
    assert ids == backend.encode(text, add_special_tokens=False).ids
    assert len(ids) < len(text.encode()) / 2  # the merges are in use, not only bytes
    assert tok.decode(ids) == text
    assert tok.token_to_id("<|im_start|>") in ids and tok.token_to_id(USER_DEFINED) in ids


def _llama_cpp_words(text: str, patterns: list[str]) -> list[str]:
    pieces = [text]
    for pattern in patterns:
        cut = []
        for piece in pieces:
            start = 0
            for match in regex.finditer(pattern, piece):
                cut += [piece[start:match.start()]] if match.start() > start else []
                cut += [match.group()] if match.end() > match.start() else []
                start = match.end()
            cut += [piece[start:]] if start < len(piece) else []
        pieces = cut
    return pieces


# Where llama.cpp's ASCII-only rewrite of the Tekken / GPT-4o regexes splits differently from the regex the
# models were trained with (which openafm follows): `[^a-z]`/`[^A-Z]` stand for upper/lower case, so a
# non-ASCII letter counts as both, and combining marks (\p{M}, e.g. Devanagari vowel signs) are not letters.
_HINDI = (["नमस्ते", " दुनिया", "!", " हिंदी", " भाषा", " सुंदर", " है", "।"],
          ["नमस", "्त", "े", " द", "ुन", "िय", "ा!", " ह", "िं", "द", "ी", " भ", "ाष", "ा", " स", "ुं", "दर",
           " ह", "ै।"])
_CASE = [([" ÜBERGRÖSSE"], [" ÜBERGRÖ", "SSE"]), ([" Привет", "Мир"], [" ПриветМир"]),
         ([" Заглавные", "Буквы"], [" ЗаглавныеБуквы"]), _HINDI]
LLAMA_CPP_DIFFERS = {"tekken": _CASE, "gpt-4o": _CASE}


@pytest.mark.parametrize("pre", list(LLAMA_CPP))
def test_words_match_llama_cpp_regexes(pre):
    tok = Tokenizer.from_gguf_metadata(gguf_metadata(reference(pre), pre))
    unbyte = {c: b for b, c in byte_alphabet().items()}
    ours = [bytes(unbyte[c] for c in w).decode() for w, _ in tok.backend.pre_tokenizer.pre_tokenize_str(TEXT)]
    theirs = _llama_cpp_words(TEXT, LLAMA_CPP[pre])
    matcher = difflib.SequenceMatcher(a=ours, b=theirs, autojunk=False)
    differences = [(ours[i:j], theirs[k:m]) for op, i, j, k, m in matcher.get_opcodes() if op != "equal"]
    assert differences == LLAMA_CPP_DIFFERS.get(pre, [])
    assert "".join(ours) == TEXT


@pytest.mark.parametrize("pre, expected_bos", [("llama-bpe", True), ("tekken", True), ("qwen2", False)])
def test_bos_defaults_follow_llama_cpp_unless_the_file_says(pre, expected_bos):
    meta = gguf_metadata(reference("llama-bpe"), pre)
    bos = meta["tokenizer.ggml.bos_token_id"]
    assert (Tokenizer.from_gguf_metadata(meta).encode("hi", add_special_tokens=True)[0] == bos) == expected_bos
    tok = Tokenizer.from_gguf_metadata(meta | {"tokenizer.ggml.add_bos_token": not expected_bos})
    assert tok.add_bos_token == (not expected_bos)
    assert (tok.encode("hi", add_special_tokens=True)[0] == bos) == (not expected_bos)


def test_unknown_pre_is_named_with_the_supported_ones():
    meta = gguf_metadata(reference("qwen2"), "deepseek-coder")
    with pytest.raises(TokenizerError, match=r"tokenizer.ggml.pre 'deepseek-coder' is not supported "
                                             r"\(supported: .*gpt-4o.*llama-bpe.*qwen2.*tekken"):
        Tokenizer.from_gguf_metadata(meta)
