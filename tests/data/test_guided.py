"""The guided-generation data: every instance validates against its schema (jsonschema, with `pattern` taken as a
whole match, as a guide means it), instances are short and in declaration order, examples are a function of their
seed, the held-out split shares no schema with train, and the schemas cover the @generable features."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import jsonschema
import pytest

from openafm.data.guided import GuidedDataset, Shape, guided_example, schema_split
from openafm.data.guided_vocab import CONCEPTS, FIELDS, Choice
from openafm.fm.structured import prompt_with_schema, response_json
from openafm.splits import Split

N_TRAIN, N_HELDOUT = 400, 120


def _fullmatch_pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and not re.fullmatch(pattern, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r} as a whole")


WholeMatch = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": _fullmatch_pattern})


@pytest.fixture(scope="module")
def train():
    return [guided_example(0, i, Split.TRAIN) for i in range(N_TRAIN)]


@pytest.fixture(scope="module")
def heldout():
    return [guided_example(0, i, Split.HELDOUT) for i in range(N_HELDOUT)]


def _nodes(schema):
    """Every dict inside a schema."""
    if isinstance(schema, dict):
        yield schema
        for v in schema.values():
            yield from _nodes(v)
    elif isinstance(schema, list):
        for v in schema:
            yield from _nodes(v)


def _resolve(root, node):
    while "$ref" in node:
        ref = node["$ref"]
        node = root if ref == "#" else root["$defs"][ref.rsplit("/", 1)[1]]
    return node


def _check_shape(root, node, value, depth, stats):
    """Keys in declaration order; lists short; how deep objects nest."""
    node = _resolve(root, node)
    stats["depth"] = max(stats["depth"], depth)
    if isinstance(value, dict):
        order = list(node["properties"])
        assert list(value) == sorted(value, key=order.index), (list(value), order)
        for k, v in value.items():
            _check_shape(root, node["properties"][k], v, depth + 1, stats)
    elif isinstance(value, list):
        items = node["items"] if "items" in node else next(s for s in node["anyOf"] if "items" in s)["items"]
        assert len(value) <= max(3, node.get("minItems", 0) + 2), (len(value), node)
        for v in value:
            _check_shape(root, items, v, depth + 1, stats)
    elif isinstance(value, str):
        assert len(value) <= 40, value


def test_every_instance_is_valid_short_and_in_declaration_order(train, heldout):
    for ex in train + heldout:
        WholeMatch(ex.schema).validate(ex.instance)
        stats = {"depth": 0}
        _check_shape(ex.schema, ex.schema, ex.instance, 0, stats)
        assert stats["depth"] <= 8 and len(ex.response) < 1500, (ex.where, stats, len(ex.response))


def test_the_example_is_the_session_format(train):
    for ex in train[:50]:
        assert ex.prompt == prompt_with_schema(ex.request, ex.schema)
        assert ex.response == response_json(ex.instance) and json.loads(ex.response) == ex.instance
        chat = ex.chat()
        assert (chat.prompt, chat.response) == (ex.prompt, ex.response)
        assert chat.where == ex.where and ex.where.startswith("guided train seed 0 #")


def test_recursion_stops_two_levels_below_the_root(train):
    def levels(value, key):                  # how many times the recursive list nests
        return 1 + max((levels(v, key) for v in value.get(key, [])), default=0) if isinstance(value, dict) else 0

    recursive = [ex for ex in train if ex.shape is Shape.RECURSIVE and
                 any(p.get("items") == {"$ref": "#"} for p in ex.schema["properties"].values())]
    assert len(recursive) > 30
    deepest = 0
    for ex in recursive:
        key = next(k for k, p in ex.schema["properties"].items() if p.get("items") == {"$ref": "#"})
        deepest = max(deepest, levels(ex.instance, key))
    assert deepest == 3        # the root, its children, their children (whose lists are empty)


def test_examples_are_a_function_of_seed_split_and_index():
    a, b = guided_example(5, 17), guided_example(5, 17)
    assert (a.prompt, a.response) == (b.prompt, b.response)
    others = {guided_example(6, 17).prompt, guided_example(5, 18).prompt, guided_example(5, 17, Split.HELDOUT).prompt}
    assert a.prompt not in others and len(others) == 3
    ds = GuidedDataset(seed=5, size=20)
    assert len(ds) == 20 and ds[17].response == a.response and [e.response for e in ds[16:18]][1] == a.response
    with pytest.raises(IndexError, match="outside this dataset of 20"):
        ds[20]


def test_heldout_schemas_are_never_trained_on(train, heldout):
    canon = lambda s: json.dumps(s, sort_keys=True)
    assert all(schema_split(ex.schema) is Split.TRAIN for ex in train)
    assert all(schema_split(ex.schema) is Split.HELDOUT for ex in heldout)
    assert not {canon(ex.schema) for ex in train} & {canon(ex.schema) for ex in heldout}
    assert len({canon(ex.schema) for ex in heldout}) > 0.9 * N_HELDOUT           # varied, not one schema again


def test_schemas_cover_the_generable_features(train):
    seen = set()
    for ex in train:
        seen.add(ex.shape)
        for node in _nodes(ex.schema):
            seen |= {k for k in ("pattern", "minItems", "maxItems", "minimum", "maximum", "enum") if k in node}
            if node.get("type") == "number":
                seen.add("number")
            if node.get("type") == "boolean":
                seen.add("boolean")
            if node.get("$ref") == "#":
                seen.add("self-ref")
            if str(node.get("$ref", "")).startswith("#/$defs/") and node["$ref"].rsplit("/", 1)[1] in ex.schema.get(
                    "$defs", {}) and any(n.get("$ref") == node["$ref"] for n in _nodes(
                    ex.schema["$defs"][node["$ref"].rsplit("/", 1)[1]])):
                seen.add("nested self-ref")
            if "minItems" in node and node.get("minItems") == node.get("maxItems"):
                seen.add("count")
            if node.get("type") == "object" and set(node.get("properties", {})) - set(node.get("required", [])):
                seen.add("optional")
        if any(d.get("type") == "string" and "enum" in d for d in ex.schema.get("$defs", {}).values()):
            seen.add("enum type")
    wanted = set(Shape) | {"pattern", "minItems", "maxItems", "minimum", "maximum", "enum", "number", "boolean",
                           "self-ref", "nested self-ref", "count", "optional", "enum type"}
    assert wanted <= seen, wanted - seen
    assert len({ex.type_name for ex in train}) >= 50 and len({ex.request for ex in train}) > 0.6 * N_TRAIN


def test_no_type_is_drawn_from_the_benchmark():
    """The benchmark's @generable types (benchmarks/_structured_types.py) share no type name with the generator."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "_structured_types.py"
    if not path.is_file():
        pytest.skip("benchmarks/_structured_types.py is not in this checkout")
    benchmark = {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)}
    ours = {name for c in CONCEPTS.values() for name in c.names}
    ours |= {f.type_name for f in FIELDS.values() if isinstance(f, Choice)}
    assert benchmark and not ours & benchmark, ours & benchmark


def test_some_requests_ask_for_an_exact_count_and_the_instance_has_it():
    asked = [e for e in (guided_example(0, i, Split.TRAIN) for i in range(120)) if e.counts]
    assert 5 <= len(asked) <= 60
    for e in asked:
        (field, n), = e.counts
        assert f"Include exactly {n} {field.replace('_', ' ')}." in e.request and len(e.instance[field]) == n
        assert e.prompt.startswith(e.request)
