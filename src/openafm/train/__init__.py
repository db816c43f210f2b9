"""The trainer (report §4): one loop for pretraining, upcycling, distillation, QAT, LoRA recovery and SFT.

    config.py          TrainConfig (YAML-loadable) and its parts
    batch_protocol.py  the Batch / Loader protocol the data pipeline implements
    synthetic.py       a deterministic in-memory loader (tests, benchmarks)
    token_loader.py    a loader over one token array (random windows); english_text_loader for `data.kind: callable`
    objective.py       Objective protocol and the LM objective (cross-entropy)
    kd.py              the knowledge-distillation objective (KL to teacher logits, full or top-k, + CE)
    hooks.py           TrainHooks: what a non-pretraining job (QAT, LoRA recovery) changes about the loop
    lora.py            LoRAHooks: rank-r LoRA adapters on a frozen base (SFT adapters, quality recovery)
    sft.py             supervised fine-tuning (LoRA or full) on chat examples: loss on the assistant turn, packed rows
    adapter_toolkit.py the adapter toolkit: rank-32 adapters on conversations, eval per epoch, early stop, bundles
    draft.py           distil a draft model from its target's greedy answers and next-token distributions
    reward.py          the reward model: trunk + scalar head, level-aware preference loss + single-sided grading
    reward_fit.py      fitting a reward model on a CPU: frozen bottom layers cached, top layers and heads trained
    clip.py            CLIP contrastive pretraining of the vision encoder (symmetric InfoNCE), zero-shot accuracy
    flip.py            FLIP masking: the patches each image keeps, the same number in every attention window
    reward_file.py     a trained reward model on disk (trained tensors + base fingerprint) and its scorer
    init.py            weight initialisation for training from scratch (scaled-normal, keep, auto)
    optimizer.py       AdamW with decay / no-decay parameter groups, gradient clipping
    schedule.py        learning-rate schedules (warmup + cosine, warmup-stable-decay, constant)
    flops.py           FLOPs per token, MFU, the machine's measured peak FLOP/s
    metrics.py         the metrics JSONL (append + flush, truncated on resume)
    rng.py             capture / restore the torch, numpy and Python RNG states
    checkpoint.py      atomic training checkpoints, keep-last-K, compatibility check
    activation.py      per-block activation checkpointing
    parallel.py        torch.distributed data parallelism (DDP, FSDP2) as a kind
    loop.py            Trainer: the step, gradient accumulation, resume
    plot.py            loss / lr / grad-norm / throughput curves to PNG
    vlm_mix.py         the report's multimodal mixes: example kinds (60/10/28.5/1.5) and resolution modes
    vlm_tasks.py       image questions with exact answers: name the emoji, read the word (train / held-out splits)
    vlm.py             a vision tower trained against a frozen decoder (stage 3); answers through the session path
    vlm_joint.py       the joint stage on a compact decoder: text perplexity before and after (stage 2)
"""
