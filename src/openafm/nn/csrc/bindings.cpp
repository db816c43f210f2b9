// Python bindings of the CPU kernels: matvec (a weight in any stored format times a few rows),
// dequantize (block formats -> float32, for prefill) and the fused DecodeStep.
#include <torch/extension.h>

#include <immintrin.h>
#include <cstring>
#include <memory>
#include <mutex>

#include "decode_step.h"
#include "kernels.h"

namespace openafm {

static std::mutex shared_mutex;   // guards the shared pool: one matvec region at a time

static Pool& shared_pool(int threads) {
    static std::unique_ptr<Pool> pool;
    if (!pool || pool->size() != threads) pool = std::make_unique<Pool>(threads);
    return *pool;
}

// x float32 [M, in] (M small) times the weight described by `spec` (see make_linear) -> float32 [M, out].
torch::Tensor matvec(torch::Tensor x, const py::tuple& spec, int64_t threads) {
    Linear l = make_linear(spec);
    TORCH_CHECK(x.dtype() == torch::kFloat32 && x.dim() == 2 && x.size(1) == l.w.in,
                "x must be float32 [M, ", l.w.in, "]");
    TORCH_CHECK(!l.lora_a.defined(), "matvec takes a plain weight (LoRA runs beside it)");
    x = x.contiguous();
    const int64_t M = x.size(0);
    auto y = torch::empty({M, l.w.out}, x.options());
    QActs qa;
    std::vector<float> xs;
    prepare(l.w, x.data_ptr<float>(), M, qa, xs);
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    std::lock_guard<std::mutex> lock(shared_mutex);
    shared_pool((int)threads).parallel_range(l.w.out, 8, [&](int64_t o0, int64_t o1) {
        matvec_rows(l.w, xp, qa, xs, yp, M, o0, o1);
    });
    return y;
}

// Block-format rows uint8 [out, row_bytes] -> float32 [out, in], the same float operations as ggml
// (d * q, then + m for Q4_1).
torch::Tensor dequantize(torch::Tensor data, int64_t format, int64_t in) {
    const Format f = static_cast<Format>(format);
    const int bb = block_bytes(f);
    data = data.contiguous();
    TORCH_CHECK(data.dtype() == torch::kUInt8 && data.dim() == 2 && data.size(1) == in / G * bb && in % G == 0,
                "block rows of ", in, " values take ", in / G * bb, " bytes");
    const int64_t out = data.size(0), nb = in / G;
    auto w = torch::empty({out, in}, torch::kFloat32);
    const uint8_t* src = data.data_ptr<uint8_t>();
    float* dst = w.data_ptr<float>();
    at::parallel_for(0, out, 64, [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o)
            for (int64_t b = 0; b < nb; ++b) {
                const uint8_t* blk = src + (o * nb + b) * bb;
                float* y = dst + o * in + b * G;
                uint16_t h; std::memcpy(&h, blk, 2);
                const float d = _cvtsh_ss(h);
                if (f == Format::Q8_0) {
                    for (int i = 0; i < G; ++i) y[i] = d * (float)(int8_t)blk[2 + i];
                } else if (f == Format::Q4_0) {
                    for (int i = 0; i < G / 2; ++i) {
                        y[i] = d * (float)((blk[2 + i] & 15) - 8);
                        y[i + 16] = d * (float)((blk[2 + i] >> 4) - 8);
                    }
                } else {
                    std::memcpy(&h, blk + 2, 2);
                    const float m = _cvtsh_ss(h);
                    for (int i = 0; i < G / 2; ++i) {
                        const float lo = d * (float)(blk[4 + i] & 15), hi = d * (float)(blk[4 + i] >> 4);
                        y[i] = lo + m;
                        y[i + 16] = hi + m;
                    }
                }
            }
    });
    return w;
}

}  // namespace openafm

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    using openafm::DecodeStep;
    m.def("matvec", &openafm::matvec, "a weight in its stored format times a few rows");
    m.def("dequantize", &openafm::dequantize, "block-format rows -> float32");
    py::class_<DecodeStep>(m, "DecodeStep")
        .def(py::init<int64_t, int64_t, int64_t, int64_t, double, int64_t>())
        .def("add_layer", &DecodeStep::add_layer)
        .def("set_head", &DecodeStep::set_head)
        .def("bind_cache", &DecodeStep::bind_cache)
        .def("step", &DecodeStep::step, py::call_guard<py::gil_scoped_release>())
        .def("verify", &DecodeStep::verify, py::call_guard<py::gil_scoped_release>())
        .def_property_readonly("threads", &DecodeStep::threads);
}
