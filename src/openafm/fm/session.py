"""`LanguageModelSession` (apple_fm_sdk names): a conversation with a model, tied to its KV cache.

The session keeps the chat messages exactly as the model saw them and an append-only `Conversation`
(runtime) whose KV cache persists: each request renders the messages with the chat template, appends
only the new text, and prefills only those tokens (`session.last_prefill` says how many). A failed or
cancelled request is rolled back: neither the transcript nor the context (messages, tokens, KV cache) keeps
any of it, and the KV cache is rewound, not rebuilt, so the next request still prefills only its own tokens.

Cancellation, as in Apple's SDK: cancelling the task awaiting `respond` raises `asyncio.CancelledError` in
it; leaving a `stream_response` loop early (`break` or an exception in its body, once the stream is closed:
at once with `aclose()` / `contextlib.aclosing`, otherwise when the dropped generator is finalized) or
cancelling the task consuming it does the same. The generation stops before its next decode step (a runtime
`CancelToken`), tool calls in flight are cancelled, the worker thread is waited for and the request rolled
back before the session lock and the model's concurrency slot are released and `is_responding` turns False.

One request at a time, as Apple's SDK: a second `respond` while one runs waits for it (an asyncio lock).
Across sessions, more than the model's `max_concurrent_requests` generating at once raises
`ConcurrentRequestsError`.
Generation runs in a worker thread, so the event loop stays free (tools run concurrently there); its decode steps
run on the model's shared engine (`SystemLanguageModel.engine`), where the requests of every session of the model
that respond at the same time share one batch.

Image prompts: each image attachment is read (Pillow), run through the model's vision tower at the model's
`resolution` and spliced into the context as that many image tokens (openafm.models.vlm), in the worker
thread. Image turns sit in the KV cache and the transcript like text turns (the transcript records each
image's path and label); a later turn prefills only its own new tokens.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
from typing import Any, AsyncIterator

from openafm.errors import ContextWindowExceededError
from openafm.fm.constraint import constraint_for
from openafm.fm.content import GeneratedContent, non_json
from openafm.fm.errors import DecodingFailureError, ExceededContextWindowSizeError, GenerationError
from openafm.fm.guardrails import Guardrails, enforce
from openafm.fm.model import SystemLanguageModel
from openafm.fm.options import GenerationOptions
from openafm.fm.images import check_vision, embed_images, user_contents
from openafm.fm.prompt import Prompt, prompt_components, prompt_parts
from openafm.fm.schema import GenerationSchema
from openafm.fm.structured import prompt_with_schema
from openafm.fm.tool import RepeatedCalls, Tool, call_key, check_tools, parse_tool_calls, run_tool, tool_spec, tools_prompt
from openafm.fm.transcript import Transcript, entry_text, structure_content, text_content, tool_calls
from openafm.models.vlm import image_marker, split_markers
from openafm.runtime.cancel import CancelToken
from openafm.runtime.conversation import Conversation

MAX_TOOL_ROUNDS = 4       # model turns that may call tools before it must answer
# the worker threads requests run in (they mostly wait on the engine): enough that concurrent sessions are not
# queued behind the event loop's small default pool
_WORKERS = concurrent.futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="openafm-session")


@dataclasses.dataclass
class _Turn:
    """What a worker-thread turn did: its result, the transcript entries to add, and where it started."""
    text: str
    value: Any
    entries: list[dict]
    prefilled: int
    mark: tuple[int, int]        # the conversation before the turn
    n_messages: int              # the messages before the turn


class LanguageModelSession:
    def __init__(self, instructions: str | None = None, model: SystemLanguageModel | None = None,
                 tools: list[Tool] | None = None, *, tool_choice: str = "auto",
                 repeated_calls: RepeatedCalls | str = RepeatedCalls.REUSE):
        """tool_choice (openafm extension): "auto" lets the model answer or call tools; "required" makes the
        first model turn of every request a tool call (later turns may answer). repeated_calls (openafm
        extension, fm.RepeatedCalls): a call the model repeats within one request (in a later round, or twice in
        one round) reuses its earlier result, and a round of only such repeats makes the model answer next (REUSE,
        the default); or every call runs the tool again (CALL_AGAIN, the SDK's way)."""
        if tool_choice not in ("auto", "required"):
            raise ValueError(f"tool_choice={tool_choice!r} is not one of 'auto', 'required'")
        if tool_choice == "required" and not tools:
            raise ValueError("tool_choice='required' needs at least one tool")
        accepted = [r.value for r in RepeatedCalls]
        if repeated_calls not in accepted:
            raise ValueError(f"repeated_calls={repeated_calls!r} is not one of {accepted}")
        self.tool_choice = tool_choice
        self.repeated_calls = RepeatedCalls(repeated_calls)
        self.model = model if model is not None else SystemLanguageModel()
        self.instructions = instructions
        self.tools = list(tools or [])
        check_tools(self.tools)          # several alike tools may share a name, as in the SDK
        self.transcript = Transcript()
        self._messages: list[dict] = []
        system = "\n\n".join(p for p in (instructions, tools_prompt(self.tools) if self.tools else None) if p)
        if system:
            self._messages.append({"role": "system", "content": system})
        if instructions is not None or self.tools:
            self.transcript.append({"role": "instructions", "contents": [text_content(instructions or "")],
                                    "tools": [tool_spec(t) for t in self.tools]})
        self._lock = asyncio.Lock()
        self._responding = False
        self._conversation = None
        self._images: list = []          # image embeddings [n, D] of the session, by marker index
        self.last_prefill = 0            # tokens prefilled by the last request (the new ones only)

    @classmethod
    def from_transcript(cls, transcript: Transcript, model: SystemLanguageModel | None = None,
                        tools: list[Tool] | None = None) -> "LanguageModelSession":
        """A session that goes on from `transcript`, which it keeps (as the SDK: `session.transcript is
        transcript`, and new turns are appended to it). Tools in the transcript are history only: pass `tools`
        for the model to call tools in this session."""
        entries = transcript.entries
        instructions = next((entry_text(e) for e in entries if e["role"] == "instructions"), None)
        session = cls(instructions=instructions, model=model, tools=tools)
        session.transcript = transcript
        for e in entries:
            if e["role"] == "instructions":
                continue
            role = {"user": "user", "response": "assistant", "tool": "tool"}[e["role"]]
            session._messages.append({"role": role, "content": _response_text(e) if role == "assistant"
                                      else entry_text(e)})
        return session

    @property
    def is_responding(self) -> bool:
        return self._responding

    def prewarm(self) -> None:
        """Load the model and prefill the instructions, so the first request starts sooner."""
        conv = self._conv()
        self._sync(conv, add_generation_prompt=False)
        conv.prefill()

    async def respond(self, prompt: Prompt, generating: Any = None, *, schema: GenerationSchema | None = None,
                      json_schema: dict | None = None, include_schema_in_prompt: bool = True,
                      options: GenerationOptions | None = None) -> Any:
        """Plain text; an instance of `generating`; or GeneratedContent for `schema` / `json_schema`.

        `prompt`: a str, an Attachment, or a list of them (see openafm.fm.prompt)."""
        prompt = prompt_components(prompt)
        check_vision(self.model, prompt)
        target = _target_schema(generating, schema, json_schema)
        text, value = await self._run(prompt, target, include_schema_in_prompt, options, None)
        return _result(text, value, generating, target)

    async def stream_response(self, prompt: Prompt, generating: Any = None, *,
                              schema: GenerationSchema | None = None, json_schema: dict | None = None,
                              include_schema_in_prompt: bool = True,
                              options: GenerationOptions | None = None) -> AsyncIterator[Any]:
        """Snapshots as the response grows: the text so far, or the partially generated object (its fields
        fill in one by one). The last snapshot equals what `respond` returns. Leaving the loop early (`break`,
        an exception, cancellation) cancels the request and rolls it back once the stream is closed."""
        prompt = prompt_components(prompt)
        check_vision(self.model, prompt)
        target = _target_schema(generating, schema, json_schema)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        done = object()

        def on_text(text: str) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, text)

        async def produce():
            try:
                return await self._run(prompt, target, include_schema_in_prompt, options, on_text)
            finally:
                queue.put_nowait(done)

        task = asyncio.ensure_future(produce())
        last = None
        try:
            while True:
                item = await queue.get()
                if item is done:
                    break
                snapshot = _snapshot(item, generating, target)
                if snapshot is not None and snapshot != last:
                    last = snapshot
                    yield snapshot
            text, value = await task
            final = _result(text, value, generating, target)
            if final != last:
                yield final
        finally:
            if not task.done():
                task.cancel()
                await _wait_out(task)
            if not task.cancelled():
                task.exception()     # mark it retrieved: raised above, or moot once the stream was left

    # --- one request ---------------------------------------------------------------------------
    async def _run(self, prompt, target, include_schema, options, on_text):
        if not isinstance(prompt, list):
            raise TypeError(f"prompt must be a list of prompt components, got {type(prompt).__name__}")
        options = options if options is not None else GenerationOptions()
        async with self._lock:
            with self.model.admitted():
                self._responding = True
                try:
                    turn = await self._in_worker(prompt, target, include_schema, options, on_text)
                    for e in turn.entries:
                        self.transcript.append(e)
                    self.last_prefill = turn.prefilled
                    return turn.text, turn.value
                finally:
                    self._responding = False

    async def _in_worker(self, *args) -> _Turn:
        """Run `_turn` in a worker thread. If this task is cancelled meanwhile, cancel the turn's token, wait
        until the worker has stopped (even through further cancellations), make sure the turn is rolled back
        (it may have finished before it saw the token), then raise CancelledError."""
        loop = asyncio.get_running_loop()
        cancel = CancelToken()
        worker = loop.run_in_executor(_WORKERS, self._turn, *args, loop, cancel)
        try:
            return await asyncio.shield(worker)
        except asyncio.CancelledError:
            cancel.cancel()
            await _wait_out(worker)
            if not worker.cancelled() and worker.exception() is None:
                turn = worker.result()
                self._conv().rollback(turn.mark)
                del self._messages[turn.n_messages:]
            raise

    def _turn(self, prompt, target, include_schema, options, on_text, loop, cancel: CancelToken) -> _Turn:
        """One request, in a worker thread: the messages and the conversation grow by the turn (rolled back
        if it raises); the transcript entries are returned for the event loop to add."""
        conv = self._conv()
        lm = self.model.language_model()
        mark, n_messages = conv.mark(), len(self._messages)
        entries: list[dict] = []
        try:
            components = prompt
            prompt, attachments = prompt_parts(components, first_image=len(self._images))
            if attachments:
                self._images += embed_images(self.model.vision_tower(), attachments, self.model.resolution)
            self._check_prompt(prompt)
            user = prompt
            if target is not None and include_schema:
                user = prompt_with_schema(prompt, target.to_json_schema())
            self._messages.append({"role": "user", "content": user})
            entries.append({"role": "user", "contents": user_contents(components)})
            prefilled = 0
            answered: dict[str, str] = {}       # call_key -> result, for this request's calls
            must_answer = False                 # every call of the last round repeated an answered one
            for round_ in range(MAX_TOOL_ROUNDS + 1):
                self._sync(conv)
                may_call = round_ < MAX_TOOL_ROUNDS and not must_answer
                constraint = self._constraint(lm.tokenizer, target, tools_allowed=may_call,
                                              call_required=round_ == 0 and self.tool_choice == "required",
                                              options=options)
                streamed = []

                def on_token(event, streamed=streamed):
                    streamed.append(event.text)
                    so_far = "".join(streamed)
                    if on_text is not None and not so_far.startswith("<"):
                        on_text(so_far)
                out = conv.generate(max_new_tokens=options.max_tokens, sampling=options.sampling_params(),
                                    constraint=constraint, on_token=on_token, cancel=cancel)
                prefilled += conv.last_turn.prefilled_tokens
                tools_allowed = self.tools and may_call
                if tools_allowed and out.finish_reason == "length" and out.text.startswith("<"):
                    raise DecodingFailureError(f"a tool call reached maximum_response_tokens={options.max_tokens} "
                                               f"before it was complete: {out.text[-80:]!r}")
                calls = parse_tool_calls(out.text, self.tools) if tools_allowed else None
                if calls is None:
                    break
                must_answer = self._answer_calls(out.text, calls, answered, entries, loop, cancel)
            text = out.text
            self._check_output(text)
            value = None
            if target is not None:
                if out.finish_reason == "length":
                    raise DecodingFailureError(f"the response reached maximum_response_tokens="
                                               f"{options.max_tokens} before its JSON was complete: {text[-80:]!r}")
                value = json.loads(text)
            self._messages.append({"role": "assistant", "content": text})
            entries.append({"role": "response", "contents": [structure_content(value) if target is not None
                                                             else text_content(text)]})
            return _Turn(text, value, entries, prefilled, mark, n_messages)
        except ContextWindowExceededError as e:
            conv.rollback(mark)
            del self._messages[n_messages:]
            raise ExceededContextWindowSizeError(str(e)) from e
        except BaseException:
            conv.rollback(mark)
            del self._messages[n_messages:]
            raise

    # --- helpers -------------------------------------------------------------------------------
    def _answer_calls(self, text: str, calls, answered: dict[str, str], entries: list[dict], loop,
                      cancel: CancelToken) -> bool:
        """Run a round's tool calls (concurrently) and add the calls and results to the messages and `entries`.
        With RepeatedCalls.REUSE a call already answered in this request, or made earlier in the same round, is
        not run again: its result is given again (the transcript still shows every call the model made).
        -> whether every call of the round repeated one answered before it (the model must answer next)."""
        keys = [call_key(t, a) for t, a in calls]
        reuse = self.repeated_calls is RepeatedCalls.REUSE
        fresh = [i for i, k in enumerate(keys) if not reuse or (k not in answered and k not in keys[:i])]
        for i, result in zip(fresh, _tool_results([calls[i] for i in fresh], loop, cancel) if fresh else [],
                             strict=True):
            answered[keys[i]] = result
        self._messages.append({"role": "assistant", "content": text})
        ids = [text_content("")["id"] for _ in calls]
        entries.append({"role": "response", "contents": [], "toolCalls": [
            {"id": i, "toolName": t.name, "arguments": a} for i, (t, a) in zip(ids, calls, strict=True)]})
        for i, (t, _), key in zip(ids, calls, keys, strict=True):
            self._messages.append({"role": "tool", "content": answered[key]})
            entries.append({"role": "tool", "toolName": t.name, "toolCallID": i,
                            "contents": [text_content(answered[key])]})
        return reuse and not fresh

    def _conv(self):
        if self._conversation is None:
            lm = self.model.language_model()
            self._conversation = Conversation(lm.model, lm.tokenizer, engine=self.model.engine())
        return self._conversation

    def _sync(self, conv, add_generation_prompt: bool = True) -> None:
        """Append to the conversation the text the chat template adds for the new messages."""
        tok = self.model.language_model().tokenizer
        if not self._messages:
            return
        rendered = tok.apply_chat_template(self._messages, add_generation_prompt=add_generation_prompt)
        if not rendered.startswith(conv.text):
            raise GenerationError("the model's chat template re-renders earlier turns differently, so the session "
                                  "cannot append to its KV cache; this template is not supported by sessions")
        for piece in split_markers(rendered[len(conv.text):]):
            if isinstance(piece, str):
                conv.append_text(piece)
            else:
                conv.append_image(self._images[piece], image_marker(piece))

    def _constraint(self, tokenizer, target, *, tools_allowed: bool, call_required: bool = False,
                    options: GenerationOptions):
        choice = "none" if not tools_allowed else ("required" if call_required else "auto")
        return constraint_for(tokenizer, tools=self.tools, choice=choice,
                              schema=target.to_json_schema() if target is not None else None,
                              structured=options.structured_decoding, budget=options.max_tokens)

    def _check_prompt(self, prompt: str) -> None:
        text = "".join(p for p in split_markers(prompt) if isinstance(p, str))
        enforce(Guardrails.of(self.model.guardrails).check_prompt(text), "prompt")

    def _check_output(self, text: str) -> None:
        enforce(Guardrails.of(self.model.guardrails).check_output(text), "output")


async def _gather(coroutines):
    return await asyncio.gather(*coroutines)


def _tool_results(calls, loop, cancel: CancelToken) -> list[str]:
    """From the worker thread: run the tool calls concurrently on the event loop and wait for their results.
    Cancelling the token cancels them; this returns (raising GenerationCancelled) once they have all ended."""
    future = asyncio.run_coroutine_threadsafe(_cancellable_tools(calls, cancel), loop)
    try:
        return future.result()
    except concurrent.futures.CancelledError:
        cancel.raise_if_cancelled("during its tool calls")
        raise


async def _cancellable_tools(calls, cancel: CancelToken) -> list[str]:
    loop = asyncio.get_running_loop()
    calls_done = asyncio.ensure_future(_gather([run_tool(t, a) for t, a in calls]))
    forget = cancel.on_cancel(lambda: loop.call_soon_threadsafe(calls_done.cancel))
    try:
        return await calls_done        # cancelled: raises once every call has ended
    finally:
        forget()


async def _wait_out(future) -> None:
    """Wait until `future` is done, through any cancellation of the waiting task (the caller re-raises)."""
    while not future.done():
        try:
            await asyncio.wait([future])
        except asyncio.CancelledError:
            pass


def _target_schema(generating, schema, json_schema) -> GenerationSchema | None:
    given = [n for n, v in (("generating", generating), ("schema", schema), ("json_schema", json_schema))
             if v is not None]
    if len(given) > 1:
        raise ValueError(f"give at most one of generating, schema and json_schema; got {given}")
    if generating is not None:
        cls = generating if isinstance(generating, type) else type(generating)
        if not hasattr(cls, "generation_schema"):
            raise ValueError(f"generating={cls.__name__} is not a @generable type")
        return cls.generation_schema()
    if schema is not None:
        if not isinstance(schema, GenerationSchema):
            raise ValueError(f"schema must be a GenerationSchema, got {type(schema).__name__}")
        return schema
    if json_schema is not None:
        if not isinstance(json_schema, dict):          # a GenerationError, as the SDK's
            hint = "; parse the JSON text with json.loads first" if isinstance(json_schema, str) else ""
            raise GenerationError(f"json_schema has the wrong format: it must be a dict (a JSON Schema object), "
                                  f"got {type(json_schema).__name__} {str(json_schema)[:80]!r}{hint}")
        problem = non_json("json_schema", json_schema)
        if problem is not None:                        # TypeError, as json.dumps raises in the SDK
            raise TypeError(f"json_schema is not JSON serializable: {problem}")
        return GenerationSchema.from_json_schema(json_schema)
    return None


def _result(text, value, generating, target):
    if target is None:
        return text
    content = GeneratedContent(value)
    if generating is not None:
        cls = generating if isinstance(generating, type) else type(generating)
        return content.value(cls)
    return content


def _snapshot(text, generating, target):
    if target is None:
        return text
    content = GeneratedContent.from_partial_json(text)
    if generating is None:
        return content
    cls = generating if isinstance(generating, type) else type(generating)
    if content.is_complete:
        return content.value(cls)
    return cls.PartiallyGenerated._from_generated_content(content)


def _response_text(entry: dict) -> str:
    calls = tool_calls(entry)
    if calls:
        body = [{"name": name, "arguments": arguments} for name, arguments in calls]
        return "<tool_call>" + json.dumps(body, separators=(", ", ": ")) + "</tool_call>"
    return entry_text(entry)
