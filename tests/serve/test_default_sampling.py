"""What a request that leaves sampling unset gets: the served model's recommended sampling, field by field (as vLLM
applies a generation config), or OpenAI's temperature 1 where there is none; what the request sets always wins."""

from __future__ import annotations

import pytest

from openafm.checkpoint.load import load_tokenizer
from openafm.checkpoint.sampling import RecommendedSampling
from openafm.runtime.sampling import SamplingParams
from openafm.serve.protocol import chat_request, completion_request
from openafm.serve.responses_api import ResponseStore, responses_request

CARD = RecommendedSampling(temperature=0.2, top_p=0.9, source="a card")
LLAMA = RecommendedSampling(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, source="llama.cpp")


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("default")


def chat(tok, recommended, **fields) -> list[SamplingParams]:
    body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, **fields}
    return chat_request(body, tokenizer=tok, model="m", context=2048, recommended=recommended).sampling


@pytest.mark.parametrize("recommended, fields, expected", [
    (CARD, {}, SamplingParams(temperature=0.2, top_p=0.9)),
    (None, {}, SamplingParams(temperature=1.0)),                                       # OpenAI's default
    (CARD, {"temperature": 0.7}, SamplingParams(temperature=0.7, top_p=0.9)),          # field by field
    (CARD, {"top_p": 0.5}, SamplingParams(temperature=0.2, top_p=0.5)),
    (CARD, {"top_p": 1}, SamplingParams(temperature=0.2)),                              # an explicit "no cut"
    (CARD, {"temperature": 0}, SamplingParams()),                                       # greedy: nothing to cut
    (LLAMA, {"temperature": 0.5}, SamplingParams(temperature=0.5, top_k=40, top_p=0.95, min_p=0.05)),
    (None, {"temperature": 0.5, "top_p": 0.8}, SamplingParams(temperature=0.5, top_p=0.8)),
])
def test_unset_fields_take_the_recommendation_and_set_ones_win(tok, recommended, fields, expected):
    assert chat(tok, recommended, **fields) == [expected]


def test_every_choice_gets_it_with_its_own_seed(tok):
    assert chat(tok, CARD, n=2, seed=5) == [SamplingParams(temperature=0.2, top_p=0.9, seed=5),
                                           SamplingParams(temperature=0.2, top_p=0.9, seed=6)]


def test_completions_and_responses_apply_it_and_responses_echo_what_was_applied(tok):
    plan = completion_request({"model": "m", "prompt": "Once", "max_tokens": 4}, tokenizer=tok, model="m",
                              context=2048, recommended=CARD)
    assert plan.sampling == [SamplingParams(temperature=0.2, top_p=0.9)]
    req = responses_request({"model": "m", "input": "Hi"}, ResponseStore(), tokenizer=tok, model="m", context=2048,
                            recommended=CARD)
    assert req.plan.sampling == [SamplingParams(temperature=0.2, top_p=0.9)]
    assert (req.echo["temperature"], req.echo["top_p"]) == (0.2, 0.9)
    req = responses_request({"model": "m", "input": "Hi"}, ResponseStore(), tokenizer=tok, model="m", context=2048)
    assert (req.echo["temperature"], req.echo["top_p"]) == (1.0, 1.0)
