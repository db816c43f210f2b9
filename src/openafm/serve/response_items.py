"""The Responses API's response object and its stream events, from one choice's engine events (`Choice`).

A reply is either a message (`output_text`) or the tool calls the framework's grammar produced (`function_call`
items, `call_id`s the client answers with `function_call_output`). A stream follows OpenAI's event order:

    response.created, response.in_progress
    message:  output_item.added, content_part.added, output_text.delta ..., output_text.done, content_part.done,
              output_item.done
    calls:    per call: output_item.added, function_call_arguments.delta, function_call_arguments.done,
              output_item.done (a reply that starts a call is held back until it is whole, as in chat streams)
    response.completed (or response.incomplete at max_output_tokens, response.failed if generation failed)

Every event carries its `sequence_number`; each is sent as an SSE `event:` line and a `data:` line.
"""

from __future__ import annotations

import json
import time

from openafm.serve.responses import Choice, new_id
from openafm.serve.responses_api import ResponseRequest


class ResponseBuilder:
    """One response: its id and creation time, the output items built from the choice, the stream's sequence."""

    def __init__(self, request: ResponseRequest, model: str):
        self.request, self.model = request, model
        self.id, self.created = new_id("resp", "_"), int(time.time())
        self.message_id = new_id("msg", "_")
        self.sequence = 0
        self.message_open = False
        self._items: list[dict] | None = None        # the function_call items, made once (their ids stay)

    def body(self, choice: Choice | None, status: str, error: str | None = None) -> dict:
        """The response object; choice None while nothing is decided yet (the created / in_progress events)."""
        output = self.output(choice) if choice is not None and status != "in_progress" else []
        usage = None
        if choice is not None and status != "in_progress":
            prompt = len(self.request.plan.prompt)
            cached = choice.first.cached_tokens if choice.first is not None else 0
            usage = {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached},
                     "output_tokens": choice.tokens, "output_tokens_details": {"reasoning_tokens": 0},
                     "total_tokens": prompt + choice.tokens}
        return {"id": self.id, "object": "response", "created_at": self.created, "status": status,
                "model": self.model, "output": output, "parallel_tool_calls": True,
                "previous_response_id": self.request.previous, "store": self.request.store,
                "error": {"code": "server_error", "message": error} if error else None,
                "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
                "usage": usage, "truncation": "disabled", **self.request.echo}

    def status(self, choice: Choice) -> str:
        return "incomplete" if choice.finish_reason() == "length" and not self.calls(choice) else "completed"

    def calls(self, choice: Choice) -> list[dict]:
        """The finished reply's function_call items ([] for a message)."""
        if self._items is None:
            self._items = [self._call_item(call) for call in choice.tool_calls() or []]
        return self._items

    def output(self, choice: Choice) -> list[dict]:
        return self.calls(choice) or [self._message_item(choice.text, self.status(choice))]

    def conversation(self, choice: Choice) -> list[dict]:
        """The messages a later request continues (previous_response_id): what was sent, then this reply."""
        calls = [{"id": c["call_id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                 for c in self.calls(choice)]
        reply = ({"role": "assistant", "content": None, "tool_calls": calls} if calls
                 else {"role": "assistant", "content": choice.text})
        return [*self.request.messages, reply]

    # --- streaming -------------------------------------------------------------------------------
    def event(self, kind: str, **fields) -> str:
        body = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return f"event: {kind}\ndata: {json.dumps(body)}\n\n"

    def opening(self) -> list[str]:
        return [self.event("response.created", response=self.body(None, "in_progress")),
                self.event("response.in_progress", response=self.body(None, "in_progress"))]

    def text_delta(self, delta: str) -> list[str]:
        """Events for newly visible text (the message item opens with its first text)."""
        if not delta:
            return []
        out = self._open_message()
        out.append(self.event("response.output_text.delta", item_id=self.message_id, output_index=0, content_index=0,
                              delta=delta, logprobs=[]))
        return out

    def closing(self, choice: Choice) -> list[str]:
        """The events after the last token: the whole items, then the finished response."""
        out = []
        if not self.calls(choice):
            out += self._open_message()
            part = {"type": "output_text", "text": choice.text, "annotations": [], "logprobs": []}
            out += [self.event("response.output_text.done", item_id=self.message_id, output_index=0, content_index=0,
                               text=choice.text, logprobs=[]),
                    self.event("response.content_part.done", item_id=self.message_id, output_index=0,
                               content_index=0, part=part),
                    self.event("response.output_item.done", output_index=0,
                               item=self._message_item(choice.text, self.status(choice)))]
        else:
            for k, call in enumerate(self.calls(choice)):
                args = call["arguments"]
                out += [self.event("response.output_item.added", output_index=k, item={**call, "arguments": "",
                                                                                       "status": "in_progress"}),
                        self.event("response.function_call_arguments.delta", item_id=call["id"], output_index=k,
                                   delta=args),
                        self.event("response.function_call_arguments.done", item_id=call["id"], output_index=k,
                                   name=call["name"], arguments=args),
                        self.event("response.output_item.done", output_index=k, item=call)]
        status = self.status(choice)
        out.append(self.event(f"response.{status}", response=self.body(choice, status)))
        return out

    def failure(self, message: str) -> str:
        return self.event("response.failed", response=self.body(None, "failed", error=message))

    def _open_message(self) -> list[str]:
        if self.message_open:
            return []
        self.message_open = True
        item = {"type": "message", "id": self.message_id, "status": "in_progress", "role": "assistant", "content": []}
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        return [self.event("response.output_item.added", output_index=0, item=item),
                self.event("response.content_part.added", item_id=self.message_id, output_index=0, content_index=0,
                           part=part)]

    def _message_item(self, text: str, status: str) -> dict:
        return {"type": "message", "id": self.message_id, "status": status, "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}

    @staticmethod
    def _call_item(call: dict) -> dict:
        return {"type": "function_call", "id": new_id("fc", "_"), "call_id": call["id"],
                "name": call["function"]["name"], "arguments": call["function"]["arguments"], "status": "completed"}
