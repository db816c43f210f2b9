"""Train a byte-level BPE tokenizer from scratch on an iterator of texts (Hugging Face `tokenizers`).

The result is an `openafm.tokenizer.Tokenizer` whose backend is built like the one openafm makes from a
GGUF file: the same pre-tokenizer for the same kind (`PreTokenizerKind` values are llama.cpp's
`tokenizer.ggml.pre` names), a ByteLevel decoder, the special tokens as special added tokens. Ids: the
special tokens first (0, 1, ... in the order given), then the 256 byte symbols, then one token per merge.
`tok.save(dir)` writes tokenizer.json + tokenizer_config.json, which `Tokenizer.from_files(dir)` reads back.

    tok = train_bpe(texts, BPETrainConfig(vocab_size=8192, special_tokens=["<|endoftext|>"]))
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from tokenizers import AddedToken, decoders, models, pre_tokenizers, trainers
from tokenizers import Tokenizer as Backend

from openafm.errors import ConfigError
from openafm.tokenizer.gguf_vocab import PRE_TOKENIZERS
from openafm.tokenizer.tokenizer import Tokenizer

BYTE_SYMBOLS = 256


class PreTokenizerKind(enum.Enum):
    GPT2 = "gpt2"        # GPT-2's regex (contractions, letters, numbers, punctuation, spaces), then bytes
    SMOLLM = "smollm"    # every digit alone first, then GPT-2's regex (SmolLM2, StarCoder)


@dataclass(kw_only=True)
class BPETrainConfig:
    vocab_size: int = 32768                    # special tokens + 256 byte symbols + merges
    min_frequency: int = 2                     # a pair seen fewer times is never merged
    special_tokens: list[str] = field(default_factory=lambda: ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    pre_tokenizer: PreTokenizerKind = PreTokenizerKind.SMOLLM
    bos_token: str | None = "<|endoftext|>"   # must be one of special_tokens (or None)
    eos_token: str | None = "<|endoftext|>"
    pad_token: str | None = None
    show_progress: bool = True

    def __post_init__(self) -> None:
        self.pre_tokenizer = PreTokenizerKind(self.pre_tokenizer)
        smallest = BYTE_SYMBOLS + len(self.special_tokens)
        if self.vocab_size < smallest:
            raise ConfigError(f"vocab_size {self.vocab_size} is below {smallest} (256 byte symbols + "
                              f"{len(self.special_tokens)} special tokens)")
        if self.min_frequency < 1:
            raise ConfigError(f"min_frequency {self.min_frequency} must be >= 1")
        if len(set(self.special_tokens)) != len(self.special_tokens) or "" in self.special_tokens:
            raise ConfigError(f"special_tokens {self.special_tokens} must be distinct non-empty strings")
        for name in ("bos_token", "eos_token", "pad_token"):
            token = getattr(self, name)
            if token is not None and token not in self.special_tokens:
                raise ConfigError(f"{name} {token!r} is not one of special_tokens {self.special_tokens}")


def byte_level_backend(kind: PreTokenizerKind, model: models.Model) -> Backend:
    """A byte-level tokenizer around `model`: `kind`'s pre-tokenizer (no space prefix) + ByteLevel decoder."""
    backend = Backend(model)
    backend.pre_tokenizer = PRE_TOKENIZERS[PreTokenizerKind(kind).value](False)
    backend.decoder = decoders.ByteLevel()
    return backend


def train_bpe(texts: Iterable[str], config: BPETrainConfig) -> Tokenizer:
    """A byte-level BPE learned on `texts` (any iterable of strings; read once, streamed)."""
    backend = byte_level_backend(config.pre_tokenizer, models.BPE(fuse_unk=False, byte_fallback=False))
    trainer = trainers.BpeTrainer(vocab_size=config.vocab_size, min_frequency=config.min_frequency,
                                  special_tokens=[AddedToken(t, special=True, normalized=False)
                                                  for t in config.special_tokens],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=config.show_progress)
    backend.train_from_iterator(texts, trainer=trainer)
    return Tokenizer(backend, bos_token=config.bos_token, eos_token=config.eos_token, pad_token=config.pad_token,
                     source=f"byte-level BPE trained to {backend.get_vocab_size()} tokens")
