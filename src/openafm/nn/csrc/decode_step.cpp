// The fused decode step (decode_step.h): the same computation as models/decoder.py's Block for one new
// token per row, with no per-operator dispatch. Matrix products run on the kernels of matvec.cpp.
#include "decode_step.h"
#include "simd.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace openafm {

static torch::Tensor optional_tensor(const py::handle& h) {
    return h.is_none() ? torch::Tensor() : h.cast<torch::Tensor>();
}

// The weight of a spec (its data field `data`): F32, PACKED, a block format, or PARTS (a tuple of specs).
static void bind_weight(Linear& l, const py::tuple& spec) {
    if (l.w.format == Format::PARTS) {
        int64_t rows = 0;
        for (const auto& part : spec[4].cast<py::tuple>()) {
            Linear p = make_linear(part.cast<py::tuple>());
            TORCH_CHECK_VALUE(p.w.in == l.w.in && p.parts.empty() && !p.lora_a.defined(),
                              "a part takes the layer's ", l.w.in, " inputs, has no parts and no LoRA");
            rows += p.w.out;
            l.parts.push_back(std::move(p));
        }
        TORCH_CHECK_VALUE(rows == l.w.out, "parts have ", rows, " rows, expected ", l.w.out);
        return;
    }
    l.keep_data = spec[4].cast<torch::Tensor>().contiguous();
    l.keep_scale = optional_tensor(spec[5]);
    l.keep_zero = optional_tensor(spec[6]);
    TORCH_CHECK(l.keep_data.size(0) == l.w.out, "weight has ", l.keep_data.size(0), " rows, expected ", l.w.out);
    if (l.w.format == Format::F32) {
        TORCH_CHECK(l.keep_data.dtype() == torch::kFloat32 && l.keep_data.size(1) == l.w.in,
                    "float32 weight must be [out, in]");
        l.w.f32 = l.keep_data.data_ptr<float>();
        return;
    }
    TORCH_CHECK(l.keep_data.dtype() == torch::kUInt8, "quantized weight must be uint8 [out, bytes]");
    l.w.data = l.keep_data.data_ptr<uint8_t>();
    l.w.row_bytes = l.keep_data.size(1);
    if (l.w.format == Format::PACKED) {
        TORCH_CHECK(l.keep_scale.defined() && l.keep_zero.defined(), "packed weights need scale and zero");
        l.w.scale = l.keep_scale.data_ptr<float>();
        l.w.zero = l.keep_zero.data_ptr<float>();
        return;
    }
    const int64_t rb = row_bytes_for(l.w.format, l.w.in);
    TORCH_CHECK_VALUE(rb >= 0, l.w.in, " values is not a whole number of ", block_shape(l.w.format).values,
                      "-value blocks");
    TORCH_CHECK_VALUE(l.w.row_bytes == rb, "block rows of ", l.w.in, " values take ", rb, " bytes, got ",
                      l.w.row_bytes);
}

Linear make_linear(const py::tuple& spec) {
    TORCH_CHECK(spec.size() == 11, "a linear spec has 11 fields, got ", spec.size());
    Linear l;
    l.w.format = static_cast<Format>(spec[0].cast<int>());
    l.w.bits = spec[1].cast<int>();
    l.w.out = spec[2].cast<int64_t>();
    l.w.in = spec[3].cast<int64_t>();
    l.lora_a = optional_tensor(spec[7]);
    l.lora_b = optional_tensor(spec[8]);
    l.lora_scale = spec[9].cast<float>();
    l.w.int8_acts = spec[10].cast<bool>();
    bind_weight(l, spec);
    if (l.lora_a.defined()) {
        l.lora_a = l.lora_a.contiguous();
        l.lora_b = l.lora_b.contiguous();
        TORCH_CHECK(l.lora_a.dtype() == torch::kFloat32 && l.lora_a.size(1) == l.w.in && l.lora_b.size(0) == l.w.out
                    && l.lora_b.size(1) == l.lora_a.size(0), "LoRA factors must be float32 A [r, in], B [out, r]");
    }
    return l;
}

DecodeStep::DecodeStep(int64_t dim, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, double eps,
                       int64_t threads)
    : dim_(dim), h_(n_heads), hkv_(n_kv_heads), dh_(head_dim), eps_((float)eps), pool_((int)threads) {}

void DecodeStep::add_layer(torch::Tensor attn_norm, torch::Tensor ffn_norm, bool owns_kv, int64_t kv_source,
                           bool rope, int64_t window, const py::tuple& attn_in, const py::tuple& attn_out,
                           const py::tuple& gate_up, const py::tuple& down, const py::object& attn_bias,
                           const py::object& q_norm, const py::object& k_norm) {
    Layer l;
    l.attn_bias = optional_tensor(attn_bias);
    l.q_norm = optional_tensor(q_norm);
    l.k_norm = optional_tensor(k_norm);
    l.attn_norm = attn_norm.contiguous();
    l.ffn_norm = ffn_norm.contiguous();
    l.owns_kv = owns_kv; l.kv_source = kv_source; l.rope = rope; l.window = window;
    l.attn_in = make_linear(attn_in); l.attn_out = make_linear(attn_out);
    l.gate_up = make_linear(gate_up); l.down = make_linear(down);
    TORCH_CHECK(!l.attn_bias.defined() || l.attn_bias.numel() == l.attn_in.w.out, "attn_bias must have attn_in's rows");
    TORCH_CHECK(!l.q_norm.defined() || l.q_norm.numel() == dh_, "q_norm must have head_dim values");
    TORCH_CHECK(!l.k_norm.defined() || l.k_norm.numel() == dh_, "k_norm must have head_dim values");
    widest_ = std::max({widest_, l.gate_up.w.out, l.attn_in.w.out});
    layers_.push_back(std::move(l));
}

void DecodeStep::set_head(torch::Tensor norm, const py::tuple& head, torch::Tensor cos, torch::Tensor sin_signed) {
    final_norm_ = norm.contiguous();
    head_ = make_linear(head);
    cos_ = cos.contiguous();
    sin_ = sin_signed.contiguous();
}

void DecodeStep::bind_cache(const py::list& layers) {
    TORCH_CHECK((int64_t)layers.size() == (int64_t)layers_.size(), "one cache entry per layer");
    std::lock_guard<std::mutex> lock(busy_);
    caches_.assign(layers.size(), LayerCache{});
    for (size_t i = 0; i < layers.size(); ++i) {
        if (layers[i].is_none()) continue;
        auto t = layers[i].cast<py::tuple>();
        LayerCache& c = caches_[i];
        c.k = t[0].cast<torch::Tensor>(); c.v = t[1].cast<torch::Tensor>();
        c.k_scale = optional_tensor(t[2]); c.v_scale = optional_tensor(t[3]);
        c.pos = t[4].cast<torch::Tensor>(); c.ring = t[5].cast<int64_t>();
        TORCH_CHECK(c.k.is_contiguous() && c.v.is_contiguous() && c.pos.is_contiguous(), "cache must be contiguous");
    }
}

void DecodeStep::linear(const Linear& l, const float* x, int64_t M, float* y) {
    const Weight& w = l.w;
    if (l.parts.empty()) {
        prepare(w, x, M, qa_, xs_);
        pool_.parallel_range(w.out, 8, [&](int64_t o0, int64_t o1) { matvec_rows(w, x, qa_, xs_, y, M, o0, o1); });
    }
    int64_t offset = 0;
    for (const Linear& part : l.parts) {                 // each part's [M, part out] into its columns of y
        part_out_.resize(M * part.w.out);
        linear(part, x, M, part_out_.data());
        for (int64_t m = 0; m < M; ++m)
            std::copy_n(part_out_.data() + m * part.w.out, part.w.out, y + m * w.out + offset);
        offset += part.w.out;
    }
    if (!l.lora_a.defined()) return;
    const int64_t r = l.lora_a.size(0);
    const float *a = l.lora_a.data_ptr<float>(), *b = l.lora_b.data_ptr<float>();
    std::vector<float> ax(r);
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t j = 0; j < r; ++j) {
            float s = 0.f;
            for (int64_t i = 0; i < w.in; ++i) s += a[j * w.in + i] * x[m * w.in + i];
            ax[j] = s;
        }
        for (int64_t o = 0; o < w.out; ++o) {
            float s = 0.f;
            for (int64_t j = 0; j < r; ++j) s += b[o * r + j] * ax[j];
            y[m * w.out + o] += l.lora_scale * s;
        }
    }
}

void DecodeStep::rms_norm(const float* x, const torch::Tensor& w, float* y, int64_t M) const {
    const float* wp = w.data_ptr<float>();
    for (int64_t m = 0; m < M; ++m) {
        double ss = 0.0;
        for (int64_t i = 0; i < dim_; ++i) ss += (double)x[m * dim_ + i] * x[m * dim_ + i];
        const float inv = 1.f / std::sqrt((float)(ss / dim_) + eps_);
        for (int64_t i = 0; i < dim_; ++i) y[m * dim_ + i] = x[m * dim_ + i] * inv * wp[i];
    }
}

// RMSNorm over each of `heads` heads (from head `first`) of each row (rows `stride` floats apart), in place.
void DecodeStep::head_norm(float* x, const torch::Tensor& w, int64_t first, int64_t heads, int64_t M,
                           int64_t stride) const {
    const float* wp = w.data_ptr<float>();
    for (int64_t m = 0; m < M; ++m)
        for (int64_t hh = first; hh < first + heads; ++hh) {
            float* v = x + m * stride + hh * dh_;
            double ss = 0.0;
            for (int64_t i = 0; i < dh_; ++i) ss += (double)v[i] * v[i];
            const float inv = 1.f / std::sqrt((float)(ss / dh_) + eps_);
            for (int64_t i = 0; i < dh_; ++i) v[i] = v[i] * inv * wp[i];
        }
}

// Rotate-half RoPE on `heads` heads of each row (rows `stride` floats apart): x*cos + swap_halves(x)*sin_signed.
void DecodeStep::rope(float* x, int64_t heads, const int64_t* pos, int64_t M, int64_t stride) const {
    const int64_t half = dh_ / 2;
    const float *cs = cos_.data_ptr<float>(), *sn = sin_.data_ptr<float>();
    std::vector<float> tmp(dh_);
    for (int64_t m = 0; m < M; ++m) {
        const int64_t p = std::max<int64_t>(pos[m], 0);
        const float *c = cs + p * dh_, *s = sn + p * dh_;
        for (int64_t hh = 0; hh < heads; ++hh) {
            float* v = x + m * stride + hh * dh_;
            for (int64_t i = 0; i < dh_; ++i) tmp[i] = v[i] * c[i] + v[(i + half) % dh_] * s[i];
            std::copy(tmp.begin(), tmp.end(), v);
        }
    }
}

// Write the new token's K and V (rows of qkv after the H query heads) into the layer's slot.
void DecodeStep::store_kv(int64_t index, const float* qkv, int64_t M, int64_t t0, const Pass& pass) {
    LayerCache& c = caches_[index];
    const int64_t stride = (h_ + 2 * hkv_) * dh_, S = c.k.size(2);
    const bool int8 = c.k_scale.defined();
    for (int which = 0; which < 2; ++which) {
        const torch::Tensor& dst = which == 0 ? c.k : c.v;
        for (int64_t m = 0; m < M; ++m) {
            for (int64_t hh = 0; hh < hkv_; ++hh) {
                const float* src = qkv + m * stride + (h_ + which * hkv_ + hh) * dh_;
                const int64_t step = t0 + pass.off[m], slot = c.ring ? step % c.ring : step;
                const int64_t row = pass.row[m];
                const int64_t at = ((row * hkv_ + hh) * S + slot) * dh_;
                if (!int8) {
                    std::copy(src, src + dh_, dst.data_ptr<float>() + at);
                    continue;
                }
                float amax = 0.f;
                for (int64_t i = 0; i < dh_; ++i) amax = std::max(amax, std::fabs(src[i]));
                const float scale = amax / 127.f, safe = scale > 0.f ? scale : 1.f;
                int8_t* codes = dst.data_ptr<int8_t>() + at;
                for (int64_t i = 0; i < dh_; ++i)
                    codes[i] = (int8_t)std::max(-127.f, std::min(127.f, std::nearbyint(src[i] / safe)));
                (which == 0 ? c.k_scale : c.v_scale).data_ptr<float>()[(row * hkv_ + hh) * S + slot] = scale;
            }
        }
    }
}

// One query per row and head over the visible slots of the layer's K/V source.
void DecodeStep::attend(const Layer& layer, int64_t index, const float* q, const int64_t* qpos, int64_t M,
                        int64_t t0, const Pass& pass, float* out) {
    const int64_t src = layer.owns_kv ? index : layer.kv_source;
    const LayerCache& c = caches_[src];
    int64_t last = t0 + 1;                                 // the latest step any token of the pass sees
    for (int64_t m = 0; m < M; ++m) last = std::max(last, t0 + pass.off[m] + 1);
    const int64_t S = c.k.size(2);
    const int64_t most = c.ring ? std::min(last, c.ring) : last;
    const int64_t groups = h_ / hkv_, qstride = layer.owns_kv ? (h_ + 2 * hkv_) * dh_ : h_ * dh_;
    const bool int8 = c.k_scale.defined();
    const float scale = 1.f / std::sqrt((float)dh_);
    const int64_t* kpos = c.pos.data_ptr<int64_t>();
    const int64_t pstride = c.pos.size(1);
    // Raw pointers once (data_ptr checks cost ~8% of a step when taken per slot).
    const float* kf = int8 ? nullptr : c.k.data_ptr<float>();
    const float* vf = int8 ? nullptr : c.v.data_ptr<float>();
    const int8_t* k8 = int8 ? c.k.data_ptr<int8_t>() : nullptr;
    const int8_t* v8 = int8 ? c.v.data_ptr<int8_t>() : nullptr;
    const float* ksc = int8 ? c.k_scale.data_ptr<float>() : nullptr;
    const float* vsc = int8 ? c.v_scale.data_ptr<float>() : nullptr;
    pool_.parallel_range(M * h_, 1, [&](int64_t j0, int64_t j1) {
        std::vector<float> p(most);
        for (int64_t j = j0; j < j1; ++j) {
            const int64_t m = j / h_, hh = j % h_, g = hh / groups, row = pass.row[m];
            const int64_t upto = t0 + pass.off[m] + 1;         // a row's token sees the steps up to its own
            const int64_t visible = c.ring ? std::min(upto, c.ring) : upto;
            const float* qv = q + m * qstride + hh * dh_;
            const int64_t base = (row * hkv_ + g) * S;
            const int64_t qp = qpos[m];
            const auto seen = [&](int64_t s) {                  // slot s holds a token this one attends to
                const int64_t kp = kpos[row * pstride + s];
                return qp < 0 || (kp >= 0 && kp <= qp && (layer.window == 0 || qp - kp < layer.window));
            };
            float mx = -std::numeric_limits<float>::infinity();
            for (int64_t s = 0; s < visible; s += 4) {         // scores, 4 slots a pass (int8 K: one at a time)
                float d[4];
                if (!int8) {
                    const float* k[4];
                    for (int i = 0; i < 4; ++i) k[i] = kf + (base + std::min(s + i, visible - 1)) * dh_;
                    dot4(qv, k, dh_, d);
                }
                for (int64_t i = 0; i < 4 && s + i < visible; ++i) {
                    if (!seen(s + i)) { p[s + i] = -std::numeric_limits<float>::infinity(); continue; }
                    if (int8) d[i] = ksc[base + s + i] * dot_n_s8(qv, k8 + (base + s + i) * dh_, dh_);
                    p[s + i] = d[i] * scale;
                    mx = std::max(mx, p[s + i]);
                }
            }
            const float total = exp_shifted(p.data(), visible, mx);      // p[s] = e^(p[s] - mx), masked slots 0
            float* o = out + m * h_ * dh_ + hh * dh_;
            if (!int8) {
                weighted_rows(p.data(), total, vf + base * dh_, visible, dh_, o);
                continue;
            }
            std::fill(o, o + dh_, 0.f);
            for (int64_t s = 0; s < visible; ++s)
                if (p[s] != 0.f) axpy_n_s8(p[s] / total * vsc[base + s], v8 + (base + s) * dh_, o, dh_);
        }
    });
}

Pass DecodeStep::grid(int64_t rows, int64_t per_row) {
    Pass p;
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t t = 0; t < per_row; ++t) { p.row.push_back(r); p.off.push_back(t); }
    return p;
}

torch::Tensor DecodeStep::step(torch::Tensor x_in, torch::Tensor positions, int64_t t0) {
    return run(x_in, positions, t0, grid(x_in.size(0), 1));
}

// M tokens of one sequence (a cache of one row) at steps t0..t0+M-1, each seeing the ones before it: the
// target's scoring pass of speculative decoding. Rings must not wrap within the pass (the caller checks).
torch::Tensor DecodeStep::verify(torch::Tensor x_in, torch::Tensor positions, int64_t t0) {
    return run(x_in, positions, t0, grid(1, x_in.size(0)));
}

// T tokens of each of B rows at steps t0..t0+T-1 (rows that feed fewer pad with position -1): the engine's
// speculative step over a batch. Rings must not wrap within the pass (the caller checks).
torch::Tensor DecodeStep::rows(torch::Tensor x_in, torch::Tensor positions, int64_t t0, int64_t T) {
    TORCH_CHECK(T >= 1 && x_in.size(0) % T == 0, "rows: x must hold B rows of T tokens each");
    return run(x_in, positions, t0, grid(x_in.size(0) / T, T));
}

// T prompt tokens of one sequence (a cache of one row) at steps t0..t0+T-1: verify's pass, with the head run on
// the last token only (prefill needs no other logits) -> logits [1, V].
torch::Tensor DecodeStep::prefill(torch::Tensor x_in, torch::Tensor positions, int64_t t0) {
    Pass p = grid(1, x_in.size(0));
    p.heads = {x_in.size(0) - 1};
    return run(x_in, positions, t0, p);
}

// Tokens of any rows, each at its own offset: only the tokens fed are computed (rows(...) computes padding too).
// Rings must not wrap within the pass (the caller checks).
torch::Tensor DecodeStep::ragged(torch::Tensor x_in, torch::Tensor positions, torch::Tensor rows,
                                 torch::Tensor offsets, int64_t t0, torch::Tensor heads) {
    const int64_t M = x_in.size(0);
    auto r = rows.to(torch::kInt64).contiguous(), o = offsets.to(torch::kInt64).contiguous();
    auto h = heads.to(torch::kInt64).contiguous();
    TORCH_CHECK(r.numel() == M && o.numel() == M && positions.numel() == M, "ragged: one row, offset and position "
                "per token");
    Pass p;
    p.row.assign(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + M);
    p.off.assign(o.data_ptr<int64_t>(), o.data_ptr<int64_t>() + M);
    p.heads.assign(h.data_ptr<int64_t>(), h.data_ptr<int64_t>() + h.numel());
    TORCH_CHECK(!p.heads.empty(), "ragged: ask for at least one token's logits");
    for (size_t k = 0; k < p.heads.size(); ++k)
        TORCH_CHECK(p.heads[k] >= 0 && p.heads[k] < M && (k == 0 || p.heads[k] > p.heads[k - 1]),
                    "ragged: heads must be ascending token indices below ", M);
    for (int64_t m = 0; m < M; ++m) TORCH_CHECK(p.off[m] >= 0, "ragged: offsets must be >= 0");
    return run(x_in, positions, t0, p);
}

torch::Tensor DecodeStep::run(torch::Tensor x_in, torch::Tensor positions, int64_t t0, const Pass& pass) {
    TORCH_CHECK(x_in.dtype() == torch::kFloat32 && x_in.dim() == 2 && x_in.size(1) == dim_, "x must be float32 [B, D]");
    TORCH_CHECK(!caches_.empty(), "bind_cache before step");
    std::lock_guard<std::mutex> lock(busy_);
    auto x = x_in.contiguous().clone();
    int64_t M = x.size(0);
    const int64_t H = h_ * dh_, KV = hkv_ * dh_;
    auto pos = positions.to(torch::kInt64).contiguous();
    const int64_t* qpos = pos.data_ptr<int64_t>();
    float* xp = x.data_ptr<float>();
    std::vector<float> xn(M * dim_), a(M * widest_), o(M * H), y(M * dim_), hid(M * widest_ / 2 + 1);
    for (int64_t i = 0; i < (int64_t)layers_.size(); ++i) {
        const Layer& l = layers_[i];
        rms_norm(xp, l.attn_norm, xn.data(), M);
        linear(l.attn_in, xn.data(), M, a.data());
        const int64_t stride = l.owns_kv ? H + 2 * KV : H;
        if (l.attn_bias.defined()) {
            const float* b = l.attn_bias.data_ptr<float>();
            for (int64_t m = 0; m < M; ++m)
                for (int64_t j = 0; j < stride; ++j) a[m * stride + j] += b[j];
        }
        if (l.q_norm.defined()) head_norm(a.data(), l.q_norm, 0, h_, M, stride);
        if (l.k_norm.defined()) head_norm(a.data(), l.k_norm, h_, hkv_, M, stride);
        if (l.rope) rope(a.data(), l.owns_kv ? h_ + hkv_ : h_, qpos, M, stride);
        if (l.owns_kv) {
            store_kv(i, a.data(), M, t0, pass);
        }
        attend(l, i, a.data(), qpos, M, t0, pass, o.data());
        linear(l.attn_out, o.data(), M, y.data());
        for (int64_t j = 0; j < M * dim_; ++j) xp[j] += y[j];
        rms_norm(xp, l.ffn_norm, xn.data(), M);
        linear(l.gate_up, xn.data(), M, a.data());
        const int64_t hidden = l.gate_up.w.out / 2;
        for (int64_t m = 0; m < M; ++m)
            for (int64_t j = 0; j < hidden; ++j) {
                const float g = a[m * 2 * hidden + j], u = a[m * 2 * hidden + hidden + j];
                hid[m * hidden + j] = g / (1.f + std::exp(-g)) * u;
            }
        linear(l.down, hid.data(), M, y.data());
        for (int64_t j = 0; j < M * dim_; ++j) xp[j] += y[j];
    }
    if (!pass.heads.empty()) {                         // only these tokens' logits (ascending: copies never clobber)
        const int64_t K = (int64_t)pass.heads.size();
        for (int64_t k = 0; k < K; ++k)
            if (pass.heads[k] != k) std::copy_n(xp + pass.heads[k] * dim_, dim_, xp + k * dim_);
        M = K;
    }
    rms_norm(xp, final_norm_, xn.data(), M);
    auto logits = torch::empty({M, head_.w.out}, x.options());
    linear(head_, xn.data(), M, logits.data_ptr<float>());
    return logits;
}

}  // namespace openafm
