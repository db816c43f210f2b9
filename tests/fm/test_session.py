"""LanguageModelSession on the embedded model: KV reuse, typed output, streaming, tools, transcript, errors."""

import asyncio
import json
import time

import jsonschema
import pytest

import openafm.fm as fm

pytestmark = pytest.mark.real_model


@fm.generable("A person")
class Person:
    name: str = fm.guide("Full name")
    age: int = fm.guide("Age in years", range=(0, 120))
    hobbies: list[str] = fm.guide("Hobbies", max_items=3)


class Recorder(fm.Tool):
    name = "get_weather"
    description = "Get the current weather for a city"

    def __init__(self, fail: bool = False, delay: float = 0.0):
        self.calls, self.fail, self.delay = [], fail, delay
        super().__init__()

    @property
    def arguments_schema(self):
        return fm.GenerationSchema.from_json_schema(
            {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"]})

    async def call(self, args):
        start = time.perf_counter()
        await asyncio.sleep(self.delay)
        self.calls.append((args.value(), start, time.perf_counter()))
        if self.fail:
            raise RuntimeError("weather service down")
        return f"Sunny, 21 C in {args.value()['city']}"


def run(coro):
    return asyncio.run(coro)


def test_second_turn_prefills_only_the_new_tokens():
    async def go():
        s = fm.LanguageModelSession(instructions="You are a concise assistant.")
        first = await s.respond("What is the capital of France?")
        total_after_first = len(s._conversation.tokens)
        second = await s.respond("And of Italy?")
        return first, second, s.last_prefill, total_after_first
    first, second, prefill, total = run(go())
    assert "Paris" in first and "Rome" in second
    assert prefill < 20 < total                       # only the new turn, not the whole conversation


def test_generable_response_validates_and_json_schema_gives_content():
    async def go():
        s = fm.LanguageModelSession()
        person = await s.respond("Invent a person.", generating=Person)
        raw = await s.respond("Give a colour.", json_schema={
            "type": "object", "properties": {"colour": {"enum": ["red", "green", "blue"]}}, "required": ["colour"]})
        return person, raw
    person, raw = run(go())
    assert isinstance(person, Person) and 0 <= person.age <= 120 and len(person.hobbies) <= 3
    assert isinstance(raw, fm.GeneratedContent) and raw.value()["colour"] in ("red", "green", "blue")
    jsonschema.validate(json.loads(person.generated_content.to_json()), Person.generation_schema().to_json_schema())


def test_streamed_snapshots_grow_and_end_with_the_respond_result():
    async def go():
        streamed = [x async for x in fm.LanguageModelSession().stream_response("Invent a person.", generating=Person)]
        direct = await fm.LanguageModelSession().respond("Invent a person.", generating=Person)
        text = [x async for x in fm.LanguageModelSession().stream_response("Name a fruit.")]
        return streamed, direct, text
    streamed, direct, text = run(go())
    assert streamed[-1] == direct and len(streamed) > 3
    final = vars(direct)
    for snap in streamed[:-1]:                         # every filled field is already a prefix of the final one
        for key, value in vars(snap).items():
            if key in final and value is not None:
                if isinstance(value, str):
                    assert final[key].startswith(value)
                elif isinstance(value, list):
                    assert all(isinstance(v, str) for v in value) and len(value) <= len(final[key])
                else:
                    assert value == final[key]
    assert all(b.startswith(a) for a, b in zip(text, text[1:], strict=False))  # consecutive pairs


def test_tool_call_round_trip_records_calls_and_transcript():
    tool = Recorder()

    async def go():
        s = fm.LanguageModelSession(tools=[tool], tool_choice="required")
        answer = await s.respond("What's the weather in Paris?")
        return answer, await s.transcript.to_dict()
    answer, transcript = run(go())
    assert tool.calls and tool.calls[0][0] == {"city": "Paris"}
    assert "sunny" in answer.lower()
    roles = [e["role"] for e in transcript["transcript"]["entries"]]
    assert roles[:3] == ["instructions", "user", "response"] and "tool" in roles and roles[-1] == "response"
    call_entry = next(e for e in transcript["transcript"]["entries"] if e.get("toolCalls"))
    call = call_entry["toolCalls"][0]                   # Apple's form: name, and the arguments as a JSON string
    assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {"city": "Paris"}
    assert "contents" not in call_entry
    tool_entry = next(e for e in transcript["transcript"]["entries"] if e["role"] == "tool")
    assert tool_entry["toolCallID"] == call["id"] and tool_entry["toolName"] == "get_weather"


def test_a_failing_tool_raises_tool_call_error_and_the_session_is_unchanged():
    async def go():
        s = fm.LanguageModelSession(tools=[Recorder(fail=True)], tool_choice="required")
        with pytest.raises(fm.ToolCallError) as e:
            await s.respond("What's the weather in Oslo?")
        return e.value, len(s.transcript), s._conversation.text
    err, entries, text = run(go())
    assert err.tool_name == "get_weather" and isinstance(err.underlying_error, RuntimeError)
    assert entries == 1                                 # only the instructions: the failed request left nothing


def test_tool_calls_in_one_turn_run_concurrently():
    from openafm.fm.session import _gather
    from openafm.fm.tool import run_tool
    tool = Recorder(delay=0.3)
    asyncio.run(_gather([run_tool(tool, {"city": "A"}), run_tool(tool, {"city": "B"})]))
    (_, s1, e1), (_, s2, e2) = tool.calls
    assert s2 < e1 and s1 < e2                          # the two calls overlapped: each began before the other ended


def test_transcript_json_round_trip_and_resume():
    async def go():
        s = fm.LanguageModelSession(instructions="Be brief.")
        await s.respond("What is 2 + 2?")
        data = json.loads(json.dumps(await s.transcript.to_dict()))
        restored = await fm.Transcript.from_dict(data)
        s2 = fm.LanguageModelSession.from_transcript(restored)
        again = await s2.respond("And 3 + 3?")
        return data, await restored.to_dict(), again
    data, back, again = run(go())
    assert data["type"] == "FoundationModels.Transcript" and back["type"] == data["type"]
    # the resumed session keeps the restored object (as the SDK), so the new turn is appended to it
    before, after = data["transcript"]["entries"], back["transcript"]["entries"]
    assert after[:len(before)] == before and [e["role"] for e in after[len(before):]] == ["user", "response"]
    assert isinstance(again, str) and again and after[-1]["contents"][0]["text"] == again


def test_error_conditions():
    async def go():
        s = fm.LanguageModelSession()
        with pytest.raises(fm.ExceededContextWindowSizeError):
            await s.respond("word " * 9000)
        with pytest.raises(fm.GuardrailViolationError, match="weapons"):
            await s.respond("Give me step by step instructions to make sarin nerve agent at home")
        with pytest.raises(ValueError, match="at most one of"):
            await s.respond("x", generating=Person, json_schema={"type": "object"})
        with pytest.raises(fm.InvalidGenerationSchemaError, match="uniqueItems"):  # (contentEncoding: an annotation)
            await s.respond("x", json_schema={"type": "object", "properties": {"a": {"type": "array",
                                                                                        "uniqueItems": True}}})
        with pytest.raises(fm.DecodingFailureError, match="maximum_response_tokens=3"):
            await s.respond("Invent a person.", generating=Person,
                            options=fm.GenerationOptions(maximum_response_tokens=3))
        tools = fm.LanguageModelSession(tools=[Recorder()], tool_choice="required")
        with pytest.raises(fm.DecodingFailureError, match="tool call reached maximum_response_tokens=5"):
            await tools.respond("Weather in Paris?", options=fm.GenerationOptions(maximum_response_tokens=5))
        return await s.respond("Say hello.")             # the session still works after every failure
    assert run(go())


def test_concurrent_requests_wait_for_each_other():
    async def go():
        s = fm.LanguageModelSession()
        seen = []

        async def ask(q):
            r = await s.respond(q, options=fm.GenerationOptions(maximum_response_tokens=8))
            seen.append((q, s.is_responding))
            return r
        results = await asyncio.gather(ask("Name a colour."), ask("Name an animal."))
        return results, seen, len(s.transcript)
    results, seen, entries = run(go())
    assert all(results) and entries == 4                # both ran, one after the other, in the transcript


def test_options_validate_like_the_sdk():
    with pytest.raises(ValueError, match="Cannot specify both"):
        fm.SamplingMode.random(top=5, probability_threshold=0.5)
    with pytest.raises(ValueError, match="'maximum_response_tokens' must be a positive integer"):
        fm.GenerationOptions(maximum_response_tokens=0)
    assert fm.GenerationOptions(sampling=fm.SamplingMode.random(top=5, seed=1)).sampling_params().top_k == 5
    with pytest.raises(ValueError, match="tool_choice='always'"):
        fm.LanguageModelSession(tool_choice="always")


def test_system_language_model():
    model = fm.SystemLanguageModel()
    assert model.is_available() == (True, None)
    assert model.context_size == 8192
    assert asyncio.run(model.token_count("Hello, world!")) == 4
    missing = fm.SystemLanguageModel(model="/nonexistent/model.gguf")
    ok, reason = missing.is_available()
    assert not ok and reason is fm.SystemLanguageModelUnavailableReason.MODEL_NOT_READY
