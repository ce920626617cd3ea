// cuda_filters.hpp — the CUDA filter kernels' launch interface (private to the CUDA
// backend). Plain data and one launch function, so cuda_filters.cu includes nothing
// of outcore and stays quick to compile; cuda_kernels.cpp validates the arguments
// and fills a FilterLaunch.
//
// The arithmetic is the CPU backend's (cpu_filters.cpp: the same tap order, every
// product and sum rounded on its own, the same integer rounding), so both backends
// give the same bits. cuda_filters.cu spells each operation with __fmul_rn /
// __fadd_rn / __fsqrt_rn, which are never fused, and is compiled with -fmad=false
// on top.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "outcore/device/edge.hpp"

namespace outcore::cuda {

/// Taps that travel inline with the launch: 4096 bytes, DeviceInfo::max_inline_bytes.
inline constexpr int kMaxInlineTaps = 1024;

enum class FilterKind : std::int32_t { SeparableRow, SeparableColumn, Conv2D, Sobel };
enum class PixelKind : std::int32_t { U8, U16, F32 };

/// One filter tile, resolved to device addresses. Rows are counted in pixels,
/// elements in samples (pixels × channels); strides in bytes. Passed to the kernel
/// by value: about 4.2 KB, within the 32 KiB kernel-parameter limit of CUDA 12.1+ on
/// Volta and newer.
struct FilterLaunch {
    FilterKind op = FilterKind::Conv2D;
    PixelKind in_type = PixelKind::F32;
    PixelKind out_type = PixelKind::F32;
    std::int32_t step = 1;  ///< samples between horizontal neighbours: the channel count
    std::int32_t radius = 0;
    std::int32_t taps = 0;  ///< weights used: 2r+1, (2r+1)², or 0 for Sobel
    std::int64_t out_rows = 0;
    std::int64_t out_elems = 0;  ///< samples per output row
    std::int64_t in_rows = 0;
    std::int64_t in_elems = 0;  ///< samples per input row, halo included
    const void* in = nullptr;
    std::int64_t in_stride = 0;
    void* out = nullptr;
    std::int64_t out_stride = 0;
    /// Device (or mapped pinned) memory holding `taps` floats; null = `weights` below.
    const float* weights_buffer = nullptr;
    float weights[kMaxInlineTaps] = {};
};

/// Per-device set-up before the first launch: allows the shared-memory kernel up to
/// `max_shared_bytes` of dynamic shared memory (cudaDevAttrMaxSharedMemoryPerBlockOptin).
/// Call with that device current.
[[nodiscard]] cudaError_t prepare_filter_kernels(int max_shared_bytes);

/// Enqueues `launch` on `stream` (the stream's device must be current). Tiles go
/// through shared memory when the tile and its halo fit in `max_shared_bytes`,
/// otherwise (or with `force_global`) through a kernel that reads global memory;
/// both compute the same bits. Returns the launch status.
[[nodiscard]] cudaError_t launch_filter(const FilterLaunch& launch, cudaStream_t stream, int max_shared_bytes,
                                        bool force_global);

/// Enqueues the edge fill of `area` (outcore/device/edge.hpp), whose pixel (0, 0) is at
/// device address `base`, on `stream`: one thread per pixel outside the image, each
/// copying the pixel edge_source_index names on both axes (or writing zeros) — the
/// host fill's result. The caller validated the area. Returns the launch status.
[[nodiscard]] cudaError_t launch_pad_edges(void* base, const EdgePadding& area, cudaStream_t stream);

}  // namespace outcore::cuda
