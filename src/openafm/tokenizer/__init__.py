"""Tokenizers: byte-level BPE from GGUF metadata or tokenizer.json, chat templates, streaming decode."""

from openafm.tokenizer.errors import ChatTemplateError, TokenizerError
from openafm.tokenizer.stream import StreamDecoder
from openafm.tokenizer.tokenizer import Tokenizer

__all__ = ["ChatTemplateError", "StreamDecoder", "Tokenizer", "TokenizerError"]
