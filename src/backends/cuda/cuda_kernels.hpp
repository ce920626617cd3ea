// cuda_kernels.hpp — the CUDA backend's kernels: GEMM tiles through cuBLAS, filter
// tiles through the kernels in cuda_filters.cu.
//
// GEMM (cublasGemmEx on the queue's stream, the queue's own handle and workspace):
//   f32  Exact     CUDA_R_32F,  CUBLAS_COMPUTE_32F
//   f32  FastTF32  CUDA_R_32F,  CUBLAS_COMPUTE_32F_FAST_TF32 (tensor cores, tf32 products)
//   f64  Exact     CUDA_R_64F,  CUBLAS_COMPUTE_64F
//   bf16 Exact     CUDA_R_16BF A and B, CUDA_R_32F C, CUBLAS_COMPUTE_32F
// Operands and filter tiles must be Device or HostPinned memory (the GPU reads pinned
// memory over PCIe); HostCached memory is pageable and refused with UsageError.
// Conversions f32 ↔ bf16/f16 (cuda_convert.cu) for a 16-bit C summed over several calls.
// Filters: u8/u16/f32, 1–4 channels, the CPU backend's limits (Conv2D up to 15×15)
// and its bits.
#pragma once

#include <atomic>

#include "outcore/device/kernels.hpp"

namespace outcore::cuda {

class CudaDevice;
class CudaQueue;

class CudaKernels final : public Kernels {
public:
    explicit CudaKernels(CudaDevice& device) noexcept : device_(&device) {}

    /// Test hook: route every filter through the global-memory kernel (the fallback
    /// for halos too wide for shared memory), so tests can compare both paths.
    void force_global_filters(bool on) noexcept {
        force_global_filters_.store(on, std::memory_order_relaxed);
    }

private:
    void do_gemm(Queue& queue, const GemmTileArgs& args) override;
    [[nodiscard]] bool do_supports_narrow_c(DType type) const noexcept override;
    [[nodiscard]] bool do_supports_convert(DType from, DType to) const noexcept override;
    void do_convert(Queue& queue, const ConvertArgs& args) override;
    void do_filter(Queue& queue, const FilterTileArgs& args) override;
    void do_pad_edges(Queue& queue, const PadEdgesArgs& args) override;
    bool do_supports_gemm(DType type, GemmCompute compute) const noexcept override;

    /// The queue as a CudaQueue of this device, or UsageError.
    [[nodiscard]] CudaQueue& own_queue(Queue& queue, const char* what) const;

    CudaDevice* device_;
    std::atomic<bool> force_global_filters_{false};
};

}  // namespace outcore::cuda
