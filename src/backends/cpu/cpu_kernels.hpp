// cpu_kernels.hpp — the CPU backend's kernels: GEMM tiles through OpenBLAS.
//
// Supported: f32 (Exact and FastTF32), f64 (Exact), bf16 (Exact: inputs widened to
// f32, accumulated and stored in f32). FastTF32 is computed exactly in f32, a legal
// implementation because the mode only permits reduced precision and never requires
// it: the result is at least as accurate as tf32 products would give.
#pragma once

#include "outcore/device/kernels.hpp"

namespace outcore {
class Device;
}

namespace outcore::cpu {

class CpuKernels final : public Kernels {
public:
    explicit CpuKernels(const Device& device) noexcept;

private:
    /// Checks the queue and views (defensively: it guards memory safety), resolves
    /// addresses now and enqueues the BLAS call on the queue's worker.
    void do_gemm(Queue& queue, const GemmTileArgs& args) override;
    [[nodiscard]] bool do_supports_narrow_c(DType type) const noexcept override;
    /// f32 ↔ bf16/f16 (ConvertArgs) on the queue's worker.
    [[nodiscard]] bool do_supports_convert(DType from, DType to) const noexcept override;
    void do_convert(Queue& queue, const ConvertArgs& args) override;
    /// Filter tiles (u8/u16/f32, 1–4 channels, Conv2D up to 15×15), vectorized and
    /// split over a shared thread pool on the queue's worker; in cpu_filters.cpp.
    void do_filter(Queue& queue, const FilterTileArgs& args) override;
    /// pad_edges_host on the queue's worker; in cpu_filters.cpp.
    void do_pad_edges(Queue& queue, const PadEdgesArgs& args) override;
    bool do_supports_gemm(DType type, GemmCompute compute) const noexcept override;

    const Device* device_;
};

}  // namespace outcore::cpu
