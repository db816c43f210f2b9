"""Guided-generation training data: seeded @generable types with a valid, short instance each and a prompt asking
for it, in exactly the format a session uses for a structured request.

Each type is a real class made with openafm.fm's `generable` and `guide` (word tables and concepts in
guided_vocab.py), so its schema is exactly what `T.generation_schema().to_json_schema()` gives a caller: objects
of typed fields (str, int and float with bounds, bool), anyOf guides and generable enum types, regex-guided
strings, lists with min / max / count bounds and element guides, nested types in $defs, optional fields, and
recursive types ($ref "#" or "#/$defs/T"). The example is

    prompt   = prompt_with_schema(request, schema)   # the user turn of `session.respond(request, generating=T)`
    response = response_json(instance)               # the JSON the constrained decoder writes

>>> ex = guided_example(seed=0, index=3, split=Split.TRAIN)
>>> ex.prompt.startswith(ex.request) and json.loads(ex.response) == ex.instance
True

Instances terminate: a list holds 0-3 items unless a bound asks for more (then at most 2 past its minimum, never
past its maximum); recursion stops 2 levels below the root (those lists are empty); strings are a few words.

Train and held-out are disjoint by schema: the hash of a schema's canonical JSON puts it in one split (1 in 8
held out), and example i of a split is the first draw, over seeds (seed, split, i, attempt), whose schema falls
in that split; no held-out schema is ever trained on.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import random
import re
from collections.abc import Callable, Sequence
from typing import Any

from openafm.data.chat import ChatExample
from openafm.data.guided_vocab import (
    CONCEPTS,
    FIELDS,
    PART_NAMES,
    PROMPTS,
    SELF_NAMES,
    TYPE_PROMPTS,
    Choice,
    Concept,
    Flag,
    Integer,
    Number,
    Pattern,
    Text,
)
from openafm.fm.generable import generable
from openafm.fm.guide import GenerationGuide, guide
from openafm.fm.structured import prompt_with_schema, response_json
from openafm.splits import Split

MAX_DEPTH = 2             # recursion: the root is level 0; lists at this level are empty
HELDOUT_BUCKETS = 2       # of 16 schema-hash buckets
MAX_ATTEMPTS = 200
_ABSENT = object()        # an optional field left out of the instance


class Shape(str, enum.Enum):
    FLAT = "flat"              # scalar fields, maybe one list
    NESTED = "nested"          # objects inside objects (two levels), single, optional or in lists
    RECURSIVE = "recursive"    # a type holding a list of itself (or an optional reference to itself)
    LISTS = "lists"            # lists with min / max / count bounds and element guides
    ENUMS = "enums"            # anyOf guides, generable enum types, lists of them
    REGEX = "regex"            # regex-guided strings


SHAPE_WEIGHTS = {Shape.FLAT: 1, Shape.NESTED: 2, Shape.RECURSIVE: 3, Shape.LISTS: 2, Shape.ENUMS: 1, Shape.REGEX: 1}


@dataclasses.dataclass(frozen=True)
class GuidedExample:
    request: str          # what the caller asks, before the schema is appended
    prompt: str           # the user turn: prompt_with_schema(request, schema)
    response: str         # response_json(instance)
    schema: dict
    instance: Any
    type_name: str
    shape: Shape
    where: str
    counts: tuple[tuple[str, int], ...] = ()    # (root list field, items) the request asks for exactly

    def chat(self) -> ChatExample:
        return ChatExample(self.prompt, self.response, self.where)


def schema_split(schema: dict) -> Split:
    """Which split a schema belongs to, from the hash of its canonical JSON."""
    digest = hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).digest()
    return Split.HELDOUT if digest[0] % 16 < HELDOUT_BUCKETS else Split.TRAIN


def guided_example(seed: int, index: int, split: Split = Split.TRAIN) -> GuidedExample:
    """Example `index` of `split` for `seed` (deterministic: the same arguments give the same example)."""
    split = Split(split)
    for attempt in range(MAX_ATTEMPTS):
        r = random.Random(f"guided:{seed}:{split.value}:{index}:{attempt}")
        shape = r.choices(list(SHAPE_WEIGHTS), weights=list(SHAPE_WEIGHTS.values()))[0]
        root = _Builder(r, shape).root()
        schema = root.cls.generation_schema().to_json_schema()
        if schema_split(schema) is not split:
            continue
        instance = root.instance(r, 0)
        request = _request(r, schema)
        counts = _asked_counts(random.Random(f"guided-count:{seed}:{split.value}:{index}"), schema, instance)
        request += "".join(f" Include exactly {n} {field.replace('_', ' ')}." for field, n in counts)
        return GuidedExample(request=request, prompt=prompt_with_schema(request, schema),
                             response=response_json(instance), schema=schema, instance=instance,
                             type_name=root.name, shape=shape, where=f"guided {split.value} seed {seed} #{index}",
                             counts=counts)
    raise RuntimeError(f"no {split.value} schema in {MAX_ATTEMPTS} draws for seed {seed} #{index}")


def _asked_counts(r: random.Random, schema: dict, instance: dict) -> tuple[tuple[str, int], ...]:
    """For about 40% of examples, one root list whose length the schema leaves open (and the instance's list has
    1-6 items): the request then asks for exactly that many, so a model learns to follow a count in the prompt."""
    open_lists = [name for name, prop in schema.get("properties", {}).items()
                  if prop.get("type") == "array" and prop.get("minItems") != prop.get("maxItems")
                  and isinstance(instance.get(name), list) and 1 <= len(instance[name]) <= 6]
    if not open_lists or r.random() >= 0.4:
        return ()
    name = r.choice(open_lists)
    return ((name, len(instance[name])),)


class GuidedDataset(Sequence):
    """`size` examples of one split, made on access (each is a function of (seed, split, index) alone)."""

    def __init__(self, seed: int = 0, split: Split = Split.TRAIN, size: int = 100_000):
        if size < 1:
            raise ValueError(f"GuidedDataset size={size} must be >= 1")
        self.seed, self.split, self.size = seed, Split(split), size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.size))]
        if not -self.size <= index < self.size:
            raise IndexError(f"index {index} is outside this dataset of {self.size} examples")
        return guided_example(self.seed, index % self.size, self.split).chat()


def _request(r: random.Random, schema: dict) -> str:
    description = schema.get("description")
    if description and r.random() < 0.9:
        return r.choice(PROMPTS).format(d=description[0].lower() + description[1:])
    words = re.sub(r"(?<!^)(?=[A-Z])", " ", schema["title"]).lower()
    return r.choice(TYPE_PROMPTS).format(a="an" if words[0] in "aeiou" else "a", t=words)


# ---- types and their instances --------------------------------------------------------------------------------

@dataclasses.dataclass
class _FieldSpec:
    name: str
    annotation: Any                                 # a type, or a string naming the type itself ("list[Part]")
    description: str | None
    guides: dict[str, Any]                          # guide() keywords
    value: Callable[[random.Random, int], Any]      # (rng, depth) -> a JSON value, or _ABSENT


@dataclasses.dataclass
class _ObjectSpec:
    name: str
    description: str | None
    fields: list[_FieldSpec]
    cls: Any = None

    def build(self) -> None:
        namespace: dict[str, Any] = {"__annotations__": {f.name: f.annotation for f in self.fields},
                                     "__module__": __name__, "__qualname__": self.name}
        for f in self.fields:
            if f.description is not None or f.guides:
                namespace[f.name] = guide(f.description, **f.guides)
        self.cls = generable(description=self.description)(type(self.name, (), namespace))

    def instance(self, r: random.Random, depth: int) -> dict:
        out = {}
        for f in self.fields:
            value = f.value(r, depth)
            if value is not _ABSENT:
                out[f.name] = value
        return out


def _item_count(r: random.Random, lo: int, hi: int | None, weights=(0.15, 0.3, 0.35, 0.2)) -> int:
    """How many items a list gets: few past its minimum, never past its maximum."""
    if hi is None:
        return lo + r.choices(range(len(weights)), weights=weights)[0] if lo == 0 else r.randint(lo, lo + 2)
    return r.randint(lo, min(hi, lo + (3 if lo == 0 else 2)))


class _Builder:
    """Draws one root type (and the types inside it) for a shape."""

    def __init__(self, r: random.Random, shape: Shape):
        self.r, self.shape = r, shape
        self.type_names: set[str] = set()

    def _type_name(self, names: Sequence[str]) -> str | None:
        free = [n for n in names if n not in self.type_names]
        if not free:
            return None
        name = self.r.choice(free)
        self.type_names.add(name)
        return name

    def _description(self, choices: Sequence[str], p: float = 0.85) -> str | None:
        return self.r.choice(choices) if self.r.random() < p else None

    def root(self) -> _ObjectSpec:
        r = self.r
        trees = [k for k, c in CONCEPTS.items() if c.children]
        if self.shape is Shape.RECURSIVE:
            tree = self.object(r.choice(trees), depth=0, n_fields=(1, 3))
            if r.random() < 0.25:       # the tree nested inside another type: "$ref": "#/$defs/T" recursion
                host = self.object(r.choice([k for k, c in CONCEPTS.items() if not c.children]), depth=0,
                                   n_fields=(1, 3), with_parts=False)
                name = _snake(tree.name)
                name = name if name not in {f.name for f in host.fields} else name + "_tree"
                host.fields.insert(r.randint(0, len(host.fields)), _part_field(r, tree, name, "one", description=None))
                host.build()
                return host
            return tree
        roots = [k for k, c in CONCEPTS.items() if not c.children and (c.parts or self.shape is not Shape.NESTED)]
        return self.object(r.choice(roots), depth=0, n_fields=(2, 5) if self.shape is not Shape.NESTED else (1, 3))

    def object(self, key: str, *, depth: int, n_fields: tuple[int, int], with_parts: bool = True) -> _ObjectSpec:
        r, concept = self.r, CONCEPTS[key]
        spec = _ObjectSpec(self._type_name(concept.names) or f"{concept.names[0]}{depth}{r.randint(10, 99)}",
                           self._description(concept.descriptions), [])
        used: set[str] = set()
        keys = r.sample(concept.fields, min(len(concept.fields), r.randint(*n_fields)))
        for k in keys:
            f = self.field(FIELDS[k], used)
            if f is not None:
                spec.fields.append(f)
                used.add(f.name)
        if with_parts and concept.parts and depth < 2 and (self.shape is Shape.NESTED or r.random() < 0.2):
            for part in r.sample(concept.parts, min(len(concept.parts), r.randint(1, 2) if depth == 0 else 1)):
                f = self.part(part, depth, used)
                if f is not None:
                    spec.fields.insert(r.randint(0, len(spec.fields)), f)
                    used.add(f.name)
        if depth == 0 and self.shape in (Shape.ENUMS, Shape.REGEX):
            wanted = Choice if self.shape is Shape.ENUMS else Pattern
            have = sum(isinstance(FIELDS[k], wanted) for k in keys)
            extra = [k for k, f in FIELDS.items() if isinstance(f, wanted) and k not in keys]
            for k in r.sample(extra, max(0, r.randint(2, 3) - have)):
                f = self.field(FIELDS[k], used)
                if f is not None:
                    spec.fields.insert(r.randint(0, len(spec.fields)), f)
                    used.add(f.name)
        if depth == 0 and self.shape is Shape.LISTS and not any(_is_list(f) for f in spec.fields):
            listable = [k for k in concept.fields if getattr(FIELDS[k], "plural", ())] or ["tag"]
            kind = FIELDS[r.choice(listable)]
            name = r.choice([n for n in kind.plural if n not in used] or [f"{kind.plural[0]}_list"])
            spec.fields.insert(r.randint(0, len(spec.fields)), self.list_field(kind, name))
            used.add(name)
        if concept.children:
            spec.fields.append(self.children(spec, concept, used))
        if not spec.fields:
            spec.fields.append(self.field(FIELDS["title"], used))
        spec.build()
        return spec

    def part(self, key: str, depth: int, used: set[str]) -> _FieldSpec | None:
        r = self.r
        mode = r.choices(("one", "optional", "list"), weights=(0.5, 0.2, 0.3))[0]
        single, plural = PART_NAMES.get(key, ((key,), (key + "s",)))
        names = [n for n in (plural if mode == "list" else single) if n not in used]
        if not names:
            return None
        inner = self.object(key, depth=depth + 1, n_fields=(2, 3))
        return _part_field(r, inner, r.choice(names), mode, self._description(("Details", "Where and how"), 0.3),
                           bounds=self.bounds() if mode == "list" else {})

    def children(self, spec: _ObjectSpec, concept: Concept, used: set[str]) -> _FieldSpec:
        r = self.r
        if r.random() < 0.15:           # an optional reference to the type itself
            name = r.choice([n for n in SELF_NAMES if n not in used] or ["parent"])

            def one(rr, depth):
                return spec.instance(rr, depth + 1) if depth < MAX_DEPTH and rr.random() < 0.5 else _ABSENT
            return _FieldSpec(name, f"{spec.name} | None", self._description(("What it comes from",), 0.4), {}, one)
        name = r.choice([n for n in concept.children if n not in used] or list(concept.children))
        hi = r.randint(2, 4) if r.random() < 0.35 else None
        weights = {0: (0.1, 0.35, 0.4, 0.15), 1: (0.55, 0.3, 0.15)}

        def many(rr, depth):
            if depth >= MAX_DEPTH:
                return []
            n = min(hi if hi is not None else 3, rr.choices(range(len(weights[depth])), weights=weights[depth])[0])
            return [spec.instance(rr, depth + 1) for _ in range(n)]
        return _FieldSpec(name, f"list[{spec.name}]", self._description(("Its parts", "What it contains",
                                                                          "The items below it"), 0.6),
                          {"max_items": hi} if hi is not None else {}, many)

    def bounds(self) -> dict[str, int]:
        """guide() keywords bounding a list (lists-shape lists are bounded more often)."""
        r = self.r
        kind = r.choices(("none", "max", "min", "minmax", "count"),
                         weights=(2, 2, 1, 2, 1) if self.shape is Shape.LISTS else (6, 2, 1, 1, 1))[0]
        lo = r.randint(1, 3)
        return {"none": {}, "max": {"max_items": r.randint(2, 6)}, "min": {"min_items": lo},
                "minmax": {"min_items": lo, "max_items": lo + r.randint(1, 5)},
                "count": {"count": r.randint(1, 4)}}[kind]

    def field(self, kind, used: set[str]) -> _FieldSpec | None:
        r = self.r
        names = [n for n in kind.names if n not in used]
        plurals = [n for n in getattr(kind, "plural", ()) if n not in used]
        p_list = {Shape.LISTS: 0.55, Shape.FLAT: 0.15}.get(self.shape, 0.25)
        if plurals and r.random() < p_list:
            return self.list_field(kind, r.choice(plurals))
        if not names:
            return None
        name, description = r.choice(names), self._description(kind.descriptions, 0.7)
        tp, guides, make = self.scalar(kind)
        if r.random() < 0.12:          # optional: left out of `required`, present in about half the instances
            return _FieldSpec(name, tp | None, description, guides,
                              lambda rr, depth: make(rr) if rr.random() < 0.5 else _ABSENT)
        return _FieldSpec(name, tp, description, guides, lambda rr, depth: make(rr))

    def scalar(self, kind) -> tuple[Any, dict, Callable[[random.Random], Any]]:
        """(type, guide() keywords, value maker) of one value of `kind`."""
        r = self.r
        if isinstance(kind, Text):
            return str, {}, kind.make
        if isinstance(kind, Flag):
            return bool, {}, lambda rr: rr.random() < 0.5
        if isinstance(kind, Pattern):
            p_regex = 0.95 if self.shape is Shape.REGEX else 0.75
            return str, ({"regex": kind.regex} if r.random() < p_regex else {}), kind.make
        if isinstance(kind, Choice):
            values = self.choice_values(kind)
            weights = (5, 4, 1) if self.shape is Shape.ENUMS else (4, 3, 3)
            how = r.choices(("anyOf", "enum", "plain"), weights=weights)[0]
            if how == "enum" and kind.type_name not in self.type_names:
                return self.enum_type(kind, values), {}, lambda rr: rr.choice(values)
            return str, ({"anyOf": list(values)} if how != "plain" else {}), lambda rr: rr.choice(values)
        if isinstance(kind, Integer):
            lo, hi, guides = self.number_bounds(kind.low, kind.high)
            return int, guides, lambda rr: rr.randint(lo, hi)
        if isinstance(kind, Number):
            lo, hi, guides = self.number_bounds(float(kind.low), float(kind.high))
            return float, guides, lambda rr: min(hi, max(lo, round(rr.uniform(lo, hi), kind.digits)))
        raise TypeError(f"unknown field kind {type(kind).__name__}")

    def number_bounds(self, low, high):
        """(lo, hi, guide keywords): the values drawn lie in [lo, hi], inside whatever the guides say."""
        r = self.r
        if r.random() < 0.3:         # a narrower range than the field's natural one
            cut = (high - low) / 3
            if isinstance(low, float):
                low, high = round(low + r.random() * cut, 1), round(high - r.random() * cut, 1)
            else:
                low, high = low + r.randint(0, int(cut)), high - r.randint(0, int(cut))
        kind = r.choices(("range", "minimum", "maximum", "none"), weights=(4, 2, 1, 3))[0]
        guides = {"range": {"range": (low, high)}, "minimum": {"minimum": low}, "maximum": {"maximum": high},
                  "none": {}}[kind]
        return low, high, guides

    def choice_values(self, kind: Choice) -> tuple[str, ...]:
        k = self.r.randint(min(3, len(kind.values)), len(kind.values))
        picked = set(self.r.sample(kind.values, k))
        return tuple(v for v in kind.values if v in picked)

    def enum_type(self, kind: Choice, values: tuple[str, ...]) -> type:
        self.type_names.add(kind.type_name)
        members = [(re.sub(r"\W", "_", v).upper(), v) for v in values]
        return generable(description=self._description(kind.descriptions, 0.5))(enum.Enum(kind.type_name, members))

    def list_field(self, kind, name: str) -> _FieldSpec:
        r = self.r
        bounds = self.bounds()
        guides = dict(bounds)
        if isinstance(kind, Choice):
            values = self.choice_values(kind)
            if r.random() < 0.4 and kind.type_name not in self.type_names:
                item: Any = self.enum_type(kind, values)
            else:
                item = str
                guides["element"] = GenerationGuide.anyOf(list(values))
            make: Callable[[random.Random], Any] = lambda rr: rr.choice(values)
        elif isinstance(kind, Pattern):
            item, make = str, kind.make
            if r.random() < 0.8:
                guides["element"] = GenerationGuide.regex(kind.regex)
        elif isinstance(kind, Integer):
            item, make = int, (lambda rr: rr.randint(kind.low, kind.high))
            if r.random() < 0.5:
                guides["element"] = GenerationGuide.range((kind.low, kind.high))
        else:
            item, make = str, kind.make
        lo = bounds.get("count", bounds.get("min_items", 0))
        hi = bounds.get("count", bounds.get("max_items"))

        def many(rr, depth):
            n, out = _item_count(rr, lo, hi), []
            for _ in range(50 * (n + 1)):          # distinct items where the pool allows
                if len(out) == n:
                    break
                v = make(rr)
                if v not in out or len(out) >= 3:
                    out.append(v)
            while len(out) < n:
                out.append(make(rr))
            return out
        words = name.replace("_", " ")
        description = self._description((f"Some {words}", f"The {words}", f"A few {words}", f"List of {words}"), 0.5)
        return _FieldSpec(name, list[item], description, guides, many)


def _part_field(r: random.Random, inner: _ObjectSpec, name: str, mode: str, description: str | None,
                bounds: dict | None = None) -> _FieldSpec:
    bounds = bounds or {}
    if mode == "one":
        return _FieldSpec(name, inner.cls, description, {}, lambda rr, depth: inner.instance(rr, depth))
    if mode == "optional":
        return _FieldSpec(name, inner.cls | None, description, {},
                          lambda rr, depth: inner.instance(rr, depth) if rr.random() < 0.6 else _ABSENT)
    lo = bounds.get("count", bounds.get("min_items", 0))
    hi = bounds.get("count", bounds.get("max_items"))
    return _FieldSpec(name, list[inner.cls], description, bounds,
                      lambda rr, depth: [inner.instance(rr, depth) for _ in range(
                          _item_count(rr, lo, hi, weights=(0.2, 0.4, 0.3, 0.1)))])


def _is_list(f: _FieldSpec) -> bool:
    return getattr(f.annotation, "__origin__", None) is list


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
