// openafm's CPU kernels: matrix-vector products over float32, packed 2/4/8-bit and GGUF block weights
// kept as stored (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, the K-quants Q4_K, Q5_K, Q6_K, and F16 / BF16 matrices),
// and the thread pool that runs them. AVX2 + FMA + F16C (the float32-activation Q8_0 / Q5 kernels also on AVX-512
// where the CPU has it).
//
// Every integer kernel first quantizes the activations to int8 per block of 32 (llama.cpp's scheme):
//   x[i] ~ d_b * q[i] for i in block b, d_b = max|x| / 127.
// (K-quant sub-blocks are 32 or 16 values wide, so they sit inside these blocks.)
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace openafm {

constexpr int G = 32;    // values per activation block (and per block of the 32-value formats)
constexpr int QK = 256;  // values per K-quant super-block

// Block formats use ggml's type codes, except F16 (ggml's 1 is PACKED here).
enum class Format : int {
    F32 = 0,       // float32 [out, in]
    PACKED = 1,    // pack.py codes [out, in * bits / 8], W = scale[o] * (code - zero[o])
    Q8_0 = 8,      // 34-byte blocks: f16 d | 32 x int8            W = d * q
    Q4_0 = 2,      // 18-byte blocks: f16 d | 16 bytes of nibbles  W = d * (q - 8)
    Q4_1 = 3,      // 20-byte blocks: f16 d | f16 m | nibbles       W = d * q + m
    Q5_0 = 6,      // 22-byte blocks: f16 d | u32 fifth bits (bit j -> value j) | nibbles   W = d * (q - 16)
    Q5_1 = 7,      // 24-byte blocks: f16 d | f16 m | u32 fifth bits | nibbles               W = d * q + m
    Q4_K = 12,     // 144-byte super-blocks of 256: f16 d | f16 dmin | 12 B of 6-bit scales / mins (8 each) |
                   //   128 B nibbles; sub-block j of 32: W = (d * sc[j]) * q - dmin * m[j]
    Q5_K = 13,     // 176 B: as Q4_K with 32 B of fifth bits (bit j of byte i -> value i of sub-block j)
                   //   before the nibbles
    Q6_K = 14,     // 210 B: 128 B low nibbles | 64 B two-bit highs | 16 x int8 scales | f16 d;
                   //   sub-block j of 16: W = (d * sc[j]) * (q - 32)
    BF16 = 30,     // bfloat16 [out, in] (2 bytes per value)
    F16 = 31,      // float16 [out, in]
    PARTS = 100,   // several weights over one input, outputs concatenated (decode_step.h's Linear::parts)
};

// A block format's unit: `values` weights stored in `bytes` bytes (1 and 2 for the 16-bit float formats).
struct BlockShape { int values, bytes; };
BlockShape block_shape(Format f);   // throws std::invalid_argument naming the code for a non-block format
int64_t row_bytes_for(Format f, int64_t in);   // bytes of a row of `in` values (-1: not whole blocks)

// Block-format rows [rows, row_bytes] -> float32 [rows, in], the float operations of gguf-py's dequantize.
void dequantize_rows(Format f, const uint8_t* src, float* dst, int64_t rows, int64_t in);

// One weight matrix as the kernels see it (pointers into tensors the caller keeps alive).
struct Weight {
    Format format = Format::F32;
    int bits = 0;                       // PACKED only
    int64_t out = 0, in = 0, row_bytes = 0;
    const float* f32 = nullptr;         // F32
    const uint8_t* data = nullptr;      // PACKED and block formats: [out, row_bytes]
    const float* scale = nullptr;       // PACKED: [out]
    const float* zero = nullptr;        // PACKED: [out]
    bool int8_acts = true;              // block formats: int8 activations (llama.cpp's scheme) or float32
};

// Activations quantized per block of 32: M rows of n values (padded to n_pad).
struct QActs {
    int64_t M = 0, n = 0, nb = 0, n_pad = 0;
    std::vector<int8_t> q;     // [M, n_pad]
    std::vector<float> d;      // [M, nb]   block scales
    std::vector<float> ds;     // [M, nb]   d_b * sum(q in block b)
    std::vector<float> xsum;   // [M]       sum over the row's blocks of ds (for a zero point)
    void quantize(const float* x, int64_t rows, int64_t cols);
};

// Block sums of float activations: xs[m * nb + b] = sum of x[m, 32b .. 32b + 31] (float32 block kernels).
void block_sums(const float* x, int64_t M, int64_t n, std::vector<float>& xs);

// What a weight's kernel reads besides x: the int8 form `qa`, or the block sums `xs`.
void prepare(const Weight& w, const float* x, int64_t M, QActs& qa, std::vector<float>& xs);

// y[m, o] for o in [o0, o1), m < M: from x float [M, in], or from its int8 form `qa` (PACKED, and block
// formats with int8_acts) or its block sums `xs` (block formats with float32 activations).
void matvec_rows(const Weight& w, const float* x, const QActs& qa, const std::vector<float>& xs, float* y,
                 int64_t M, int64_t o0, int64_t o1);

// The instruction set of the float32-activation Q8_0 / Q5_0 / Q5_1 kernels (every other kernel is AVX2): AVX512
// where the CPU has AVX-512 F, BW, DQ and VL (matvec512.cpp), else AVX2. Results differ between the two in the
// last bits (another summation order); within one, a row's result does not depend on its batch.
enum class Isa : int { AVX2 = 0, AVX512 = 1 };
Isa best_isa();
Isa kernel_isa();
void set_kernel_isa(Isa isa);     // throws std::invalid_argument for AVX512 on a CPU without it
// matvec512.cpp: the float32-activation kernel on AVX-512 for Q8_0, Q5_0 and Q5_1 (xs: block sums, read by the
// Q5 formats); false for any other format (nothing computed).
bool block_rows_f32_avx512(const Weight& w, const float* x, const float* xs, float* y, int64_t M, int64_t o0,
                           int64_t o1);

// The same, per family (matvec_rows dispatches to them). Each runs the rows in register tiles of up to four, or
// eight for the float32-activation Q8_0 / Q4_0 / Q4_1 kernel, whose per-row state is one accumulator (simd.h's
// in_tiles: a weight block is widened or unpacked once per tile), with per (o, m) the same operations
// in the same order whatever M is, so a row's result is bit-identical in a batch and alone. F16 / BF16 always
// take the activations in float32 (no int8 path).
void kquant_rows(const Weight& w, const float* x, const QActs& qa, const std::vector<float>& xs, float* y,
                 int64_t M, int64_t o0, int64_t o1);                                          // kquants.cpp
void q5_rows(const Weight& w, const float* x, const QActs& qa, const std::vector<float>& xs, float* y,
             int64_t M, int64_t o0, int64_t o1);                                              // q5_f16.cpp
void half_rows(const Weight& w, const float* x, float* y, int64_t M, int64_t o0, int64_t o1);  // q5_f16.cpp

// A fixed set of worker threads for fine-grained parallel work (a decode step runs ~200 regions).
// Work is claimed in chunks from a shared counter, so a region finishes as soon as its chunks are done:
// a worker the OS has descheduled (another process holds its core) is simply not waited for, and the
// region runs on the threads that are running. Idle workers spin briefly, then yield, then sleep: a
// quiet machine pays no wake-up latency between regions, and a busy one gets its core back (OpenMP's
// passive policy sleeps at once; its active policy never yields).
class Pool {
public:
    explicit Pool(int threads);
    ~Pool();
    int size() const { return n_; }
    // Run job(begin, end) over chunks covering [0, total) (chunk sizes multiples of `align`).
    void parallel_range(int64_t total, int64_t align, const std::function<void(int64_t, int64_t)>& job);
private:
    void worker();
    void work(uint64_t generation);
    int n_;
    std::vector<std::thread> threads_;
    const std::function<void(int64_t, int64_t)>* job_ = nullptr;
    std::atomic<int64_t> total_{0}, chunk_{1}, done_{0};
    std::atomic<uint64_t> claim_{0};          // generation << 32 | next unclaimed index
    std::atomic<uint64_t> generation_{0};
    std::atomic<bool> stop_{false};
    std::atomic<int> sleepers_{0};
    std::mutex mutex_;
    std::condition_variable wake_;
};

}  // namespace openafm
