"""`openafm serve`: the OpenAI-compatible server and the playground, on loopback unless told otherwise."""

from __future__ import annotations

import argparse
import sys

import uvicorn

from openafm.api import DEFAULT_MODEL, load
from openafm.checkpoint.sampling import RecommendedSampling
from openafm.commands.common import SPECULATE_HELP, parse_speculate, speculation
from openafm.runtime.engine import EngineConfig
from openafm.runtime.proposers import ProposerKind
from openafm.runtime.threads import set_threads
from openafm.serve.access import KEY_ENV, Access, exposed_without_key
from openafm.serve.app import MAX_BODY, create_app
from openafm.serve.engine_front import DefaultSampling, Served, served_weights


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve", help="serve the model over OpenAI's HTTP API (continuous batching) with a playground at /",
        description="Serve a model over OpenAI's API: POST /v1/chat/completions and /v1/completions (streaming, "
                    "response_format json_schema, tools), GET /v1/models, /health, /metrics (Prometheus), and the "
                    "playground with its profiler at /. Requests share one engine loop per model (continuous "
                    "batching). Binds to 127.0.0.1 unless --host says otherwise; beyond this machine, give --api-key.")
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"model name, .gguf file or checkpoint (default {DEFAULT_MODEL})")
    p.add_argument("--adapter", action="append", default=[], metavar="NAME=FILE",
                   help="serve a LoRA adapter file under NAME as well (repeatable); pick it with \"model\": NAME")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--max-batch", type=int, default=EngineConfig.max_batch, help="rows decoded together")
    p.add_argument("--max-queue", type=int, default=EngineConfig.max_queue,
                   help="requests waiting for a row; beyond it the server answers 429 with Retry-After")
    p.add_argument("--max-context", type=int, default=None,
                   help=f"prompt + completion tokens of one request (default {EngineConfig.max_context}, or the "
                        f"model's context window where that is shorter)")
    p.add_argument("--weights", default="auto", choices=["auto", "native", "native-int8", "float32", "bfloat16"],
                   help="how a GGUF's weights are held (openafm.load): auto = native blocks, or float32 when "
                        "--adapter is given (adapters attach to the dequantized weights they were trained on)")
    p.add_argument("--max-body", type=int, default=MAX_BODY, help="largest request body in bytes")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads for the matrix work (default: torch's choice, the cores this process may use)")
    p.add_argument("--speculate", default=(ProposerKind.OFF, None), type=parse_speculate,
                   metavar="off|ngram|draft:DIR", help=SPECULATE_HELP)
    p.add_argument("--api-key", default=None, metavar="KEY",
                   help=f"require 'Authorization: Bearer KEY' on every API endpoint (401 otherwise; /health and the "
                        f"playground page stay open, and the page asks for the key); default: the {KEY_ENV} "
                        f"environment variable, else no key")
    p.add_argument("--default-sampling", default=DefaultSampling.MODEL.value,
                   choices=[k.value for k in DefaultSampling],
                   help="what a request that leaves temperature / top_p unset gets: 'model' (default), the model's "
                        "recommended sampling (its generation_config.json, GGUF general.sampling.* keys or bundle "
                        "sidecar; the default model: temperature 0.7, top-p 0.9), field by field, as vLLM does; "
                        "'openai', OpenAI's temperature 1 with no cut, word salad from a small model. GET /v1/models "
                        "shows the one applied")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                   help="let web pages from ORIGIN (scheme://host[:port], or '*') call the API from a browser "
                        "(CORS; repeatable). Default: none, so other origins' pages cannot read its answers")
    p.set_defaults(run=run)


def sampling_words(applied: RecommendedSampling) -> str:
    """What a request that sets no sampling gets, in words (with the settings the source gives that are not run)."""
    words = ", ".join(f"{k} {v}" for k, v in applied.settings().items())
    unused = f"; not applied (openafm does not run them): {', '.join(applied.unused)}" if applied.unused else ""
    return f"a request without temperature / top_p samples with {words}, from {applied.source}{unused}"


def parse_adapters(specs: list[str]) -> dict[str, str]:
    adapters = {}
    for spec in specs:
        name, sep, file = spec.partition("=")
        if not sep or not name or not file:
            raise ValueError(f"--adapter {spec!r} must be NAME=FILE")
        adapters[name] = file
    return adapters


def run(args: argparse.Namespace) -> int:
    adapters = parse_adapters(args.adapter)
    access = Access.from_options(args.api_key, args.allow_origin)
    if exposed_without_key(args.host, access):
        print(f"openafm serve: WARNING: binding to {args.host} without an API key: anyone who can reach this "
              f"machine can use the model. Give --api-key KEY (or set {KEY_ENV}).", file=sys.stderr)
    set_threads(args.threads)
    lm = load(args.model, weights=served_weights(args.weights, adapters))
    window = lm.model.kv_plan.max_seq_len
    max_context = args.max_context if args.max_context is not None else min(EngineConfig.max_context, window)
    kind, draft = speculation(args.speculate, lm.model)
    config = EngineConfig(max_batch=args.max_batch, max_queue=args.max_queue, max_context=max_context, speculate=kind)
    served = Served(lm, adapters, config, draft=draft, sampling=DefaultSampling(args.default_sampling)).start()
    if args.max_context is None and window < EngineConfig.max_context:
        print(f"openafm serve: --max-context {max_context} (the model's context window)", file=sys.stderr)
    print(f"openafm serve: {', '.join(served.models)} ({served_weights(args.weights, adapters)} weights, decode "
          f"step {served.default.engine.step_kind}) on http://{args.host}:{args.port}/ (playground at /)",
          file=sys.stderr)
    print(f"openafm serve: {sampling_words(served.default.sampling)}", file=sys.stderr)
    try:
        uvicorn.run(create_app(served, max_body=args.max_body, access=access), host=args.host, port=args.port, log_level="warning")
    finally:
        served.stop()
    return 0
