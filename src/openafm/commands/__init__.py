"""Every `openafm` subcommand, one module each exposing ``register(subparsers)``; ``openafm.cli`` only dispatches
(its ``COMMAND_MODULES`` lists them in help order).

    common.py     what several commands share: --model and sampling flags, a timed load, the timing line
    generate.py   `openafm generate PROMPT` (continuation or --chat, speculative with --draft) and `openafm chat`
    models.py     `openafm models`: packaged models and presets, --describe NAME, --inspect PATH
    respond.py    `openafm respond PROMPT`: the Foundation Models session API (schema, stream, adapter, images)
    demo.py       `openafm demo` (`make demo`): chat, generations and the framework on the default model, timed
    serve.py      `openafm serve`: the OpenAI-compatible server and the playground (uvicorn)
    upcycle.py    `openafm upcycle DENSE OUT`: sparse upcycling of a dense model into an MoE checkpoint
    data.py       `openafm data build`: the corpus curation pipeline (report §3.1) into JSONL shards
    shards.py     `openafm data tokenize`: JSONL Documents -> memory-mapped token shards per domain and language
    tokenizer.py  `openafm tokenizer train|extend`: train a byte-level BPE, or extend one with new tokens
    train.py      `openafm train CONFIG.yaml [--resume]` and `openafm plot RUN_DIR`
    pipeline.py   `openafm pipeline RECIPE.yaml`: run a training recipe's stages in order (report §4.3)
    qat.py        `openafm qat MODEL OUT` (2-bit QAT) and `openafm recover BASE OUT.safetensors` (LoRA recovery)
    sft.py        `openafm sft OUT`: a LoRA adapter or a fully fine-tuned model by SFT (guided, BFCL or a file)
    synth.py      `openafm synth OUT.jsonl`: rejection-sampled, verified SFT data with provenance
    rl.py         `openafm rl CONFIG.yaml`: synchronous RLOO over prompt sets with their rewards
    reward.py     `openafm reward train OUT_DIR` (a reward model from graded, verified pairs) and `reward score`
    vision.py     `openafm vision pretrain OUT` (CLIP with FLIP masking) and `vision zero-shot CKPT` (held-out emoji)
    vlm.py        `openafm vlm train` (a vision tower for a frozen decoder) and `openafm vlm joint` (the joint stage)
    adapter.py    `openafm adapter train|eval|export`: the adapter toolkit on JSONL conversations (report §7)
    draft.py      `openafm draft train`: a draft model distilled from the target for speculative decoding
    eval.py       `openafm eval --tasks ...`, `openafm eval list`, `openafm eval compare RUN...` (report §8)
    inspect.py    `openafm models --inspect PATH`: what a GGUF file or Hugging Face directory is, what runs natively
"""
