"""Tokenizers: byte-level or SentencePiece BPE from GGUF metadata or tokenizer.json, chat templates,
streaming decode, training.

    tokenizer.py      Tokenizer: text <-> token ids, special tokens and the chat template
    gguf_vocab.py     a GGUF file's tokenizer.ggml.* metadata -> a Hugging Face `tokenizers` BPE
    gguf_pre.py       tokenizer.ggml.pre -> llama.cpp's split regexes as a pre-tokenizer (Llama 3, Qwen2, Tekken, ...)
    gguf_spm.py       a GGUF SentencePiece ('llama') vocabulary -> BPE with merges ranked by score, byte fallback
    chat_template.py  render a Hugging Face-style Jinja chat template in a sandbox
    stream.py         StreamDecoder: token ids in one at a time, text deltas out, never half a character
    train.py          train a byte-level BPE tokenizer from scratch on an iterator of texts
    extend.py         vocabulary extension (report §4.1): new merges learned on new text, every old id kept
    merge_learner.py  BPE merge learning over words already split into token ids (the core of extension)
    errors.py         TokenizerError, ChatTemplateError: each names the bad value and what is accepted
"""

from openafm.tokenizer.errors import ChatTemplateError, TokenizerError
from openafm.tokenizer.stream import StreamDecoder
from openafm.tokenizer.tokenizer import Tokenizer

__all__ = ["ChatTemplateError", "StreamDecoder", "Tokenizer", "TokenizerError"]
