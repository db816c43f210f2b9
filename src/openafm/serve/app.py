"""The HTTP server: OpenAI's endpoints over the batch engines, the playground at `/`, health and metrics.

POST /v1/chat/completions and /v1/completions read the body strictly (serve.protocol), run the choices as
engine rows (serve.engine_front) and answer in OpenAI's shapes (serve.responses), streamed as server-sent
events (`data: {chunk}` ... `data: [DONE]`) when asked. POST /v1/responses (OpenAI's Responses API) is read as
the chat request it amounts to (serve.responses_api) and answered as a response object or its typed events
(serve.response_items). Errors are OpenAI error bodies: 400 naming the
field, 404 for an unknown model, 413-free size check (a body over `max_body` bytes is a 400 naming the limit),
429 with Retry-After when the queue is full, 500 if a request fails inside (the server itself goes on). A
client that disconnects cancels its rows (checked between events, and by the stream's cancellation). With an API
key, the API answers 401 without it (serve.access).
"""

from __future__ import annotations

import json
import time
from importlib import resources

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles

from openafm.serve.access import Access, install
from openafm.serve.engine_front import Served, events
from openafm.serve.metrics import Metrics
from openafm.serve.protocol import RequestError, chat_request, completion_request
from openafm.serve.response_items import ResponseBuilder
from openafm.serve.responses import Choice, chat_body, chunk, completion_body, new_id, usage
from openafm.serve.responses_api import ResponseStore, responses_request

MAX_BODY = 1 << 20          # bytes of one request body
RETRY_AFTER = "1"           # seconds, on a 429
DISCONNECT_CHECK = 0.25     # seconds between checks that a non-streaming client is still there


def create_app(served: Served, *, max_body: int = MAX_BODY, access: Access = Access()) -> FastAPI:
    app = FastAPI(title="openafm", docs_url=None, redoc_url=None, openapi_url=None)
    install(app, access)
    metrics = Metrics()
    store = ResponseStore()
    app.state.served, app.state.metrics, app.state.responses = served, metrics, store
    static = resources.files("openafm.serve") / "static"
    app.mount("/static", StaticFiles(directory=str(static)), name="static")

    @app.get("/", response_class=HTMLResponse)
    async def playground() -> str:
        return (static / "index.html").read_text(encoding="utf-8")

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "models": list(served.models), "running": served.running, "waiting": served.waiting}

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [
            {"id": m.name, "object": "model", "created": 0, "owned_by": "openafm", "kind": m.kind,
             "source": m.source, "max_context": served.config.max_context,
             "default_sampling": m.sampling.to_dict()}
            for m in served.models.values()]}

    @app.get("/metrics", response_class=PlainTextResponse)
    async def prometheus() -> PlainTextResponse:
        return PlainTextResponse(metrics.render(waiting=served.waiting, running=served.running),
                                 media_type="text/plain; version=0.0.4")

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        return await _complete(request, "chat", served, metrics, max_body)

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await _complete(request, "text", served, metrics, max_body)

    @app.post("/v1/responses")
    async def responses(request: Request):
        return await _respond(request, served, metrics, max_body, store)

    return app


async def _complete(request: Request, kind: str, served: Served, metrics: Metrics, max_body: int):
    """One completion request, answered whole or as a stream; every error an OpenAI error body."""
    endpoint = "chat" if kind == "chat" else "completions"
    try:
        body = await _read_json(request, max_body)
        model = _model(served, body)
        if kind == "chat":
            plan = chat_request(body, tokenizer=model.tokenizer, model=model.name, context=served.config.max_context,
                                vision=served.vision_tower, recommended=model.sampling)
        else:
            plan = completion_request(body, tokenizer=model.tokenizer, model=model.name,
                                      context=served.config.max_context, recommended=model.sampling)
        stream = events(model.engine, plan)
        if plan.stream:
            first = await stream.__anext__()          # raises a 429 here, before the 200 is sent
            metrics.request(endpoint, 200)
            return StreamingResponse(_sse(request, plan, model, stream, first, metrics),
                                     media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        choices = await _gather(request, plan, model, stream, metrics)
        if choices is None:
            result = JSONResponse({}, status_code=499)
        else:
            build = chat_body if plan.kind == "chat" else completion_body
            rid = new_id("chatcmpl" if plan.kind == "chat" else "cmpl")
            result = JSONResponse(build(rid, plan, choices, model.engine))
    except Exception as e:                                            # noqa: BLE001 - answered as an error body
        return _failure(e, endpoint, metrics)
    metrics.request(endpoint, result.status_code)
    return result


async def _respond(request: Request, served: Served, metrics: Metrics, max_body: int, store: ResponseStore):
    """One Responses API request: the response object, or its stream of typed events (serve.response_items)."""
    try:
        body = await _read_json(request, max_body)
        model = _model(served, body)
        req = responses_request(body, store, tokenizer=model.tokenizer, model=model.name,
                                context=served.config.max_context, vision=served.vision_tower,
                                recommended=model.sampling)
        builder = ResponseBuilder(req, model.name)
        stream = events(model.engine, req.plan)
        if req.plan.stream:
            first = await stream.__anext__()
            metrics.request("responses", 200)
            return StreamingResponse(_response_events(request, req, builder, model, stream, first, metrics, store),
                                     media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        choices = await _gather(request, req.plan, model, stream, metrics)
        if choices is None:
            result = JSONResponse({}, status_code=499)
        else:
            if req.store:
                store.put(builder.id, builder.conversation(choices[0]))
            result = JSONResponse(builder.body(choices[0], builder.status(choices[0])))
    except Exception as e:                                            # noqa: BLE001 - answered as an error body
        return _failure(e, "responses", metrics)
    metrics.request("responses", result.status_code)
    return result


def _model(served: Served, body):
    name = body.get("model") if isinstance(body, dict) else None
    return served.get(name) if isinstance(name, str) else served.default


def _failure(e: Exception, endpoint: str, metrics: Metrics) -> JSONResponse:
    """A RequestError as its status and OpenAI error body; anything else as a 500 for this request only."""
    if isinstance(e, RequestError):
        metrics.request(endpoint, e.status)
        headers = {"Retry-After": RETRY_AFTER} if e.status == 429 else None
        return JSONResponse(e.body(), status_code=e.status, headers=headers)
    metrics.request(endpoint, 500)
    return JSONResponse(RequestError(f"internal error: {type(e).__name__}: {e}", None, status=500,
                                     kind="server_error").body(), status_code=500)


async def _gather(request: Request, plan, model, stream, metrics: Metrics) -> list[Choice] | None:
    """A non-streaming answer: every choice's events gathered; None if the client left meanwhile (its rows are
    cancelled)."""
    choices = [Choice(i, plan, model.tokenizer) for i in range(plan.n)]
    last: dict[int, float] = {}
    checked = time.monotonic()
    try:
        async for item in stream:
            if item is None or time.monotonic() - checked > DISCONNECT_CHECK:
                checked = time.monotonic()
                if await request.is_disconnected():
                    return None
            if item is None:
                continue
            i, e = item
            _observe(metrics, last, i, e)
            choices[i].add(e)
    finally:
        await stream.aclose()
    failed = [c for c in choices if c.failed()]
    if failed:
        raise RuntimeError(failed[0].error or failed[0].finish)
    return choices


async def _response_events(request: Request, req, builder: ResponseBuilder, model, stream, first, metrics: Metrics,
                           store: ResponseStore):
    """A streamed response: the opening events, a delta per newly visible text, the closing events."""
    choice = Choice(0, req.plan, model.tokenizer)
    last: dict[int, float] = {}
    for line in builder.opening():
        yield line
    try:
        async for _, e in _live(request, stream, first):
            _observe(metrics, last, 0, e)
            choice.add(e)
            if choice.failed():
                if choice.finish == "error":
                    yield builder.failure(f"generation failed: {choice.error}")
                return
            for line in builder.text_delta(choice.delta_text()):
                yield line
            if e.finish is not None:
                if req.store:
                    store.put(builder.id, builder.conversation(choice))
                for line in builder.closing(choice):
                    yield line
    finally:
        await stream.aclose()


async def _live(request: Request, stream, first):
    """The engine's (choice, event) items from ``first`` on, without the keep-alive ticks (None), each of which
    checks that the client is still there; ends early when it has gone (its rows are then cancelled)."""
    item = first
    while True:
        if item is not None:
            yield item
        elif await request.is_disconnected():
            return
        try:
            item = await stream.__anext__()
        except StopAsyncIteration:
            return


async def _sse(request: Request, plan, model, stream, first, metrics: Metrics):
    """A streamed answer as server-sent events: a chunk per event, the usage chunk if asked, then [DONE]."""
    rid = new_id("chatcmpl" if plan.kind == "chat" else "cmpl")
    created = int(time.time())
    choices = [Choice(i, plan, model.tokenizer) for i in range(plan.n)]
    started = [False] * plan.n
    last: dict[int, float] = {}
    try:
        async for i, e in _live(request, stream, first):
            _observe(metrics, last, i, e)
            c = choices[i]
            c.add(e)
            if c.failed():
                if c.finish == "error":
                    error = RequestError(f"generation failed: {c.error}", None, status=500, kind="server_error")
                    yield f"data: {json.dumps(error.body())}\n\n"
                return
            body = chunk(rid, plan, created, c, role=not started[i], final=e.finish is not None,
                         extra=_profile_extra(plan, model, c, e))
            started[i] = True
            if body is not None:
                yield f"data: {json.dumps(body)}\n\n"
        if any(c.finish is None for c in choices):
            return                                           # the client left before the end
        if plan.include_usage:
            body = {"id": rid, "object": "chat.completion.chunk" if plan.kind == "chat" else "text_completion",
                    "created": created, "model": plan.model, "choices": [], "usage": usage(plan, choices)}
            yield f"data: {json.dumps(body)}\n\n"
        yield "data: [DONE]\n\n"
    finally:
        await stream.aclose()


def _profile_extra(plan, model, c: Choice, e) -> dict | None:
    """The playground's profile fields of one chunk (the token's detail, the prefill's figures), if asked."""
    if not plan.profile:
        return None
    extra = {}
    if c.profile and e.token_id == c.profile[-1]["id"] and e.token_id >= 0:
        extra["token"] = c.profile[-1]
    if c.first is e:
        extra["prefill"] = {"prompt_tokens": len(plan.prompt), "cached_prompt_tokens": e.cached_tokens,
                            "prefill_ms": round(e.prefill_seconds * 1e3, 3), "step": model.engine.step_kind,
                            "speculate": model.engine.config.speculate.value}
    return extra or None


def _observe(metrics: Metrics, last: dict[int, float], i: int, e) -> None:
    if e.token_id < 0:
        return
    metrics.token()
    if i not in last:
        metrics.ttft.observe(e.at)
    else:
        metrics.itl.observe(e.at - last[i])
    last[i] = e.at


async def _read_json(request: Request, max_body: int):
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_body:
        raise RequestError(f"the request body is {int(length)} bytes; this server accepts at most {max_body}",
                           None, code="body_too_large")
    raw = bytearray()
    async for part in request.stream():
        raw += part
        if len(raw) > max_body:
            raise RequestError(f"the request body is over {max_body} bytes, this server's limit", None,
                               code="body_too_large")
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RequestError(f"the request body is not valid JSON: {e}", None, code="invalid_json") from None
