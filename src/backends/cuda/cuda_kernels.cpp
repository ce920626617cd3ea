#include "cuda_kernels.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>

#include "cuda_blas.hpp"
#include "cuda_check.hpp"
#include "cuda_convert.hpp"
#include "cuda_device.hpp"
#include "cuda_filters.hpp"
#include "cuda_queue.hpp"
#include "outcore/core/error.hpp"

namespace outcore::cuda {

namespace {

constexpr auto kIntMax = static_cast<std::uint64_t>(std::numeric_limits<int>::max());

/// Checks what the GPU will read or write through `view`: this device's memory, inside
/// its block, reachable by kernels (not pageable), aligned to its elements.
void check_kernel_view(const CudaDevice& device, const char* kernel, const char* name, const BufferView& view,
                       std::uint64_t elem_bytes) {
    if (view.block.device_id != device.id()) {
        throw UsageError(kComponent, fmt::format("{}: {} belongs to another device", kernel, name));
    }
    if (view.offset > view.block.bytes || view.bytes > view.block.bytes - view.offset) {
        throw UsageError(kComponent, fmt::format("{}: {} lies outside its block", kernel, name));
    }
    if (view.block.kind == MemoryKind::HostCached) {
        throw UsageError(kComponent,
                         fmt::format("{}: {} is HostCached (pageable) memory, which kernels cannot reach; "
                                     "use Device or HostPinned memory",
                                     kernel, name));
    }
    if (reinterpret_cast<std::uintptr_t>(device_address(view)) % elem_bytes != 0) {
        throw UsageError(kComponent, fmt::format("{}: {} is not aligned to its {}-byte elements", kernel,
                                                 name, elem_bytes));
    }
}

PixelKind pixel_kind(DType t) noexcept {
    switch (t) {
        case DType::U8: return PixelKind::U8;
        case DType::U16: return PixelKind::U16;
        default: return PixelKind::F32;
    }
}

FilterKind filter_kind(FilterOp op) noexcept {
    switch (op) {
        case FilterOp::SeparableRow: return FilterKind::SeparableRow;
        case FilterOp::SeparableColumn: return FilterKind::SeparableColumn;
        case FilterOp::Conv2D: return FilterKind::Conv2D;
        case FilterOp::SobelMagnitude: return FilterKind::Sobel;
    }
    return FilterKind::Sobel;
}

}  // namespace

bool CudaKernels::do_supports_narrow_c(DType /*type*/) const noexcept {
    return true;  // bf16 and f16 C with CUBLAS_COMPUTE_32F (cublasGemmEx)
}

bool CudaKernels::do_supports_gemm(DType type, GemmCompute compute) const noexcept {
    switch (type) {
        case DType::F32: return true;
        case DType::F64:
        case DType::BF16:
        case DType::F16: return compute == GemmCompute::Exact;
        default: return false;
    }
}

CudaQueue& CudaKernels::own_queue(Queue& queue, const char* what) const {
    auto* cuda_queue = dynamic_cast<CudaQueue*>(&queue);
    if (cuda_queue == nullptr || &cuda_queue->cuda_device() != device_) {
        throw UsageError(kComponent, fmt::format("{}: the queue belongs to another device", what));
    }
    return *cuda_queue;
}

void CudaKernels::do_gemm(Queue& queue, const GemmTileArgs& args) {
    CudaQueue& q = own_queue(queue, "gemm");
    if (!do_supports_gemm(args.type, args.compute)) {
        throw UsageError(kComponent,
                         fmt::format("gemm: type {} with this compute mode is not supported on CUDA",
                                     to_string(args.type)));
    }
    for (std::uint64_t v : {args.m, args.n, args.k, args.lda, args.ldb, args.ldc}) {
        if (v > kIntMax) {
            throw UsageError(kComponent,
                             fmt::format("gemm: m, n, k = {}, {}, {} (ld {}, {}, {}) exceed cuBLAS's "
                                         "32-bit limit {}",
                                         args.m, args.n, args.k, args.lda, args.ldb, args.ldc, kIntMax));
        }
    }
    const std::uint64_t in_bytes = dtype_bytes(args.type);
    const std::uint64_t out_bytes =
        dtype_bytes(gemm_tile_c_dtype(args));  // f32 C for 16-bit floats unless narrow
    if (args.k > 0) {
        check_kernel_view(*device_, "gemm", "a", args.a, in_bytes);
        check_kernel_view(*device_, "gemm", "b", args.b, in_bytes);
    }
    check_kernel_view(*device_, "gemm", "c", args.c, out_bytes);
    if (args.m == 0 || args.n == 0) return;

    const cublasOperation_t ta = args.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = args.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int m = static_cast<int>(args.m);
    const int n = static_cast<int>(args.n);
    const int k = static_cast<int>(args.k);
    // With k == 0 A and B are never read, but cuBLAS still checks ld ≥ max(1, rows).
    const int lda = static_cast<int>(std::max<std::uint64_t>({args.lda, args.trans_a ? args.k : args.m, 1}));
    const int ldb = static_cast<int>(std::max<std::uint64_t>({args.ldb, args.trans_b ? args.n : args.k, 1}));
    const int ldc = static_cast<int>(args.ldc);
    void* c = device_address(args.c);
    const void* a = args.k > 0 ? device_address(args.a) : c;
    const void* b = args.k > 0 ? device_address(args.b) : c;

    cudaDataType_t in_type = CUDA_R_32F;
    cudaDataType_t out_type = CUDA_R_32F;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    switch (args.type) {
        case DType::F64:
            in_type = out_type = CUDA_R_64F;
            compute = CUBLAS_COMPUTE_64F;
            break;
        case DType::BF16: in_type = CUDA_R_16BF; break;
        case DType::F16: in_type = CUDA_R_16F; break;
        default:
            if (args.compute == GemmCompute::FastTF32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
            break;
    }
    if (args.narrow_c) out_type = in_type;  // a 16-bit C: cuBLAS sums in f32, rounds when storing
    const cublasHandle_t handle = q.cublas();
    const CublasApi& blas = cublas_api();  // loaded by cublas()
    // Host scalars, read by cuBLAS when the call is made: f64 for the f64 compute type,
    // f32 for the others.
    const bool wide = args.type == DType::F64;
    const double alpha64 = args.alpha;
    const double beta64 = args.beta;
    const auto alpha32 = static_cast<float>(args.alpha);
    const auto beta32 = static_cast<float>(args.beta);
    q.submit([=, &blas](cudaStream_t) {
        const void* alpha = wide ? static_cast<const void*>(&alpha64) : static_cast<const void*>(&alpha32);
        const void* beta = wide ? static_cast<const void*>(&beta64) : static_cast<const void*>(&beta32);
        OUTCORE_CUBLAS_CHECK(blas.gemm_ex(handle, ta, tb, m, n, k, alpha, a, in_type, lda, b, in_type, ldb,
                                          beta, c, out_type, ldc, compute, CUBLAS_GEMM_DEFAULT));
    });
}

void CudaKernels::do_filter(Queue& queue, const FilterTileArgs& args) {
    CudaQueue& q = own_queue(queue, "filter");
    // Types, passes and the 15×15 limit: checked by Kernels::filter for every backend.
    if (args.out_rows == 0 || args.out_cols == 0) return;
    const std::uint64_t in_elem = dtype_bytes(args.in_type);
    const std::uint64_t out_elem = dtype_bytes(args.out_type);
    check_kernel_view(*device_, "filter", "the input", args.in, in_elem);
    check_kernel_view(*device_, "filter", "the output", args.out, out_elem);
    if (args.in_row_stride % in_elem != 0 || args.out_row_stride % out_elem != 0) {
        throw UsageError(kComponent, "filter: row strides must be multiples of the element size");
    }

    auto launch = std::make_shared<FilterLaunch>();
    launch->op = filter_kind(args.op);
    launch->in_type = pixel_kind(args.in_type);
    launch->out_type = pixel_kind(args.out_type);
    launch->step = static_cast<std::int32_t>(args.channels);
    launch->radius = static_cast<std::int32_t>(args.radius);
    const std::uint64_t halo_rows = args.op == FilterOp::SeparableRow ? 0 : args.radius;
    const std::uint64_t halo_cols = args.op == FilterOp::SeparableColumn ? 0 : args.radius;
    // Kernels::filter checked these against the views, which bounds them by memory.
    launch->out_rows = static_cast<std::int64_t>(args.out_rows);
    launch->out_elems = static_cast<std::int64_t>(args.out_cols * args.channels);
    launch->in_rows = static_cast<std::int64_t>(args.out_rows + 2 * halo_rows);
    launch->in_elems = static_cast<std::int64_t>((args.out_cols + 2 * halo_cols) * args.channels);
    launch->in = device_address(args.in);
    launch->in_stride = static_cast<std::int64_t>(args.in_row_stride);
    launch->out = device_address(args.out);
    launch->out_stride = static_cast<std::int64_t>(args.out_row_stride);

    // A row written early must not be read later as input.
    const auto in_begin = reinterpret_cast<std::uintptr_t>(launch->in);
    const auto out_begin = reinterpret_cast<std::uintptr_t>(launch->out);
    const std::uint64_t in_span = args.in_row_stride * static_cast<std::uint64_t>(launch->in_rows - 1) +
                                  static_cast<std::uint64_t>(launch->in_elems) * in_elem;
    const std::uint64_t out_span =
        args.out_row_stride * (args.out_rows - 1) + static_cast<std::uint64_t>(launch->out_elems) * out_elem;
    if (in_begin < out_begin + out_span && out_begin < in_begin + in_span) {
        throw UsageError(kComponent, "filter: the input and output tiles overlap");
    }

    if (args.weights != nullptr && args.op != FilterOp::SobelMagnitude) {
        const std::size_t taps = args.weights->size_bytes() / sizeof(float);
        if (taps > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
            throw UsageError(kComponent, "filter: too many weights");
        }
        launch->taps = static_cast<std::int32_t>(taps);
        if (args.weights->is_inline()) {
            if (taps > static_cast<std::size_t>(kMaxInlineTaps)) {
                throw UsageError(kComponent,
                                 fmt::format("filter: {} inline weight bytes exceed this device's {}; make "
                                             "the KernelParams with this device",
                                             args.weights->size_bytes(), device_->info().max_inline_bytes));
            }
            std::memcpy(launch->weights, args.weights->inline_bytes().data(), taps * sizeof(float));
        } else {
            const BufferView buffer = args.weights->buffer();
            check_kernel_view(*device_, "filter", "the weights buffer", buffer, sizeof(float));
            launch->weights_buffer = static_cast<const float*>(device_address(buffer));
        }
    }

    const int max_shared = device_->max_shared_bytes();
    const bool force_global = force_global_filters_.load(std::memory_order_relaxed);
    q.submit([launch = std::shared_ptr<const FilterLaunch>(std::move(launch)), max_shared,
              force_global](cudaStream_t stream) {
        OUTCORE_CUDA_CHECK(launch_filter(*launch, stream, max_shared, force_global));
    });
}

bool CudaKernels::do_supports_convert(DType /*from*/, DType /*to*/) const noexcept {
    return true;  // every pair Kernels::supports_convert asks about (cuda_convert.cu)
}

void CudaKernels::do_convert(Queue& queue, const ConvertArgs& args) {
    CudaQueue& q = own_queue(queue, "convert");
    check_kernel_view(*device_, "convert", "in", args.in, dtype_bytes(args.from));
    check_kernel_view(*device_, "convert", "out", args.out, dtype_bytes(args.to));
    auto kind = [](DType t) {
        return t == DType::BF16 ? FloatKind::BF16 : t == DType::F16 ? FloatKind::F16 : FloatKind::F32;
    };
    q.submit([from = kind(args.from), to = kind(args.to), in = device_address(args.in),
              out = device_address(args.out), count = args.count](cudaStream_t stream) {
        OUTCORE_CUDA_CHECK(launch_convert(from, to, in, out, count, stream));
    });
}

void CudaKernels::do_pad_edges(Queue& queue, const PadEdgesArgs& args) {
    CudaQueue& q = own_queue(queue, "edge fill");
    check_kernel_view(*device_, "edge fill", "the area", args.buffer, 1);
    q.submit([base = device_address(args.buffer), area = args.area](cudaStream_t stream) {
        OUTCORE_CUDA_CHECK(launch_pad_edges(base, area, stream));
    });
}

}  // namespace outcore::cuda
