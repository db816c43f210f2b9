"""Responses that meet all, some or none of an instruction prompt's constraints, built programmatically.

A response is rendered from a plan (language, JSON or prose, lowercase, title, keyword / forbidden / comma sentences,
bullets, end phrase, counts of sentences, paragraphs and words) chosen so that the constraints to meet are met and
the others broken; counts are adjusted with the checkers' own counting functions. The grade is never assumed: each
candidate is judged by data/instructions.check, and a candidate whose verdict is not the target grade is redrawn:

    grade 2   every constraint followed strictly
    grade 1   at least one followed strictly and at least one not followed even loosely
    grade 0   none followed even loosely

    build_instruction_responses(prompt, rng) -> [GradedResponse x 3] or None (no candidate reached some grade)
"""

from __future__ import annotations

import dataclasses
import json
import random

from openafm.data.instructions import Constraint, InstructionPrompt, Kind, Relation, check, paragraphs, sentences, words
from openafm.rl.preference.pairs import GradedResponse

BANKS = {
    "en": ["People often talk about {topic}.", "There is much to learn about {topic}.",
           "Many find {topic} interesting.", "It helps to start with the basics.", "Small steps lead to real progress.",
           "Curiosity makes every subject richer.", "Good habits make a big difference.",
           "Friends can share what they know.", "Patience is part of the process.",
           "Each day brings something new to notice."],
    "fr": ["Le sujet est vraiment passionnant pour tout le monde.", "Il faut prendre le temps de bien comprendre.",
           "Chaque jour nous apprenons quelque chose de nouveau.", "Les amis partagent souvent leurs idées.",
           "La patience est une qualité très importante.", "Nous aimons découvrir des choses nouvelles ensemble."],
    "de": ["Das Thema ist für viele Menschen sehr spannend.", "Man muss sich Zeit nehmen um alles zu verstehen.",
           "Jeden Tag lernen wir etwas Neues dazu.", "Freunde teilen gerne ihre Gedanken miteinander.",
           "Geduld ist eine sehr wichtige Eigenschaft.", "Wir entdecken gerne neue Dinge zusammen."],
    "es": ["El tema es muy interesante para muchas personas.", "Hay que tomarse el tiempo para entender todo bien.",
           "Cada día aprendemos algo nuevo.", "Los amigos comparten sus ideas con alegría.",
           "La paciencia es una cualidad muy importante.", "Nos gusta descubrir cosas nuevas juntos."],
    "it": ["Il tema è molto interessante per molte persone.", "Bisogna prendersi il tempo per capire tutto bene.",
           "Ogni giorno impariamo qualcosa di nuovo.", "Gli amici condividono le loro idee con gioia.",
           "La pazienza è una qualità molto importante.", "Ci piace scoprire cose nuove insieme."],
    "pt": ["O tema é muito interessante para muitas pessoas.", "É preciso ter tempo para entender tudo bem.",
           "Todos os dias aprendemos algo novo.", "Os amigos partilham as suas ideias com alegria.",
           "A paciência é uma qualidade muito importante.", "Gostamos de descobrir coisas novas juntos."],
}
FILLER = {"en": "truly", "fr": "vraiment", "de": "wirklich", "es": "realmente", "it": "davvero", "pt": "realmente"}
TRIES = 24


@dataclasses.dataclass
class Plan:
    lang: str = "en"
    json: bool = False
    lowercase: bool = False
    title: bool = False
    keywords: tuple[str, ...] = ()       # each gets a sentence
    forbidden: tuple[str, ...] = ()      # each gets a sentence (breaking a forbidden constraint)
    commas: bool = False
    bullets: int = 0
    end_phrase: str | None = None
    body: list[str] = dataclasses.field(default_factory=list)
    body_paragraphs: int = 1


def render(plan: Plan, topic: str) -> str:
    extra = [f"I often think of the word {w} here." for w in plan.keywords]
    extra += [f"Some would mention {w} at this point." for w in plan.forbidden]
    extra += ["Here are ideas, notes, and thoughts."] if plan.commas else []
    body = list(plan.body)
    if plan.json:
        text = json.dumps({"response": " ".join(body + extra)}, ensure_ascii=False)
    else:
        k = max(1, min(plan.body_paragraphs, len(body)))
        cut = [round(i * len(body) / k) for i in range(k + 1)]
        paras = [" ".join(body[cut[i]:cut[i + 1]]) for i in range(k)]
        paras[0] = " ".join([paras[0]] + extra)
        if plan.bullets:
            paras.append("\n".join(f"* Point {i + 1} is worth a look." for i in range(plan.bullets)))
        if plan.end_phrase:
            paras[-1] += " " + plan.end_phrase
        text = "\n\n".join(paras)
        if plan.title:
            text = f"<<Notes on {topic}>>\n" + text
    return text.lower() if plan.lowercase else text


def _count_target(c: Constraint, meet: bool, rng: random.Random) -> int:
    n = c.n
    if meet:
        return {Relation.AT_LEAST: n + rng.randint(0, 1), Relation.AT_MOST: max(1, n - rng.randint(0, 1)),
                Relation.EXACTLY: n}[c.relation]
    return {Relation.AT_LEAST: max(1, n - 1 - rng.randint(0, 1)), Relation.AT_MOST: n + 1 + rng.randint(0, 1),
            Relation.EXACTLY: n + 1}[c.relation]


def plan_for(prompt: InstructionPrompt, meet: set[Kind], topic: str, rng: random.Random) -> str:
    """Render a response meant to follow exactly the constraints whose kinds are in `meet`."""
    cs = {c.kind: c for c in prompt.constraints}
    p = Plan()
    if Kind.LANGUAGE in cs:
        lang = cs[Kind.LANGUAGE].lang
        p.lang = lang if Kind.LANGUAGE in meet else ("fr" if lang == "en" else "en")
    p.json = Kind.JSON in cs and Kind.JSON in meet
    p.lowercase = Kind.LOWERCASE in cs and Kind.LOWERCASE in meet
    p.title = Kind.TITLE in cs and Kind.TITLE in meet
    if Kind.KEYWORDS in cs and Kind.KEYWORDS in meet:
        p.keywords = cs[Kind.KEYWORDS].words
    if Kind.FORBIDDEN in cs and Kind.FORBIDDEN not in meet:
        p.forbidden = cs[Kind.FORBIDDEN].words[:1]
    p.commas = Kind.NO_COMMAS in cs and Kind.NO_COMMAS not in meet
    if Kind.BULLETS in cs:
        p.bullets = cs[Kind.BULLETS].n + (0 if Kind.BULLETS in meet else 1)
    if Kind.END_PHRASE in cs and Kind.END_PHRASE in meet:
        p.end_phrase = cs[Kind.END_PHRASE].phrase
    bank = [s.format(topic=topic) for s in BANKS[p.lang]]
    rng.shuffle(bank)
    p.body = bank[:rng.randint(2, 3)]
    targets = {k: _count_target(cs[k], k in meet, rng) for k in (Kind.SENTENCES, Kind.PARAGRAPHS, Kind.WORDS)
               if k in cs}
    for _ in range(60):                      # adjust the body until every count is on its target
        text = render(p, topic)
        if Kind.PARAGRAPHS in targets and (d := targets[Kind.PARAGRAPHS] - len(paragraphs(text))):
            p.body_paragraphs = max(1, p.body_paragraphs + d)
            while len(p.body) < p.body_paragraphs:
                p.body.append(bank[len(p.body) % len(bank)])
            continue
        if Kind.SENTENCES in targets and (d := targets[Kind.SENTENCES] - len(sentences(text))):
            if d > 0:
                p.body.append(bank[len(p.body) % len(bank)])
            elif len(p.body) > max(1, p.body_paragraphs):
                p.body.pop()
            else:
                break
            continue
        if Kind.WORDS in targets and (d := targets[Kind.WORDS] - len(words(text))):
            last = p.body[-1].rstrip(".").split(" ")
            if d >= 8:
                p.body.append(bank[len(p.body) % len(bank)])
            elif d > 0:
                p.body[-1] = " ".join(last + [FILLER[p.lang]] * d) + "."
            elif len(last) + d >= 1:
                p.body[-1] = " ".join(last[:len(last) + d]) + "."
            elif len(p.body) > 1:
                p.body.pop()
            else:
                break
            continue
        break
    return render(p, topic)


def grade_of(prompt: InstructionPrompt, text: str) -> tuple[int | None, float]:
    """(grade by the checkers, or None when the verdict is none of the three; the loose fraction followed)."""
    v = check(prompt.constraints, text)
    if v.all_strict:
        return 2, v.fraction_loose
    if not any(v.loose):
        return 0, v.fraction_loose
    if any(v.strict) and not v.all_loose:
        return 1, v.fraction_loose
    return None, v.fraction_loose


def build_instruction_responses(prompt: InstructionPrompt, topic: str, rng: random.Random
                                ) -> list[GradedResponse] | None:
    kinds = [c.kind for c in prompt.constraints]
    if len(kinds) < 2:
        return None
    out = []
    for grade in (2, 1, 0):
        for _ in range(TRIES):
            meet = (set(kinds) if grade == 2 else set() if grade == 0
                    else set(rng.sample(kinds, rng.randint(1, len(kinds) - 1))))
            text = plan_for(prompt, meet, topic, rng)
            got, fraction = grade_of(prompt, text)
            if got == grade:
                followed = [c.kind.value for c, ok in zip(prompt.constraints, check(prompt.constraints, text).strict)
                            if ok]
                out.append(GradedResponse(text, grade, f"follows {followed or 'none'} of "
                                                       f"{[k.value for k in kinds]} (strict)", fraction))
                break
        else:
            return None
    return out
