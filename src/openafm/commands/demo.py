"""`openafm demo` (what `make demo` runs): the default model loaded, a streamed chat answer, sampled and batched
generations with their timings, then the Foundation Models API on the same model."""

from __future__ import annotations

import asyncio
import dataclasses

import openafm.fm as fm
from openafm.api import DEFAULT_MODEL
from openafm.commands.common import load_timed, print_token, stats_line
from openafm.runtime.generate import GenerationStats


def register(subparsers) -> None:
    d = subparsers.add_parser("demo", help="the main job: load the default model, stream a chat answer, time generations",
                       description="Load the default model, stream a chat answer and a few generations, and print "
                                   "time to first token and decode tokens/s.")
    d.add_argument("--model", default=DEFAULT_MODEL, help=f"model name or path (default: {DEFAULT_MODEL})")
    d.set_defaults(run=run_demo)


def run_demo(args) -> int:
    print(f"== Loading {args.model}")
    lm, load_s = load_timed(args.model)
    cfg = lm.model.kv_plan
    print(f"   {lm.source}\n   {cfg.n_layers} layers, dim {cfg.dim}, {cfg.n_heads} heads / {cfg.n_kv_heads} KV heads, "
          f"vocab {cfg.vocab_size}, {lm.config.param_count() / 1e6:.1f}M parameters; loaded in {load_s:.2f} s")

    question = "What are three good reasons to learn a second language?"
    print(f"\n== Chat (streamed, greedy)\nuser> {question}\nmodel> ", end="", flush=True)
    stats = GenerationStats()
    lm.chat(question, max_tokens=96, on_token=print_token, stats=stats)
    print("\n" + stats_line(stats))

    print("\n== Generations (sampled, temperature 0.7, top-p 0.9, seed 0)")
    for prompt in ["The old lighthouse keeper", "def fibonacci(n):", "Photosynthesis is the process"]:
        stats = GenerationStats()
        text = lm.generate(prompt, max_tokens=40, temperature=0.7, top_p=0.9, seed=0, stats=stats)
        print(f"-- {prompt}{text}\n   {stats_line(stats)}")

    print("\n== A batch of 3 prompts in one forward per step (greedy)")
    stats = GenerationStats()
    prompts = ["The capital of France is", "Water boils at", "The largest planet in the solar system is"]
    outs = lm.generate(prompts, max_tokens=16, stats=stats)
    for p, o in zip(prompts, outs):
        print(f"-- {p}{o}")
    print(f"   {stats_line(stats)} (per sequence; x{len(prompts)} tokens per step)")
    _demo_framework(args.model)
    return 0


TOOL_QUESTION = "What's the weather in Paris?"


class DemoWeather(fm.Tool):
    """The demo's tool: the same forecast for any city; it prints each call and keeps the cities it was asked for."""
    name = "get_weather"
    description = "Get the current weather for a city"

    def __init__(self) -> None:
        super().__init__()
        self.cities: list[str] = []

    @property
    def arguments_schema(self) -> fm.GenerationSchema:
        return fm.GenerationSchema.from_json_schema(
            {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})

    async def call(self, args: fm.GeneratedContent) -> str:
        city = args.value()["city"]
        self.cities.append(city)
        print(f"   [tool get_weather called with city={city!r}]")
        return f"Sunny and 21 C in {city}"


@fm.generable("A fictional person")
class Person:
    name: str = fm.guide("Full name")
    age: int = fm.guide("Age in years", range=(18, 99))
    hobbies: list[str] = fm.guide("Hobbies", max_items=3)


def snapshot_fields(snapshot) -> dict:
    """A streamed Person.PartiallyGenerated's fields, without its generation id."""
    return {f.name: getattr(snapshot, f.name) for f in dataclasses.fields(snapshot) if f.name != "id"}


def _demo_framework(model_name: str) -> None:
    """The Foundation Models API on the same model: a typed object, a streamed partial object, a tool call."""

    async def go():
        model = fm.SystemLanguageModel(model=model_name)
        print("\n== Guided generation: a @generable object (constrained decoding)")
        person = await fm.LanguageModelSession(model=model).respond("Invent a person.", generating=Person)
        print(f"   {person}")
        print("\n== Streaming a partially generated object (each snapshot that changed)")
        shown = None
        async for snapshot in fm.LanguageModelSession(model=model).stream_response("Invent a person.",
                                                                                    generating=Person):
            fields = snapshot_fields(snapshot)
            if fields != shown:
                print("   " + ", ".join(f"{k}={v!r}" for k, v in fields.items()))
                shown = fields
        print("\n== Tool calling round trip (the model decides to call; the call format is enforced by the grammar)")
        session = fm.LanguageModelSession(model=model, tools=[DemoWeather()])
        answer = await session.respond(TOOL_QUESTION,
                                       options=fm.GenerationOptions(maximum_response_tokens=60))
        print(f"   answer: {answer}")
    asyncio.run(go())
