#include "cpu_kernels.hpp"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <vector>

#include "cpu_queue.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/device.hpp"

namespace outcore::cpu {

namespace {

constexpr const char* kComponent = "cpu";

/// Bytes a column-major `rows × cols` matrix with leading dimension `ld` spans.
std::uint64_t span_bytes(std::uint64_t rows, std::uint64_t cols, std::uint64_t ld, std::uint64_t elem_bytes) {
    if (rows == 0 || cols == 0) return 0;
    const std::uint64_t elems = checked_add(checked_mul(cols - 1, ld, "gemm"), rows, "gemm");
    return checked_mul(elems, elem_bytes, "gemm");
}

/// One operand, checked against BLAS's limits and its view, as BLAS will see it.
struct Operand {
    std::byte* data = nullptr;
    blasint ld = 1;
};

Operand check_operand(const char* name, const BufferView& view, std::uint64_t rows, std::uint64_t cols,
                      std::uint64_t ld, std::uint64_t elem_bytes) {
    constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<blasint>::max());
    if (ld < std::max<std::uint64_t>(rows, 1) && !(rows == 0 || cols == 0)) {
        throw UsageError(kComponent, fmt::format("gemm: ld{} = {} is less than its {} rows", name, ld, rows));
    }
    if (ld > kMax) {
        throw UsageError(kComponent, fmt::format("gemm: ld{} = {} exceeds BLAS's limit {}", name, ld, kMax));
    }
    const std::uint64_t need = span_bytes(rows, cols, ld, elem_bytes);
    if (view.bytes < need) {
        throw UsageError(kComponent,
                         fmt::format("gemm: {} needs {} bytes, its view has {}", name, need, view.bytes));
    }
    std::byte* data = address_of(view);
    if (need != 0 && reinterpret_cast<std::uintptr_t>(data) % elem_bytes != 0) {
        throw UsageError(kComponent,
                         fmt::format("gemm: {} is not aligned to its {}-byte elements", name, elem_bytes));
    }
    // BLAS rejects ld < 1 even for empty operands; no element is read in that case.
    return Operand{data, static_cast<blasint>(std::max<std::uint64_t>(ld, 1))};
}

/// Widens a column-major bf16 or f16 matrix to a packed f32 one (ld = rows).
std::vector<float> widen_16(DType type, const std::byte* src, std::uint64_t rows, std::uint64_t cols,
                            std::uint64_t ld) {
    const auto widen = type == DType::BF16 ? bf16_to_f32 : f16_to_f32;
    std::vector<float> out(static_cast<std::size_t>(rows * cols));
    for (std::uint64_t j = 0; j < cols; ++j) {
        for (std::uint64_t i = 0; i < rows; ++i) {
            std::uint16_t bits = 0;
            std::memcpy(&bits, src + (i + j * ld) * 2, sizeof bits);
            out[static_cast<std::size_t>(i + j * rows)] = widen(bits);
        }
    }
    return out;
}

}  // namespace

CpuKernels::CpuKernels(const Device& device) noexcept : device_(&device) {
#if defined(__SANITIZE_THREAD__)
    // OpenBLAS's thread pool hands work over with spin-waits in uninstrumented code,
    // which TSan cannot see, so every multi-threaded GEMM would be a false race
    // report. Under TSan only, GEMM runs on the queue's worker alone.
    static std::once_flag once;
    std::call_once(once, [] { openblas_set_num_threads(1); });
#endif
}

bool CpuKernels::do_supports_narrow_c(DType /*type*/) const noexcept {
    return true;  // bf16 and f16 (Kernels::supports_narrow_c asks for no other)
}

bool CpuKernels::do_supports_gemm(DType type, GemmCompute compute) const noexcept {
    switch (type) {
        case DType::F32: return true;  // FastTF32 runs exactly in f32: see the header
        case DType::F64:
        case DType::BF16:
        case DType::F16: return compute == GemmCompute::Exact;
        default: return false;
    }
}

bool CpuKernels::do_supports_convert(DType /*from*/, DType /*to*/) const noexcept {
    return true;  // every pair Kernels::supports_convert asks about
}

void CpuKernels::do_convert(Queue& queue, const ConvertArgs& args) {
    auto* cpu_queue = dynamic_cast<CpuQueue*>(&queue);
    if (cpu_queue == nullptr || &queue.device() != device_) {
        throw UsageError(kComponent, "convert: the queue belongs to another device");
    }
    if (args.in.block.device_id != device_->id() || args.out.block.device_id != device_->id()) {
        throw UsageError(kComponent, "convert: a view belongs to another device");
    }
    const std::byte* in = address_of(args.in);
    std::byte* out = address_of(args.out);
    const std::uint64_t count = args.count;
    if (args.from == DType::F32) {
        const auto narrow_of = args.to == DType::BF16 ? f32_to_bf16 : f32_to_f16;
        cpu_queue->enqueue([=] {
            for (std::uint64_t i = 0; i < count; ++i) {
                float v = 0;
                std::memcpy(&v, in + i * 4, sizeof v);
                const std::uint16_t bits = narrow_of(v);
                std::memcpy(out + i * 2, &bits, sizeof bits);
            }
        });
        return;
    }
    const auto widen = args.from == DType::BF16 ? bf16_to_f32 : f16_to_f32;
    cpu_queue->enqueue([=] {
        for (std::uint64_t i = 0; i < count; ++i) {
            std::uint16_t bits = 0;
            std::memcpy(&bits, in + i * 2, sizeof bits);
            const float v = widen(bits);
            std::memcpy(out + i * 4, &v, sizeof v);
        }
    });
}

void CpuKernels::do_gemm(Queue& queue, const GemmTileArgs& args) {
    auto* cpu_queue = dynamic_cast<CpuQueue*>(&queue);
    if (cpu_queue == nullptr || &queue.device() != device_) {
        throw UsageError(kComponent, "gemm: the queue belongs to another device");
    }
    if (!do_supports_gemm(args.type, args.compute)) {
        throw UsageError(kComponent,
                         fmt::format("gemm: type {} with this compute mode is not supported on the CPU",
                                     to_string(args.type)));
    }
    for (const BufferView* v : {&args.a, &args.b, &args.c}) {
        if (v->block.device_id != device_->id()) {
            throw UsageError(kComponent, "gemm: an operand belongs to another device");
        }
    }
    constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<blasint>::max());
    if (args.m > kMax || args.n > kMax || args.k > kMax) {
        throw UsageError(kComponent, fmt::format("gemm: m, n, k = {}, {}, {} exceed BLAS's limit {}", args.m,
                                                 args.n, args.k, kMax));
    }
    const std::uint64_t in_bytes = dtype_bytes(args.type);
    const std::uint64_t out_bytes =
        dtype_bytes(gemm_tile_c_dtype(args));  // f32 C for 16-bit floats unless narrow
    const std::uint64_t a_rows = args.trans_a ? args.k : args.m;
    const std::uint64_t a_cols = args.trans_a ? args.m : args.k;
    const std::uint64_t b_rows = args.trans_b ? args.n : args.k;
    const std::uint64_t b_cols = args.trans_b ? args.k : args.n;
    const Operand a = check_operand("a", args.a, a_rows, a_cols, args.lda, in_bytes);
    const Operand b = check_operand("b", args.b, b_rows, b_cols, args.ldb, in_bytes);
    const Operand c = check_operand("c", args.c, args.m, args.n, args.ldc, out_bytes);
    if (args.m == 0 || args.n == 0) return;  // C is empty: nothing to write

    const auto m = static_cast<blasint>(args.m);
    const auto n = static_cast<blasint>(args.n);
    const auto k = static_cast<blasint>(args.k);
    const CBLAS_TRANSPOSE ta = args.trans_a ? CblasTrans : CblasNoTrans;
    const CBLAS_TRANSPOSE tb = args.trans_b ? CblasTrans : CblasNoTrans;
    const double alpha = args.alpha;
    const double beta = args.beta;

    switch (args.type) {
        case DType::F32:
            cpu_queue->enqueue([=] {
                cblas_sgemm(CblasColMajor, ta, tb, m, n, k, static_cast<float>(alpha),
                            reinterpret_cast<const float*>(a.data), a.ld,
                            reinterpret_cast<const float*>(b.data), b.ld, static_cast<float>(beta),
                            reinterpret_cast<float*>(c.data), c.ld);
            });
            break;
        case DType::F64:
            cpu_queue->enqueue([=] {
                cblas_dgemm(CblasColMajor, ta, tb, m, n, k, alpha, reinterpret_cast<const double*>(a.data),
                            a.ld, reinterpret_cast<const double*>(b.data), b.ld, beta,
                            reinterpret_cast<double*>(c.data), c.ld);
            });
            break;
        case DType::BF16:
        case DType::F16:
            // Widening happens on the worker: the inputs are only valid once earlier
            // work on the queue (their upload) has run.
            cpu_queue->enqueue([=, type = args.type, narrow = args.narrow_c] {
                const std::vector<float> wa =
                    widen_16(type, a.data, a_rows, a_cols, static_cast<std::uint64_t>(a.ld));
                const std::vector<float> wb =
                    widen_16(type, b.data, b_rows, b_cols, static_cast<std::uint64_t>(b.ld));
                const auto packed_lda = static_cast<blasint>(std::max<std::uint64_t>(a_rows, 1));
                const auto packed_ldb = static_cast<blasint>(std::max<std::uint64_t>(b_rows, 1));
                if (!narrow) {
                    cblas_sgemm(CblasColMajor, ta, tb, m, n, k, static_cast<float>(alpha), wa.data(),
                                packed_lda, wb.data(), packed_ldb, static_cast<float>(beta),
                                reinterpret_cast<float*>(c.data), c.ld);
                    return;
                }
                // A 16-bit C: summed in f32 (β·C widened first), rounded once when stored.
                const auto rows = static_cast<std::uint64_t>(m);
                const auto cols = static_cast<std::uint64_t>(n);
                const auto ldc = static_cast<std::uint64_t>(c.ld);
                std::vector<float> wc = beta != 0.0
                                            ? widen_16(type, c.data, rows, cols, ldc)
                                            : std::vector<float>(static_cast<std::size_t>(rows * cols));
                cblas_sgemm(CblasColMajor, ta, tb, m, n, k, static_cast<float>(alpha), wa.data(), packed_lda,
                            wb.data(), packed_ldb, static_cast<float>(beta), wc.data(),
                            static_cast<blasint>(std::max<std::uint64_t>(rows, 1)));
                const auto narrow_of = type == DType::BF16 ? f32_to_bf16 : f32_to_f16;
                for (std::uint64_t j = 0; j < cols; ++j) {
                    for (std::uint64_t i = 0; i < rows; ++i) {
                        const std::uint16_t bits = narrow_of(wc[static_cast<std::size_t>(i + j * rows)]);
                        std::memcpy(c.data + (i + j * ldc) * 2, &bits, sizeof bits);
                    }
                }
            });
            break;
        default: break;  // excluded by do_supports_gemm above
    }
}

}  // namespace outcore::cpu
