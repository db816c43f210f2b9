"""Patterns: the small regex language the rules are written in, and ``Rule``, the matcher it compiles to.

Every regex runs on one normalized sentence (see ``normalization``): lower-case words separated by
single spaces, so ``L`` and ``R`` (a space or the text's edge) bound whole words and ``(?: \\S+){0,n}``
skips up to n words. A rule is one of four kinds (:class:`RuleKind`):

* INTENT — an instruction-seeking cue (``METHOD_CUE``: "how to", "how do/can/would", "can I", "step
  by step", "instructions for", "walk me through", "can you", answer-shaped openers such as "here is
  how" / "you will need"; ``WANT_CUE``: "I want/need/plan to"), then the harmful action within five
  words; or a sentence that opens with the action, after filler words (``FILLER``: "please", "now",
  "step 1", "to", ...). A stop word in between (``STOP``: "stop", "without", "prevent", "protect",
  "why", "whether", "about", "history", "did", ...) cancels the match. "How did" is no cue, so
  history questions pass. Built with :func:`intent`.
* PATTERN — a regex that is harmful on its own, no cue needed (threats, "go kill yourself").
* PHRASE — a listed phrase as whole words (:func:`phrase_regex`; what ``RuleSet.deny(phrases=...)`` adds).
* COOCCURRENCE — a term of one class within a few words of a term of another (:func:`cooccur`).

``near(a, b, gap)`` is the usual action: a verb then its object ("synthesize ... sarin").

>>> bool(re.search(intent(near("make", "sarin", 3)), "how do i make pure sarin"))
True
>>> bool(re.search(intent(near("make", "sarin", 3)), "how to stop people who make sarin"))
False
>>> rule("self_harm.demo", RuleKind.PATTERN, "kys").category
'self_harm'
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Iterable


class RuleKind(str, enum.Enum):
    PHRASE = "phrase"                # a listed phrase, anywhere, as whole words
    PATTERN = "pattern"              # a regular expression over normalized text; harmful on its own
    INTENT = "intent"                # an instruction-seeking cue, then a harmful action within 5 words
    COOCCURRENCE = "cooccurrence"    # a term of one class within a few words of a term of another


@dataclasses.dataclass(frozen=True)
class Rule:
    """One matcher. ``regex`` runs on a normalized sentence after ``unless`` (phrases that make this
    rule inapplicable, e.g. "sexual abuse" for the minors co-occurrence rule) is blanked out."""

    name: str
    category: str
    kind: RuleKind
    regex: re.Pattern[str]
    unless: re.Pattern[str] | None = None

    def find(self, sentence: str) -> str | None:
        if self.unless is not None:
            sentence = self.unless.sub("_", sentence)
        m = self.regex.search(sentence)
        return m.group(0).strip() if m else None


L, R = r"(?<!\S)", r"(?!\S)"          # whole-word boundaries in normalized text


def any_of(*alternatives: str) -> str:
    return "(?:" + "|".join(alternatives) + ")"


def near(a: str, b: str, gap: int) -> str:
    """``a``, at most ``gap`` other words, then ``b`` — all whole words."""
    return rf"{L}{a}(?: \S+){{0,{gap}}} {b}{R}"


def phrase_regex(phrases: Iterable[str]) -> re.Pattern[str]:
    return re.compile(L + any_of(*(re.escape(p) for p in phrases)) + R)


# Instruction-seeking cues. An action must start within 5 words after one of them; a stop word in
# between ("how to stop ...", "explain why ...") cancels it. Statements of wanting ("i want to ...") are
# cues for every category but self-harm, where they are a person in crisis, not a request for a method.
WANT_CUE = any_of(r"i (?:want|need|plan) to", r"i am planning to", r"im planning to")
METHOD_CUE = any_of(
    r"how (?:to|do|does|can|could|would|should|might)",     # not "how did": history questions
    r"(?:can|could|would|should|do|must|will) i",
    r"(?:best|easiest|fastest|quickest|cheapest|simplest|surest|most effective|most painless|least painful"
    r"|painless|quick|easy) (?:way|ways|method|methods) (?:to|of|for)",
    r"ways to", r"steps? (?:to|for)", r"step by step", r"instructions?", r"directions? (?:to|for)",
    r"guide (?:to|for|on)", r"tutorial", r"recipe", r"procedure", r"protocol", r"process (?:to|for|of)",
    r"teach me", r"show me", r"tell me", r"walk me through", r"explain (?:to me )?how", r"describe how",
    r"help me",
    r"(?:can|could|would|will) you", r"give me", r"provide", r"details? (?:on|for|of)",
    r"what (?:do|would) i need to", r"where (?:can|do|could) i", r"here is how", r"heres how",
    r"this is how", r"you (?:will|ll) need", r"youll need", r"in order to", r"the trick is to",
    r"write", r"create", r"generate", r"draft", r"compose",
)
CUE = any_of(METHOD_CUE, WANT_CUE)
STOP = any_of(
    "not", "dont", "never", "stop", "stopping", "quit", "avoid", "avoiding", "prevent", "preventing",
    "without", "resist", "cope", "overcome", "protect", "protecting", "defend", "survive", "recognize",
    "recognise", "spot", "detect", "report", "tell if", "if", "why", "whether", "history", "historically",
    "did", "was", "were", "about",
)
FILLER = any_of("please", "pls", "plz", "ok", "okay", "now", "so", "hey", "just", "first", "then", "next",
                "also", "and", "quickly", "simply", "step", r"\d+", "to")
GAP = rf"(?: (?!{STOP}{R})\S+){{0,5}}"


def intent(action: str, cue: str = CUE) -> str:
    """A cue then ``action`` (a regex starting with its verb), or a sentence opening with ``action``."""
    return rf"(?:{L}{cue}{GAP} |^(?:{FILLER} )*){action}{R}"


def cooccur(a: str, b: str, window: int) -> str:
    return rf"{L}(?:{a}(?: \S+){{0,{window}}} {b}|{b}(?: \S+){{0,{window}}} {a}){R}"


def rule(name: str, kind: RuleKind, regex: str, unless: Iterable[str] = ()) -> Rule:
    """A built-in rule; its category is the part of ``name`` before the first dot."""
    category = name.split(".")[0]
    unless = tuple(unless)
    return Rule(name, category, kind, re.compile(regex), re.compile(L + any_of(*unless) + R) if unless else None)
