"""openafm: an open implementation of the Apple Intelligence Foundation Language Models (2025) stack.

    import openafm
    lm = openafm.load("smollm2-135m-instruct")
    print(lm.chat("Name three colours.", max_tokens=32))

The spine, each layer importing only those before it (tests/layering.py keeps it so):

    errors.py      the typed errors every layer raises (each names the bad value)
    config.py      configs are data: dataclass <-> dict <-> flat golden dump
    io.py          files for every room: atomic file and directory writes (fsync, rename), JSON Lines, YAML
    splits.py      Split: TRAIN and HELDOUT, the one enum every source of examples is cut by
    nn/            building blocks: norm, rope, attention kinds, the KV contract, MLP, MoE, LoRA, packed low-bit layers
    tokenizer/     byte-level BPE from GGUF or tokenizer.json, chat templates, streaming decode, training, extension
    models/        a model is a plan: the on-device decoder, PT-MoE, presets, upcycling
    checkpoint/    every way a model comes from disk (GGUF, HF, native, compressed) and the one loader over them
    runtime/       KV caches, sampling, generation, constrained decoding, LanguageModel (text in, text out)
    fm/            the Foundation Models framework with apple_fm_sdk's names
    api.py         the front door: openafm.load
    cli.py         the `openafm` command line: it only dispatches to commands/
    commands/      every CLI subcommand, one module each
    serve/         the OpenAI-compatible server (continuous batching) and the playground, run by `openafm serve`

Beside the spine, importing from it and never imported by it:

    data/          corpus sources, the curation pipeline, token shards, mixtures, loaders
    train/         the one trainer: loop, objectives, hooks, checkpoints; the vision stack's trainers in a room
    compress/      what makes compressed models: QAT, RTN, group quantization, ASTC, SVD pull-out, recovery
    eval/          evaluation: perplexity and task scores
    rl/            post-training: the RLOO algorithm and runs, with rooms for rewards, preference pairs and the
                   reward model, verified SFT data, and asynchronous RL on Ray
    distributed/   track parallelism and the tensor-parallel baseline on torch.distributed
    pipelines/     the recipe runner: named pipelines of stages over the packages above
"""

import os

# Before torch loads OpenMP (openafm.api imports torch): idle OpenMP workers sleep instead of spinning, unless the
# environment chose otherwise. Beside another CPU-bound process this keeps decode at ~22 tok/s instead of ~9, and
# costs nothing on a quiet machine (figures: openafm/runtime/threads.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from openafm.api import LanguageModel, available_models, load  # noqa: E402

__version__ = "0.1.0"
__all__ = ["LanguageModel", "available_models", "load", "__version__"]
