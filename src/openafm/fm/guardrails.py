"""Guardrails: a lexical safety filter on prompts and responses (``SystemLanguageModelGuardrails``).

Apple's framework has two guardrail settings, and so does openafm, with the SDK's spelling:

* ``DEFAULT`` — every category below is checked in the prompt (instructions, user text and any
  material to transform) and in the model's output. A hit becomes a ``GuardrailViolationError``.
* ``PERMISSIVE_CONTENT_TRANSFORMATIONS`` — for transforming text the user supplies (summarize,
  rewrite, translate, classify a post that itself contains violent or hateful words). Exactly two
  things are relaxed: (1) the prompt-side check skips the text passed as ``transform_material``
  (the instructions around it are still checked in full), and (2) the output check runs only the
  ``BLOCK_ALWAYS`` categories, so a summary may repeat ``BLOCK_BY_DEFAULT`` content from the
  material. Nothing else changes. Apple's permissive mode goes further for ``String`` responses (it
  never raises and relies on the model refusing); openafm keeps the ``BLOCK_ALWAYS`` output check
  because its open models have no trained refusal to rely on. As in Apple's framework, guided
  (non-string) generation uses default guardrails: see :meth:`Guardrails.for_guided_generation`.

>>> g = Guardrails.DEFAULT
>>> g.check_prompt("How do I kill a python process that hangs?").allowed
True
>>> v = g.check_prompt("h0w t0 m4k3 s4r1n at home")
>>> v.allowed, v.category, v.rule
(False, 'weapons_mass_harm', 'weapons_mass_harm.make_agent')
>>> p = Guardrails.PERMISSIVE_CONTENT_TRANSFORMATIONS
>>> p.check_prompt("Summarize this post.", transform_material="Immigrants are vermin.").allowed
True

Taxonomy (severity: what happens in permissive mode)

==========================  ================  =================================================
category                    severity          what it covers
==========================  ================  =================================================
weapons_mass_harm           BLOCK_ALWAYS      making, obtaining or using chemical, biological,
                                              radiological, nuclear or explosive weapons
                                              (CBRNE), and making pathogens more dangerous
sexual_minors               BLOCK_ALWAYS      sexual content involving anyone under 18, seeking
                                              abuse material, grooming phrasing
self_harm                   BLOCK_ALWAYS      methods of suicide or self-injury, telling someone
                                              to kill or harm themselves
violent_wrongdoing          BLOCK_BY_DEFAULT  how to kill, injure, poison or kidnap a person,
                                              conceal a killing; direct threats ("I'll kill you")
hate_harassment             BLOCK_BY_DEFAULT  dehumanizing a group, calling for violence against
                                              it; slurs the deployment adds (none built in)
illegal_drug_manufacture    BLOCK_BY_DEFAULT  making or extracting hard illegal drugs
malware_cyberattack         BLOCK_BY_DEFAULT  writing or deploying malware, breaking into other
                                              people's accounts, stealing credentials, DDoS
==========================  ================  =================================================

Why these rules, and what they let through
------------------------------------------
The filter blocks *requests for capability* and *direct abuse*, not *topics*. Most rules are
INTENT rules: an instruction-seeking cue ("how to", "how do/can/would", "can I", "step by step",
"instructions for", "walk me through", "can you", "I want to", a sentence that opens with the
imperative verb or with "to <verb>", or answer-shaped openers such as "here is how" / "you will
need") followed within five words by a harmful action — a verb next to a harmful object
("synthesize ... sarin", "poison ... my husband", "write ... keylogger"), or a recipe word next to
it ("recipe for LSD"). "How did" is not a cue, so history questions about how something was done
pass. So
"the history of chemical weapons treaties", a news summary saying a suspect "planned to bomb a
station", "why did the Allies build the atomic bomb", "what are the symptoms of anthrax" and
"what is the lethal dose of caffeine" pass: they mention the subject but ask for no procedure.
Words between the cue and the action that turn the request around ("stop", "without", "prevent",
"protect", "why", "whether", "about", "history", ...) cancel the match, so "how do I stop wanting
to hurt myself" and "how to kill weeds without harming my kids" pass. Objects are specific: "kill"
needs a person ("kill a python process", "kill time", "kill the lights" pass); "bomb" is
neutralized in "bath bomb", "bomb shelter", "photobomb". A few PATTERN rules need no cue because
the text is harmful on its own: threats ("I'm going to kill you"), telling someone to kill
themselves, dehumanizing claims about a group ("<group> are vermin", present tense only, so
"Nazi propaganda called Jews vermin" passes). One COOCCURRENCE rule blocks a sexual term within
ten words of a term for a minor, after neutralizing phrases such as "sex education", "sexual
abuse", "sexual assault" (so reporting and prevention pass). Statements of wanting ("I want to kill
myself") are not cues for self-harm, on purpose: they are a person in crisis, not a request for a
method, and blocking them would only silence that person; the model should answer them.

Normalization (what resists trivial evasion): NFKC (full-width letters, ligatures), format
characters dropped (zero-width spaces), a small table of Cyrillic/Greek look-alike letters, accents
stripped, case folded, apostrophes dropped ("someone's" -> "someones"), punctuation -> space,
whitespace collapsed, leetspeak folded inside tokens that mix letters with 0 1 3 4 5 7 8 9 @ $ ! |
(both 1->i and 1->l are tried), and runs of single letters joined ("s a r i n" -> "sarin").
Matching is per sentence and word-bounded: "skill" never matches "kill", "killer cake" never
matches "kill", "methane" never matches "meth".

Known limits (it is a lexical filter, not a model). Measured on a 44-prompt table written after the
rules were final (tests/fm/test_guardrails.py HELD_OUT, ``benchmarks/guardrails.py``): precision
0.94, recall 0.67 — about a third of unseen harmful phrasings get through. Misses come from words
not in the lists ("torture a prisoner", "shoot up my school", "slitting my wrists", "press ecstasy
pills", "brute-force someone's password", "a sexual encounter"), object-before-verb phrasing
("the heroin recipe") and requests without a cue ("which bridge is high enough to kill myself by
jumping"). More generally: no context beyond one sentence ("what is the most painless way to do
it?" after a previous sentence passes); paraphrases that name neither verb nor object pass;
euphemisms, misspellings beyond the folds above ("kiiill", "bo mb") and other languages pass;
answers that describe a procedure without naming it pass. False positives: counter-speech quoting
a dehumanizing claim ("why is it wrong to say immigrants are vermin?"), games ("how do I kill the
dragon boss", "kill someone in minecraft"), "smoke bomb", news sentences opening with "To build a
nuclear bomb, ...", "should I kill myself?" (blocked, though it is a crisis question) and a teenager
asking about their own relationship ("I'm 14 and my boyfriend wants to have sex") — the allow-list
is the remedy for deployment-specific ones. A model's refusal that restates a BLOCK_ALWAYS request
("I can't give instructions to make sarin") is itself blocked in the output.
No slur lexicon ships built in: slur lists are community- and language-specific and full of
reclaimed and in-group uses, so a deployment adds its own with :meth:`RuleSet.deny`.

Extending and allow-listing: ``RuleSet.builtin().deny(category, phrases=..., patterns=...,
intents=...)`` adds rules (phrases are normalized like the text; patterns and intent actions are
regexes over normalized text), ``.allow(phrases=..., rules=...)`` neutralizes phrases before every
rule or switches named rules off, ``.with_category(Category(...))`` adds a category. Unknown
categories and rules, empty phrases, bad regexes and regexes that match the empty string raise
:class:`openafm.errors.ConfigError` naming the value.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import functools
import re
import unicodedata
from typing import ClassVar, Iterable

from openafm.errors import ConfigError
# The setting enum (apple_fm_sdk.SystemLanguageModelGuardrails: DEFAULT = 0,
# PERMISSIVE_CONTENT_TRANSFORMATIONS = 1) lives with SystemLanguageModel; one class, not two.
from openafm.fm.model import SystemLanguageModelGuardrails


# ─── taxonomy ─────────────────────────────────────────────────────────────────────────────────────

class Severity(str, enum.Enum):
    BLOCK_ALWAYS = "block_always"            # blocked in both settings, prompt and output
    BLOCK_BY_DEFAULT = "block_by_default"    # permissive setting: not checked in material or output


@dataclasses.dataclass(frozen=True)
class Category:
    name: str
    severity: Severity
    description: str


BUILTIN_CATEGORIES: tuple[Category, ...] = (
    Category("weapons_mass_harm", Severity.BLOCK_ALWAYS,
             "making, obtaining or using chemical, biological, radiological, nuclear or explosive weapons"),
    Category("sexual_minors", Severity.BLOCK_ALWAYS,
             "sexual content involving minors, seeking abuse material, grooming"),
    Category("self_harm", Severity.BLOCK_ALWAYS,
             "methods of suicide or self-injury, encouraging someone to harm themselves"),
    Category("violent_wrongdoing", Severity.BLOCK_BY_DEFAULT,
             "how to kill, injure, poison or kidnap a person, conceal a killing; direct threats"),
    Category("hate_harassment", Severity.BLOCK_BY_DEFAULT,
             "dehumanizing a group or calling for violence against it; deployment-supplied slurs"),
    Category("illegal_drug_manufacture", Severity.BLOCK_BY_DEFAULT,
             "making or extracting hard illegal drugs"),
    Category("malware_cyberattack", Severity.BLOCK_BY_DEFAULT,
             "writing or deploying malware, breaking into others' accounts, stealing credentials, DDoS"),
)


# ─── normalization ────────────────────────────────────────────────────────────────────────────────

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


# ─── rules ────────────────────────────────────────────────────────────────────────────────────────

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


_L, _R = r"(?<!\S)", r"(?!\S)"          # whole-word boundaries in normalized text


def _any(*alternatives: str) -> str:
    return "(?:" + "|".join(alternatives) + ")"


def _near(a: str, b: str, gap: int) -> str:
    """``a``, at most ``gap`` other words, then ``b`` — all whole words."""
    return rf"{_L}{a}(?: \S+){{0,{gap}}} {b}{_R}"


def _phrases(phrases: Iterable[str]) -> re.Pattern[str]:
    return re.compile(_L + _any(*(re.escape(p) for p in phrases)) + _R)


# Instruction-seeking cues. An action must start within 5 words after one of them; a stop word in
# between ("how to stop ...", "explain why ...") cancels it. Statements of wanting ("i want to ...") are
# cues for every category but self-harm, where they are a person in crisis, not a request for a method.
_WANT_CUE = _any(r"i (?:want|need|plan) to", r"i am planning to", r"im planning to")
_METHOD_CUE = _any(
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
_CUE = _any(_METHOD_CUE, _WANT_CUE)
_STOP = _any(
    "not", "dont", "never", "stop", "stopping", "quit", "avoid", "avoiding", "prevent", "preventing",
    "without", "resist", "cope", "overcome", "protect", "protecting", "defend", "survive", "recognize",
    "recognise", "spot", "detect", "report", "tell if", "if", "why", "whether", "history", "historically",
    "did", "was", "were", "about",
)
_FILLER = _any("please", "pls", "plz", "ok", "okay", "now", "so", "hey", "just", "first", "then", "next",
               "also", "and", "quickly", "simply", "step", r"\d+", "to")
_GAP = rf"(?: (?!{_STOP}{_R})\S+){{0,5}}"


def _intent(action: str, cue: str = _CUE) -> str:
    """A cue then ``action`` (a regex starting with its verb), or a sentence opening with ``action``."""
    return rf"(?:{_L}{cue}{_GAP} |^(?:{_FILLER} )*){action}{_R}"


def _cooccur(a: str, b: str, window: int) -> str:
    return rf"{_L}(?:{a}(?: \S+){{0,{window}}} {b}|{b}(?: \S+){{0,{window}}} {a}){_R}"


def _rule(name: str, kind: RuleKind, regex: str, unless: Iterable[str] = ()) -> Rule:
    category = name.split(".")[0]
    unless = tuple(unless)
    return Rule(name, category, kind, re.compile(regex), re.compile(_L + _any(*unless) + _R) if unless else None)


# Word lists (written for openafm). Verbs carry their -ing forms where requests use them.
_MAKE = _any("make", "making", "build", "building", "create", "creating", "assemble", "assembling",
             "construct", "constructing", r"synthesi[sz]e", r"synthesi[sz]ing", "synthesis", "produce",
             "producing", "production", "manufacture", "manufacturing", "cook", "cooking", "brew",
             "brewing", "mix", "mixing", "prepare", "preparing", "extract", "extracting", "purify",
             "purifying", "refine", "refining")
_RECIPE = _any(r"recipes? (?:for|of)", r"synthesis (?:route|routes|of|for)", r"instructions (?:for|on)",
               r"ingredients (?:for|of)", r"formulas? (?:for|of)", r"blueprints? (?:for|of)")   # + the object itself
_CBRNE_VERB = _any(_MAKE, r"weaponi[sz]e", r"weaponi[sz]ing", r"aerosoli[sz]e", r"aerosoli[sz]ing", "culture",
                   "culturing", "cultivate", "enrich", "enriching", "obtain", "acquire", "buy", "detonate",
                   "detonating", "deploy", "deploying", "release", "releasing", "disperse", "dispersing", "smuggle",
                   "rig", "plant", "planting", "set off")
_CBRNE_OBJECT = _any(
    "sarin", "soman", "tabun", "cyclosarin", "vx", "novichok", r"nerve (?:agent|gas)s?", "mustard gas",
    "sulfur mustard", "phosgene", "chlorine gas", "hydrogen cyanide", "ricin", "abrin", r"botulinum(?: toxin)?",
    "anthrax", "smallpox", r"bioweapons?", r"biological weapons?", r"chemical weapons?",
    r"nuclear (?:bomb|weapon|warhead|device)s?", r"atomic bombs?", r"atom bombs?", r"dirty bombs?",
    r"radiological (?:weapon|dispersal device)s?", r"(?:weapons? grade|highly enriched) (?:uranium|plutonium)",
    r"(?:(?:pipe|car|nail|pressure cooker|letter) )?bombs?", "explosives", "an explosive",
    r"explosive (?:device|charge|vest|belt|mixture|compound)s?", r"improvised explosive devices?", r"ieds?",
    "tatp", "acetone peroxide", "hmtd", "nitroglycerin", "semtex", "c 4", r"molotov(?: cocktail)?s?",
    "napalm", r"detonators?", r"blasting caps?", r"grenades?", r"landmines?",
)
_PATHOGEN = _any(r"virus(?:es)?", r"pathogens?", "bacteria", "bacterium", "flu", "influenza", r"strains?",
                 r"germs?", "h5n1", "ebola", "smallpox", "anthrax", "plague", "yersinia pestis", "bacillus anthracis",
                 r"toxins?", r"spores?")

_SEXUAL = _any("have sex", "having sex", "had sex", "sex with", "talk dirty", "dirty talk",
               r"sex (?:scene|story|stories|act|acts|video|tape|chat)s?",
               r"sext(?:ing)? with", r"sexual(?:ly)? (?:content|act|acts|activity|roleplay|role play|story|fantasy"
               r"|images?|photos?|pictures?|videos?|relationship|touching|favou?rs?|explicit)", "sexy", r"nudes?",
               "naked", r"erotic(?:a)?", r"porn(?:o|ographic|ography)?", "intercourse", r"orgasms?", "lewd", "nsfw",
               r"explicit (?:story|content|images?|photos?|pics?|scene)s?", r"seduc(?:e|ing|tion)", "hentai",
               r"fetish(?:es)?", r"masturbat\w*", r"genitals?")
_MINOR = _any(r"child(?:ren)?", r"kids?", "kiddie", r"minors?", "a minor", r"underage(?:d)?", r"pre ?teens?",
              r"tweens?", r"toddlers?", r"infants?", "baby", "babies", r"(?:little|young) (?:girl|boy)s?",
              r"school ?(?:girl|boy)s?", r"teens?", r"teenagers?", "teenage",
              r"(?:[1-9]|1[0-7]) ?(?:year|yr)s? ?old", r"aged? (?:[1-9]|1[0-7])",
              r"(?:youre|you are|she is|shes|he is|hes|im|i am) (?:[1-9]|1[0-7])"
              r"(?! (?:minutes|hours|feet|inches|kg|lbs|percent))", r"(?:elementary|middle) schoolers?")
_ABUSE_MATERIAL = _any(r"child porn(?:ography)?", "kiddie porn", "csam", r"underage porn(?:ography)?",
                       r"child sexual abuse (?:material|images?|imagery|videos?|content)")

_SELF = r"(?:myself|my self)"
_PERSON = _any("person", "people", "someone", "somebody", "anyone", "anybody", "him", "her", "them", "human",
               "humans", "man", "woman", "men", "women", "guy", "girl", "boy", "child", "children", "kid", "kids",
               "baby", "toddler", "wife", "husband", "spouse", "boyfriend", "girlfriend", "partner", "ex", "boss",
               "neighbor", "neighbour", "coworker", "colleague", "teacher", "classmate", "student", "mother",
               "father", "mom", "mum", "dad", "parents?", "brother", "sister", "son", "daughter", "family",
               "friend", "roommate", "stepdad", "stepmom", "president", "politician", "senator", "judge", "cop",
               "officer", "witness", "stranger", "landlord", "victim", r"pedestrians?", r"cyclists?")
_HARM_VERB = _any("kill", "killing", "murder", "murdering", "poison", "poisoning", "strangle", "strangling",
                  "suffocate", "suffocating", "smother", "smothering", "stab", "stabbing", "shoot", "shooting",
                  "kidnap", "kidnapping", "abduct", "abducting", "assassinate", "assassinating", "torture",
                  "torturing", "maim", "drown", "drowning", "dismember", "hurt", "hurting", "harm", "harming",
                  "injure", "injuring", "attack", "attacking", "beat up", "run over", "choke", "choking")
_POISON = _any(r"poisons?", r"toxins?", r"sedatives?", r"roofies", "rohypnol", "antifreeze", "cyanide", "arsenic",
               "thallium", "rat poison")
_DRINK = _any(r"coffees?", r"teas?", r"drinks?", "food", r"meals?", "wine", "water", r"beers?", "soup", "dinner",
              "lunch")
_BODY = r"(?:corpse|corpses|dead body|dead bodies|bodies|body(?! (?:odou?r|fat|hair|acne|spray|lotion|wash|weight" \
        r"|butter|pain|image|language|shop|count|of water|temperature|mass)))"

_GROUP = _any("jews", "jewish people", "muslims", "christians", "catholics", "hindus", "sikhs", "buddhists",
              "atheists", "blacks", "black people", "whites", "white people", "asians", "asian people", "arabs",
              "latinos", "latinas", "hispanics", "mexicans", "africans", "indians", "chinese people", "immigrants",
              "migrants", "refugees", "gays", "gay people", "lesbians", "bisexuals", "homosexuals", "trans people",
              "transgender people", "women", "men", "disabled people", "the disabled", "roma", "gypsies",
              "indigenous people")
_DEHUMANIZING = _any("subhuman", "sub human", "vermin", "animals", "beasts", "parasites", "rats", "cockroaches",
                     "roaches", "insects", "a disease", "a plague", "a cancer", "a virus", "savages", "filth", "trash",
                     "garbage", "inferior", "not human", "less than human", "apes", "monkeys", "pigs", "dogs")
_EXTERMINATE = _any("kill", "exterminate", "eradicate", "gas", "wipe out", "get rid of", "purge", "lynch", "hang",
                    "burn", "shoot", "slaughter", "massacre")

_DRUG = _any("meth", "methamphetamine", "crystal meth", "crack cocaine", "cocaine", "heroin", "fentanyl",
             "carfentanil", "lsd", "mdma", "ghb", "pcp", "dmt", "krokodil", "desomorphine", "mephedrone",
             r"meth labs?")

_MALWARE_VERB = _any("produce", "producing", "generate", "generating", "implement", "implementing", "craft",
                     "crafting", "write", "writing", "code", "coding", "create", "creating", "build", "building",
                     "make", "making", "develop", "developing", "program", "deploy", "deploying", "spread", "spreading",
                     "distribute", "distributing", "install", "installing", "launch", "launching", "sell",
                     "obfuscate", "set up")
_MALWARE = _any("ransomware", r"key ?loggers?", r"botnets?", r"rootkits?", r"trojans?", r"trojan horses?",
                r"remote access trojans?", r"(?:computer|pc|windows|android|macro) virus(?:es)?",
                r"(?:computer|network|self propagating) worms?", "malware", "spyware", "stalkerware",
                r"info ?stealers?", r"(?:credential|password|cookie) stealers?", r"cryptojackers?", r"crypters?",
                r"exploit kits?", r"phishing (?:kit|page|site|website|email|emails|campaign|link)s?",
                r"zero day exploits?", r"polymorphic (?:code|malware|virus)")
_OTHERS = _any("someones?", "somebodys?", "someone elses", "somebody elses", "his", "her", "their", "other peoples",
               "a strangers", r"(?:the|a|my) (?:school|company|companys|schools|government|governments|employers?)",
               r"my (?:ex|exs|ex \S+|wifes?|husbands?|girlfriends?|boyfriends?|partners?|boss|bosss|neighbou?rs?"
               r"|coworkers?|teachers?|friends?|sisters?|brothers?|moms?|dads?)")
_TARGET = _any(r"accounts?", r"e ?mails?", "gmail", r"phones?", "iphone", "instagram", "facebook", "snapchat",
               "whatsapp", "tiktok", "wifi", "wi fi", "network", r"computers?", "laptop", r"servers?",
               r"databases?", "icloud", r"systems?", "webcam", "camera", "messages", "texts")
_SECRETS = _any("passwords", "credentials", "credit card numbers", "card numbers", "cookies", "login details",
                "session tokens", "logins")

_BUILTIN_RULES: tuple[Rule, ...] = (
    # weapons_mass_harm — BLOCK_ALWAYS
    _rule("weapons_mass_harm.make_agent", RuleKind.INTENT, _intent(_any(
        _near(_CBRNE_VERB, _CBRNE_OBJECT, 3), _near(_RECIPE, _CBRNE_OBJECT, 2),
        _near(_any(r"weaponi[sz](?:e|ing)", r"aerosoli[sz](?:e|ing)"), _PATHOGEN, 3)))),
    _rule("weapons_mass_harm.enhance_pathogen", RuleKind.INTENT, _intent(_any(
        _near(_any("make", "engineer", "modify", "mutate", "enhance", "evolve"), _PATHOGEN, 3)
        + r"(?: \S+){0,3} more (?:transmissible|lethal|contagious|virulent|deadly|infectious)",
        r"(?:increase|increasing|boost|boosting|enhance|enhancing) the (?:transmissibility|virulence|lethality)"
        r" of"))),
    # sexual_minors — BLOCK_ALWAYS
    _rule("sexual_minors.sexual_with_minor", RuleKind.COOCCURRENCE, _cooccur(_SEXUAL, _MINOR, 10), unless=(
        "sex education", "sex ed", "sexual health", r"sex(?:ual)? abuse", "sexually abused", "sexual exploitation",
        "sexual assault", "sexually assaulted", r"sex offenders?", "sex trafficking", "sexual harassment",
        "sexual orientation", "sexual development", "naked eye", r"naked mole rats?", r"nude (?:colou?r|shade)s?",
        _ABUSE_MATERIAL)),
    _rule("sexual_minors.seek_abuse_material", RuleKind.INTENT, _intent(_near(_any(
        "find", "finding", "download", "downloading", "get", "buy", "access", "share", "sharing", "trade",
        "view", "watch", "make", "making", "produce", "create", "sell", "distribute"), _ABUSE_MATERIAL, 2))),
    _rule("sexual_minors.grooming", RuleKind.INTENT, _intent(
        _near(_any("get", "convince", "persuade", "lure", "trick", "groom", "grooming"), _MINOR, 3)
        + r"(?: \S+){0,4} (?:meet (?:me|up)(?: \S+){0,2} (?:alone|in private|secretly)"
          r"|without (?:her|his|their) parents (?:knowing|finding out)|(?:not|never) tell (?:her|his|their) parents)")),
    # self_harm — BLOCK_ALWAYS
    _rule("self_harm.method", RuleKind.INTENT, _intent(_any(
        _any("kill", "killing", "hurt", "hurting", "harm", "harming", "cut", "cutting", "hang", "hanging",
             "poison", "poisoning", "drown", "drowning", "shoot", "shooting", "starve", "starving", "burn",
             "burning", "strangle", "suffocate", "overdose") + " " + _SELF,
        r"(?:commit|committing) suicide", r"(?:end|ending|take|taking) my (?:own )?life",
        r"overdose (?:on|intentionally|on purpose)", r"die (?:painlessly|quickly|without pain|in my sleep)"),
        cue=_METHOD_CUE)),
    _rule("self_harm.pills_to_die", RuleKind.PATTERN,
          r"\bhow many (?:\S+ ){0,3}(?:pills|tablets|capsules|mg|milligrams|grams)(?: \S+){0,6} "
          r"(?:to die|to kill myself|to end my life|to not wake up|(?:would|will) kill me)\b"),
    _rule("self_harm.encouragement", RuleKind.PATTERN, _any(
        r"\b(?:you should|u should|you need to|go|just|why dont you|pls|please|plz) (?:go )?(?:kill (?:yourself|"
        r"urself|your self)|hang yourself|end your (?:own )?life|off yourself|commit suicide|cut yourself)\b",
        r"\bkys\b",
        r"\b(?:nobody|no one) (?:would|will) (?:miss|care about) you if you (?:died|were dead|killed yourself)\b",
        r"\b(?:the world|everyone) (?:would|will) be better off (?:without you|if you (?:died|were dead))\b")),
    # violent_wrongdoing — BLOCK_BY_DEFAULT
    _rule("violent_wrongdoing.harm_person", RuleKind.INTENT, _intent(_near(_HARM_VERB, _PERSON, 3)),
          unless=(r"hurt (?:his|her|their|your|my|someones|somebodys) feelings",)),
    _rule("violent_wrongdoing.conceal_killing", RuleKind.INTENT, _intent(_any(
        _near(_any("hide", "hiding", "dispose of", "disposing of", "get rid of", "dissolve", "dissolving",
                   "bury", "burying"), _BODY, 2),
        r"get away with (?:murder|murdering|killing|poisoning)(?: \S+){0,2} " + _PERSON))),
    _rule("violent_wrongdoing.threat", RuleKind.PATTERN,
          r"\b(?:i will|ill|i am going to|im going to|im gonna|i am gonna)(?: \S+){0,2} "
          r"(?:kill|murder|stab|shoot|strangle|hurt) (?:you|u|ya|your (?:family|kids|children|wife|husband))\b"),
    _rule("violent_wrongdoing.covert_poisoning", RuleKind.PATTERN, _any(
        rf"{_L}{_POISON}(?: \S+){{0,8}} (?:in|into) (?:\S+ ){{0,2}}{_DRINK}{_R}",
        rf"{_L}spik(?:e|ing) (?:\S+ ){{0,2}}{_DRINK}{_R}",
        rf"{_L}(?:(?:untraceable|undetectable) {_POISON}|{_POISON} (?:that|which) (?:\S+ ){{0,2}}"
        rf"(?:be detected|show up|leave no trace|be traced)){_R}")),
    _rule("violent_wrongdoing.staged_death", RuleKind.PATTERN,
          r"\bmake (?:it|the death|his death|her death|their death|the murder|the killing) look like "
          r"(?:an accident|a suicide|suicide|natural causes)\b"),
    # hate_harassment — BLOCK_BY_DEFAULT
    _rule("hate_harassment.dehumanize", RuleKind.PATTERN,
          rf"{_L}{_GROUP} (?:are|r|is) (?:all |just |nothing but |no better than |literally )*{_DEHUMANIZING}{_R}"),
    _rule("hate_harassment.violence_call", RuleKind.PATTERN, _any(
        rf"(?:{_L}(?:we should|we must|we need to|lets|let us|you should|everyone should|someone should|"
        rf"somebody should|time to|i want to|we will|need to)(?: \S+)? |^(?:{_FILLER} )*){_EXTERMINATE} "
        rf"(?:all )?(?:the |those |these |of the )?{_GROUP}{_R}",
        rf"{_L}death to (?:all )?(?:the )?{_GROUP}{_R}",
        rf"{_L}{_GROUP} (?:should|must|deserve to|need to|ought to) (?:all )?(?:die|be killed|be exterminated|"
        rf"be gassed|be wiped out|be eradicated|burn|hang|be lynched|be shot){_R}")),
    # illegal_drug_manufacture — BLOCK_BY_DEFAULT
    _rule("illegal_drug_manufacture.make_drug", RuleKind.INTENT, _intent(_any(
        _near(_any(_MAKE, "set up", "start", "run", "freebase"), _DRUG, 3), _near(_RECIPE, _DRUG, 2),
        r"(?:convert|reduce|extract)(?: \S+){0,2} pseudoephedrine"))),
    # malware_cyberattack — BLOCK_BY_DEFAULT
    _rule("malware_cyberattack.make_malware", RuleKind.INTENT, _intent(_near(_MALWARE_VERB, _MALWARE, 3))),
    _rule("malware_cyberattack.break_in", RuleKind.INTENT, _intent(
        _any("hack", "hacking", "hack into", "hacking into", "break into", "breaking into", "get into",
             "getting into", "spy on", "spying on", "read", "reading", "monitor", "monitoring",
             "track", "tracking", "clone", "cloning", "access", "accessing", "log into", "hijack", "hijacking")
        + rf" {_OTHERS}(?: \S+){{0,2}} {_TARGET}")),
    _rule("malware_cyberattack.steal_credentials", RuleKind.INTENT, _intent(
        _near(_any("steal", "stealing", "harvest", "harvesting", "dump", "dumping", "grab", "grabbing", "sniff",
                   "sniffing", "phish", "phishing"), _SECRETS, 3))),
    _rule("malware_cyberattack.evade_or_ddos", RuleKind.INTENT, _intent(_any(
        r"(?:bypass|bypassing|evade|evading)(?: \S+){0,2} (?:antivirus|anti virus|av|edr|windows defender|defender)",
        r"(?:ddos|d dos)(?: \S+){0,3} (?:\S+ )?(?:website|site|server|network|game server)s?"))),
)

BUILTIN_ALLOW_PHRASES: tuple[str, ...] = (   # benign compounds that contain a blocked word
    "bath bomb", "bath bombs", "photo bomb", "photobomb", "bomb shelter", "bomb shelters", "bomb calorimeter",
    "f bomb", "da bomb", "bomb squad", "bomb disposal", "bomb threat", "kill time", "killing time",
    "kill the lights", "kill switch", "kill a process", "kill the process", "kill command", "kill signal",
    "poison pill", "poison ivy", "poison oak", "child process", "child processes", "bomb ass",
)


# ─── rule set ─────────────────────────────────────────────────────────────────────────────────────

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
        return _phrases(self.allow_phrases) if self.allow_phrases else None

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
            new.append(Rule(f"{category}.user_phrase[{norm}]", category, RuleKind.PHRASE, _phrases([norm])))
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
    return re.compile(_intent(f"(?:{source})") if kind is RuleKind.INTENT else source)


_BUILTIN = RuleSet(BUILTIN_CATEGORIES, _BUILTIN_RULES, BUILTIN_ALLOW_PHRASES)


# ─── the checker ──────────────────────────────────────────────────────────────────────────────────

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
    try:
        from openafm.fm.errors import GuardrailViolationError
    except ImportError as e:
        raise ImportError("enforce needs openafm.fm.errors.GuardrailViolationError, which could not be "
                          f"imported: {e}") from e
    error = GuardrailViolationError(
        f"guardrail violation in the {where}: category {verdict.category!r}, rule {verdict.rule!r}, "
        f"matched {verdict.excerpt!r}")
    error.category, error.rule, error.where, error.excerpt = verdict.category, verdict.rule, where, verdict.excerpt
    raise error
