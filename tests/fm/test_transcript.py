"""Transcripts in Apple's format: a hand-written file in the form Apple's framework exports (after
apple/python-apple-fm-sdk src/apple_fm_sdk/transcript.py and tests/tester_schemas/test_transcript_full.json)
loads, round-trips, and resumes a session that keeps the very object; openafm's earlier form is read and
written as Apple's; malformed dictionaries raise GenerationError as the SDK's do."""

import asyncio
import copy
import json
from pathlib import Path

import pytest

import openafm.fm as fm

FIXTURE = Path(__file__).parent / "fixtures" / "apple_transcript_tools.json"


def apple() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def load(data: dict) -> fm.Transcript:
    return asyncio.run(fm.Transcript.from_dict(data))


def test_an_apple_transcript_loads_and_round_trips_unchanged():
    data = apple()
    transcript = load(copy.deepcopy(data))
    assert len(transcript) == 7
    assert asyncio.run(transcript.to_dict()) == data             # every key kept: assets, options, responseFormat
    assert json.loads(transcript.to_json()) == data
    again = load(json.loads(json.dumps(asyncio.run(transcript.to_dict()))))
    assert asyncio.run(again.to_dict()) == data


def test_a_resumed_session_keeps_the_transcript_object_and_sees_the_history():
    transcript = load(apple())
    session = fm.LanguageModelSession.from_transcript(transcript)
    assert session.transcript is transcript
    roles = [m["role"] for m in session._messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user", "assistant"]
    assert session._messages[0]["content"] == "You help people plan walks. Use the trail tool to look trails up."
    call = session._messages[2]["content"]       # the tool call as the model writes one, arguments as an object
    assert call == ('<tool_call>[{"name": "findTrails", "arguments": {"town": "Keswick", "maxKilometres": 5}}]'
                    '</tool_call>')
    assert session._messages[4]["content"] == '{"trail": "Friar\'s Crag", "kilometres": 2.4}'
    assert session.tools == []                      # tools in a transcript are history only, as in the SDK


def test_openafm_earlier_form_is_read_and_written_as_apples():
    legacy = {"version": 1, "type": "FoundationModels.Transcript", "transcript": {"entries": [
        {"id": "I", "role": "instructions", "contents": [{"type": "text", "id": "a", "text": "Be brief."}],
         "tools": [{"name": "get_weather", "description": "Weather", "parameters": {"type": "object"}}]},
        {"id": "U", "role": "user", "contents": [{"type": "text", "id": "b", "text": "Weather in Oslo?"}]},
        {"id": "R", "role": "response", "contents": [],
         "toolCalls": [{"id": "C", "toolName": "get_weather", "arguments": {"city": "Oslo"}}]},
        {"id": "T", "role": "tool", "toolName": "get_weather", "toolCallID": "C",
         "contents": [{"type": "text", "id": "c", "text": "Snow"}]},
    ]}}
    entries = asyncio.run(load(legacy).to_dict())["transcript"]["entries"]
    assert entries[0]["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather", "parameters": {"type": "object"}}}]
    assert entries[2] == {"id": "R", "role": "response",
                          "toolCalls": [{"id": "C", "name": "get_weather", "arguments": '{"city": "Oslo"}'}]}
    assert entries[3] == legacy["transcript"]["entries"][3]


def test_a_session_writes_apples_form():
    class Weather(fm.Tool):
        name, description = "get_weather", "Weather for a city"

        @property
        def arguments_schema(self):
            return fm.GenerationSchema.from_json_schema({"type": "object", "properties": {"city": {"type": "string"}},
                                                         "required": ["city"]})

        async def call(self, args):
            return "Snow"

    session = fm.LanguageModelSession(instructions="Be brief.", tools=[Weather()])
    session.transcript.append({"role": "response", "contents": [],            # what the session's tool loop appends
                               "toolCalls": [{"id": "C", "toolName": "get_weather", "arguments": {"city": "Oslo"}}]})
    instructions, response = asyncio.run(session.transcript.to_dict())["transcript"]["entries"]
    assert instructions["tools"][0]["type"] == "function"
    assert instructions["tools"][0]["function"]["name"] == "get_weather"
    assert instructions["tools"][0]["function"]["parameters"]["required"] == ["city"]
    assert "contents" not in response and response["toolCalls"] == [
        {"id": "C", "name": "get_weather", "arguments": '{"city": "Oslo"}'}]


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("transcript"), "needs a 'transcript' object with an 'entries' list, got no transcript"),
    (lambda d: d["transcript"].pop("entries"), "needs a 'transcript' object with an 'entries' list"),
    (lambda d: d.update(type="Other"), "expected type 'FoundationModels.Transcript', got 'Other'"),
    (lambda d: d.update(version=2), "version 2 is not supported"),
    (lambda d: d["transcript"]["entries"].append({"role": "user"}), r"entries\[7\] has no 'id' string"),
    (lambda d: d["transcript"]["entries"].append({"id": "X", "role": "user"}), r"a 'user' entry needs 'contents'"),
    (lambda d: d["transcript"]["entries"].append({"id": "X", "role": "assistant", "contents": []}),
     "role 'assistant' is not one of"),
    (lambda d: d["transcript"]["entries"][3].pop("toolCallID"), "a 'tool' entry needs 'toolName' and 'toolCallID'"),
    (lambda d: d["transcript"]["entries"][2]["toolCalls"][0].update(arguments="{town"),
     "tool call 'findTrails': 'arguments' is not JSON"),
    (lambda d: d["transcript"]["entries"][2]["toolCalls"][0].update(arguments="[1]"),
     "'arguments' must be a JSON object"),
    (lambda d: d["transcript"]["entries"][0]["tools"][0].update(type="retrieval"), "a transcript tool must be"),
])
def test_a_malformed_dictionary_raises_generation_error_as_the_sdk(change, message):
    data = apple()
    change(data)
    with pytest.raises(fm.GenerationError, match=message):
        load(data)


def test_a_missing_transcript_key_raises_even_with_type_and_version():
    # apple tests/test_transcript.py test_from_dict_with_invalid_json
    with pytest.raises(fm.GenerationError, match="Failed to create transcript from dictionary"):
        load({"version": 1, "type": "FoundationModels.Transcript"})
    assert len(load({"version": 1, "type": "FoundationModels.Transcript", "transcript": {"entries": []}})) == 0


def test_content_the_model_cannot_read_raises_instead_of_vanishing():
    data = apple()
    data["transcript"]["entries"][1]["contents"].append({"id": "P", "type": "image", "image": {"path": "x.png"}})
    transcript = load(data)                          # loads and round-trips ...
    assert asyncio.run(transcript.to_dict()) == data
    with pytest.raises(fm.GenerationError, match="content of type 'image'"):
        fm.LanguageModelSession.from_transcript(transcript)      # ... but is not silently dropped from the context


@pytest.mark.real_model
def test_a_session_resumed_from_an_apple_transcript_answers_and_appends_to_that_object():
    transcript = load(apple())

    async def go():
        session = fm.LanguageModelSession.from_transcript(transcript)
        answer = await session.respond("And how long is it?", options=fm.GenerationOptions(maximum_response_tokens=24))
        return answer, await transcript.to_dict()
    answer, data = asyncio.run(go())
    entries = data["transcript"]["entries"]
    assert isinstance(answer, str) and answer
    assert len(entries) == 9 and [e["role"] for e in entries[-2:]] == ["user", "response"]
    assert entries[-2]["contents"][0]["text"] == "And how long is it?" and entries[-1]["contents"][0]["text"] == answer
    assert entries[:7] == apple()["transcript"]["entries"]
