"""Models: a model is a plan (a list of per-layer specs over the shared blocks of openafm.nn), not a subclass.

    plan.py          DecoderConfig, the per-layer plan; KV-sharing and interleaved plans
    decoder.py       CausalLM (embeddings, rotary tables, forward set-up, head); Decoder runs the plan's blocks in order
    pt_moe.py        Parallel-Track MoE (report §2.2): tracks over one residual stream, synced once per track block
    presets.py       named model configs (SmolLM2, AFM on-device and server shapes); get_preset, with_changes
    build.py         config type -> model class, and the kind names native checkpoints record
    upcycle.py       sparse upcycling (report §4.3): a dense decoder -> an MoE decoder computing the same function
    resize_vocab.py  grow the embeddings after a tokenizer extension (new rows: the mean of their pieces' rows)
    vision.py        the vision encoder (report §2.3): ViTDet with Register-Window, the plain ViT, presets
    vl_adapter.py    the vision-language adapter: patch grid -> a fixed number of decoder tokens (C-Abstractor, ...)
    image_views.py   resolution modes (high 720 / balanced 144 / rapid 9 image tokens), image loading and tiling
    vlm.py           the vision tower (encoder + adapter) and the splice of image tokens into a decoder's input
    clip.py          the CLIP pair: vision encoder + a small text tower in one embedding space, learned temperature
"""
