"""Engine: ``RuleSet`` (which rules run), ``Guardrails`` (one setting's prompt and output checks),
``GuardrailVerdict`` and ``enforce``, which turns a blocked verdict into ``GuardrailViolationError``.

A scan splits the text into sentences, reads each in every normalized variant, blanks out the
allow-listed phrases, and returns the first rule that matches; rules of BLOCK_ALWAYS categories are
tried first. The two settings differ only in what they scan (see the package docstring).

Extending and allow-listing: ``RuleSet.builtin().deny(category, phrases=..., patterns=...,
intents=...)`` adds rules (phrases are normalized like the text; patterns and intent actions are
regexes over normalized text), ``.allow(phrases=..., rules=...)`` neutralizes phrases before every
rule or switches named rules off, ``.with_category(Category(...))`` adds a category. Unknown
categories and rules, empty phrases, bad regexes and regexes that match the empty string raise
:class:`openafm.errors.ConfigError` naming the value. No slur lexicon ships built in: slur lists are
community- and language-specific and full of reclaimed and in-group uses, so a deployment adds its
own with :meth:`RuleSet.deny`.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import re
from collections.abc import Iterable
from typing import ClassVar

from openafm.errors import ConfigError
from openafm.fm.errors import GuardrailViolationError
from openafm.fm.guardrails.normalization import normalize, sentences, variants
from openafm.fm.guardrails.patterns import Rule, RuleKind, intent, phrase_regex
from openafm.fm.guardrails.rules import BUILTIN_ALLOW_PHRASES, BUILTIN_RULES
from openafm.fm.guardrails.taxonomy import BUILTIN_CATEGORIES, Category, Severity

# The setting enum (apple_fm_sdk.SystemLanguageModelGuardrails: DEFAULT = 0,
# PERMISSIVE_CONTENT_TRANSFORMATIONS = 1) lives with SystemLanguageModel; one class, not two.
from openafm.fm.model import SystemLanguageModelGuardrails


@dataclasses.dataclass(frozen=True)
class GuardrailVerdict:
    """The outcome of one check: allowed, or the category and rule that blocked it and the matched
    text (an excerpt of the *normalized* sentence, e.g. ``"how to make sarin"``)."""

    allowed: bool
    category: str | None = None
    rule: str | None = None
    excerpt: str | None = None

    def __post_init__(self) -> None:
        filled = (self.category, self.rule, self.excerpt)
        if self.allowed and any(f is not None for f in filled):
            raise ValueError(f"an allowed verdict names no category, rule or excerpt; got {filled!r}")
        if not self.allowed and any(not isinstance(f, str) or not f for f in filled):
            raise ValueError(f"a blocked verdict names its category, rule and excerpt; got {filled!r}")


ALLOWED = GuardrailVerdict(True)


@dataclasses.dataclass(frozen=True)
class RuleSet:
    """Categories, rules, allow-listed phrases and switched-off rules. Immutable: ``deny``,
    ``allow`` and ``with_category`` return new rule sets."""

    categories: tuple[Category, ...]
    rules: tuple[Rule, ...]
    allow_phrases: tuple[str, ...] = ()
    disabled_rules: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        names = [c.name for c in self.categories]
        if len(set(names)) != len(names):
            raise ConfigError(f"duplicate guardrail category names in {names}")
        seen: set[str] = set()
        for r in self.rules:
            if r.category not in names:
                raise ConfigError(f"rule {r.name!r} has unknown category {r.category!r}; known: {names}")
            if r.name in seen:
                raise ConfigError(f"duplicate guardrail rule name {r.name!r}")
            seen.add(r.name)

    @functools.cached_property
    def _allow(self) -> re.Pattern[str] | None:
        return phrase_regex(self.allow_phrases) if self.allow_phrases else None

    @functools.cached_property
    def _ordered(self) -> tuple[tuple[Rule, Severity], ...]:
        """Enabled rules with their category's severity, BLOCK_ALWAYS categories first."""
        severity = {c.name: c.severity for c in self.categories}
        rank = {Severity.BLOCK_ALWAYS: 0, Severity.BLOCK_BY_DEFAULT: 1}
        enabled = [(r, severity[r.category]) for r in self.rules if r.name not in self.disabled_rules]
        return tuple(sorted(enabled, key=lambda rs: rank[rs[1]]))

    @staticmethod
    def builtin() -> RuleSet:
        return _BUILTIN

    @property
    def rule_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.rules)

    def category(self, name: str) -> Category:
        for c in self.categories:
            if c.name == name:
                return c
        raise ConfigError(f"unknown guardrail category {name!r}; known: {[c.name for c in self.categories]}")

    def with_category(self, category: Category) -> RuleSet:
        if not isinstance(category, Category):
            raise TypeError(f"with_category takes a Category, got {type(category).__name__}: {category!r}")
        return dataclasses.replace(self, categories=self.categories + (category,))

    def deny(self, category: str, *, phrases: Iterable[str] = (), patterns: Iterable[str] = (),
             intents: Iterable[str] = ()) -> RuleSet:
        """Add rules to ``category``: phrases (normalized like the text, whole words), patterns
        (regexes over normalized text, harmful on their own) and intents (regexes for a harmful
        action, which block only after an instruction-seeking cue or as an opening imperative)."""
        self.category(category)
        new: list[Rule] = []
        for phrase in _strings(phrases, "phrase"):
            norm = normalize(phrase)
            if not norm:
                raise ConfigError(f"deny phrase {phrase!r} is empty once normalized")
            new.append(Rule(f"{category}.user_phrase[{norm}]", category, RuleKind.PHRASE, phrase_regex([norm])))
        for kind, sources in ((RuleKind.PATTERN, patterns), (RuleKind.INTENT, intents)):
            for source in _strings(sources, kind.value):
                compiled = _compile_user(source, kind)
                new.append(Rule(f"{category}.user_{kind.value}[{source}]", category, kind, compiled))
        return dataclasses.replace(self, rules=self.rules + tuple(new))

    def allow(self, *, phrases: Iterable[str] = (), rules: Iterable[str] = ()) -> RuleSet:
        """Neutralize ``phrases`` (normalized) before every rule runs, and switch off named ``rules``."""
        extra = []
        for phrase in _strings(phrases, "phrase"):
            norm = normalize(phrase)
            if not norm:
                raise ConfigError(f"allow phrase {phrase!r} is empty once normalized")
            extra.append(norm)
        off = set(_strings(rules, "rule name"))
        for name in off:
            if name not in self.rule_names:
                near = difflib.get_close_matches(name, self.rule_names, n=3)
                raise ConfigError(f"unknown guardrail rule {name!r}; close names: {near or list(self.rule_names)}")
        return dataclasses.replace(self, allow_phrases=self.allow_phrases + tuple(extra),
                                   disabled_rules=self.disabled_rules | off)

    def scan(self, text: str, severities: frozenset[Severity]) -> GuardrailVerdict:
        """The first rule of a category with one of ``severities`` that matches ``text`` (rules of
        BLOCK_ALWAYS categories are tried first), or :data:`ALLOWED`."""
        active = [r for r, severity in self._ordered if severity in severities]
        allow = self._allow
        for sentence in sentences(text):
            readings = [allow.sub("_", v) if allow else v for v in variants(sentence)]
            for rule in active:
                for reading in readings:
                    excerpt = rule.find(reading)
                    if excerpt:
                        return GuardrailVerdict(False, rule.category, rule.name, excerpt)
        return ALLOWED


def _strings(values: Iterable[str], what: str) -> list[str]:
    if isinstance(values, str):
        raise TypeError(f"expected an iterable of {what}s, got the single string {values!r}; wrap it in a list")
    out = list(values)
    for v in out:
        if not isinstance(v, str):
            raise TypeError(f"each {what} must be a str, got {type(v).__name__}: {v!r}")
    return out


def _compile_user(source: str, kind: RuleKind) -> re.Pattern[str]:
    try:
        re.compile(source)
    except re.error as e:
        raise ConfigError(f"deny {kind.value} {source!r} is not a valid regular expression: {e}") from None
    if re.fullmatch(source, ""):
        raise ConfigError(f"deny {kind.value} {source!r} matches the empty string, so it would block everything")
    return re.compile(intent(f"(?:{source})") if kind is RuleKind.INTENT else source)


_BUILTIN = RuleSet(BUILTIN_CATEGORIES, BUILTIN_RULES, BUILTIN_ALLOW_PHRASES)


_ALL = frozenset(Severity)
_SEVERE = frozenset({Severity.BLOCK_ALWAYS})


@dataclasses.dataclass(frozen=True)
class Guardrails:
    """Prompt and output checks for one guardrail setting over one rule set.

    ``Guardrails.DEFAULT`` and ``Guardrails.PERMISSIVE_CONTENT_TRANSFORMATIONS`` use the built-in
    rules; ``Guardrails(setting, rules)`` uses others; :meth:`of` accepts the SDK enum too.
    """

    setting: SystemLanguageModelGuardrails = SystemLanguageModelGuardrails.DEFAULT
    rules: RuleSet = dataclasses.field(default_factory=RuleSet.builtin)

    DEFAULT: ClassVar[Guardrails]
    PERMISSIVE_CONTENT_TRANSFORMATIONS: ClassVar[Guardrails]

    def __post_init__(self) -> None:
        if not isinstance(self.setting, SystemLanguageModelGuardrails):
            raise TypeError(f"guardrails setting must be a SystemLanguageModelGuardrails member "
                            f"({[m.name for m in SystemLanguageModelGuardrails]}), got {self.setting!r}")
        if not isinstance(self.rules, RuleSet):
            raise TypeError(f"rules must be a RuleSet, got {type(self.rules).__name__}")

    @classmethod
    def of(cls, value: Guardrails | SystemLanguageModelGuardrails) -> Guardrails:
        """Guardrails for what ``SystemLanguageModel(guardrails=...)`` was given."""
        if isinstance(value, Guardrails):
            return value
        if isinstance(value, SystemLanguageModelGuardrails):
            return cls(value)
        raise TypeError(f"guardrails must be a Guardrails or a SystemLanguageModelGuardrails member, got {value!r}")

    @property
    def is_permissive(self) -> bool:
        return self.setting is SystemLanguageModelGuardrails.PERMISSIVE_CONTENT_TRANSFORMATIONS

    def with_rules(self, rules: RuleSet) -> Guardrails:
        return dataclasses.replace(self, rules=rules)

    def for_guided_generation(self) -> Guardrails:
        """The guardrails for a non-string (guided) response: default, whatever the setting, as in
        Apple's framework, where the permissive setting only applies to ``String`` responses."""
        return dataclasses.replace(self, setting=SystemLanguageModelGuardrails.DEFAULT)

    def check_prompt(self, text: str, *, transform_material: str | None = None) -> GuardrailVerdict:
        """Check a prompt. ``text`` (instructions and the request) is always checked with every
        category; ``transform_material`` (user-supplied text to summarize, rewrite, ...) is checked
        too by default and skipped by the permissive setting."""
        _require_str(text, "prompt text")
        if transform_material is not None:
            _require_str(transform_material, "transform_material")
        verdict = self.rules.scan(text, _ALL)
        if verdict.allowed and transform_material is not None and not self.is_permissive:
            verdict = self.rules.scan(transform_material, _ALL)
        return verdict

    def check_output(self, text: str) -> GuardrailVerdict:
        """Check a response: every category by default, only BLOCK_ALWAYS ones when permissive."""
        _require_str(text, "output text")
        return self.rules.scan(text, _SEVERE if self.is_permissive else _ALL)


Guardrails.DEFAULT = Guardrails(SystemLanguageModelGuardrails.DEFAULT)
Guardrails.PERMISSIVE_CONTENT_TRANSFORMATIONS = Guardrails(
    SystemLanguageModelGuardrails.PERMISSIVE_CONTENT_TRANSFORMATIONS)


def _require_str(value: object, what: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}: {value!r:.80}")


_WHERE = ("prompt", "output")


def enforce(verdict: GuardrailVerdict, where: str) -> None:
    """Raise ``GuardrailViolationError`` for a blocked verdict, naming the category, the rule, the
    matched excerpt and ``where`` ("prompt" or "output"); return for an allowed one."""
    if not isinstance(verdict, GuardrailVerdict):
        raise TypeError(f"enforce takes a GuardrailVerdict, got {type(verdict).__name__}: {verdict!r}")
    if where not in _WHERE:
        raise ValueError(f"where must be one of {_WHERE}, got {where!r}")
    if verdict.allowed:
        return
    error = GuardrailViolationError(
        f"guardrail violation in the {where}: category {verdict.category!r}, rule {verdict.rule!r}, "
        f"matched {verdict.excerpt!r}")
    error.category, error.rule, error.where, error.excerpt = verdict.category, verdict.rule, where, verdict.excerpt
    raise error
