"""Speculation inside the engine step: n-gram guesses and forced grammar runs verified in one pass change no
token (greedy and seeded sampling, free and constrained rows, rows in one batch, a row cache compacting its holes),
and the engine only guesses when it pays; the proposer and its acceptance arithmetic against a naive reference."""

from __future__ import annotations

import json

import pytest
from engine_events import Collector

import openafm
from openafm.models.build import build_model
from openafm.models.presets import get_preset
from openafm.runtime.engine import Engine, EngineConfig, RowRequest
from openafm.runtime.constrained import GrammarConstraint
from openafm.runtime.proposers import Acceptance, NgramConfig, NgramProposer, ProposerKind, StepCosts
from openafm.runtime.request import Forced
from openafm.runtime.sampling import SamplingParams
from tiny import TINY_PRESETS, make_tiny

PASSAGE = ("The lighthouse keeper climbed the spiral stairs at dusk, lit the great lamp, and wrote in his log: "
           "wind from the north-east, sea rough, two ships passed before midnight, all well.")
COPY = f"Repeat this text exactly, word for word:\n\n{PASSAGE}"


@pytest.fixture(scope="module")
def lm():
    return openafm.load()


def run(lm, requests: list[tuple[list[int], int, dict]], config: EngineConfig) -> list[Collector]:
    engine = Engine(lm.model, lm.tokenizer, config).start()
    try:
        outs = [Collector() for _ in requests]
        for (prompt, n, kw), out in zip(requests, outs, strict=True):
            engine.submit(RowRequest(prompt, n, out, **kw))
        return [o.wait() for o in outs]
    finally:
        engine.stop()


@pytest.mark.real_model
def test_guesses_change_no_token_and_copying_accepts_most(lm):
    tok = lm.tokenizer
    copy = tok.encode(lm.chat_prompt(COPY))
    chat = tok.encode(lm.chat_prompt("Write a haiku about the sea."))
    seeded = {"sampling": SamplingParams(temperature=0.8, seed=3)}
    requests = [(copy, 48, {}), (chat, 24, {}), (copy, 32, seeded)]
    plain = run(lm, requests, EngineConfig(max_batch=4))
    spec = run(lm, requests, EngineConfig(max_batch=4, speculate=ProposerKind.NGRAM, initial_capacity=64))
    assert [o.tokens for o in spec] == [o.tokens for o in plain]
    assert [o.text for o in spec] == [o.text for o in plain]
    last = spec[0].events[-1]
    assert last.proposed > 0 and last.accepted / last.proposed > 0.5, (last.proposed, last.accepted)
    assert sum(e.guessed for e in spec[0].events) == last.accepted
    assert plain[0].events[-1].proposed == 0


@pytest.mark.real_model
def test_forced_runs_of_a_grammar_are_fed_in_one_step_and_change_nothing(lm):
    tok = lm.tokenizer
    schema = {"type": "object", "properties": {"keeper": {"type": "string", "maxLength": 30},
                                               "ships": {"type": "integer", "minimum": 0, "maximum": 9},
                                               "wind": {"enum": ["north-east", "south-west", "calm"]}},
              "required": ["keeper", "ships", "wind"], "additionalProperties": False}
    prompt = tok.encode(lm.chat_prompt(f"{PASSAGE}\n\nFill in the JSON from the text."))
    outs = {}
    for kind, forced in ((ProposerKind.OFF, Forced.SAMPLE), (ProposerKind.NGRAM, Forced.FEED)):
        engine = Engine(lm.model, tok, EngineConfig(max_batch=2, speculate=kind)).start()
        try:
            out = Collector()
            engine.submit(RowRequest(prompt, 60, out, constraint=GrammarConstraint.from_json_schema(schema, tok),
                                     forced=forced))
            outs[kind] = (out.wait(), engine.steps_run)
        finally:
            engine.stop()
    (plain, plain_steps), (spec, spec_steps) = outs[ProposerKind.OFF], outs[ProposerKind.NGRAM]
    assert spec.tokens == plain.tokens and json.loads(spec.text) == json.loads(plain.text)
    assert spec.events[-1].finish == "complete"
    forced = sum(e.forced for e in spec.events)
    assert forced > 5 and spec_steps < plain_steps, (forced, spec_steps, plain_steps)


def test_the_ngram_proposer_matches_a_naive_search():
    config = NgramConfig(min_n=2, max_n=3, max_gamma=4)
    tokens = [5, 1, 2, 3, 9, 1, 2, 7, 1, 2, 3, 4, 1, 2, 3]
    proposer = NgramProposer([], config)
    for i, t in enumerate(tokens):
        proposer.append(t)
        seen = tokens[:i + 1]
        want = []
        for n in range(config.max_n, config.min_n - 1, -1):          # naive: scan back for the longest suffix
            if len(seen) <= n:
                continue
            ends = [e for e in range(n - 1, len(seen) - 1) if seen[e + 1 - n:e + 1] == seen[-n:]]
            if ends:
                want = seen[ends[-1] + 1:ends[-1] + 5]
                break
        assert proposer.propose(4) == want, (i, seen)
    assert NgramProposer([1, 2, 3, 1, 2], config).propose(2) == [3, 1]
    with pytest.raises(ValueError, match="min_n=3, max_n=2"):
        NgramConfig(min_n=3, max_n=2)


def test_acceptance_and_step_costs_decide_like_the_arithmetic():
    a = Acceptance(rate=0.5)
    assert a.expected_tokens(3) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    a.update(proposed=4, accepted=4)
    assert a.rate > 0.5 and (a.proposed, a.accepted) == (4, 4)
    b = Acceptance(rate=0.5)
    b.update(proposed=4, accepted=0)                                   # only the first position was judged
    assert b.rate == pytest.approx(0.5 + 0.15 * (0 - 0.5))
    b.untried()                                                        # drifts back towards the prior
    assert b.rate == pytest.approx(0.425 + 0.02 * (0.8 - 0.425))
    costs = StepCosts()
    assert costs.estimate(4, 3) / costs.estimate(4, 1) == pytest.approx(1.35)   # the prior, nothing measured
    costs.observe(4, 1, 0.010)
    assert costs.estimate(4, 3) == pytest.approx(0.0135)
    costs.observe(4, 3, 0.030)
    assert costs.estimate(4, 3) == pytest.approx(0.030)
    costs.observe(4, 3, 0.020)
    assert costs.estimate(4, 3) == pytest.approx(0.030 + 0.2 * (0.020 - 0.030))


@pytest.mark.parametrize("name", TINY_PRESETS + ["afm-server-tiny"])
def test_tiny_families_decode_the_same_tokens_with_guesses(name, tokenizer):
    """Dense, KV-sharing, sliding-window (held whole, masked) and PT-MoE (eager) decoders: two rows, one on a
    repeating prompt the n-gram proposer matches, give the same greedy tokens with and without guesses."""
    model = make_tiny(name) if name in TINY_PRESETS else build_model(get_preset(name)).eval()
    prompts = [[5, 6, 7, 8, 9] * 6 + [5, 6], [11, 12, 13, 14, 11, 12]]
    outs = {}
    for kind in (ProposerKind.OFF, ProposerKind.NGRAM):
        engine = Engine(model, tokenizer, EngineConfig(max_batch=2, max_context=256, initial_capacity=32,
                                                            speculate=kind)).start()
        try:
            rows = [Collector() for _ in prompts]
            for p, out in zip(prompts, rows, strict=True):
                engine.submit(RowRequest(p, 48, out))
            outs[kind] = [r.wait() for r in rows]
        finally:
            engine.stop()
    assert [r.tokens for r in outs[ProposerKind.NGRAM]] == [r.tokens for r in outs[ProposerKind.OFF]]
    assert sum(r.events[-1].proposed for r in outs[ProposerKind.NGRAM]) > 0
