"""`Tokenizer`: text <-> token ids, special tokens and the chat template, over a Hugging Face
`tokenizers.Tokenizer` built from a GGUF file's metadata (byte-level or SentencePiece BPE) or read from a
tokenizer.json.

    tok = Tokenizer.from_gguf_metadata(read_gguf(path).metadata)
    ids = tok.encode("<|im_start|>user\\nHi<|im_end|>")      # special tokens in text stay whole
    tok.decode(ids) == "<|im_start|>user\\nHi<|im_end|>"
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer as Backend

from openafm.tokenizer.chat_template import render_chat_template
from openafm.tokenizer.errors import ChatTemplateError, TokenizerError
from openafm.tokenizer.gguf_vocab import add_bos_eos, backend_from_gguf, special_token

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
TEMPLATE_FILE = "chat_template.jinja"            # where recent transformers versions save the template
GENERATION_CONFIG_FILE = "generation_config.json"

# Tokens that close a turn in common chat templates; one counts as an end of generation when the
# template writes it and the vocabulary has it.
END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>")


class Tokenizer:
    def __init__(self, backend: Backend, *, bos_token: str | None = None, eos_token: str | None = None,
                 pad_token: str | None = None, unk_token: str | None = None, chat_template: str | None = None,
                 add_bos_token: bool = False, add_eos_token: bool = False, extra_eos_token_ids: Iterable[int] = (),
                 source: str = "tokenizer"):
        self.backend, self.chat_template, self.source = backend, chat_template, source
        self.bos_token, self.eos_token, self.pad_token, self.unk_token = bos_token, eos_token, pad_token, unk_token
        self.add_bos_token, self.add_eos_token = add_bos_token, add_eos_token
        for name in ("bos_token", "eos_token", "pad_token", "unk_token"):
            token = getattr(self, name)
            if token is not None and backend.token_to_id(token) is None:
                raise TokenizerError(f"{source}: {name} {token!r} is not in the vocabulary")
        self._extra_eos = frozenset(self._check_id(i) for i in extra_eos_token_ids)

    # -- construction -------------------------------------------------------------------------------

    @classmethod
    def from_gguf_metadata(cls, metadata: dict[str, Any]) -> Tokenizer:
        """From the `tokenizer.*` keys of a GGUF file (see `openafm.checkpoint.gguf.read_gguf`)."""
        add_bos, add_eos = add_bos_eos(metadata)
        return cls(backend_from_gguf(metadata),
                   bos_token=special_token(metadata, "bos_token_id"),
                   eos_token=special_token(metadata, "eos_token_id"),
                   pad_token=special_token(metadata, "padding_token_id"),
                   unk_token=special_token(metadata, "unknown_token_id"),
                   chat_template=metadata.get("tokenizer.chat_template"),
                   add_bos_token=add_bos, add_eos_token=add_eos,
                   source=f"GGUF tokenizer ({metadata.get('general.name', 'unnamed model')})")

    @classmethod
    def from_files(cls, directory: str | os.PathLike) -> Tokenizer:
        """From a Hugging Face checkpoint directory: tokenizer.json, plus tokenizer_config.json (special
        tokens, chat template), chat_template.jinja and generation_config.json (extra EOS ids) if present."""
        directory = Path(directory)
        path = directory / TOKENIZER_FILE
        if not path.is_file():
            raise TokenizerError(f"{directory}: no {TOKENIZER_FILE}")
        try:
            backend = Backend.from_file(str(path))
        except Exception as e:  # the Rust side raises a bare Exception for a malformed file
            raise TokenizerError(f"{path}: not a valid tokenizers file ({e})") from None
        config = _read_json(directory / CONFIG_FILE)
        template = config.get("chat_template")
        if (directory / TEMPLATE_FILE).is_file():
            template = (directory / TEMPLATE_FILE).read_text(encoding="utf-8")
        if isinstance(template, list):  # transformers' named templates: [{"name": ..., "template": ...}]
            named = {t.get("name"): t.get("template") for t in template}
            if "default" not in named:
                raise TokenizerError(f"{directory / CONFIG_FILE}: chat_template lists templates {sorted(named)} "
                                     f"but none named 'default'")
            template = named["default"]
        eos_ids = _read_json(directory / GENERATION_CONFIG_FILE).get("eos_token_id", [])
        return cls(backend, bos_token=_token_text(config.get("bos_token")),
                   eos_token=_token_text(config.get("eos_token")), pad_token=_token_text(config.get("pad_token")),
                   unk_token=_token_text(config.get("unk_token")), chat_template=template,
                   add_bos_token=bool(config.get("add_bos_token", False)),
                   add_eos_token=bool(config.get("add_eos_token", False)),
                   extra_eos_token_ids=[eos_ids] if isinstance(eos_ids, int) else eos_ids,
                   source=str(directory))

    def save(self, directory: str | os.PathLike) -> None:
        """Write tokenizer.json and tokenizer_config.json (readable by `from_files` and by transformers)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.backend.save(str(directory / TOKENIZER_FILE))
        config = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": self.bos_token, "eos_token": self.eos_token,
            "pad_token": self.pad_token, "unk_token": self.unk_token,
            "add_bos_token": self.add_bos_token, "add_eos_token": self.add_eos_token,
            "clean_up_tokenization_spaces": False,
            "chat_template": self.chat_template,
        }
        text = json.dumps({k: v for k, v in config.items() if v is not None}, indent=2, ensure_ascii=False)
        (directory / CONFIG_FILE).write_text(text + "\n", encoding="utf-8")

    # -- text <-> ids -----------------------------------------------------------------------------------

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids of `text`. Special tokens written in the text (e.g. '<|im_start|>') become single ids;
        `add_special_tokens` adds the BOS/EOS the tokenizer is configured to add (none for SmolLM2)."""
        return self.backend.encode(text, add_special_tokens=add_special_tokens).ids

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = False) -> list[list[int]]:
        return [e.ids for e in self.backend.encode_batch(list(texts), add_special_tokens=add_special_tokens)]

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        ids, size = [int(i) for i in ids], self.vocab_size
        bad = [i for i in ids if not 0 <= i < size]
        if bad:
            raise TokenizerError(f"{self.source}: token id {bad[0]} is outside the vocabulary of {self.vocab_size}")
        return self.backend.decode(ids, skip_special_tokens=skip_special_tokens)

    def token_to_id(self, token: str) -> int:
        token_id = self.backend.token_to_id(token)
        if token_id is None:
            raise TokenizerError(f"{self.source}: token {token!r} is not in the vocabulary")
        return token_id

    def id_to_token(self, token_id: int) -> str:
        token = self.backend.id_to_token(self._check_id(token_id))
        if token is None:
            raise TokenizerError(f"{self.source}: token id {token_id} has no token")
        return token

    # -- special tokens --------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return self.backend.get_vocab_size(with_added_tokens=True)

    @property
    def bos_token_id(self) -> int | None:
        return None if self.bos_token is None else self.token_to_id(self.bos_token)

    @property
    def eos_token_id(self) -> int | None:
        return None if self.eos_token is None else self.token_to_id(self.eos_token)

    @property
    def pad_token_id(self) -> int | None:
        return None if self.pad_token is None else self.token_to_id(self.pad_token)

    @property
    def eos_token_ids(self) -> frozenset[int]:
        """Ids that end generation: EOS, any end-of-turn token the chat template writes, and the
        generation_config.json EOS ids."""
        ids = set(self._extra_eos)
        if self.eos_token_id is not None:
            ids.add(self.eos_token_id)
        for token in END_OF_TURN_TOKENS:
            token_id = self.backend.token_to_id(token)
            if token_id is not None and self.chat_template is not None and token in self.chat_template:
                ids.add(token_id)
        return frozenset(ids)

    @property
    def special_token_ids(self) -> frozenset[int]:
        """Ids of the special added tokens (those `decode(..., skip_special_tokens=True)` drops)."""
        return frozenset(i for i, t in self.backend.get_added_tokens_decoder().items() if t.special)

    # -- chat ---------------------------------------------------------------------------------------------

    def apply_chat_template(self, messages: list[dict[str, Any]], add_generation_prompt: bool = True,
                            **variables: Any) -> str:
        """The conversation as prompt text, rendered by the tokenizer's Jinja chat template."""
        if self.chat_template is None:
            raise ChatTemplateError(f"{self.source} has no chat template (tokenizer.chat_template in a GGUF, "
                                    f"chat_template in {CONFIG_FILE} or {TEMPLATE_FILE})")
        return render_chat_template(self.chat_template, messages, add_generation_prompt=add_generation_prompt,
                                    bos_token=self.bos_token, eos_token=self.eos_token, **variables)

    def __repr__(self) -> str:
        return (f"Tokenizer({self.source}, vocab_size={self.vocab_size}, bos={self.bos_token!r}, "
                f"eos={self.eos_token!r})")

    def _check_id(self, token_id: int) -> int:
        if not 0 <= token_id < self.vocab_size:
            raise TokenizerError(f"{self.source}: token id {token_id} is outside the vocabulary of {self.vocab_size}")
        return token_id


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise TokenizerError(f"{path}: not valid JSON ({e})") from None


def _token_text(value: Any) -> str | None:
    """tokenizer_config.json writes a special token as a string or as {"content": ..., ...}."""
    if isinstance(value, dict):
        return value.get("content")
    return value
