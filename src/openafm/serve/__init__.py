"""The OpenAI-compatible server (`openafm serve`): continuous batching over the runtime's batch engine, and the
playground with its profiler.

Modules:
    errors.py         RequestError (an OpenAI error body naming the field) and `need`, the check that raises it
    protocol.py       the OpenAI request bodies read strictly into a Plan (every unsupported field is a 400 naming it)
    images.py         image content parts (base64 data URLs) read, and prefilled through the vision tower for the rows
    engine_front.py   the served models (and adapters), each with a runtime.engine loop; the asyncio bridge
    responses.py      OpenAI response bodies and stream chunks from engine events (tool calls, log-probs, profile)
    responses_api.py  the Responses API (POST /v1/responses) read as the chat request it amounts to; stored responses
    response_items.py the Responses API's response object and its typed stream events
    metrics.py        Prometheus text for GET /metrics
    app.py            the FastAPI application: endpoints, server-sent events, errors
    access.py         who may call it: the API key (Bearer, constant-time) and the origins CORS admits

Package data: the "static" folder holds the playground, plain HTML, JS and CSS served at / (no build step).
"""
