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
    init.py            weight initialisation for training from scratch (scaled-normal, keep, auto)
    optimizer.py       AdamW with decay / no-decay parameter groups, gradient clipping
    schedule.py        learning-rate schedules (warmup + cosine, warmup-stable-decay, constant)
    precision.py       the bfloat16 autocast every training step runs under (warns once where the CPU lacks
                       native bfloat16)
    flops.py           FLOPs per token, MFU, the machine's measured peak FLOP/s
    metrics.py         the metrics JSONL (append + flush, truncated on resume)
    rng.py             capture / restore the torch, numpy and Python RNG states
    checkpoint.py      atomic training checkpoints, keep-last-K, compatibility check
    activation.py      per-block activation checkpointing
    parallel.py        torch.distributed data parallelism (DDP, FSDP2) as a kind
    loop.py            Trainer: the step, gradient accumulation, resume
    plot.py            loss / lr / grad-norm / throughput curves to PNG
    vision/            the vision stack's trainers: CLIP with FLIP masking, the vision-language adapter, the joint stage
"""
