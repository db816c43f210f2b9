"""Normalization: fold text to the plain lower-case words the rules match, undoing trivial evasions.

What resists trivial evasion: NFKC (full-width letters, ligatures), format characters dropped
(zero-width spaces), a small table of Cyrillic/Greek look-alike letters, accents stripped, case
folded, apostrophes dropped ("someone's" -> "someones"), punctuation -> space, whitespace collapsed,
leetspeak folded inside tokens that mix letters with 0 1 3 4 5 7 8 9 @ $ ! | (both 1->i and 1->l are
tried), and runs of single letters joined ("s a r i n" -> "sarin"). The rules run on every reading
:func:`variants` returns, one sentence (:func:`sentences`) at a time.

Not folded: repeated letters ("kiiill"), split words ("bo mb"), misspellings, other languages.

>>> normalize("Ｈow  to   MAKE… s\u200barin?")
'how to make sarin'
>>> variants("h0w t0 m4k3 s4r1n")
['h0w t0 m4k3 s4r1n', 'how to make sarin', 'how to make sarln']
>>> variants("s a r i n")
['sarin']
>>> sentences("First one. Second one!\\nThird")
['First one.', 'Second one!', 'Third']
"""

from __future__ import annotations

import re
import unicodedata

_LOOKALIKES = str.maketrans({   # Cyrillic and Greek letters that render like Latin ones (lower case)
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "х": "x", "у": "y", "і": "i", "ј": "j",
    "ѕ": "s", "к": "k", "м": "m", "т": "t", "н": "h", "в": "b", "α": "a", "ο": "o", "ε": "e",
    "ι": "i", "κ": "k", "ν": "v", "ρ": "p", "τ": "t", "υ": "u", "χ": "x",
})
_LEET_COMMON = {"0": "o", "3": "e", "4": "a", "5": "s", "7": "t", "8": "b", "9": "g", "@": "a",
                "$": "s", "!": "i"}
_LEET_ONE_AS = ("i", "l")          # "1" and "|" stand for either; both readings are scanned
_LEET_CHARS = set(_LEET_COMMON) | {"1", "|"}
_APOSTROPHES = re.compile(r"['’‘ʼ`´]")
_NON_WORD = re.compile(r"[^\w ]|_")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")


def _unicode_fold(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")      # zero-width characters
    text = text.casefold().translate(_LOOKALIKES)
    text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
    return _APOSTROPHES.sub("", unicodedata.normalize("NFC", text))


def _leet_fold(token: str, one_as: str) -> str:
    if not (any(c.isalpha() for c in token) and any(c in _LEET_CHARS for c in token)):
        return token
    table = {**_LEET_COMMON, "1": one_as, "|": one_as}
    return "".join(table.get(c, c) for c in token)


def _words_only(text: str) -> str:
    return " ".join(_NON_WORD.sub(" ", text).split())


def _join_spaced_letters(text: str, keep_leading_article: bool) -> str:
    """Join runs of three or more single letters ("s a r i n" -> "sarin"). With
    keep_leading_article, a run opening with "a" or "i" keeps that word ("a b o m b" -> "a bomb")."""
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if len(run) >= 3:
            if keep_leading_article and run[0] in ("a", "i") and len(run) >= 4:
                out.extend([run[0], "".join(run[1:])])
            else:
                out.append("".join(run))
        else:
            out.extend(run)
        run.clear()

    for word in text.split(" "):
        if len(word) == 1 and word.isalpha():
            run.append(word)
        else:
            flush()
            out.append(word)
    flush()
    return " ".join(w for w in out if w)


def normalize(text: str) -> str:
    """The plain normalized form of ``text``: folded, lower case, words separated by single spaces."""
    return _words_only(_unicode_fold(text))


def variants(sentence: str) -> list[str]:
    """Every normalized reading of one sentence that the rules are run on (1 for ordinary text)."""
    folded = _unicode_fold(sentence)
    readings = [_words_only(folded)]
    for one_as in _LEET_ONE_AS:
        readings.append(_words_only(" ".join(_leet_fold(t, one_as) for t in folded.split())))
    out: list[str] = []
    for r in readings:
        for keep in (False, True):
            v = _join_spaced_letters(r, keep)
            if v and v not in out:
                out.append(v)
    return out


def sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text) if s.strip()]
