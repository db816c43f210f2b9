"""A GGUF file's `tokenizer.ggml.*` metadata -> a Hugging Face `tokenizers` BPE tokenizer.

What the metadata gives and where it goes:

    tokenizer.ggml.model       'gpt2' = byte-level BPE; 'llama' = SentencePiece BPE (see gguf_spm.py)
    tokenizer.ggml.pre         how byte-level text is split before BPE (see gguf_pre.PRE_TOKENIZERS)
    tokenizer.ggml.tokens      the vocabulary, id = position ('gpt2': spelled in GPT-2's byte alphabet)
    tokenizer.ggml.merges      "left right" pairs, highest priority first ('llama': usually absent)
    tokenizer.ggml.scores      'llama': one score per piece, which ranks the merges when there are none
    tokenizer.ggml.token_type  1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
    tokenizer.ggml.add_bos_token / add_eos_token / add_space_prefix

Control and unknown tokens become special added tokens (matched whole in text, dropped by
`skip_special_tokens`); user-defined tokens become plain added tokens (matched whole, always decoded),
as llama.cpp and transformers treat them. When the file does not say whether to add BOS/EOS, llama.cpp's
defaults apply (BOS for 'llama' and for the Llama 3 / Tekken pre-tokenizers).
"""

from __future__ import annotations

import functools
from typing import Any

from tokenizers import AddedToken, decoders, models, processors
from tokenizers import Tokenizer as Backend

from openafm.tokenizer.errors import TokenizerError
from openafm.tokenizer.gguf_pre import PRE_TOKENIZERS
from openafm.tokenizer.gguf_spm import CONTROL, NORMAL, UNKNOWN, USER_DEFINED, attach_spm, spm_model

SUPPORTED_MODELS = ("gpt2", "llama")

__all__ = ["PRE_TOKENIZERS", "SUPPORTED_MODELS", "add_bos_eos", "backend_from_gguf", "byte_alphabet",
           "special_token"]


def backend_from_gguf(metadata: dict[str, Any]) -> Backend:
    """The tokenizer: model, pre-tokenizer or normalizer, decoder, added tokens, BOS/EOS post-processor."""
    model = metadata.get("tokenizer.ggml.model")
    if model not in SUPPORTED_MODELS:
        raise TokenizerError(f"tokenizer.ggml.model {model!r} is not supported "
                             f"(supported: {', '.join(SUPPORTED_MODELS)})")
    tokens: list[str] = _need(metadata, "tokenizer.ggml.tokens")
    types: list[int] = metadata.get("tokenizer.ggml.token_type") or [NORMAL] * len(tokens)
    if len(types) != len(tokens):
        raise TokenizerError(f"tokenizer.ggml.token_type has {len(types)} entries for {len(tokens)} tokens")
    backend = _byte_level(metadata, tokens, types) if model == "gpt2" else _sentencepiece(metadata, tokens, types)
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                for t, kind in zip(tokens, types) if kind in (CONTROL, UNKNOWN)])
    backend.add_tokens([AddedToken(t, special=False, normalized=False)
                        for t, kind in zip(tokens, types) if kind == USER_DEFINED])
    if backend.get_vocab_size(with_added_tokens=True) != len(tokens):
        raise TokenizerError(f"the tokenizer has {backend.get_vocab_size(with_added_tokens=True)} tokens after "
                             f"adding special tokens, the GGUF vocabulary {len(tokens)}")
    post = _post_processor(metadata)
    if post is not None:
        backend.post_processor = post
    return backend


def add_bos_eos(metadata: dict[str, Any]) -> tuple[bool, bool]:
    """Whether encoding with special tokens adds BOS / EOS: the file's add_bos_token / add_eos_token, else
    llama.cpp's default for the tokenizer kind (BOS for 'llama', 'llama-bpe' and 'tekken'; EOS never)."""
    if metadata.get("tokenizer.ggml.model") == "llama":
        default_bos = True
    else:
        spec = PRE_TOKENIZERS.get(metadata.get("tokenizer.ggml.pre"))  # type: ignore[arg-type]
        default_bos = spec is not None and spec.add_bos
    add_bos = metadata.get("tokenizer.ggml.add_bos_token")
    return (default_bos if add_bos is None else bool(add_bos),
            bool(metadata.get("tokenizer.ggml.add_eos_token", False)))


def _byte_level(metadata: dict[str, Any], tokens: list[str], types: list[int]) -> Backend:
    pre = metadata.get("tokenizer.ggml.pre")  # llama.cpp's fallback when missing ('default') is not GPT-2's
    if pre not in PRE_TOKENIZERS:
        raise TokenizerError(f"tokenizer.ggml.pre {pre!r} is not supported "
                             f"(supported: {', '.join(sorted(PRE_TOKENIZERS))})")
    spec = PRE_TOKENIZERS[pre]
    vocab = _vocab(tokens, types, respell=True)
    merges = _merges(_need(metadata, "tokenizer.ggml.merges"))
    try:
        backend = Backend(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False,
                                     ignore_merges=spec.ignore_merges))
    except Exception as e:  # the Rust side raises a bare Exception, e.g. for a merge of unknown tokens
        raise TokenizerError(f"the GGUF tokens and merges do not form a BPE model: {e}") from None
    backend.pre_tokenizer = spec(bool(metadata.get("tokenizer.ggml.add_space_prefix", False)))
    backend.decoder = decoders.ByteLevel()
    return backend


def _sentencepiece(metadata: dict[str, Any], tokens: list[str], types: list[int]) -> Backend:
    merges = _merges(metadata["tokenizer.ggml.merges"]) if metadata.get("tokenizer.ggml.merges") else None
    backend = Backend(spm_model(metadata, _vocab(tokens, types, respell=False), types, merges))
    attach_spm(backend, bool(metadata.get("tokenizer.ggml.add_space_prefix", True)))  # llama.cpp's default
    return backend


def special_token(metadata: dict[str, Any], key: str) -> str | None:
    """The text of the token whose id is `tokenizer.ggml.{key}` (e.g. 'bos_token_id'), or None if unset."""
    token_id = metadata.get(f"tokenizer.ggml.{key}")
    if token_id is None:
        return None
    tokens = metadata["tokenizer.ggml.tokens"]
    if not 0 <= token_id < len(tokens):
        raise TokenizerError(f"tokenizer.ggml.{key} = {token_id} is outside the vocabulary of {len(tokens)} tokens")
    return tokens[token_id]


@functools.cache
def byte_alphabet() -> dict[int, str]:
    """GPT-2's byte -> character map: printable bytes stand for themselves, the rest for chr(256 + k)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    alphabet = {byte: chr(byte) for byte in printable}
    for k, byte in enumerate(b for b in range(256) if b not in alphabet):
        alphabet[byte] = chr(256 + k)
    return alphabet


def _vocab(tokens: list[str], types: list[int], respell: bool) -> dict[str, int]:
    """Token -> id, in id order. With `respell` (byte-level BPE), a normal token written with characters
    outside the byte alphabet (some converters store decoded text) is respelled in it; added tokens keep
    their text, which is what text matches."""
    letters = set(byte_alphabet().values())
    vocab: dict[str, int] = {}
    for token_id, (token, kind) in enumerate(zip(tokens, types)):
        if respell and kind == NORMAL and not letters.issuperset(token):
            token = "".join(byte_alphabet()[b] for b in token.encode("utf-8"))
        if token in vocab:
            raise TokenizerError(f"token {token!r} appears twice in the vocabulary (ids {vocab[token]} and {token_id})")
        vocab[token] = token_id
    return vocab


def _merges(merges: list[str]) -> list[tuple[str, str]]:
    pairs = [tuple(merge.split(" ")) for merge in merges]
    bad = [merge for merge, pair in zip(merges, pairs) if len(pair) != 2]
    if bad:
        raise TokenizerError(f"tokenizer.ggml.merges has {len(bad)} entries that are not two tokens "
                             f"separated by one space, e.g. {bad[0]!r}")
    return pairs  # type: ignore[return-value]


def _post_processor(metadata: dict[str, Any]) -> processors.PostProcessor | None:
    """BOS/EOS around the text when `encode(..., add_special_tokens=True)` and the file asks for them."""
    ends: dict[str, tuple[str, int]] = {}  # 'bos' / 'eos' -> (token, id)
    for key, add in zip(("bos", "eos"), add_bos_eos(metadata)):
        if add:
            token = special_token(metadata, f"{key}_token_id")
            if token is None:
                why = "is set" if f"tokenizer.ggml.add_{key}_token" in metadata else "defaults to True for this kind"
                raise TokenizerError(f"tokenizer.ggml.add_{key}_token {why} but tokenizer.ggml.{key}_token_id is not")
            ends[key] = (token, metadata[f"tokenizer.ggml.{key}_token_id"])
    if not ends:
        return None
    single = [*(ends["bos"][:1] if "bos" in ends else ()), "$A", *(ends["eos"][:1] if "eos" in ends else ())]
    return processors.TemplateProcessing(single=single, special_tokens=list(ends.values()))


def _need(metadata: dict[str, Any], key: str) -> Any:
    if key not in metadata:
        raise TokenizerError(f"the GGUF metadata has no {key!r}; cannot build its tokenizer")
    return metadata[key]
