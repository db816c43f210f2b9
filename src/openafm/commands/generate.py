"""`openafm generate PROMPT` (a continuation, or a chat answer with --chat, optionally speculative) and `openafm chat`
(an interactive conversation), both streaming tokens."""

from __future__ import annotations

import sys

from openafm.commands.common import (SPECULATE_HELP, load_timed, model_args, parse_speculate, print_token, sampling,
                                     sampling_args, speculation, stats_line)
from openafm.runtime.generate import GenerationStats
from openafm.runtime.kv_cache import KVStorage
from openafm.runtime.proposers import ProposerKind


def register(subparsers) -> None:
    g = subparsers.add_parser("generate", help="continue a prompt (or answer it with --chat), streaming tokens",
                       description="Generate text from a prompt, streaming tokens to stdout. Timing goes to stderr.")
    model_args(g)
    sampling_args(g)
    g.add_argument("prompt", nargs="+", help="the prompt text (several words are joined with spaces)")
    g.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template as a user turn")
    g.add_argument("--system", default=None, help="system message (with --chat)")
    g.add_argument("--quiet-stats", action="store_true", help="do not print timing to stderr")
    g.add_argument("--kv", choices=["native", "int8"], default="native",
                   help="KV cache storage: native (the model's dtype, default) or int8 (per-token, per-head "
                        "scales; ~1/4 of fp32 cache memory)")
    g.add_argument("--speculate", default=(ProposerKind.OFF, None), type=parse_speculate,
                   metavar="off|ngram|draft:DIR", help=SPECULATE_HELP)
    g.add_argument("--gamma", type=int, default=4, help="most draft tokens guessed per step with draft:DIR (default 4)")
    g.set_defaults(run=run_generate)

    c = subparsers.add_parser("chat", help="interactive chat that streams the model's replies",
                       description="Chat with a model. Type a message and press Enter; /reset clears the "
                                   "conversation, /exit (or Ctrl-D) quits.")
    model_args(c)
    sampling_args(c, default_max=256)
    c.add_argument("--system", default=None, help="system message for the conversation")
    c.set_defaults(run=run_chat)


def run_generate(args) -> int:
    lm, load_s = load_timed(args.model, args.dtype, args.threads, args.weights)
    prompt = " ".join(args.prompt)
    if args.chat:
        prompt = lm.chat_prompt(prompt, system=args.system)
    elif args.system is not None:
        raise ValueError("--system needs --chat")
    stats = GenerationStats()
    kind, draft = speculation(args.speculate, lm.model)
    lm.generate(prompt, on_token=print_token, stats=stats, kv_storage=KVStorage(args.kv), speculate=kind,
                draft=draft, gamma=args.gamma, **sampling(args))
    print()
    if not args.quiet_stats:
        line = stats_line(stats, load_s)
        if kind is not ProposerKind.OFF:     # a step may commit several tokens: tokens/s is new tokens over time
            line = line.replace(f"decode {stats.decode_tokens_per_second:.1f} tok/s",
                                f"decode {(stats.new_tokens - 1) / max(stats.decode_seconds, 1e-9):.1f} tok/s "
                                f"(speculative {kind.value}: {stats.accepted} of {stats.proposed} guesses accepted)")
        print(line, file=sys.stderr)
    return 0


def run_chat(args) -> int:
    lm, load_s = load_timed(args.model, args.dtype, args.threads, args.weights)
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
        reply = lm.chat(history, system=args.system, on_token=print_token, **sampling(args))
        print()
        history.append({"role": "assistant", "content": reply})
