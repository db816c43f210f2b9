// Python bindings of the CPU kernels: matvec (a weight in any stored format times a few rows),
// dequantize (block formats -> float32, for prefill) and the fused DecodeStep.
#include <torch/extension.h>

#include <memory>
#include <mutex>

#include "decode_step.h"
#include "kernels.h"

namespace openafm {

static const char* isa_name(Isa isa) { return isa == Isa::AVX512 ? "avx512" : "avx2"; }

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
    TORCH_CHECK_VALUE(l.parts.empty(), "matvec takes one weight; run a PARTS weight's parts one by one");
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

// Block-format rows uint8 [out, row_bytes] -> float32 [out, in], bit-identical to gguf-py's dequantize.
torch::Tensor dequantize(torch::Tensor data, int64_t format, int64_t in) {
    const Format f = static_cast<Format>(format);
    const BlockShape s = block_shape(f);
    const int64_t rb = row_bytes_for(f, in);
    data = data.contiguous();
    TORCH_CHECK_VALUE(rb >= 0, in, " values is not a whole number of ", s.values, "-value blocks");
    TORCH_CHECK_VALUE(data.dtype() == torch::kUInt8 && data.dim() == 2 && data.size(1) == rb,
                      "block rows of ", in, " values take ", rb, " bytes");
    const int64_t out = data.size(0);
    auto w = torch::empty({out, in}, torch::kFloat32);
    const uint8_t* src = data.data_ptr<uint8_t>();
    float* dst = w.data_ptr<float>();
    at::parallel_for(0, out, 64, [&](int64_t o0, int64_t o1) {
        dequantize_rows(f, src + o0 * rb, dst + o0 * in, o1 - o0, in);
    });
    return w;
}

}  // namespace openafm

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    using openafm::DecodeStep;
    m.def("matvec", &openafm::matvec, "a weight in its stored format times a few rows");
    m.def("dequantize", &openafm::dequantize, "block-format rows -> float32");
    m.def("kernel_isa", [] { return openafm::isa_name(openafm::kernel_isa()); },
          "the instruction set of the float32-activation Q8_0 / Q5 kernels");
    m.def("best_isa", [] { return openafm::isa_name(openafm::best_isa()); },
          "the widest instruction set this CPU gives those kernels");
    m.def("set_kernel_isa", [](const std::string& name) {
        if (name != "avx2" && name != "avx512")
            throw std::invalid_argument("kernel isa " + name + " is not one of avx2, avx512");
        openafm::set_kernel_isa(name == "avx512" ? openafm::Isa::AVX512 : openafm::Isa::AVX2);
    }, "choose that kernel's instruction set (avx512 raises on a CPU without it)");
    py::class_<DecodeStep>(m, "DecodeStep")
        .def(py::init<int64_t, int64_t, int64_t, int64_t, double, int64_t>())
        .def("add_layer", &DecodeStep::add_layer)
        .def("set_head", &DecodeStep::set_head)
        .def("bind_cache", &DecodeStep::bind_cache)
        .def("step", &DecodeStep::step, py::call_guard<py::gil_scoped_release>())
        .def("verify", &DecodeStep::verify, py::call_guard<py::gil_scoped_release>())
        .def("rows", &DecodeStep::rows, py::call_guard<py::gil_scoped_release>())
        .def("prefill", &DecodeStep::prefill, py::call_guard<py::gil_scoped_release>())
        .def("ragged", &DecodeStep::ragged, py::call_guard<py::gil_scoped_release>())
        .def_property_readonly("threads", &DecodeStep::threads);
}
