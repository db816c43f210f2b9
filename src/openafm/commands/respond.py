"""`openafm respond PROMPT`: one answer through the Foundation Models session API (openafm.fm): plain, streamed,
constrained to a JSON Schema, with an adapter or with images."""

from __future__ import annotations

import asyncio
import json
import sys

import openafm.fm as fm
from openafm.api import DEFAULT_MODEL
from openafm.models.image_views import DEFAULT_RESOLUTION, Resolution


def register(subparsers) -> None:
    r = subparsers.add_parser("respond", help="answer a prompt through the Foundation Models session API (openafm.fm)",
                       description="Answer a prompt with LanguageModelSession.respond. With --schema FILE the answer "
                                   "is JSON constrained to that JSON Schema (an unsupported keyword is an error "
                                   "naming it); with --stream the text is printed as it grows.")
    r.add_argument("prompt", nargs="+", help="the prompt text")
    r.add_argument("--model", "-m", default=DEFAULT_MODEL, help=f"model name or path (default: {DEFAULT_MODEL})")
    r.add_argument("--schema", metavar="FILE", help="JSON Schema file the answer must satisfy")
    r.add_argument("--adapter", metavar="FILE", help="a LoRA adapter file (.safetensors) trained for this model; "
                                                     "it must match the model's weights")
    r.add_argument("--instructions", default=None, help="session instructions (a system message)")
    r.add_argument("--max-tokens", type=int, default=None, help="maximum_response_tokens (default 512)")
    r.add_argument("--temperature", "-t", type=float, default=None, help="0 or unset = greedy; > 0 samples")
    r.add_argument("--seed", type=int, default=None, help="seed for sampling")
    r.add_argument("--stream", action="store_true", help="print the text as it is generated")
    r.add_argument("--image", action="append", default=[], metavar="FILE",
                   help="an image attached after the prompt text (repeat for several); read by the model's vision "
                        "tower (packaged for the default model)")
    r.add_argument("--resolution", default=DEFAULT_RESOLUTION.value, choices=[m.value for m in Resolution],
                   help="image mode: high (1344 tiled 2x2 + overview, 720 image tokens), balanced (672, 144), rapid "
                        f"(224, 9); default {DEFAULT_RESOLUTION.value}, where the shipped vision tower answers best")
    r.set_defaults(run=run_respond)


def run_respond(args) -> int:

    schema = None
    if args.schema:
        try:
            with open(args.schema) as f:
                schema = json.load(f)
        except OSError as e:
            raise ValueError(f"--schema {args.schema}: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"--schema {args.schema}: not valid JSON ({e})") from None
    sampling = fm.SamplingMode.random(seed=args.seed) if args.temperature else None
    options = fm.GenerationOptions(sampling=sampling, temperature=args.temperature,
                                   maximum_response_tokens=args.max_tokens)
    adapter = fm.SystemLanguageModel.Adapter(args.adapter) if args.adapter else None
    session = fm.LanguageModelSession(instructions=args.instructions,
                                      model=fm.SystemLanguageModel(model=args.model, adapter=adapter,
                                                                   resolution=args.resolution))
    prompt = " ".join(args.prompt)
    if args.image:
        prompt = [prompt, *(fm.ImageAttachment(path) for path in args.image)]

    async def go():
        if args.stream and schema is None:
            shown = ""
            async for snapshot in session.stream_response(prompt, options=options):
                sys.stdout.write(snapshot[len(shown):])
                sys.stdout.flush()
                shown = snapshot
            print()
        elif schema is not None:
            content = await session.respond(prompt, json_schema=schema, options=options)
            print(content.to_json())
        else:
            print(await session.respond(prompt, options=options))
    asyncio.run(go())
    return 0
