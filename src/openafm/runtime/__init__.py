"""The runtime: text generation over a loaded model (KV caches, sampling, stop strings, constrained decoding).

    language_model.py  LanguageModel: a loaded model and its tokenizer, text in, text out (`openafm.load` returns one)
    engine.py          THE decode loop: continuous batching, chunked prefill, prefix cache, grammar masks and forced
                       tokens, cancellation, proposers' guesses verified in the step; `start`+`submit` or `run`
    request.py         RowRequest, RowEvent and Completion: what a caller submits, hears back, and gets in the end
    row_state.py       one request's state inside the engine and how it picks each token (Row.choose)
    generate.py        generate_tokens: token prompts in, Generations out (a private engine in the calling thread)
    fused_step.py      the decode step as one C++ call over the model's own modules and KV cache (StepKind)
    cancel.py          CancelToken: stops a generation from another thread before its next forward pass
    kv_cache.py        a KV cache that knows each layer's kind (full, sliding ring, shared); native or int8 slots
    sampling.py        token sampling: greedy, or seeded temperature with optional top-k / top-p
    stops.py           stop strings over streamed text, holding back text that might start one
    constrained.py     constrained decoding: an llguidance grammar masks the logits and fast-forwards forced tokens
    conversation.py    an append-only conversation whose KV cache persists across turns
    steering.py        reorder the tokens a grammar allows (repetition penalty, closing bias) without widening it
    draft.py           DraftModel: a small decoder over the target's embedding with a frequent-token head
    threads.py         CPU threads: `--threads`, idle OpenMP workers sleeping (OMP_WAIT_POLICY), the timing line
    row_cache.py       a KV cache whose rows join and leave at different times (right-aligned, positions per row)
    prefix_cache.py    recent prompts' K/V, so a prompt sharing a prefix prefills only the rest
    proposers.py       guesses of a row's next tokens (n-gram prompt lookup, a draft model) that an engine step verifies
"""
