"""A GGUF SentencePiece vocabulary (`tokenizer.ggml.model` 'llama') as a Hugging Face BPE with byte fallback.

What the metadata gives (Llama 2, Mistral 7B, Gemma 2/3, Phi-3): the pieces (spaces written '▁'), one
score per piece, token types (6 = byte piece '<0xNN>'), add_space_prefix; usually no merges.

SentencePiece's BPE (and llama.cpp's SPM tokenizer, which re-implements it) starts from single characters
and repeatedly joins the adjacent pair whose concatenation is a piece with the highest score; characters
left without a piece become their UTF-8 byte pieces. A BPE whose merges are every (left, right) split of
every piece, ranked by the joined piece's score, makes the same choices, so that is the model built here
(the file's own merges are used when it has them). Text handling as llama.cpp does it: spaces -> '▁',
and with add_space_prefix a '▁' before the text and after each special token; decoding undoes both.
"""

from __future__ import annotations

from typing import Any

from tokenizers import Regex, decoders, models, normalizers
from tokenizers import Tokenizer as Backend

from openafm.tokenizer.errors import TokenizerError

SPACE = "\u2581"  # '▁', SentencePiece's visible space
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6  # tokenizer.ggml.token_type values
BYTE_PIECES = [f"<0x{b:02X}>" for b in range(256)]


def spm_model(metadata: dict[str, Any], vocab: dict[str, int], types: list[int],
              merges: list[tuple[str, str]] | None) -> models.BPE:
    """The BPE model over all pieces (`vocab`), with the file's `merges` or, if None, merges derived
    from tokenizer.ggml.scores."""
    if metadata.get("tokenizer.ggml.remove_extra_whitespaces", False):
        raise TokenizerError("tokenizer.ggml.remove_extra_whitespaces = True is not supported "
                             "(SentencePiece's whitespace collapsing; supported: False or absent)")
    tokens = list(vocab)
    if merges is None:
        merges = derived_merges(tokens, types, _scores(metadata, len(tokens)))
    has_bytes = all(vocab.get(piece) is not None and types[vocab[piece]] == BYTE for piece in BYTE_PIECES)
    unknown = [t for t, kind in zip(tokens, types) if kind == UNKNOWN]
    if not has_bytes and not unknown:
        raise TokenizerError("tokenizer.ggml.token_type has neither the 256 byte pieces <0x00>..<0xFF> (type 6) "
                             "nor an unknown token (type 2): characters outside the vocabulary have no token")
    try:
        return models.BPE(vocab=vocab, merges=merges, unk_token=None if has_bytes else unknown[0],
                          fuse_unk=not has_bytes, byte_fallback=has_bytes)
    except Exception as e:  # the Rust side raises a bare Exception, e.g. for a merge of unknown tokens
        raise TokenizerError(f"the GGUF tokens and merges do not form a BPE model: {e}") from None


def derived_merges(tokens: list[str], types: list[int], scores: list[float]) -> list[tuple[str, str]]:
    """Every split of every normal or user-defined piece into two pieces, best joined score first (ties:
    lower id first; SentencePiece would take the leftmost pair, which differs only for equal scores)."""
    index = {token: token_id for token_id, token in enumerate(tokens)}
    ranked: list[tuple[float, int, int, str, str]] = []
    for token_id, (token, kind) in enumerate(zip(tokens, types)):
        if kind not in (NORMAL, USER_DEFINED) or len(token) < 2:
            continue
        for cut in range(1, len(token)):
            left, right = token[:cut], token[cut:]
            if left in index and right in index:
                ranked.append((-scores[token_id], token_id, cut, left, right))
    ranked.sort()
    return [(left, right) for *_, left, right in ranked]


def spm_normalizer(add_space_prefix: bool) -> normalizers.Normalizer:
    """' ' -> '▁', after a '▁' before each piece of text between special tokens if add_space_prefix."""
    replace = normalizers.Replace(Regex(" "), SPACE)
    return normalizers.Sequence([normalizers.Prepend(SPACE), replace]) if add_space_prefix else replace


def spm_decoder(add_space_prefix: bool) -> decoders.Decoder:
    """'▁' -> ' ', byte pieces -> the characters they spell, and the prefix space off the text's start."""
    steps = [decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()]
    if add_space_prefix:
        steps.append(decoders.Strip(content=" ", left=1, right=0))
    return decoders.Sequence(steps)


def attach_spm(backend: Backend, add_space_prefix: bool) -> None:
    backend.normalizer = spm_normalizer(add_space_prefix)
    backend.decoder = spm_decoder(add_space_prefix)


def _scores(metadata: dict[str, Any], n_tokens: int) -> list[float]:
    scores = metadata.get("tokenizer.ggml.scores")
    if scores is None:
        raise TokenizerError("tokenizer.ggml.scores is missing: a 'llama' (SentencePiece) vocabulary without "
                             "tokenizer.ggml.merges needs one score per token to rank its merges")
    if len(scores) != n_tokens:
        raise TokenizerError(f"tokenizer.ggml.scores has {len(scores)} entries for {n_tokens} tokens")
    return [float(s) for s in scores]

