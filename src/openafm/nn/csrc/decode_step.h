// One decode step of a dense openafm decoder (any plan of global / sliding / NoPE layers, KV sharing,
// full or ring caches, float32 or int8 K/V) for B rows of one new token each, run as one C++ call.
#pragma once
#include <torch/extension.h>

#include <memory>
#include <mutex>
#include <optional>

#include "kernels.h"

namespace openafm {

struct Linear {
    Weight w;                                            // PARTS: only out and in are set
    std::vector<Linear> parts;                           // PARTS: the weights whose outputs are concatenated
    torch::Tensor keep_data, keep_scale, keep_zero;     // keep the tensors the pointers point into
    torch::Tensor lora_a, lora_b;                        // float32 [r, in], [out, r]; undefined: none
    float lora_scale = 0.f;
};

struct Layer {
    torch::Tensor attn_norm, ffn_norm;                   // float32 [D]
    bool owns_kv = true, rope = true;
    int64_t kv_source = 0, window = 0;                  // window 0: global
    Linear attn_in, attn_out, gate_up, down;            // attn_in: qkv (owner) or q (reader)
    torch::Tensor attn_bias;                             // [attn_in out] added after attn_in (Qwen2); or undefined
    torch::Tensor q_norm, k_norm;                        // [Dh] RMSNorm over each head's q / k (Qwen3); or undefined
};

struct LayerCache {                                      // the storage of one owner layer
    torch::Tensor k, v, k_scale, v_scale, pos;           // [B, Hkv, S, Dh] (float or int8), [B, Hkv, S, 1], [B, S]
    int64_t ring = 0;                                    // ring window (0: full buffer)
};

// Where the M tokens of one pass sit: token m is row row[m]'s token at step t0 + off[m] (it sees that row's cache
// and the row's tokens at earlier offsets); `heads` lists the tokens whose logits return, ascending (empty: all).
struct Pass {
    std::vector<int64_t> row, off, heads;
};

class DecodeStep {
public:
    DecodeStep(int64_t dim, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, double eps, int64_t threads);
    void add_layer(torch::Tensor attn_norm, torch::Tensor ffn_norm, bool owns_kv, int64_t kv_source, bool rope,
                   int64_t window, const py::tuple& attn_in, const py::tuple& attn_out, const py::tuple& gate_up,
                   const py::tuple& down, const py::object& attn_bias, const py::object& q_norm,
                   const py::object& k_norm);
    void set_head(torch::Tensor norm, const py::tuple& head, torch::Tensor cos, torch::Tensor sin_signed);
    // Per owner layer (None for readers): (k, v, k_scale or None, v_scale or None, pos [B, S], ring).
    void bind_cache(const py::list& layers);
    // x [B, D] embedded tokens, positions [B], step = time step being written -> logits [B, V].
    torch::Tensor step(torch::Tensor x, torch::Tensor positions, int64_t step);
    // x [M, D] M tokens of ONE sequence (the bound cache has one row), positions [M], steps step..step+M-1
    // -> logits [M, V]; each token attends to the cache and the tokens before it (speculative scoring).
    torch::Tensor verify(torch::Tensor x, torch::Tensor positions, int64_t step);
    // x [B*T, D]: T tokens of each of B rows (row-major), positions [B*T], steps step..step+T-1 -> logits [B*T, V];
    // each row's tokens attend to its cache and to its tokens before them (a batched speculative step).
    torch::Tensor rows(torch::Tensor x, torch::Tensor positions, int64_t step, int64_t per_row);
    // x [T, D] T prompt tokens of ONE sequence at steps step..step+T-1 -> logits [1, V] of the last one only.
    torch::Tensor prefill(torch::Tensor x, torch::Tensor positions, int64_t step);
    // x [M, D]: M tokens of any rows, token m at row rows[m], step step + offsets[m] (a row's offsets 0, 1, ...;
    // rows may feed different numbers of tokens, and none is padding) -> logits [K, V] of the tokens `heads`
    // (ascending indices into the M): the engine's speculative step, whose rows guess unequal numbers of tokens.
    torch::Tensor ragged(torch::Tensor x, torch::Tensor positions, torch::Tensor rows, torch::Tensor offsets,
                         int64_t step, torch::Tensor heads);
    int64_t threads() const { return pool_.size(); }

private:
    void linear(const Linear& l, const float* x, int64_t M, float* y);
    static Pass grid(int64_t rows, int64_t per_row);   // rows x per_row tokens, row-major, every logit
    torch::Tensor run(torch::Tensor x, torch::Tensor positions, int64_t step, const Pass& pass);
    void attend(const Layer& layer, int64_t index, const float* q, const int64_t* qpos, int64_t M, int64_t t0,
                const Pass& pass, float* out);
    void store_kv(int64_t index, const float* qkv, int64_t M, int64_t t0, const Pass& pass);
    void rms_norm(const float* x, const torch::Tensor& w, float* y, int64_t M) const;
    void head_norm(float* x, const torch::Tensor& w, int64_t first, int64_t heads, int64_t M, int64_t stride) const;
    void rope(float* x, int64_t heads, const int64_t* pos, int64_t M, int64_t stride) const;

    int64_t dim_, h_, hkv_, dh_;
    int64_t widest_ = 0;                                 // the widest attn_in / gate_up output (scratch size)
    float eps_;
    std::vector<Layer> layers_;
    std::vector<LayerCache> caches_;
    torch::Tensor final_norm_, cos_, sin_;
    Linear head_;
    Pool pool_;
    std::mutex busy_;                                   // one step at a time (scratch buffers, pool)
    QActs qa_;
    std::vector<float> xs_, part_out_;
};

Linear make_linear(const py::tuple& spec);

}  // namespace openafm
