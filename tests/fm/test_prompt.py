"""Prompts as the SDK takes them (apple/python-apple-fm-sdk src/apple_fm_sdk/prompt.py): a str, an
attachment, or a list mixing them; image attachments on a model without vision weights raise ImagePromptError."""

import asyncio

import pytest

import openafm.fm as fm
from openafm.checkpoint.packaged import DEFAULT_MODEL
from openafm.fm import model as fm_model
from openafm.fm.prompt import prompt_components, prompt_text


@pytest.fixture
def image(tmp_path):
    path = tmp_path / "cat.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n")
    return path


def test_the_sdk_names_are_its_types():
    assert fm.PromptComponent == str | fm.Attachment
    assert fm.Prompt == str | fm.Attachment | list[str | fm.Attachment]
    assert issubclass(fm.ImageAttachment, fm.Attachment)
    with pytest.raises(TypeError, match="abstract"):
        fm.Attachment()


def test_components_and_text():
    assert prompt_components("Hi") == ["Hi"]
    assert prompt_components(("a", "b")) == ["a", "b"]
    assert prompt_text(["First line", "Second line"], model="m") == "First line\nSecond line"
    assert prompt_text("One", model="m") == "One" and prompt_text([], model="m") == ""


@pytest.mark.parametrize("prompt, message", [
    (3, "unsupported prompt: int 3; a prompt is a str, an Attachment, or a list of them"),
    ({"text": "hi"}, "unsupported prompt: dict"),
    (["a", b"b"], r"unsupported prompt component at \[1\]: bytes b'b'"),
    (["a", ["b"]], r"unsupported prompt component at \[1\]: list"),
    (["a", None], r"unsupported prompt component at \[1\]: NoneType None"),
])
def test_other_prompts_raise_prompt_error_naming_the_component(prompt, message):
    with pytest.raises(fm.PromptError, match=message):
        prompt_components(prompt)


def test_an_image_attachment_needs_an_existing_file(image, tmp_path):
    attachment = fm.ImageAttachment(image, label="cat")
    assert (attachment.path, attachment.label, attachment.kind) == (image, "cat", "image")
    assert fm.ImageAttachment(str(image)).path == image                       # openafm: a str path too
    with pytest.raises(fm.ImagePromptError, match="file does not exist at .*missing.png"):
        fm.ImageAttachment(tmp_path / "missing.png")
    with pytest.raises(fm.ImagePromptError, match="label must be a str or None, got int 3"):
        fm.ImageAttachment(image, label=3)


def test_an_image_in_a_prompt_to_a_text_only_model_raises_and_leaves_the_session_untouched(image, monkeypatch):
    monkeypatch.setitem(fm_model._TOWERS, DEFAULT_MODEL, None)                # as if no vision weights shipped
    session = fm.LanguageModelSession(instructions="Be brief.")

    async def go(call):
        with pytest.raises(fm.ImagePromptError) as info:
            await call()
        return str(info.value)
    message = asyncio.run(go(lambda: session.respond(["What is in this picture?", fm.ImageAttachment(image)])))
    assert f"model '{DEFAULT_MODEL}' has no vision weights" in message
    assert str(image) in message and "component [1]" in message

    async def stream():
        return [x async for x in session.stream_response(fm.ImageAttachment(image, label="cat"))]
    assert "label='cat'" in asyncio.run(go(stream))
    assert len(session.transcript) == 1 and session._conversation is None     # nothing generated, nothing kept
    with pytest.raises(fm.PromptError, match=r"component at \[1\]: int 2"):
        asyncio.run(session.respond(["a", 2]))


@pytest.mark.real_model
def test_a_list_prompt_is_answered_and_recorded_as_its_lines():
    async def go():
        session = fm.LanguageModelSession()
        answer = await session.respond(["Name a colour.", "Answer in one word."],
                                       options=fm.GenerationOptions(maximum_response_tokens=8))
        streamed = [x async for x in session.stream_response(["Name a fruit.", "One word."],
                                                             options=fm.GenerationOptions(maximum_response_tokens=8))]
        return answer, streamed, await session.transcript.to_dict(), session._messages
    answer, streamed, transcript, messages = asyncio.run(go())
    assert isinstance(answer, str) and answer and streamed and all(isinstance(s, str) for s in streamed)
    users = [e for e in transcript["transcript"]["entries"] if e["role"] == "user"]
    assert [u["contents"][0]["text"] for u in users] == ["Name a colour.\nAnswer in one word.",
                                                         "Name a fruit.\nOne word."]
    assert messages[0] == {"role": "user", "content": "Name a colour.\nAnswer in one word."}


class Weather(fm.Tool):
    name, description = "get_weather", "Weather for a city"
    arguments_schema = property(lambda self: fm.GenerationSchema.from_json_schema(
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}))

    async def call(self, args):
        return "Sunny"


@pytest.mark.real_model
def test_token_count_tells_a_list_of_prompt_components_from_a_list_of_tools(image, monkeypatch):
    monkeypatch.setitem(fm_model._TOWERS, DEFAULT_MODEL, None)
    model = fm.SystemLanguageModel()
    tokenizer = model.language_model().tokenizer

    def count(value):
        return asyncio.run(model.token_count(value))
    assert count(["First line", "Second line"]) == len(tokenizer.encode("First line\nSecond line")) > 0
    assert count(["First line", "Second line"]) == count("First line\nSecond line")
    tools = count([Weather(), Weather()])
    assert tools == count([Weather()]) > count(["First line", "Second line"])
    assert count([]) == 0
    with pytest.raises(fm.PromptError, match=r"component at \[1\]: Weather"):
        count(["What is the weather?", Weather()])
    with pytest.raises(fm.ImagePromptError, match="has no vision weights"):
        count(["Describe", fm.ImageAttachment(image)])
