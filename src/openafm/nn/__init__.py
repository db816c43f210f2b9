"""Building blocks of the decoder (layers, attention, the KV contract, packed low-bit layers); no knowledge of models.

    layer_spec.py      the layer vocabulary: AttentionKind, FFNKind, LayerSpec (what models/plan.py composes)
    attention.py       grouped-query attention of the three kinds, K/V from own projections or an earlier layer's
    kv.py              the contract between attention layers and what holds their K/V; FreshKV for cache-free passes
    mask.py            attention masks from absolute positions (causal, sliding window, per document)
    rope.py            rotary position embeddings in the rotate-half (Hugging Face Llama) layout
    norm.py            RMSNorm (fused)
    linear.py          Linear: nn.Linear with the fastest kernel for one-row (decode) inputs
    mlp.py             the gated feed-forward (SwiGLU, or GeGLU for Gemma), gate and up fused into one matmul
    moe.py             dropless top-k mixture-of-experts over SwiGLU experts (grouped matmul or a segment loop)
    lora.py            LoRA: a frozen linear layer plus a trainable low-rank update; apply, merge, state dicts
    pack.py            bit packing of 2/4/8-bit quantization codes along the input dimension
    packed_kernel.py   the CPU kernels in the csrc folder (AVX2): matvec over float32, packed and GGUF block weights, the
                       fused decode step; built once with torch's cpp_extension
    block_linear.py    BlockLinear / BlockEmbedding / BlockRows: layers that run from GGUF blocks as stored (Q8_0, Q4_0,
                       Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, F16, BF16; BlockRows: rows in several formats)
    packed_linear.py   PackedLinear / PackedEmbedding: layers that execute from packed low-bit weights
    packed_model.py    swap a model's linear layers and embedding for packed ones
"""
