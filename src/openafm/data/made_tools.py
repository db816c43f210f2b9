"""Made-up tool families for SFT: hundreds of seeded tools, each a lookup over a small invented table or a formula,
so that the model learns to call a tool it has never seen from its description alone and to answer with every value
its result holds, where the 16 hand-written training families (data/tool_rounds_vocab.py) teach their own habits.

    pool = made_families(seed=0)                       # MADE_FAMILIES Family objects, the same for the same seed
    convs = made_tool_conversations(1200, seed=0)      # conversations over them, rendered as tool_rounds renders

Two kinds of family:
  lookup    a domain (hotels, ferries, servers, ...) with invented entities; the tool returns 2-3 of an entity's
            attributes, and some also take a count that a total scales by (nights at a hotel, tickets to a concert)
  formula   a calculation over two or three numbers (a rectangle's area, a bill split, a discount)
No made family works in a held-out family's domain (weather, units, shares, word meanings, dates, books, recipes,
parcels): HELDOUT_WORDS names those, and every made family's name, description and questions are checked against
them here, so the held-out tool round trip stays a test of tools never trained on.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable

from openafm.data.conversations import Conversation
from openafm.data.made_tools_vocab import (DOMAINS, FORMULAS, VALIDATION_DOMAINS, VALIDATION_FORMULAS, Attribute,
                                           Domain, Formula)
from openafm.data.tool_rounds import Kind, ToolRoundCase, pool_cases, pool_conversations
from openafm.data.tool_rounds_vocab import FAMILY_BY_NAME, Family, find_key

MADE_FAMILIES = 250
HELDOUT_WORDS = ("weather", "temperature", "forecast", "convert", "unit", "units", "stock", "share", "ticker",
                 "definition", "define", "meaning", "mean", "days", "date", "book", "author", "recipe", "calorie",
                 "calories", "kcal", "package", "parcel", "tracking", "shipment")


# ---- families ----------------------------------------------------------------------------------------------------

def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _lookup_name(r: random.Random, domain: Domain, attributes: tuple[Attribute, ...]) -> str:
    noun = domain.noun.replace(" ", "_")
    return r.choice((f"get_{noun}_info", f"lookup_{noun}", f"{noun}_details", f"check_{noun}", f"find_{noun}",
                     f"get_{noun}", f"{noun}_lookup", f"query_{noun}", f"{noun}_info",
                     f"get_{noun}_{attributes[0].key}"))


def _lookup_run(domain: Domain, table: dict[str, dict]) -> Callable[[dict], dict]:
    def run(a: dict) -> dict:
        key = find_key(table, a[domain.arg], domain.noun)
        out = {domain.arg: key, **table[key]}
        if domain.count is not None:
            out[domain.count.arg] = a[domain.count.arg]
            out[domain.count.total.key] = a[domain.count.arg] * table[key][domain.count.scales]
        return out
    return run


def lookup_family(r: random.Random, domain: Domain) -> Family:
    """A lookup tool over 6-12 invented entities of `domain`, returning 2-3 of their attributes (and a total when
    the domain has a count)."""
    count = domain.count
    attributes = tuple(r.sample(domain.attributes, r.randint(2, min(3, len(domain.attributes)))))
    if count is not None and count.scales not in [x.key for x in attributes]:
        attributes = (next(x for x in domain.attributes if x.key == count.scales), *attributes[:2])
    names = list(dict.fromkeys(domain.name(r) for _ in range(r.randint(6, 12))))
    table = {n: {x.key: x.value(r) for x in attributes} for n in names}
    shown = [*attributes, *([count.total] if count else [])]
    phrases = _listed([x.phrase for x in shown])
    description = r.choice((f"Look up a {domain.noun} by name: {phrases}.", f"{domain.noun.capitalize()} "
                            f"information: {phrases}.", f"Returns {phrases} of a {domain.noun}."))
    guides = {"anyOf": names} if r.random() < 0.3 else {}
    args = ((domain.arg, str, domain.arg_description, guides),)
    asked = count.asked if count else ""
    if count is not None:
        args += ((count.arg, int, count.description, {"range": (count.low, count.high)}),)
    entity, p0, p1 = "{" + domain.arg + "}", shown[0].phrase, shown[1].phrase
    questions = (f"What is {p0} of the {domain.noun} {entity}{asked}?", f"Can you look up the {domain.noun} "
                 f"{entity}{asked}?", f"Tell me {p0} and {p1} of {entity}{asked}.", f"Please check {entity}{asked} "
                 f"for me.", f"Look up {entity}{asked} and tell me {phrases}.")
    stated = _listed([f"{x.phrase} is {{{x.key}}}{x.unit}" for x in shown])
    answer = r.choice((f"For the {domain.noun} {entity}{asked}, {stated}.", f"{entity}{asked}: {stated}."))
    numeric = [x for x in shown if x.unit and isinstance(table[names[0]].get(x.key, 0), (int, float))]
    return Family(_lookup_name(r, domain, attributes), description, args,
                  _lookup_draw(domain, names), _lookup_run(domain, table), questions, answer,
                  f"{{{shown[0].key}}}{shown[0].unit}", tuple(x.key for x in shown),
                  (numeric[0].key, numeric[0].unit) if numeric else None, topic=domain.noun)


def _lookup_draw(domain: Domain, names: list[str]) -> Callable[[random.Random], dict]:
    count = domain.count
    if count is None:
        return lambda r: {domain.arg: r.choice(names)}
    return lambda r: {domain.arg: r.choice(names), count.arg: r.randint(count.low, count.high)}


def formula_family(r: random.Random, formula: Formula) -> Family:
    """A formula's tool under one of its names. Its string arguments (one list of choices) are drawn distinct."""
    args = tuple((name, kind, description, {"anyOf": list(spec[0])} if kind is str else {"range": tuple(spec)})
                 for name, kind, description, *spec in formula.args)
    strings = [a for a in formula.args if a[1] is str]
    if len({a[3] for a in strings}) > 1:
        raise ValueError(f"formula {formula.names[0]}: its string arguments draw from one list of choices")

    def draw(rr: random.Random) -> dict:
        picked = iter(rr.sample(strings[0][3], len(strings))) if strings else iter(())
        return {a[0]: next(picked) if a[1] is str else rr.randint(a[3], a[4]) if a[1] is int
                else round(rr.uniform(a[3], a[4]), 2) for a in formula.args}
    return Family(r.choice(formula.names), formula.description, args, draw, formula.run, formula.questions,
                  formula.answer, "{" + formula.keys[0] + "}", formula.keys, formula.compare, topic=formula.names[0])


def heldout_words(family: Family) -> list[str]:
    """The HELDOUT_WORDS in a family's name, description, argument descriptions and question templates."""
    text = " ".join([family.name.replace("_", " "), family.description, *family.questions,
                     *(a[0].replace("_", " ") + " " + a[2] for a in family.args)]).lower()
    return [w for w in HELDOUT_WORDS if re.search(rf"\b{w}\b", text)]


@functools.cache
def made_families(seed: int, count: int = MADE_FAMILIES) -> tuple[Family, ...]:
    """`count` made families with distinct names (none a built-in family's), drawn by seed: lookups of every domain
    and each formula at least once."""
    r = random.Random(f"made-tools:{seed}")
    out: dict[str, Family] = {}
    makers = [functools.partial(lookup_family, r, d) for d in DOMAINS]
    makers += [functools.partial(formula_family, r, f) for f in FORMULAS]
    tries = 0
    while len(out) < count:
        tries += 1
        if tries > 50 * count:
            raise ValueError(f"cannot draw {count} made tool families with distinct names (got {len(out)})")
        family = makers[len(out)]() if len(out) < len(makers) else r.choice(makers)()
        if family.name in out or family.name in FAMILY_BY_NAME:
            continue
        if heldout_words(family):
            raise RuntimeError(f"made family {family.name} uses held-out words {heldout_words(family)}")
        out[family.name] = family
    return tuple(out.values())


@functools.cache
def validation_families(seed: int) -> tuple[Family, ...]:
    """Two families of every validation domain and formula (names distinct): tools no made or built-in family is."""
    r = random.Random(f"made-tools-validation:{seed}")
    out: dict[str, Family] = {}
    for make in [functools.partial(lookup_family, r, d) for d in VALIDATION_DOMAINS] + \
            [functools.partial(formula_family, r, f) for f in VALIDATION_FORMULAS]:
        for _ in range(8):
            family = make()
            if family.name not in out and family.name not in FAMILY_BY_NAME:
                out[family.name] = family
            if sum(f.topic == family.topic for f in out.values()) == 2:
                break
    return tuple(out.values())


def made_tool_cases(n: int, *, seed: int) -> list[ToolRoundCase]:
    """n validation cases (one call each, as the held-out benchmark's) over validation_families(seed)."""
    return pool_cases(validation_families(seed), n, stream=f"made-tool-cases:{seed}",
                      where=f"made-tool-cases validation seed {seed}")


def made_tool_conversations(n: int, *, seed: int) -> list[Conversation]:
    """n tool-round conversations over made_families(seed) (kinds as data/tool_rounds.py draws them)."""
    return pool_conversations(made_families(seed), n, stream=f"made-tool-rounds:{seed}",
                              where=f"made-tool-rounds seed {seed}", kinds=tuple(Kind))
