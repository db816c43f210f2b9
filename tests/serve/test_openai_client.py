"""`openafm serve` used the way users use it: the official `openai` client (and raw HTTP where the client hides
the wire) against a live server on loopback, on the default model. Shapes are checked against the client's own
types, usage against the tokenizer, batched greedy text against the same requests one at a time."""

from __future__ import annotations

import concurrent.futures
import json
import time

import httpx
import jsonschema
import openai
import pytest
import torch
from live_server import live_server
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk

import openafm
from openafm.checkpoint.packaged import DEFAULT_MODEL
from openafm.runtime.draft import build_draft
from openafm.runtime.engine import EngineConfig
from openafm.runtime.proposers import ProposerKind
from openafm.serve.access import Access, exposed_without_key
from openafm.serve.engine_front import DefaultSampling, Served
from openafm.serve.protocol import OPENAI_SAMPLING

pytestmark = pytest.mark.real_model
MODEL = DEFAULT_MODEL
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
WEATHER = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                           "additionalProperties": False}}},
           {"type": "function", "function": {"name": "get_time", "description": "Local time in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


@pytest.fixture(scope="module")
def lm():
    return openafm.load()


@pytest.fixture(scope="module")
def server(lm):
    with live_server(lm, EngineConfig(max_batch=8, max_queue=16), max_body=64 * 1024) as (url, served):
        yield url, served


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server[0] + "/v1", api_key="unused", max_retries=0, timeout=120)


def ask(client, content: str, **kw):
    return client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": content}],
                                          temperature=0, **kw)


def test_chat_shape_usage_and_logprobs(client, lm):
    r = ask(client, "What is the capital of France?", max_tokens=16, logprobs=True, top_logprobs=3)
    ChatCompletion.model_validate(r.model_dump())                  # the client's own type, round trip
    assert r.object == "chat.completion" and r.model == MODEL and r.choices[0].message.role == "assistant"
    assert "Paris" in r.choices[0].message.content
    prompt = lm.tokenizer.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}])
    assert r.usage.prompt_tokens == len(lm.tokenizer.encode(prompt))
    lps = r.choices[0].logprobs.content
    assert r.usage.completion_tokens == len(lps) == len(lm.tokenizer.encode(r.choices[0].message.content))
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert "".join(t.token for t in lps) == r.choices[0].message.content
    assert all(len(t.top_logprobs) == 3 and t.top_logprobs[0].logprob >= t.top_logprobs[-1].logprob for t in lps)
    assert all(t.logprob == pytest.approx(t.top_logprobs[0].logprob) for t in lps)        # greedy: the top token


def test_stream_is_sse_ending_in_done_and_equals_the_whole_reply(server, client):
    whole = ask(client, "Name three colours.", max_tokens=20)
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Name three colours."}], "temperature": 0,
            "max_tokens": 20, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream("POST", server[0] + "/v1/chat/completions", json=body, timeout=120) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        raw = "".join(r.iter_text())
    events = raw.split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]"
    assert all(e.startswith("data: ") and "\n" not in e for e in events[:-1])
    chunks = [ChatCompletionChunk.model_validate(json.loads(e[6:])) for e in events[:-2]]
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert chunks[-2].choices[0].finish_reason == whole.choices[0].finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage.model_dump() == whole.usage.model_dump()
    streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Name three colours."}], temperature=0, max_tokens=20,
        stream=True) if c.choices)
    assert streamed == text


def test_json_schema_and_json_object_are_valid(client):
    r = ask(client, "Invent a person.", max_tokens=60,
            response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}})
    jsonschema.validate(json.loads(r.choices[0].message.content), PERSON)
    assert r.choices[0].finish_reason == "stop"
    # a prompt the model closes in ~16 tokens: "Describe a cat as JSON." runs on with empty keys until the cap
    r = ask(client, "Describe a cat as a JSON object with its name and age.", max_tokens=200,
            response_format={"type": "json_object"})
    assert r.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(r.choices[0].message.content), dict)


def test_tools_required_named_and_none(client):
    r = ask(client, "What is the weather in Paris?", max_tokens=60, tools=WEATHER, tool_choice="required")
    calls = r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason == "tool_calls" and r.choices[0].message.content is None
    assert calls and all(c.function.name in ("get_weather", "get_time") for c in calls)
    assert all(isinstance(json.loads(c.function.arguments)["city"], str) for c in calls)
    r = ask(client, "What is the weather in Paris?", max_tokens=60, tools=WEATHER,
            tool_choice={"type": "function", "function": {"name": "get_time"}})
    assert [c.function.name for c in r.choices[0].message.tool_calls] == ["get_time"] * len(r.choices[0].message.tool_calls)
    r = ask(client, "Say hello.", max_tokens=8, tools=WEATHER, tool_choice="none")
    assert r.choices[0].message.tool_calls is None and not r.choices[0].message.content.startswith("<")
    # The client runs the tool and sends the result back; the model answers in text.
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    r = client.chat.completions.create(model=MODEL, temperature=0, max_tokens=8, tools=WEATHER, tool_choice="none",
                                       messages=[{"role": "user", "content": "What is the weather in Paris?"},
                                                 {"role": "assistant", "content": None, "tool_calls": [call]},
                                                 {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 24 C"}])
    assert r.choices[0].message.content


def test_completions_n_seed_stop(client):
    r = client.completions.create(model=MODEL, prompt="The old lighthouse keeper", max_tokens=12, n=3,
                                  temperature=0.9, seed=7, logprobs=2)
    Completion.model_validate(r.model_dump())
    again = client.completions.create(model=MODEL, prompt="The old lighthouse keeper", max_tokens=12, n=3,
                                      temperature=0.9, seed=7)
    assert [c.text for c in r.choices] == [c.text for c in again.choices]       # seeded: reproducible
    assert len(r.choices) == 3 and r.usage.completion_tokens == sum(len(c.logprobs.tokens) for c in r.choices)
    r = ask(client, "Count from 1 to 10, separated by commas.", max_tokens=40, stop=["5"])
    assert "5" not in r.choices[0].message.content and r.choices[0].finish_reason == "stop"


@pytest.mark.parametrize("body, param", [
    ({"frequency_penalty": 0.5}, "frequency_penalty"),
    ({"temperature": 3}, "temperature"),
    ({"top_p": 0}, "top_p"),
    ({"n": 99}, "n"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": 10 ** 6}, "max_tokens"),
    ({"max_completion_tokens": 10 ** 6}, "max_completion_tokens"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"top_logprobs": 3}, "top_logprobs"),
    ({"logit_bias": {"1": 5}}, "logit_bias"),
    ({"functions": []}, "functions"),
    ({"stream_options": {"include_usage": True}}, "stream_options"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     "messages[0].content[0].image_url.url"),
    ({"response_format": {"type": "xml"}}, "response_format.type"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string",
                                                                 "format": "no-such-format"}}}},
     "response_format.json_schema.schema"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
      "tool_choice": {"type": "function", "function": {"name": "g"}}}, "tool_choice"),
    ({"model": "nope"}, "model"),
])
def test_every_bad_request_names_its_field(server, body, param):
    full = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, **body}
    r = httpx.post(server[0] + "/v1/chat/completions", json=full, timeout=60)
    assert r.status_code == (404 if param == "model" else 400), r.text
    error = r.json()["error"]
    assert error["param"] == param and error["message"] and error["type"] == "invalid_request_error"
    if "image" in json.dumps(body):
        assert "not a data URL" in error["message"]           # tests/serve/test_image_inputs.py has the rest


def test_malformed_and_oversized_bodies_are_400(server, client):
    r = httpx.post(server[0] + "/v1/chat/completions", content=b'{"model": ', timeout=30,
                   headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]
    r = httpx.post(server[0] + "/v1/chat/completions", json={"model": MODEL, "messages": [
        {"role": "user", "content": "x" * 70_000}]}, timeout=30)
    assert r.status_code == 400 and "65536" in r.json()["error"]["message"]
    with pytest.raises(openai.BadRequestError) as e:                     # and through the client
        ask(client, "hi", max_tokens=4, presence_penalty=1.0)
    assert e.value.body["param"] == "presence_penalty"
    assert httpx.get(server[0] + "/health").json()["status"] == "ok"     # still up


def test_concurrent_requests_give_the_greedy_text_they_give_alone(client):
    questions = ["Who wrote Hamlet?", "What is 2+2?", "Name a planet.", "What colour is the sky?"]
    alone = [ask(client, q, max_tokens=12).choices[0].message.content for q in questions]
    with concurrent.futures.ThreadPoolExecutor(len(questions)) as pool:
        together = list(pool.map(lambda q: ask(client, q, max_tokens=12).choices[0].message.content, questions))
    assert together == alone


def test_a_disconnected_stream_frees_its_slot(server):
    url, served = server
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Tell me a very long story."}],
            "max_tokens": 1000, "stream": True, "temperature": 0.7}
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=60) as r:
        lines = r.iter_lines()
        for _ in range(3):
            next(lines)
        assert served.running == 1
    for _ in range(500):                            # closed: the row is cancelled before its next step
        if served.running == 0:
            break
        time.sleep(0.01)
    assert served.running == 0 and served.default.engine.cache.lengths == [0] * 8


def test_a_client_that_gives_up_on_a_plain_request_frees_its_slot(server):
    url, served = server
    # a grammar that cannot end before ~800 tokens, so the reply outlasts the client's patience whatever is sampled
    long = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": 400}
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Tell me a very long story."}],
            "max_tokens": 1000, "temperature": 0.7,
            "response_format": {"type": "json_schema", "json_schema": {"name": "long", "schema": long}}}
    with pytest.raises(httpx.TimeoutException):
        httpx.post(url + "/v1/chat/completions", json=body, timeout=1.5)
    for _ in range(500):
        if served.running == 0:
            break
        time.sleep(0.01)
    assert served.running == 0


def test_models_health_metrics(server, client, lm):
    assert [m.id for m in client.models.list().data] == [MODEL]
    listed = httpx.get(server[0] + "/v1/models").json()["data"][0]["default_sampling"]
    assert listed == lm.sampling.to_dict() and listed["temperature"] > 0      # what a request that sets none gets
    text = httpx.get(server[0] + "/metrics").text
    assert "# TYPE openafm_time_to_first_token_seconds histogram" in text
    assert 'openafm_requests_total{endpoint="chat",status="200"}' in text
    count = next(line for line in text.splitlines() if line.startswith("openafm_time_to_first_token_seconds_count"))
    assert int(count.split()[1]) > 0


def test_a_server_speculating_with_a_draft_gives_the_same_greedy_text(lm, client):
    draft = build_draft(lm.model, n_layers=1, vocab_ids=torch.arange(4096))        # untrained: guesses often fail
    config = EngineConfig(max_batch=4, speculate=ProposerKind.DRAFT)
    with live_server(lm, config, draft=draft) as (url, served):
        spec = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)
        for question in ("Name three colours.", "Write a haiku about the sea."):
            want = ask(client, question, max_tokens=24).choices[0].message.content
            assert ask(spec, question, max_tokens=24).choices[0].message.content == want


def test_a_full_queue_is_429_with_retry_after(lm):
    # The engine loop is not started: the first request stays queued and fills the queue of one.
    with live_server(lm, EngineConfig(max_batch=1, max_queue=1), engine=False) as (url, served):
        body = {"model": MODEL, "prompt": "1, 2, 3,", "max_tokens": 4, "stream": True}
        with httpx.stream("POST", url + "/v1/completions", json=body, timeout=60) as queued:
            assert queued.status_code == 200 and served.waiting == 1
            r = httpx.post(url + "/v1/completions", json={**body, "stream": False}, timeout=60)
            assert r.status_code == 429 and r.headers["retry-after"] == "1"
            assert r.json()["error"]["type"] == "rate_limit_error" and "max_queue=1" in r.json()["error"]["message"]
            r = httpx.post(url + "/v1/chat/completions", timeout=60, json={"model": MODEL, "max_tokens": 4,
                           "messages": [{"role": "user", "content": "hi"}]})
            assert r.status_code == 429


def test_an_adapter_is_served_by_name(tmp_path):
    import copy

    import torch

    from openafm.checkpoint.adapter import save_adapter
    from openafm.checkpoint.fingerprint import weights_fingerprint
    from openafm.nn.lora import apply_lora

    lm = openafm.load(weights="float32")              # what `openafm serve --adapter` loads (weights=auto)
    adapted = copy.deepcopy(lm.model)
    torch.manual_seed(0)                               # lora_A's init too: the adapter is the same whatever ran before
    apply_lora(adapted, rank=4, alpha=4, targets=("down",))
    with torch.no_grad():
        for name, p in adapted.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.2)
    path = save_adapter(tmp_path / "strong.safetensors", adapted, base_name=lm.name,
                        base_fingerprint=weights_fingerprint(lm.model))
    with live_server(lm, EngineConfig(max_batch=2), adapters={"strong": path}) as (url, served):
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
        assert [m.id for m in client.models.list().data] == [MODEL, "strong"]
        base, strong = (client.chat.completions.create(model=name, messages=[{"role": "user", "content": "Hi."}],
                                                       temperature=0, max_tokens=1, logprobs=True)
                        for name in (MODEL, "strong"))
        assert served.models["strong"].engine.model is not served.default.engine.model
        # The adapter changes the distribution: the first token's log-probability differs.
        assert abs(base.choices[0].logprobs.content[0].logprob - strong.choices[0].logprobs.content[0].logprob) > 1e-3


def test_an_api_key_guards_the_api_and_cors_admits_only_named_origins(lm):
    access = Access(api_key="s3cret", allow_origins=("https://app.example",))
    with live_server(lm, EngineConfig(max_batch=2), access=access) as (url, _):
        body = {"model": MODEL, "prompt": "1, 2, 3,", "max_tokens": 2, "temperature": 0}
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=url + "/v1", api_key="wrong", max_retries=0).completions.create(**body)
        good = openai.OpenAI(base_url=url + "/v1", api_key="s3cret", max_retries=0, timeout=120)
        assert good.completions.create(**body).usage.completion_tokens == 2
        for path in ("/v1/models", "/metrics"):
            r = httpx.get(url + path, timeout=60)
            assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", path
        assert httpx.get(url + "/health", timeout=60).status_code == 200
        assert httpx.get(url + "/", timeout=60).status_code == 200          # the playground page asks for the key
        preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization"}
        r = httpx.options(url + "/v1/completions", headers={"Origin": "https://app.example", **preflight})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "https://app.example"
        r = httpx.options(url + "/v1/completions", headers={"Origin": "https://evil.example", **preflight})
        assert "access-control-allow-origin" not in r.headers
    with live_server(lm, EngineConfig(max_batch=1), engine=False) as (url, _):     # no key, no origins
        r = httpx.get(url + "/v1/models", headers={"Origin": "https://app.example"}, timeout=60)
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


def test_exposure_without_a_key_is_named():
    assert exposed_without_key("0.0.0.0", Access()) and exposed_without_key("myhost.lan", Access())
    assert not exposed_without_key("127.0.0.1", Access()) and not exposed_without_key("::1", Access())
    assert not exposed_without_key("0.0.0.0", Access(api_key="k"))
    with pytest.raises(ValueError, match="'app.example' is not an origin"):
        Access(allow_origins=("app.example",))
    with pytest.raises(ValueError, match="non-empty"):
        Access(api_key=" k")


def test_responses_api_text_and_usage_match_chat_completions(client):
    r = client.responses.create(model=MODEL, input="Name three colours.", instructions="You are concise.",
                                max_output_tokens=12, temperature=0)
    chat = client.chat.completions.create(model=MODEL, max_tokens=12, temperature=0,
                                          messages=[{"role": "system", "content": "You are concise."},
                                                    {"role": "user", "content": "Name three colours."}])
    assert r.object == "response" and r.output_text == chat.choices[0].message.content
    assert r.usage.input_tokens == chat.usage.prompt_tokens and r.usage.output_tokens == chat.usage.completion_tokens
    assert r.status == ("incomplete" if chat.choices[0].finish_reason == "length" else "completed")
    assert r.instructions == "You are concise." and r.output[0].type == "message"


def test_responses_api_schema_tools_and_previous_response(client):
    r = client.responses.create(model=MODEL, input="Invent a person.", temperature=0, max_output_tokens=64,
                                text={"format": {"type": "json_schema", "name": "person", "schema": PERSON,
                                                 "strict": True}})
    jsonschema.validate(json.loads(r.output_text), PERSON)
    tools = [{"type": "function", "name": t["function"]["name"], "description": t["function"]["description"],
              "parameters": t["function"]["parameters"]} for t in WEATHER]
    first = client.responses.create(model=MODEL, input="What is the weather in Paris?", tools=tools,
                                    tool_choice={"type": "function", "name": "get_weather"}, temperature=0,
                                    max_output_tokens=64)
    call = first.output[0]
    assert call.type == "function_call" and call.name == "get_weather" and "city" in json.loads(call.arguments)
    second = client.responses.create(model=MODEL, previous_response_id=first.id, tools=tools, tool_choice="none",
                                     input=[{"type": "function_call_output", "call_id": call.call_id,
                                             "output": "Sunny, 24 C"}], temperature=0, max_output_tokens=24)
    assert second.previous_response_id == first.id and second.output[0].type == "message" and second.output_text
    assert second.usage.input_tokens > first.usage.input_tokens      # the earlier turn and the result were sent


def test_responses_api_stream_events_build_the_same_response(client):
    kw = dict(model=MODEL, input="Tell me about the sea.", max_output_tokens=16, temperature=0)
    with client.responses.stream(**kw) as stream:
        events = list(stream)
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.incomplete"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    whole = client.responses.create(**kw)
    assert deltas == events[-1].response.output_text == whole.output_text and whole.status == "incomplete"
    answer = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"],
              "additionalProperties": False}
    with client.responses.stream(model=MODEL, input="What is 2 + 2?", max_output_tokens=32, temperature=0,
                                 text={"format": {"type": "json_schema", "name": "sum", "schema": answer}}) as stream:
        final = stream.get_final_response()                    # the SDK finalizes on response.completed
    assert final.status == "completed" and isinstance(json.loads(final.output_text)["answer"], int)


@pytest.mark.parametrize("body,param,status", [
    ({"input": "hi", "n": 2}, "n", 400),
    ({"input": "hi", "previous_response_id": "resp_nope"}, "previous_response_id", 404),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
     "input[0].content[0].image_url", 400),
    ({"input": "hi", "tools": [{"type": "web_search"}]}, "tools[0].type", 400),
    ({"input": "hi", "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "string",
                                                                                      "format": "no-such"}}}},
     "text.format.schema", 400),
    ({"input": "hi", "max_output_tokens": 0}, "max_output_tokens", 400),
    ({"input": [{"type": "reasoning", "summary": []}]}, "input[0].type", 400),
])
def test_responses_api_bad_requests_name_their_field(server, body, param, status):
    r = httpx.post(server[0] + "/v1/responses", json={"model": MODEL, **body}, timeout=60)
    assert r.status_code == status, r.text
    assert r.json()["error"]["param"] == param


def test_responses_made_with_store_false_are_not_kept(client):
    r = client.responses.create(model=MODEL, input="Hi", max_output_tokens=2, store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model=MODEL, input="Again", previous_response_id=r.id, max_output_tokens=2)


def test_default_sampling_openai_gives_every_served_model_openais_defaults(lm):
    served = Served(lm, sampling=DefaultSampling.OPENAI)
    assert served.default.sampling == OPENAI_SAMPLING and OPENAI_SAMPLING.settings() == {"temperature": 1.0}
    assert Served(lm).default.sampling == lm.sampling           # the model's own by default
