"""Vocabulary extension of a byte-level BPE tokenizer (report §4.1: AFM's tokenizer grew from 100k to
150k tokens for new languages), keeping every old id.

How: the new-language text is split exactly as the base tokenizer splits it (added tokens, normalizer,
pre-tokenizer) and each piece is segmented by the base BPE. On those segmentations new merges are
learned (`merge_learner.learn_merges`) and appended after the old merges; each new token gets the next
id after the old vocabulary.

What is preserved, exactly:
  * every old id keeps its string, every old merge its rank; special/added tokens keep their ids;
    normalizer, pre-tokenizer, decoder and post-processor are unchanged;
  * the extended encoding of any text is the base encoding with some runs of adjacent tokens grouped:
    expanding each new id into its old-token decomposition (`VocabExtension.decompose`) gives the base
    ids back, id for id. So no text ever needs more tokens than before, and decoding is byte-exact
    wherever the base tokenizer's is (all text, for a byte-level BPE without a normalizer);
  * text whose base segmentation contains none of the learned pairs tokenizes exactly as before.
What is not: old-language text that does contain a learned pair (a common subword of the new text)
gets fewer, new tokens there, so a model sees different ids for it until it has learned them.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from tokenizers import Tokenizer as Backend
from tqdm import tqdm

from openafm.tokenizer.errors import TokenizerError
from openafm.tokenizer.merge_learner import learn_merges
from openafm.tokenizer.tokenizer import Tokenizer

EXTENSION_FILE = "extension.json"  # written beside tokenizer.json by the CLI: old vocab size, merges added


@dataclass(kw_only=True)
class ExtendConfig:
    add: int                    # new tokens to learn (fewer when min_frequency stops it first)
    min_frequency: int = 2      # a pair seen fewer times in the new text is never merged
    show_progress: bool = True

    def __post_init__(self) -> None:
        if self.add < 1:
            raise ValueError(f"add {self.add} must be >= 1 (new tokens to learn)")
        if self.min_frequency < 1:
            raise ValueError(f"min_frequency {self.min_frequency} must be >= 1")


@dataclass(kw_only=True)
class VocabExtension:
    tokenizer: Tokenizer                       # the extended tokenizer
    old_vocab_size: int                        # new token k has id old_vocab_size + k
    merges: list[tuple[int, int]]              # merge k: (left id, right id) -> id old_vocab_size + k
    _cache: dict[int, list[int]] = field(default_factory=dict, repr=False)

    @property
    def n_added(self) -> int:
        return len(self.merges)

    def decompose(self, token_id: int) -> list[int]:
        """The old ids a token stands for: itself for an old id, its merge tree's leaves for a new one."""
        if token_id < self.old_vocab_size:
            return [token_id]
        k = token_id - self.old_vocab_size
        if k >= len(self.merges):
            raise TokenizerError(f"token id {token_id} is outside the extended vocabulary of "
                                 f"{self.old_vocab_size + len(self.merges)}")
        if token_id not in self._cache:
            a, b = self.merges[k]
            self._cache[token_id] = self.decompose(a) + self.decompose(b)
        return self._cache[token_id]

    def decompositions(self) -> dict[int, list[int]]:
        """{new id: old ids} for every new token (what `resize_embeddings` initialises from)."""
        return {self.old_vocab_size + k: self.decompose(self.old_vocab_size + k) for k in range(len(self.merges))}

    def to_json(self) -> dict:
        return {"old_vocab_size": self.old_vocab_size, "added": self.n_added, "merges": self.merges}

    @classmethod
    def from_json(cls, tokenizer: Tokenizer, data: dict) -> VocabExtension:
        merges = [tuple(m) for m in data["merges"]]
        ext = cls(tokenizer=tokenizer, old_vocab_size=int(data["old_vocab_size"]), merges=merges)  # type: ignore[arg-type]
        if tokenizer.vocab_size != ext.old_vocab_size + len(merges):
            raise TokenizerError(f"{tokenizer.source} has {tokenizer.vocab_size} tokens, the extension record says "
                                 f"{ext.old_vocab_size} + {len(merges)}")
        return ext


def extend_tokenizer(base: Tokenizer, texts: Iterable[str], config: ExtendConfig) -> VocabExtension:
    """Learn `config.add` new tokens on `texts` and append them (and their merges) after the old ones."""
    spec = json.loads(base.backend.to_str())
    model = _check_extendable(spec, base)
    old_size = base.vocab_size
    strings = [""] * old_size
    for token, token_id in model["vocab"].items():
        strings[token_id] = token
    for added in spec.get("added_tokens", []):
        strings[added["id"]] = added["content"]

    pieces = _count_pieces(base.backend, texts, config.show_progress)
    words, counts = [], []
    for piece, count in pieces.items():
        ids = [t.id for t in base.backend.model.tokenize(piece)]
        if len(ids) > 1:
            words.append(ids)
            counts.append(count)
    merges = learn_merges(words, counts, strings, n_new=config.add, min_frequency=config.min_frequency,
                          progress=config.show_progress)

    for k, (a, b) in enumerate(merges):
        model["vocab"][strings[old_size + k]] = old_size + k
    string_merges = isinstance(model["merges"][0], str) if model["merges"] else False
    model["merges"] += [f"{strings[a]} {strings[b]}" if string_merges else [strings[a], strings[b]]
                        for a, b in merges]
    backend = Backend.from_str(json.dumps(spec))
    tokenizer = Tokenizer(backend, bos_token=base.bos_token, eos_token=base.eos_token, pad_token=base.pad_token,
                          unk_token=base.unk_token, chat_template=base.chat_template,
                          add_bos_token=base.add_bos_token, add_eos_token=base.add_eos_token,
                          extra_eos_token_ids=base._extra_eos,
                          source=f"{base.source} + {len(merges)} tokens")
    return VocabExtension(tokenizer=tokenizer, old_vocab_size=old_size, merges=merges)


def _check_extendable(spec: dict, base: Tokenizer) -> dict:
    """The BPE model dict of a byte-level BPE with contiguous ids; raises naming what is unsupported."""
    model = spec.get("model", {})
    if model.get("type") != "BPE":
        raise TokenizerError(f"{base.source}: model type {model.get('type')!r} cannot be extended (only 'BPE')")
    for key in ("dropout", "continuing_subword_prefix", "end_of_word_suffix", "unk_token"):
        if model.get(key):
            raise TokenizerError(f"{base.source}: BPE with {key}={model[key]!r} is not supported for extension "
                                 f"(plain byte-level BPE only)")
    if model.get("byte_fallback"):
        raise TokenizerError(f"{base.source}: byte_fallback BPE is not supported (byte-level BPE only)")
    decoder = (spec.get("decoder") or {}).get("type")
    if decoder != "ByteLevel":
        raise TokenizerError(f"{base.source}: decoder {decoder!r} is not byte-level ('ByteLevel' is supported)")
    ids = set(model["vocab"].values()) | {t["id"] for t in spec.get("added_tokens", [])}
    if ids != set(range(base.vocab_size)):
        raise TokenizerError(f"{base.source}: token ids are not exactly 0..{base.vocab_size - 1}; cannot append")
    return model


def _count_pieces(backend: Backend, texts: Iterable[str], progress: bool) -> Counter[str]:
    """Pre-tokenized pieces (in the byte alphabet) and their counts, split as `backend.encode` splits."""
    added = sorted((t.content for t in backend.get_added_tokens_decoder().values()), key=len, reverse=True)
    splitter = re.compile("|".join(map(re.escape, added))) if added else None
    normalizer, pre = backend.normalizer, backend.pre_tokenizer
    pieces: Counter[str] = Counter()
    for text in tqdm(texts, desc="counting words", unit="text", disable=not progress):
        for chunk in splitter.split(text) if splitter else [text]:
            if normalizer is not None:
                chunk = normalizer.normalize_str(chunk)
            pieces.update(p for p, _ in pre.pre_tokenize_str(chunk))
    return pieces
