"""Constrained decoding with llguidance: every output stays inside its grammar, whatever the model prefers."""

import json
import re

import jsonschema
import pytest
import torch

from openafm.runtime.constrained import GrammarConstraint, GrammarError
from openafm.runtime.generate import FinishReason, GenerationStats, generate_tokens
from openafm.runtime.request import Forced
from openafm.runtime.sampling import SamplingParams
from tiny import make_tiny

PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "colour": {"enum": ["red", "green", "blue"]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "minItems": 1, "maxItems": 3}},
    "required": ["name", "age", "colour", "tags"], "additionalProperties": False}


@pytest.fixture(scope="module")
def random_model():
    """A tiny random model over SmolLM2's real 49,152-token vocabulary: it prefers nothing sensible."""
    return make_tiny("smollm2-tiny", vocab_size=49152, max_seq_len=512)


def run(model, tokenizer, constraint, *, seed=None, forced=Forced.FEED, max_new=200, stats=None):
    sampling = SamplingParams() if seed is None else SamplingParams(temperature=1.0, seed=seed)
    return generate_tokens(model, [tokenizer.encode("Person: ")], max_new_tokens=max_new, sampling=sampling,
                           constraint=constraint, forced=forced, tokenizer=tokenizer,
                           eos_token_ids=set(tokenizer.eos_token_ids), stats=stats)[0]


@pytest.mark.parametrize("seed", [None, 0, 1, 2, 3])
def test_random_model_output_always_validates(random_model, tokenizer, seed):
    out = run(random_model, tokenizer, GrammarConstraint.from_json_schema(PERSON, tokenizer), seed=seed)
    assert out.finish_reason in (FinishReason.COMPLETE, FinishReason.EOS)
    jsonschema.validate(json.loads(out.text), PERSON)
    assert ", " in out.text and "\n" not in out.text          # bounded whitespace: compact separators


def test_fast_forward_gives_the_same_tokens_with_fewer_forward_passes(random_model, tokenizer):
    with_ff, without = GenerationStats(), GenerationStats()
    a = run(random_model, tokenizer, GrammarConstraint.from_json_schema(PERSON, tokenizer), stats=with_ff)
    b = run(random_model, tokenizer, GrammarConstraint.from_json_schema(PERSON, tokenizer), forced=Forced.SAMPLE,
            stats=without)
    assert a.token_ids == b.token_ids
    assert with_ff.forced_tokens > 5 and without.forced_tokens == 0
    assert with_ff.decode_steps < without.decode_steps


def test_regex_constraint(random_model, tokenizer):
    pattern = r"[0-9]{3}-[0-9]{4}"
    out = run(random_model, tokenizer, GrammarConstraint.from_regex(pattern, tokenizer), seed=5)
    assert re.fullmatch(pattern, out.text)


def test_lark_constraint(random_model, tokenizer):
    grammar = 'start: "The answer is " ANSWER "."\nANSWER: "yes" | "no"'
    out = run(random_model, tokenizer, GrammarConstraint.from_lark(grammar, tokenizer), seed=7)
    assert out.text in ("The answer is yes.", "The answer is no.")


def test_bad_grammars_are_rejected_loudly(tokenizer):
    with pytest.raises(GrammarError, match="JSON schema"):
        GrammarConstraint.from_json_schema({"type": "object", "properties": {"a": {"type": "nonsense"}}}, tokenizer)
    with pytest.raises(GrammarError, match="Lark grammar cannot be compiled"):
        GrammarConstraint.from_lark("start: undefined_rule", tokenizer)


def test_constraint_needs_a_single_prompt(random_model, tokenizer):
    c = GrammarConstraint.from_regex("a+", tokenizer)
    with pytest.raises(ValueError, match="batch of 2 prompts"):
        generate_tokens(random_model, [[1], [2]], max_new_tokens=4, constraint=c)


def test_length_limit_still_applies(random_model, tokenizer):
    out = run(random_model, tokenizer, GrammarConstraint.from_json_schema(PERSON, tokenizer), max_new=6)
    assert len(out.token_ids) == 6 and out.finish_reason == FinishReason.LENGTH
