"""Verifiable instruction-following constraints (IFEval-style): a seeded generator of prompts that carry
machine-checkable constraints, and one checker per constraint kind with strict and loose verdicts.

    prompts = instruction_prompts(100, seed=0)          # InstructionPrompt(prompt, task, constraints)
    verdict = check(prompts[0].constraints, response)   # Verdict: per constraint, strict and loose
    verdict.all_strict, verdict.fraction_loose

Strict follows each constraint's definition below. Loose is IFEval's relaxation (Zhou et al. 2023, §2): a
constraint is loosely followed when any of eight variants of the response follows it strictly — the response,
the response without markdown emphasis ("*"), and each of those with its first line, its last line, or both
dropped (an empty variant counts as not following). So "Sure! Here it is:" before a JSON object passes loosely.

Definitions (words are runs of \\w characters; counts are compared with the constraint's Relation):
    words         number of words
    sentences     number of sentences: runs of text ended by ., ! or ? followed by a space or the end
    paragraphs    number of paragraphs: non-empty blocks separated by a blank line
    keywords      every keyword appears (case-insensitive, as a whole word)
    forbidden     no forbidden word appears (case-insensitive, as a whole word)
    lowercase     the response has a letter and no uppercase letter
    json          the whole response parses as JSON (one ```json fence around it allowed, as IFEval allows)
    bullets       exactly n lines are markdown bullets ("* item" or "- item")
    end-phrase    the response ends with the phrase (case-insensitive, surrounding whitespace and quotes ignored)
    language      py3langid (the data pipeline's language id) names the given language, probability >= 0.5
    no-commas     no comma in the response
    title         a title in double angular brackets, <<like this>>
"""

from __future__ import annotations

import dataclasses
import enum
import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from openafm.data.pipeline.langid import identify


class Kind(str, enum.Enum):
    WORDS = "words"
    SENTENCES = "sentences"
    PARAGRAPHS = "paragraphs"
    KEYWORDS = "keywords"
    FORBIDDEN = "forbidden"
    LOWERCASE = "lowercase"
    JSON = "json"
    BULLETS = "bullets"
    END_PHRASE = "end-phrase"
    LANGUAGE = "language"
    NO_COMMAS = "no-commas"
    TITLE = "title"


class Relation(str, enum.Enum):
    AT_LEAST = "at least"
    AT_MOST = "at most"
    EXACTLY = "exactly"

    def holds(self, count: int, n: int) -> bool:
        return count >= n if self is Relation.AT_LEAST else count <= n if self is Relation.AT_MOST else count == n


@dataclasses.dataclass(frozen=True)
class Constraint:
    """One checkable instruction. Which fields a kind uses: counts (words, sentences, paragraphs: n and
    relation; bullets: n, always exactly), keywords / forbidden (words), end-phrase (phrase), language (lang)."""
    kind: Kind
    n: int | None = None
    relation: Relation | None = None
    words: tuple[str, ...] = ()
    phrase: str | None = None
    lang: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "kind", Kind(self.kind))
        if self.relation is not None:
            object.__setattr__(self, "relation", Relation(self.relation))
        object.__setattr__(self, "words", tuple(self.words))
        need = _FIELDS[self.kind]
        for name in ("n", "relation", "words", "phrase", "lang"):
            has = getattr(self, name) not in (None, ())
            if has != (name in need):
                raise ValueError(f"a {self.kind.value} constraint {'needs' if name in need else 'takes no'} "
                                 f"{name!r} (it uses {sorted(need) or 'no field'}); got {getattr(self, name)!r}")

    def to_dict(self) -> dict[str, Any]:
        out = {"kind": self.kind.value}
        for name in _FIELDS[self.kind]:
            value = getattr(self, name)
            out[name] = value.value if isinstance(value, Relation) else list(value) if name == "words" else value
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Constraint:
        return cls(**{k: tuple(v) if k == "words" else v for k, v in d.items()})

    def describe(self) -> str:
        """The instruction as the prompt states it."""
        k, n, rel = self.kind, self.n, self.relation.value if self.relation else ""
        return {
            Kind.WORDS: lambda: f"Answer with {rel} {n} words.",
            Kind.SENTENCES: lambda: f"Your response should contain {rel} {n} sentences.",
            Kind.PARAGRAPHS: lambda: f"Write {rel} {n} paragraphs, separated from each other by a blank line.",
            Kind.KEYWORDS: lambda: f"Include the keywords {', '.join(repr(w) for w in self.words)} in the response.",
            Kind.FORBIDDEN: lambda: f"Do not use the words {', '.join(repr(w) for w in self.words)}.",
            Kind.LOWERCASE: lambda: "Your entire response must be in lowercase letters; no capital letters allowed.",
            Kind.JSON: lambda: "Wrap your entire output in JSON format.",
            Kind.BULLETS: lambda: f"Your answer must contain exactly {n} bullet points, in markdown: * like this.",
            Kind.END_PHRASE: lambda: f"Finish your response with the exact phrase {self.phrase!r}; no other words "
                                     f"should follow it.",
            Kind.LANGUAGE: lambda: f"Your entire response must be in {LANGUAGES[self.lang]}, no other language.",
            Kind.NO_COMMAS: lambda: "Do not use any commas in your response.",
            Kind.TITLE: lambda: "Give your answer a title wrapped in double angular brackets, such as <<my title>>.",
        }[k]()


_COUNT = {"n", "relation"}
_FIELDS: dict[Kind, set[str]] = {
    Kind.WORDS: _COUNT, Kind.SENTENCES: _COUNT, Kind.PARAGRAPHS: _COUNT, Kind.KEYWORDS: {"words"},
    Kind.FORBIDDEN: {"words"}, Kind.LOWERCASE: set(), Kind.JSON: set(), Kind.BULLETS: {"n"},
    Kind.END_PHRASE: {"phrase"}, Kind.LANGUAGE: {"lang"}, Kind.NO_COMMAS: set(), Kind.TITLE: set(),
}
LANGUAGES = {"en": "English", "fr": "French", "de": "German", "es": "Spanish", "it": "Italian", "pt": "Portuguese"}


# --- the checkers ------------------------------------------------------------------------------------------------

def words(text: str) -> list[str]:
    return re.findall(r"\w+", text)


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])(?:\s+|$)", text.strip()) if words(s)]


def paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]


def bullet_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.match(r"^\s*(\*[^*]|-\s)", line)]


def _has_word(text: str, word: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, flags=re.IGNORECASE) is not None


def _json(text: str) -> bool:
    body = re.sub(r"^```(?:json|JSON|Json)?\s*\n?|\n?\s*```$", "", text.strip()).strip()
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


def _ends_with(text: str, phrase: str) -> bool:
    return text.strip().strip('"').lower().endswith(phrase.strip().lower())


def _language(text: str, lang: str) -> bool:
    found, prob = identify(text)
    return found == lang and prob >= 0.5


CHECKERS: dict[Kind, Callable[[Constraint, str], bool]] = {
    Kind.WORDS: lambda c, t: c.relation.holds(len(words(t)), c.n),
    Kind.SENTENCES: lambda c, t: c.relation.holds(len(sentences(t)), c.n),
    Kind.PARAGRAPHS: lambda c, t: c.relation.holds(len(paragraphs(t)), c.n),
    Kind.KEYWORDS: lambda c, t: all(_has_word(t, w) for w in c.words),
    Kind.FORBIDDEN: lambda c, t: not any(_has_word(t, w) for w in c.words),
    Kind.LOWERCASE: lambda c, t: any(ch.isalpha() for ch in t) and t == t.lower(),
    Kind.JSON: lambda c, t: _json(t),
    Kind.BULLETS: lambda c, t: len(bullet_lines(t)) == c.n,
    Kind.END_PHRASE: lambda c, t: _ends_with(t, c.phrase),
    Kind.LANGUAGE: lambda c, t: _language(t, c.lang),
    Kind.NO_COMMAS: lambda c, t: "," not in t,
    Kind.TITLE: lambda c, t: re.search(r"<<[^\n<>]+>>", t) is not None,
}


def follows_strict(constraint: Constraint, response: str) -> bool:
    return bool(response.strip()) and CHECKERS[constraint.kind](constraint, response)


def loose_variants(response: str) -> list[str]:
    """IFEval's eight loose variants: {as is, without "*"} x {all lines, without the first, without the last,
    without both}."""
    out = []
    for text in (response, response.replace("*", "")):
        lines = text.split("\n")
        out += [text, "\n".join(lines[1:]).strip(), "\n".join(lines[:-1]).strip(), "\n".join(lines[1:-1]).strip()]
    return out


def follows_loose(constraint: Constraint, response: str) -> bool:
    return any(follows_strict(constraint, v) for v in loose_variants(response))


@dataclasses.dataclass(frozen=True)
class Verdict:
    strict: tuple[bool, ...]      # per constraint, in order
    loose: tuple[bool, ...]

    @property
    def all_strict(self) -> bool:
        return all(self.strict)

    @property
    def all_loose(self) -> bool:
        return all(self.loose)

    @property
    def fraction_strict(self) -> float:
        return sum(self.strict) / len(self.strict) if self.strict else 1.0

    @property
    def fraction_loose(self) -> float:
        return sum(self.loose) / len(self.loose) if self.loose else 1.0


def check(constraints: Sequence[Constraint], response: str) -> Verdict:
    return Verdict(tuple(follows_strict(c, response) for c in constraints),
                   tuple(follows_loose(c, response) for c in constraints))


# --- the prompt generator ----------------------------------------------------------------------------------------

TASKS = [
    "Write a short story about {topic}.", "Explain {topic} to a ten-year-old.", "Write a blog post about {topic}.",
    "Describe the history of {topic}.", "Give advice to someone interested in {topic}.",
    "Write a product description for a book about {topic}.", "List the pros and cons of {topic}.",
    "Write a letter to a friend about {topic}.", "Summarise what people should know about {topic}.",
    "Write a poem about {topic}.",
]
TOPICS = ["the ocean", "city gardens", "learning to cook", "the moon", "old trains", "bees", "winter sports",
          "public libraries", "volcanoes", "chess", "rainy days", "bicycles", "coffee", "deserts", "music lessons",
          "mountain hiking", "the printing press", "recycling", "birdwatching", "electric cars"]
KEYWORDS = ["river", "lantern", "harvest", "journey", "silver", "window", "garden", "signal", "balance", "memory",
            "bridge", "thunder", "candle", "compass", "orchard", "puzzle"]
END_PHRASES = ["Is there anything else I can help with?", "Let me know if you have additional questions.",
               "That is all.", "Peace out."]
# Pairs that cannot hold together (or make one of them trivial): never drawn into one prompt.
CONFLICTS = {frozenset(p) for p in [
    (Kind.JSON, Kind.PARAGRAPHS), (Kind.JSON, Kind.BULLETS), (Kind.JSON, Kind.END_PHRASE), (Kind.JSON, Kind.TITLE),
    (Kind.JSON, Kind.SENTENCES), (Kind.JSON, Kind.NO_COMMAS), (Kind.LANGUAGE, Kind.KEYWORDS),
    (Kind.LANGUAGE, Kind.FORBIDDEN), (Kind.LANGUAGE, Kind.END_PHRASE), (Kind.LOWERCASE, Kind.END_PHRASE),
    (Kind.LOWERCASE, Kind.KEYWORDS), (Kind.KEYWORDS, Kind.FORBIDDEN), (Kind.WORDS, Kind.SENTENCES),
]}


@dataclasses.dataclass(frozen=True)
class InstructionPrompt:
    prompt: str                          # the task followed by the constraints' instructions
    task: str
    constraints: tuple[Constraint, ...]
    where: str = ""                      # "instructions seed 0 #7"

    def to_dict(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "task": self.task, "constraints": [c.to_dict() for c in self.constraints]}


def _draw(kind: Kind, rng: random.Random) -> Constraint:
    rel = rng.choice(list(Relation))
    if kind is Kind.WORDS:
        return Constraint(kind, n=rng.choice([20, 50, 100, 150, 300]), relation=rel)
    if kind is Kind.SENTENCES:
        return Constraint(kind, n=rng.randint(2, 8), relation=rel)
    if kind is Kind.PARAGRAPHS:
        return Constraint(kind, n=rng.randint(2, 5), relation=rel)
    if kind in (Kind.KEYWORDS, Kind.FORBIDDEN):
        return Constraint(kind, words=tuple(rng.sample(KEYWORDS, rng.randint(1, 3))))
    if kind is Kind.BULLETS:
        return Constraint(kind, n=rng.randint(2, 6))
    if kind is Kind.END_PHRASE:
        return Constraint(kind, phrase=rng.choice(END_PHRASES))
    if kind is Kind.LANGUAGE:
        return Constraint(kind, lang=rng.choice(sorted(LANGUAGES)))
    return Constraint(kind)


def instruction_prompt(rng: random.Random, *, most: int = 3, where: str = "") -> InstructionPrompt:
    """One prompt: a task and 1..most constraints of distinct, compatible kinds."""
    task = rng.choice(TASKS).format(topic=rng.choice(TOPICS))
    kinds: list[Kind] = []
    target = rng.randint(1, most)
    for kind in rng.sample(list(Kind), len(Kind)):
        if len(kinds) == target:
            break
        if all(frozenset((kind, k)) not in CONFLICTS for k in kinds):
            kinds.append(kind)
    constraints = tuple(_draw(k, rng) for k in kinds)
    return InstructionPrompt(" ".join([task] + [c.describe() for c in constraints]), task, constraints, where)


def instruction_prompts(n: int, *, seed: int = 0, most: int = 3) -> list[InstructionPrompt]:
    """n prompts, the same for the same seed."""
    if n < 0 or most < 1:
        raise ValueError(f"instruction_prompts needs n >= 0 and most >= 1, got n={n}, most={most}")
    rng = random.Random(seed)
    return [instruction_prompt(rng, most=most, where=f"instructions seed {seed} #{i}") for i in range(n)]
