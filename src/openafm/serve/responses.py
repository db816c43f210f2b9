"""OpenAI response bodies and stream chunks from engine events: one `Choice` accumulates one choice's events.

Finish reasons map to OpenAI's: eos, a stop string and a complete grammar are "stop", the token budget is
"length", a reply that is a tool call is "tool_calls". With tools on, a reply that starts with `<` is a tool
call (the framework's grammar lets a plain answer never start with `<`): its text is held back while it streams
and sent as `tool_calls` at the end. `openafm_profile` (an extension) adds per-token records: the profiler's
timeline (token, forced or sampled, grammar-mask time, time since the request, K/V bytes).
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import time

from openafm.fm.tool import CALL_OPEN, parse_tool_calls
from openafm.runtime.engine import CANCELLED, ERROR, RowEvent
from openafm.runtime.generate import FinishReason
from openafm.serve.protocol import Plan

FINISH = {FinishReason.EOS: "stop", FinishReason.STOP: "stop", FinishReason.COMPLETE: "stop",
          FinishReason.LENGTH: "length"}


def new_id(prefix: str, sep: str = "-") -> str:
    """A random id: chat completions' "chatcmpl-..." by default; the Responses API's "resp_..." with sep="_"."""
    return f"{prefix}{sep}{secrets.token_hex(12)}"


@dataclasses.dataclass
class Choice:
    index: int
    plan: Plan
    tokenizer: object
    text: str = ""
    sent: int = 0                  # characters of text already streamed
    tokens: int = 0                # completion tokens (the EOS token is not counted)
    finish: str | None = None
    error: str | None = None
    logprobs: list = dataclasses.field(default_factory=list)
    pending_logprobs: list = dataclasses.field(default_factory=list)
    profile: list = dataclasses.field(default_factory=list)
    first: RowEvent | None = None

    def add(self, e: RowEvent) -> None:
        if self.first is None and e.prompt_tokens:
            self.first = e
        if e.token_id >= 0 and not (e.finish == FinishReason.EOS and e.token_id in self.tokenizer.eos_token_ids):
            self.tokens += 1
            if e.logprob is not None:
                entry = self._logprob(e)
                self.logprobs.append(entry)
                self.pending_logprobs.append(entry)
            if self.plan.profile:
                self.profile.append({"id": e.token_id, "text": self.tokenizer.decode([e.token_id]),
                                     "forced": e.forced, "guessed": e.guessed,
                                     "mask_ms": round(e.mask_seconds * 1e3, 4),
                                     "t_ms": round(e.at * 1e3, 3), "kv_bytes": e.kv_bytes,
                                     "logprob": e.logprob})
        self.text += e.text
        if e.finish is not None:
            self.finish, self.error = e.finish, e.error

    def _logprob(self, e: RowEvent) -> dict:
        def item(tok: int, lp: float) -> dict:
            text = self.tokenizer.decode([tok])
            return {"token": text, "logprob": lp, "bytes": list(text.encode("utf-8"))}
        entry = item(e.token_id, e.logprob)
        entry["top_logprobs"] = [item(t, lp) for t, lp in (e.top_logprobs or [])]
        return entry

    # --- what the reply is ----------------------------------------------------------------------
    @property
    def is_call(self) -> bool:
        return bool(self.plan.tools) and self.text.startswith("<")

    def tool_calls(self) -> list[dict] | None:
        if not self.is_call or not self.text.startswith(CALL_OPEN):
            return None
        try:
            calls = parse_tool_calls(self.text, self.plan.tools) or []
        except (ValueError, KeyError, TypeError):          # cut short by the token budget
            return None
        return [{"id": new_id("call"), "type": "function",
                 "function": {"name": tool.name, "arguments": json.dumps(args)}} for tool, args in calls]

    def finish_reason(self) -> str:
        if self.finish == FinishReason.LENGTH:
            return "length"
        if self.tool_calls() is not None:
            return "tool_calls"
        return FINISH.get(self.finish, "stop")

    def failed(self) -> bool:
        return self.finish in (ERROR, CANCELLED)

    # --- streaming -------------------------------------------------------------------------------
    def delta_text(self) -> str:
        """Text not yet streamed (nothing while the reply may still turn out to be a tool call)."""
        if self.plan.tools and (not self.text or self.is_call):
            return ""
        out, self.sent = self.text[self.sent:], len(self.text)
        return out

    def take_logprobs(self) -> list:
        out, self.pending_logprobs = self.pending_logprobs, []
        return out


def usage(plan: Plan, choices: list[Choice]) -> dict:
    completion = sum(c.tokens for c in choices)
    return {"prompt_tokens": len(plan.prompt), "completion_tokens": completion,
            "total_tokens": len(plan.prompt) + completion}


def profile_summary(plan: Plan, choices: list[Choice], engine) -> dict:
    first = next((c.first for c in choices if c.first is not None), None)
    return {"prompt_tokens": len(plan.prompt), "cached_prompt_tokens": first.cached_tokens if first else 0,
            "prefill_ms": round(first.prefill_seconds * 1e3, 3) if first else None,
            "step": engine.step_kind, "choices": [c.profile for c in choices]}


def chat_body(rid: str, plan: Plan, choices: list[Choice], engine) -> dict:
    out = []
    for c in choices:
        calls = c.tool_calls()
        message = {"role": "assistant", "content": None if calls else c.text, "refusal": None}
        if calls:
            message["tool_calls"] = calls
        out.append({"index": c.index, "message": message, "finish_reason": c.finish_reason(),
                    "logprobs": {"content": c.logprobs, "refusal": None} if plan.logprobs is not None else None})
    body = {"id": rid, "object": "chat.completion", "created": int(time.time()), "model": plan.model,
            "system_fingerprint": "openafm", "choices": out, "usage": usage(plan, choices)}
    if plan.profile:
        body["openafm"] = profile_summary(plan, choices, engine)
    return body


def completion_body(rid: str, plan: Plan, choices: list[Choice], engine) -> dict:
    out = [{"index": c.index, "text": c.text, "finish_reason": c.finish_reason(),
            "logprobs": _text_logprobs(c) if plan.logprobs is not None else None} for c in choices]
    body = {"id": rid, "object": "text_completion", "created": int(time.time()), "model": plan.model,
            "system_fingerprint": "openafm", "choices": out, "usage": usage(plan, choices)}
    if plan.profile:
        body["openafm"] = profile_summary(plan, choices, engine)
    return body


def _text_logprobs(c: Choice, entries: list | None = None) -> dict:
    entries = c.logprobs if entries is None else entries
    offsets, at = [], c.sent if entries is not c.logprobs else 0
    for e in entries:
        offsets.append(at)
        at += len(e["token"])
    return {"tokens": [e["token"] for e in entries], "token_logprobs": [e["logprob"] for e in entries],
            "top_logprobs": [{t["token"]: t["logprob"] for t in e["top_logprobs"]} for e in entries],
            "text_offset": offsets}


def chunk(rid: str, plan: Plan, created: int, choice: Choice, *, role: bool = False, final: bool = False,
          extra: dict | None = None) -> dict | None:
    """A stream chunk for `choice`'s news, or None when there is nothing to send."""
    text = choice.delta_text()
    logprobs = choice.take_logprobs() if plan.logprobs is not None else []
    calls = choice.tool_calls() if final else None
    if not (text or role or final or logprobs or extra):
        return None
    if plan.kind == "text":
        c = {"index": choice.index, "text": text, "finish_reason": choice.finish_reason() if final else None,
             "logprobs": _text_logprobs(choice, logprobs) if plan.logprobs is not None else None}
        body = {"id": rid, "object": "text_completion", "created": created, "model": plan.model, "choices": [c]}
    else:
        delta: dict = {}
        if role:
            delta["role"] = "assistant"
        if text or (role and not plan.tools):
            delta["content"] = text
        if calls:
            delta["tool_calls"] = [{"index": k, **call} for k, call in enumerate(calls)]
        elif final and choice.is_call:                    # a call cut short: send its text as it is
            delta["content"] = choice.text
        c = {"index": choice.index, "delta": delta, "finish_reason": choice.finish_reason() if final else None,
             "logprobs": {"content": logprobs, "refusal": None} if plan.logprobs is not None else None}
        body = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": plan.model,
                "system_fingerprint": "openafm", "choices": [c]}
    if plan.include_usage:
        body["usage"] = None
    if extra is not None:
        body["openafm"] = extra
    return body
