"""Stage 2: language identification with py3langid (sets Document.lang; drops "unknown").

Why py3langid: its naive-Bayes byte n-gram model (97 languages, 4.6 MB) ships inside the wheel, needs only
numpy, and classifies a document in well under a millisecond; lingua is more accurate on very short text
but its models are ~100x larger and slower, langdetect is pure Python and non-deterministic unless seeded.

The language is "unknown" — and the document dropped — when the normalised probability of the best
language is below ``min_prob`` (0.5). Code is not natural language and is not identified (lang stays
None); a document whose source already set ``lang`` (the templated English math problems) keeps it.
The first ``max_chars`` characters are classified (enough for a stable answer; long pages cost no more).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from functools import lru_cache

import py3langid.langid as L
from py3langid.langid import MODEL_FILE, LanguageIdentifier

from openafm.data.document import Document
from openafm.data.pipeline.stage import Drop, Stage


@lru_cache(maxsize=1)
def _identifier():
    return LanguageIdentifier.from_modelpath(L.MODEL_DIR / MODEL_FILE, norm_probs=True)


def identify(text: str) -> tuple[str, float]:
    """(ISO 639-1 code, probability) of the most likely language."""
    lang, prob = _identifier().classify(text)
    return lang, float(prob)


class LangIdStage(Stage):
    name = "langid"

    def __init__(self, *, min_prob: float = 0.5, max_chars: int = 4000):
        if not 0.0 <= min_prob <= 1.0:
            raise ValueError(f"min_prob must be in [0, 1], got {min_prob}")
        self.min_prob, self.max_chars = min_prob, max_chars

    def process(self, doc: Document, counts: Counter) -> Document | Drop:
        if doc.domain == "code":
            counts["not-identified:code"] += 1
            return doc
        if doc.lang is not None:
            counts["lang-from-source"] += 1
            return doc
        lang, prob = identify(doc.text[: self.max_chars])
        if prob < self.min_prob:
            return Drop("unknown-language")
        expected = doc.meta.get("expected_lang")
        if expected is not None and expected != lang:
            counts["differs-from-source-language"] += 1
        counts[f"lang:{lang}"] += 1
        return replace(doc, lang=lang, meta={**doc.meta, "lang_prob": round(prob, 4)})
