"""Stage 7: profanity filter — mask profane words; drop a document where they are more than 2% of words.

Masking (first letter kept, the rest ``*``) keeps a document that swears once — a quotation, a joke —
useful; a document dense with profanity is dropped as ``profanity-density``. The word lists are small and
deliberately limited to unambiguous strong profanity and slurs per language: words with a common innocent
sense (English "ass" = donkey, "cock" = rooster, "bitch" = female dog, "damn" in the KJV sense) are left
out, so the filter does not mask the King James Bible. Entries ending in ``*`` match any word starting with
them; matching is case-insensitive on whole words. Each document is checked against the English list and
its own language's list.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from functools import cache

from openafm.data.document import Document
from openafm.data.pipeline.stage import Drop, Stage

WORDS: dict[str, tuple[str, ...]] = {
    "en": ("fuck*", "motherfuck*", "shit", "shits", "shitty", "bullshit", "cunt*", "asshole*", "dickhead*",
           "wanker*", "twat*", "nigger*", "faggot*"),
    "de": ("scheiße", "scheisse", "scheiß*", "fick*", "arschloch*", "fotze*", "wichser*", "hurensohn*"),
    "es": ("mierda*", "puta", "putas", "puto", "coño", "gilipollas", "cabrón", "cabrones", "joder", "pendejo*"),
    "fr": ("merde*", "putain*", "connard*", "connasse*", "salope*", "enculé*"),
    "it": ("cazzo*", "stronzo*", "stronza*", "vaffanculo", "puttana*", "minchia*"),
    "pl": ("kurwa*", "kurwy", "chuj*", "pierdol*", "jebać", "jebany*", "skurwysyn*"),
    "ru": ("хуй*", "хуе*", "пизд*", "ебать", "ебан*", "блядь*", "бляд*", "сука", "суки"),
    "cs": ("kurva*", "kurvy", "hovno*", "prdel*", "zmrd*", "píča*"),
}


@cache
def pattern(lang: str | None) -> re.Pattern:
    entries = WORDS["en"] + (WORDS.get(lang, ()) if lang != "en" else ())
    alts = [re.escape(w[:-1]) + r"\w*" if w.endswith("*") else re.escape(w) for w in entries]
    return re.compile(r"(?<!\w)(?:" + "|".join(alts) + r")(?!\w)", re.IGNORECASE)


def mask(text: str, lang: str | None) -> tuple[str, int]:
    n = 0

    def sub(m: re.Match) -> str:
        nonlocal n
        n += 1
        return m.group(0)[0] + "*" * (len(m.group(0)) - 1)
    return pattern(lang).sub(sub, text), n


class ProfanityStage(Stage):
    name = "profanity"

    def __init__(self, *, max_density: float = 0.02):
        self.max_density = max_density

    def process(self, doc: Document, counts: Counter) -> Document | Drop:
        text, n = mask(doc.text, doc.lang)
        if n == 0:
            return doc
        if n > self.max_density * max(len(doc.text.split()), 1):
            return Drop("profanity-density")
        counts["words-masked"] += n
        counts["documents-masked"] += 1
        return replace(doc, text=text, meta={**doc.meta, "profanity_masked": n})
