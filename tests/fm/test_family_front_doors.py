"""Every front door takes a model of every supported family, as the file a user passes: an fm session with a
@generable type, a tool round trip, `openafm serve` with json_schema, and `openafm sft` with a LoRA adapter.
The models are tiny and random, so the checks are on structure (valid, bounded, called once), not on wording."""

import asyncio
import json
import threading

import jsonschema
import openai
import pytest

import openafm
import openafm.fm as fm
from families import FAMILIES, make, save_gguf
from live_server import live_server
from openafm.checkpoint.adapter import read_adapter
from openafm.cli import main
from openafm.runtime.engine import Engine, EngineConfig, RowRequest
from openafm.runtime.generate import generate_tokens

COLOURS = ["red", "green", "blue"]
SHORT = fm.GenerationOptions(maximum_response_tokens=400)   # one tool call in byte tokens is ~60


@fm.generable("A pick")
class Pick:
    colour: str = fm.guide("A colour", anyOf=COLOURS)
    count: int = fm.guide("How many", range=(0, 9))


class Weather(fm.Tool):
    name = "get_weather"
    description = "Get the weather for a city"

    def __init__(self):
        self.calls = []
        super().__init__()

    @property
    def arguments_schema(self):
        return fm.GenerationSchema.from_json_schema(
            {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]}}, "required": ["city"],
             "additionalProperties": False})

    async def call(self, args):
        self.calls.append(args.value())
        return f"Sunny in {args.value()['city']}"


@pytest.fixture(scope="module", params=[f.name for f in FAMILIES])
def gguf_path(request, tmp_path_factory):
    return save_gguf(make(request.param), request.param, tmp_path_factory.mktemp(request.param) / "model.gguf")


def test_session_answers_with_a_generable_type(gguf_path):
    model = fm.SystemLanguageModel(model=str(gguf_path))
    pick = asyncio.run(fm.LanguageModelSession(model=model).respond("Pick one.", generating=Pick))
    assert isinstance(pick, Pick) and pick.colour in COLOURS and 0 <= pick.count <= 9


def test_tool_round_trip_calls_once_then_answers(gguf_path):
    tool = Weather()
    session = fm.LanguageModelSession(model=fm.SystemLanguageModel(model=str(gguf_path)), tools=[tool],
                                      tool_choice="required")
    answer = asyncio.run(session.respond("Weather in Paris?", options=SHORT))
    assert isinstance(answer, str) and len(tool.calls) >= 1 and tool.calls[0]["city"] in ("Paris", "Rome")
    entries = session.transcript.entries
    calls = [e for e in entries if e["role"] == "response" and e.get("toolCalls")]
    outputs = [e for e in entries if e["role"] == "tool"]
    asked = [c for e in calls for c in e["toolCalls"]]
    assert len(calls) >= 1 and len(outputs) == len(asked) and entries[-1]["role"] == "response"   # each call answered
    distinct = {(c["name"], json.dumps(json.loads(c["arguments"]), sort_keys=True)) for c in asked}
    assert len(tool.calls) == len(distinct)             # RepeatedCalls.REUSE: a repeated call runs the tool once


def test_serve_json_schema_is_valid(gguf_path):
    schema = {"type": "object", "properties": {"colour": {"enum": COLOURS}}, "required": ["colour"],
              "additionalProperties": False}
    lm = openafm.load(gguf_path)
    with live_server(lm, EngineConfig(max_context=min(2048, lm.context_window))) as (url, _):
        client = openai.OpenAI(base_url=url + "/v1", api_key="none")
        reply = client.chat.completions.create(
            model=client.models.list().data[0].id, messages=[{"role": "user", "content": "A colour?"}], max_tokens=24,
            response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": schema, "strict": True}})
    jsonschema.validate(json.loads(reply.choices[0].message.content), schema)


def test_sft_trains_a_lora_adapter_fm_loads(gguf_path, tmp_path):
    data = tmp_path / "chat.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"Colour {i}?", "response": c}) + "\n"
                            for i, c in enumerate(COLOURS * 2)))
    out = tmp_path / "a.safetensors"
    assert main(["sft", str(out), "--model", str(gguf_path), "--data", str(data), "--eval-data", str(data),
                 "--eval-examples", "2", "--steps", "2", "--rank", "2", "--batch-size", "2", "--seq-len", "64",
                 "--precision", "float32", "--checkpoint-every", "1", "--warmup", "1"]) == 0
    assert read_adapter(out).rank == 2
    adapted = fm.SystemLanguageModel(model=str(gguf_path), adapter=fm.SystemLanguageModel.Adapter(str(out)))
    assert adapted.is_available() == (True, None)


@pytest.mark.parametrize("name", ["mistral", "gemma2"])
def test_engine_rows_of_sliding_window_models_equal_plain_decoding(name, tmp_path):
    """The serving engine holds sliding layers whole and masks them by the window: with a prompt longer than
    the window, its greedy tokens equal generate's (a ring cache)."""
    lm = openafm.load(save_gguf(make(name), name, tmp_path / "m.gguf"))
    prompt = lm.tokenizer.encode("a prompt well past the six-token window of these tiny models")
    want = generate_tokens(lm.model, [prompt], max_new_tokens=12, eos_token_ids=set(lm.tokenizer.eos_token_ids))
    want = want[0].token_ids
    done, got = threading.Event(), []

    def on_event(e):
        if e.token_id >= 0:
            got.append(e.token_id)
        if e.finish is not None:
            done.set()
    engine = Engine(lm.model, lm.tokenizer, EngineConfig(max_context=256)).start()
    try:
        engine.submit(RowRequest(prompt, 12, on_event))
        assert done.wait(60)
    finally:
        engine.stop()
    assert got == want
