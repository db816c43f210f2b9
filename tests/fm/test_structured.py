"""StructuredDecoding: the bounded grammar schema admits a subset of the schema's instances, and steering only
reorders the tokens a grammar allows (checked against jsonschema and against a random-logits decoder)."""

from __future__ import annotations

import json

import jsonschema
import pytest
import torch

from openafm.fm.structured import StructuredDecoding, prompt_with_schema, response_json
from openafm.runtime.constrained import GrammarConstraint
from openafm.runtime.steering import IDLE, JsonLexer, SteeredConstraint

TREE = {"type": "object", "properties": {"name": {"type": "string"},
                                         "children": {"type": "array", "items": {"$ref": "#"}}},
        "required": ["name", "children"], "additionalProperties": False}
LISTS = {"type": "object", "properties": {
    "free": {"type": "array", "items": {"type": "integer"}},
    "at_least_5": {"type": "array", "items": {"type": "integer"}, "minItems": 5},
    "capped": {"type": "array", "items": {"type": "integer"}, "maxItems": 2}},
    "required": ["free", "at_least_5", "capped"]}


def tree(depth: int, width: int = 1) -> dict:
    return {"name": "n", "children": [tree(depth - 1, width) for _ in range(width)] if depth else []}


def test_off_leaves_the_schema_as_it_is():
    assert StructuredDecoding.off().bounded_schema(TREE) == TREE
    assert StructuredDecoding.off().bounded_schema(LISTS) == LISTS


@pytest.mark.parametrize("max_depth", [1, 2, 3])
def test_max_depth_admits_trees_up_to_that_depth_and_no_deeper(max_depth):
    bounded = StructuredDecoding.off().replace(max_depth=max_depth).bounded_schema(TREE)
    for depth in range(6):
        jsonschema.validate(tree(depth, 2), TREE)                      # every tree is valid for the schema
        ok = jsonschema.Draft202012Validator(bounded).is_valid(tree(depth, 2))
        assert ok == (depth <= max_depth), (depth, max_depth)


def test_max_items_bounds_only_unbounded_arrays_and_never_below_min_items():
    bounded = StructuredDecoding.off().replace(max_items=3).bounded_schema(LISTS)["properties"]
    assert bounded["free"]["maxItems"] == 3
    assert bounded["at_least_5"]["maxItems"] == 5 and bounded["at_least_5"]["minItems"] == 5
    assert bounded["capped"]["maxItems"] == 2


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="max_items=0"):
        StructuredDecoding(max_items=0)
    with pytest.raises(ValueError, match="repetition_penalty=0.5"):
        StructuredDecoding(repetition_penalty=0.5)


def test_the_prompt_format_is_the_sessions():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert prompt_with_schema("Hi.", schema) == 'Hi.\n\nRespond with JSON that matches this JSON Schema:\n' \
                                               '{"type": "object", "properties": {"a": {"type": "integer"}}}'
    assert response_json({"a": [1, "é"]}) == '{"a": [1, "é"]}'


# --- steering -------------------------------------------------------------------------------------------------

class _Fake:
    """A constraint that allows tokens 0..allowed-1 and remembers what it consumed."""

    def __init__(self, allowed: int, texts: list[str]):
        self.allowed, self.generated, self.forced_count = allowed, [], 0
        self.tokenizer = type("T", (), {"vocab_size": len(texts), "decode": lambda s, ids: texts[ids[0]]})()

    def mask_logits(self, logits):
        out = logits.clone()
        out[..., self.allowed:] = float("-inf")
        return out

    def consume(self, token):
        self.generated.append(token)


def test_repetition_penalty_follows_ctrls_rule_on_allowed_content_tokens_only():
    fake = _Fake(3, ["a", "b", "]", "c"])
    steered = SteeredConstraint(fake, budget=100, repetition_penalty=2.0)
    for token in (0, 1, 2):                  # "]" was produced too, but structure is never penalised
        steered.consume(token)
    out = steered.mask_logits(torch.tensor([4.0, -4.0, 1.0, 9.0]))
    assert out.tolist() == [2.0, -8.0, 1.0, float("-inf")]


def test_closing_walk_starts_within_the_last_tokens_of_the_budget():
    fake = _Fake(6, ["a", '"', '"}', '", "', ",", "{"])
    steered = SteeredConstraint(fake, budget=6, close_within=3, close_bias=10.0)
    logits = torch.zeros(6)
    for _ in range(3):
        assert steered.mask_logits(logits).tolist() == [0.0] * 6
        steered.consume(0)
    # outside a string: "a" idles, '"' and '"}' open a string (the brace is in it), '", "' opens one and closes
    # it, "," moves on, "{" opens an object
    assert steered.mask_logits(logits).tolist() == [-2.5, -10.0, -10.0, 0.0, 0.0, -10.0]
    steered.consume(1)                                   # now inside a string
    # '"}' closes the string and the object; '", "' closes it and starts another: the walk prefers the first
    assert steered.mask_logits(logits).tolist() == [-2.5, 10.0, 20.0, 0.0, -2.5, -2.5]


def test_the_lexer_reads_escapes_inside_strings():
    lexer = JsonLexer()
    assert lexer.feed('{"a\\"b') == -2.0 and lexer.in_string        # the escaped quote does not close it
    assert lexer.feed('"}') == 2.0 and not lexer.in_string
    assert lexer.feed("123") == IDLE


@pytest.mark.real_model
def test_random_logits_finish_a_recursive_schema_only_with_the_remedies(tokenizer):
    """A 'model' that emits random logits nests a recursive type until the budget runs out; the bounded grammar
    and the closing bias make it end, and what it writes is valid for the original schema."""
    budget = 160
    texts = [tokenizer.decode([i]) for i in range(tokenizer.vocab_size)]
    taste = torch.tensor([20.0 * ("{" in t) - 20.0 * ("]" in t) + 5.0 * ('"' in t) for t in texts])

    def decode(structured: StructuredDecoding) -> str | None:
        constraint = structured.steer(GrammarConstraint.from_json_schema(structured.bounded_schema(TREE), tokenizer),
                                      budget=budget)
        g = torch.Generator().manual_seed(0)
        while len(constraint.generated) < budget and not constraint.done:
            logits = torch.randn(tokenizer.vocab_size, generator=g) + taste   # likes to open children, not close
            constraint.consume(int(constraint.mask_logits(logits).argmax()))
            constraint.forced(budget - len(constraint.generated))
        return tokenizer.decode(constraint.generated) if constraint.done else None

    assert decode(StructuredDecoding.off()) is None
    text = decode(StructuredDecoding(max_items=2, max_depth=2, close_within=60))
    assert text is not None
    jsonschema.validate(json.loads(text), TREE)


@pytest.mark.real_model
def test_the_closing_walk_ends_a_map_whose_keys_repeat(tokenizer):
    """A 'model' that likes to close a string and go on (`",`) and to write digits runs a map the
    narrowing cannot bound (its keys have a pattern) past any budget; the closing walk ends it, valid."""
    budget = 120
    schema = {"type": "object", "patternProperties": {"^[a-z0-9]+$": {"type": "string"}},
              "additionalProperties": False}
    texts = [tokenizer.decode([i]) for i in range(tokenizer.vocab_size)]
    taste = torch.tensor([8.0 * (t == '",') + 6.0 * t.strip().isdigit() + 4.0 * (t == '"') for t in texts])

    def decode(close_within: int | None) -> str | None:
        structured = StructuredDecoding.off().replace(close_within=close_within)
        constraint = structured.steer(GrammarConstraint.from_json_schema(schema, tokenizer), budget=budget)
        while len(constraint.generated) < budget and not constraint.done:
            constraint.consume(int(constraint.mask_logits(taste.clone()).argmax()))
            constraint.forced(budget - len(constraint.generated))
        return tokenizer.decode(constraint.generated) if constraint.done else None

    assert decode(None) is None
    text = decode(40)
    assert text is not None
    jsonschema.validate(json.loads(text), schema)


def test_a_schema_without_recursion_keeps_its_refs():
    schema = {"$defs": {"x": {"type": "string"}}, "type": "object",
              "properties": {"a": {"$ref": "#/$defs/x"}, "b": {"$ref": "#/$defs/x"}}, "required": ["a", "b"]}
    assert StructuredDecoding(max_items=None, max_open_keys=None).bounded_schema(schema) == schema
