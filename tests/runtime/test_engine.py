"""Continuous batching on the default model: rows that join a running batch at different times, leave early,
reuse a prefix or run under a grammar decode exactly the tokens they decode alone (greedy, through
runtime.generate); the row cache compacts and grows under them; a cancelled row frees its slot; a full queue
refuses."""

from __future__ import annotations

import argparse
import json
import time

import pytest
from engine_events import Collector

import openafm
from openafm.checkpoint.packaged import RAW_MODEL
from openafm.commands.common import parse_speculate
from openafm.runtime.engine import CANCELLED, Engine, EngineBusy, EngineConfig, RowRequest
from openafm.runtime.constrained import GrammarConstraint
from openafm.runtime.generate import generate_tokens
from openafm.runtime.proposers import ProposerKind
from openafm.runtime.sampling import SamplingParams

pytestmark = pytest.mark.real_model

QUESTIONS = ["What is the capital of France?", "Name three colours.", "Write a haiku about the sea.",
             "What is 2+2?", "Who wrote Hamlet?"]


@pytest.fixture(scope="module")
def lm():
    return openafm.load(RAW_MODEL)      # its long answers keep a row running while a long prompt joins


def alone(lm, prompt: list[int], n: int, **kw) -> list[int]:
    out = generate_tokens(lm.model, [prompt], max_new_tokens=n, eos_token_ids=set(lm.tokenizer.eos_token_ids),
                          tokenizer=lm.tokenizer, **kw)[0]
    return out.token_ids


def test_rows_joining_at_different_times_decode_what_they_decode_alone(lm):
    tok = lm.tokenizer
    prompts = [tok.encode(lm.chat_prompt(q)) for q in QUESTIONS]
    # A tiny starting capacity: the row cache must realign (longer prompts joining), compact and grow under the rows.
    engine = Engine(lm.model, tok, EngineConfig(max_batch=4, initial_capacity=16, prefix_cache=0)).start()
    try:
        first = Collector()
        engine.submit(RowRequest(prompts[0], 24, first))
        while len(first.events) < 5:                       # the others join a batch already 5 steps in
            first.done.wait(0.01)
        rest = [Collector() for _ in prompts[1:]]
        for p, c in zip(prompts[1:], rest, strict=True):
            engine.submit(RowRequest(p, 12 + 4 * len(rest), c))   # the fifth waits for a free row
        got = [first.wait().tokens] + [c.wait().tokens for c in rest]
    finally:
        engine.stop()
    want = [alone(lm, prompts[0], 24)] + [alone(lm, p, 12 + 4 * len(rest)) for p in prompts[1:]]
    assert got == want
    assert engine.cache.capacity > 16


def test_a_shared_prefix_is_prefilled_once_and_changes_nothing(lm):
    tok = lm.tokenizer
    prompts = [tok.encode(lm.chat_prompt(q, system="You are a terse assistant who answers in one line.")) for q in
               QUESTIONS[:3]]
    engine = Engine(lm.model, tok, EngineConfig(max_batch=4, min_prefix=8)).start()
    try:
        outs = []
        for p in prompts:                           # one at a time: each later prompt finds the earlier ones cached
            outs.append(Collector())
            engine.submit(RowRequest(p, 10, outs[-1]))
            outs[-1].wait()
    finally:
        engine.stop()
    shared = next(i for i in range(len(prompts[0])) if prompts[0][i] != prompts[1][i])
    assert outs[0].events[0].cached_tokens == 0
    assert outs[1].events[0].cached_tokens == shared and outs[2].events[0].cached_tokens >= shared > 10
    assert [o.tokens for o in outs] == [alone(lm, p, 10) for p in prompts]


def test_prompts_admitted_together_share_the_prefix_the_first_one_prefilled(lm):
    tok = lm.tokenizer
    prompts = [tok.encode(lm.chat_prompt(q, system="You are a terse assistant who answers in one line.")) for q in
               QUESTIONS[:3]]
    engine = Engine(lm.model, tok, EngineConfig(max_batch=4, min_prefix=8))
    outs = [Collector() for _ in prompts]
    engine.run([RowRequest(p, 10, o) for p, o in zip(prompts, outs, strict=True)])    # all admitted at once
    shared = next(i for i in range(len(prompts[0])) if prompts[0][i] != prompts[1][i])
    assert [o.events[0].cached_tokens for o in outs] == [0, shared, shared]
    assert [o.tokens for o in outs] == [alone(lm, p, 10) for p in prompts]


def test_grammar_rows_in_a_batch_are_valid_and_equal_alone(lm):
    tok = lm.tokenizer
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                               "age": {"type": "integer", "minimum": 0, "maximum": 99}},
              "required": ["name", "age"], "additionalProperties": False}
    prompt = tok.encode(lm.chat_prompt("Invent a person. Answer in JSON."))
    plain = tok.encode(lm.chat_prompt("Name three colours."))
    engine = Engine(lm.model, tok, EngineConfig(max_batch=4)).start()
    try:
        json_row, text_row = Collector(), Collector()
        engine.submit(RowRequest(prompt, 40, json_row, constraint=GrammarConstraint.from_json_schema(schema, tok),
                                 logprobs=2))
        engine.submit(RowRequest(plain, 20, text_row))
        json_row.wait(), text_row.wait()
    finally:
        engine.stop()
    value = json.loads(json_row.text)
    assert set(value) == {"name", "age"} and 0 <= value["age"] <= 99
    assert json_row.events[-1].finish == "complete"
    forced = [e for e in json_row.events if e.forced]
    assert forced and all(e.logprob == 0.0 and e.mask_seconds == 0 for e in forced)      # '{"name": "' is forced
    assert all(e.mask_seconds > 0 for e in json_row.events if e.token_id >= 0 and not e.forced)
    ref = alone(lm, prompt, 40, constraint=GrammarConstraint.from_json_schema(schema, tok))
    assert json_row.tokens == ref
    assert text_row.tokens == alone(lm, plain, 20)


def test_a_cancelled_row_leaves_and_frees_its_slot(lm):
    tok = lm.tokenizer
    engine = Engine(lm.model, tok, EngineConfig(max_batch=2)).start()
    try:
        long = Collector()
        req = RowRequest(tok.encode(lm.chat_prompt("Tell me a long story.")), 400, long,
                         sampling=SamplingParams(temperature=0.8, seed=1))
        engine.submit(req)
        while len(long.events) < 3:
            long.done.wait(0.01)
        req.cancel.cancel()
        long.wait(10)
        assert long.events[-1].finish == CANCELLED and len(long.events) < 50
        for _ in range(500):                        # the row leaves right after its last event
            if engine.running == 0:
                break
            time.sleep(0.01)
        assert engine.running == 0 and engine.cache.lengths == [0, 0]
    finally:
        engine.stop()


def test_a_full_queue_refuses(lm):
    tok = lm.tokenizer
    engine = Engine(lm.model, tok, EngineConfig(max_batch=1, max_queue=2))      # not started: nothing leaves
    prompt = tok.encode("Hello")
    engine.submit(RowRequest(prompt, 4, Collector()))
    engine.submit(RowRequest(prompt, 4, Collector()))
    with pytest.raises(EngineBusy, match="max_queue=2"):
        engine.submit(RowRequest(prompt, 4, Collector()))


def test_a_long_prompt_joins_in_chunks_between_the_running_rows_steps(lm):
    """A joining prompt prefills one chunk per loop turn: the running row keeps decoding meanwhile (a token per
    chunk), and the chunked prefill gives the tokens the whole prefill gives."""
    tok = lm.tokenizer
    long = tok.encode(lm.chat_prompt("Summarise this: " + " ".join(["the sea was calm and the sky was clear"] * 50)))
    short = tok.encode(lm.chat_prompt("Count from one to fifty."))
    order: list[str] = []
    engine = Engine(lm.model, tok, EngineConfig(max_batch=2, prefill_chunk=64)).start()
    try:
        running, joining = Collector(), Collector()
        engine.submit(RowRequest(short, 120, lambda e: (order.append("running"), running(e))))
        while len(running.events) < 3:
            running.done.wait(0.01)
        order.append("submitted")
        engine.submit(RowRequest(long, 8, lambda e: (order.append("joining"), joining(e))))
        joining.wait(), running.wait()
    finally:
        engine.stop()
    between = order[order.index("submitted"):order.index("joining")].count("running")
    chunks = -(-len(long) // 64)
    assert len(long) > 400 and between >= chunks - 2, (between, chunks)
    assert joining.events[0].prefill_seconds > 0 and joining.tokens == alone(lm, long, 8)
    both = joining.events[0].prefill_seconds + running.events[0].prefill_seconds     # the engine's running total
    assert abs(engine.prefill_seconds - both) < 1e-9


def test_speculate_values_parse_or_fail_naming_the_value():
    assert parse_speculate("off") == (ProposerKind.OFF, None)
    assert parse_speculate("ngram") == (ProposerKind.NGRAM, None)
    assert parse_speculate("draft:drafts/x") == (ProposerKind.DRAFT, "drafts/x")
    for bad in ("draft", "draft:", "eagle", "ngram:3"):
        with pytest.raises(argparse.ArgumentTypeError, match=repr(bad)):
            parse_speculate(bad)


def test_a_draft_request_on_an_engine_without_a_draft_is_refused(lm):
    engine = Engine(lm.model, lm.tokenizer, EngineConfig(max_batch=1))
    with pytest.raises(ValueError, match="speculate=draft"):
        engine.run([RowRequest([1, 2, 3], 4, lambda e: None, speculate=ProposerKind.DRAFT)])
    with pytest.raises(ValueError, match="needs a draft model"):
        Engine(lm.model, lm.tokenizer, EngineConfig(speculate=ProposerKind.DRAFT))
