"""Stage 3: exact deduplication (normalised-text hash) and near-duplicate removal (MinHash LSH).

Exact: the text is NFKC-normalised, case-folded, stripped of punctuation and its whitespace collapsed; the
SHA-1 of that is the key, so copies that differ only in case, spacing or punctuation collapse.

Near: MinHash (128 permutations) over word 5-gram shingles (character 5-grams for Chinese, Japanese, Thai,
which are written without spaces), LSH at Jaccard threshold 0.8. Five-word shingles are the usual choice
for web-scale near-dup detection (shorter shingles make unrelated texts in one language look similar;
longer ones miss documents with small edits); 0.8 removes re-wrapped or lightly edited copies and keeps
documents that merely share passages. A document with fewer than 5 tokens has one shingle (all of it).
The first document seen is kept; later ones are dropped as ``exact-duplicate`` / ``near-duplicate``.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter

from openafm.data.document import Document
from openafm.data.pipeline.stage import Drop, Stage

_PUNCT = re.compile(r"[^\w\s]+")
_SPACE = re.compile(r"\s+")
CHAR_SHINGLE_LANGS = frozenset({"zh", "ja", "th"})


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return _SPACE.sub(" ", _PUNCT.sub(" ", text)).strip()


def exact_key(text: str) -> str:
    return hashlib.sha1(normalize(text).encode("utf-8")).hexdigest()


def shingles(text: str, lang: str | None, n: int = 5) -> set[str]:
    norm = normalize(text)
    tokens = list(norm.replace(" ", "")) if lang in CHAR_SHINGLE_LANGS else norm.split()
    if len(tokens) < n:
        return {" ".join(tokens)}
    sep = "" if lang in CHAR_SHINGLE_LANGS else " "
    return {sep.join(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


class DedupStage(Stage):
    name = "dedup"

    def __init__(self, *, threshold: float = 0.8, num_perm: int = 128, shingle: int = 5):
        from datasketch import MinHashLSH  # on use: datasketch costs ~0.4 s to import (every CLI call)
        self.threshold, self.num_perm, self.shingle = threshold, num_perm, shingle
        self.seen: set[str] = set()
        self.lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)

    def _minhash(self, doc: Document):
        from datasketch import MinHash  # on use, as above
        m = MinHash(num_perm=self.num_perm, seed=1)
        m.update_batch([s.encode("utf-8") for s in shingles(doc.text, doc.lang, self.shingle)])
        return m

    def _add(self, doc: Document, key: str, m) -> None:
        self.seen.add(key)
        self.lsh.insert(doc.id, m)

    def process(self, doc: Document, counts: Counter) -> Document | Drop:
        key = exact_key(doc.text)
        if key in self.seen:
            return Drop("exact-duplicate")
        m = self._minhash(doc)
        if self.lsh.query(m):
            return Drop("near-duplicate")
        self._add(doc, key, m)
        return doc

    def restore(self, doc: Document) -> None:
        self._add(doc, exact_key(doc.text), self._minhash(doc))
