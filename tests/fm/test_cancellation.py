"""Cancelling a session request (respond, stream_response, tool calls) leaves the session as if it never ran.

Each test runs a normal turn, cancels a long second one a few decode steps in, then asks a third question and
compares everything with a session that never saw the cancelled turn: the transcript, the messages, the
conversation's tokens, the KV cache (rewound, not rebuilt: the next turn prefills only its own tokens) and
the answer itself (greedy decoding, so the same tokens). Forward passes are counted with a hook on the model.
"""

import asyncio
import contextlib
import time

import pytest

import openafm.fm as fm
from openafm.fm import model as fm_model

pytestmark = pytest.mark.real_model

FIRST, THIRD = "What is the capital of France?", "And of Italy?"
LONG = "Write a long story about a dragon."     # after FIRST, the model talks past LONG_OPTIONS' 150 tokens
LONG_OPTIONS = fm.GenerationOptions(maximum_response_tokens=150)
SHORT_OPTIONS = fm.GenerationOptions(maximum_response_tokens=12)
TOOL_OPTIONS = fm.GenerationOptions(maximum_response_tokens=40)
STEPS_BEFORE_CANCEL = 6          # forward passes of the long turn (prefill + 5 decode steps) before cancelling
MAX_STEPS_AFTER_CANCEL = 2       # the one in progress when the cancel lands, at most one more


class ForwardCounter:
    """Counts forward passes of the session's model; `reached(n)` is set (on the loop) once n more have run."""

    def __init__(self, session: fm.LanguageModelSession):
        self.count, self._waits = 0, []
        self._loop = asyncio.get_running_loop()
        # The embedding runs once per forward pass, in the module graph and in the fused decode step alike.
        self._handle = session.model.language_model().model.embed.register_forward_hook(self._hook)

    def _hook(self, *_):
        self.count += 1
        for target, event in self._waits:
            if self.count >= target:
                self._loop.call_soon_threadsafe(event.set)

    def reached(self, more: int) -> asyncio.Event:
        event = asyncio.Event()
        self._waits.append((self.count + more, event))
        return event

    def close(self):
        self._handle.remove()


def state(session):
    conv = session._conversation
    return len(session.transcript), list(session._messages), list(conv.tokens), conv.text


_REFERENCE: list[str] = []


async def reference_answer():
    """THIRD's answer in a session that asked only FIRST before it (computed once)."""
    if not _REFERENCE:
        s = fm.LanguageModelSession(instructions="You are a concise assistant.")
        await s.respond(FIRST, options=SHORT_OPTIONS)
        _REFERENCE.append(await s.respond(THIRD, options=SHORT_OPTIONS))
    return _REFERENCE[0]


async def check_untouched_and_continue(session, before, counter, stopped_at):
    """The worker has stopped (no forward pass for 0.3 s), nothing of the cancelled turn is left, the slot
    is free, and the next turn prefills only its own tokens and answers as if the cancelled one never ran."""
    await asyncio.sleep(0.3)
    assert counter.count == stopped_at, "the worker kept generating after the request was cancelled"
    assert not session.is_responding
    assert fm_model._RUNNING[session.model._key] == 0                      # the concurrency slot is free
    assert state(session) == before
    conv, tokens_before = session._conversation, len(before[2])
    cached = conv.cache.steps                     # rewound (kept), not dropped: the earlier turns stay cached
    assert tokens_before - 1 <= cached <= tokens_before
    answer = await session.respond(THIRD, options=SHORT_OPTIONS)          # max_concurrent_requests=1
    entries = (await session.transcript.to_dict())["transcript"]["entries"]
    assert [e["role"] for e in entries] == ["instructions", "user", "response", "user", "response"]
    assert all(LONG not in str(e) for e in entries) and all(LONG not in m["content"] for m in session._messages)
    prompt_end = len(conv.tokens) - conv.last_turn.generated_tokens
    assert session.last_prefill == prompt_end - cached < 20               # only the new tokens were prefilled
    assert answer == await reference_answer()
    return answer


async def started_session():
    model = fm.SystemLanguageModel(max_concurrent_requests=1)
    s = fm.LanguageModelSession(instructions="You are a concise assistant.", model=model)
    await s.respond(FIRST, options=SHORT_OPTIONS)
    return s, ForwardCounter(s), state(s)


def test_cancelled_respond_stops_within_a_step_and_leaves_no_trace():
    async def go():
        s, counter, before = await started_session()
        try:
            task = asyncio.create_task(s.respond(LONG, options=LONG_OPTIONS))
            await counter.reached(STEPS_BEFORE_CANCEL).wait()
            assert s.is_responding
            at_cancel = counter.count
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            stopped_at = counter.count                 # the worker has stopped by the time CancelledError arrives
            await check_untouched_and_continue(s, before, counter, stopped_at)
            return stopped_at - at_cancel
        finally:
            counter.close()
    after = asyncio.run(go())
    print(f"forward passes after task.cancel(): {after}")
    assert 0 <= after <= MAX_STEPS_AFTER_CANCEL


@pytest.mark.parametrize("how", ["break", "raise", "cancel_consumer"])
def test_leaving_a_stream_cancels_the_request_and_leaves_no_trace(how):
    async def consume(s, counter, marks):
        async for snapshot in s.stream_response(LONG, options=LONG_OPTIONS):
            if counter.count >= marks["start"] + STEPS_BEFORE_CANCEL and snapshot:
                marks["left"] = counter.count
                if how == "break":
                    break
                if how == "raise":
                    raise KeyError("the consumer failed")
                await asyncio.Event().wait()      # cancel_consumer: parked until its task is cancelled
        else:
            pytest.fail("the stream ended before it was left")

    async def go():
        s, counter, before = await started_session()
        marks = {"start": counter.count}
        try:
            task = asyncio.create_task(consume(s, counter, marks))
            if how == "cancel_consumer":
                await counter.reached(STEPS_BEFORE_CANCEL + 2).wait()
                marks["left"] = counter.count
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, KeyError):
                await task
            while s.is_responding:                  # break / raise: the dropped stream is closed by its finalizer
                await asyncio.sleep(0.001)
            stopped_at = counter.count
            await check_untouched_and_continue(s, before, counter, stopped_at)
            return stopped_at - marks["left"]
        finally:
            counter.close()
    after = asyncio.run(go())
    print(f"{how}: forward passes after leaving the stream: {after}")
    assert 0 <= after <= MAX_STEPS_AFTER_CANCEL


def test_closing_a_stream_returns_only_once_the_request_is_rolled_back():
    async def go():
        s, counter, before = await started_session()
        try:
            async with contextlib.aclosing(s.stream_response(LONG, options=LONG_OPTIONS)) as stream:
                async for _ in stream:
                    if counter.count >= STEPS_BEFORE_CANCEL:
                        break
            assert not s.is_responding and state(s) == before      # aclose() returned after the cleanup
            await check_untouched_and_continue(s, before, counter, counter.count)
        finally:
            counter.close()
    asyncio.run(go())


def test_cancel_after_the_worker_finished_still_rolls_the_turn_back():
    """The race: the turn completed in its thread, but the task was cancelled before it resumed."""
    async def go():
        s, counter, before = await started_session()
        try:
            start, n_messages = counter.count, len(s._messages)
            task = asyncio.create_task(s.respond(LONG, options=fm.GenerationOptions(maximum_response_tokens=4)))
            await counter.reached(1).wait()
            while len(s._messages) < n_messages + 2:     # block the loop until the worker has appended the
                time.sleep(0.005)                        # answer: it is past its last check of the token
            time.sleep(0.05)
            assert counter.count - start == 4            # prefill + 3 decode steps: it ran to its end
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await check_untouched_and_continue(s, before, counter, counter.count)
        finally:
            counter.close()
    asyncio.run(go())


class SlowWeather(fm.Tool):
    name = "get_weather"
    description = "Get the current weather for a city"

    def __init__(self):
        self.started, self.cancelled, self.calls = asyncio.Event(), False, 0
        super().__init__()

    @property
    def arguments_schema(self):
        return fm.GenerationSchema.from_json_schema(
            {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"]})

    async def call(self, args):
        self.calls += 1
        if self.calls == 1:                          # the first call hangs until it is cancelled
            self.started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                self.cancelled = True
                raise
        return f"Sunny, 21 C in {args.value()['city']}"


def test_cancelling_during_a_tool_call_cancels_the_tool_and_leaves_no_trace():
    async def go():
        tool = SlowWeather()
        s = fm.LanguageModelSession(tools=[tool], tool_choice="required",
                                    model=fm.SystemLanguageModel(max_concurrent_requests=1))
        task = asyncio.create_task(s.respond("What's the weather in Paris?", options=TOOL_OPTIONS))
        await tool.started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        cancelled_before_return = tool.cancelled
        roles_after_cancel = [e["role"] for e in (await s.transcript.to_dict())["transcript"]["entries"]]
        messages_after_cancel = [m["role"] for m in s._messages]
        answer = await s.respond("What's the weather in Paris?", options=TOOL_OPTIONS)
        roles = [e["role"] for e in (await s.transcript.to_dict())["transcript"]["entries"]]
        return cancelled_before_return, roles_after_cancel, messages_after_cancel, answer, roles, tool.calls
    cancelled, roles_after_cancel, messages_after_cancel, answer, roles, calls = asyncio.run(go())
    assert cancelled                                 # the tool's sleep was cancelled before respond raised
    assert roles_after_cancel == ["instructions"] and messages_after_cancel == ["system"]
    assert "sunny" in answer.lower() and calls >= 2
    assert roles[:4] == ["instructions", "user", "response", "tool"] and roles[-1] == "response"
