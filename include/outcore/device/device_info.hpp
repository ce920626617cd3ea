// outcore/device/device_info.hpp — what a device is and what it can take.
//
// recommended_working_set_bytes is the default device budget: the analog of Metal's
// recommendedMaxWorkingSetSize (CUDA: free memory at start less a reserve; Vulkan:
// the VK_EXT_memory_budget heap budget; CPU: a fraction of RAM).
#pragma once

#include <cstdint>
#include <string>

namespace outcore {

struct DeviceInfo {
    std::string name;         ///< "NVIDIA H200", "CPU (16 threads)"
    std::string backend;      ///< "cpu", "cuda", "vulkan"
    std::uint32_t index = 0;  ///< ordinal within its backend
    std::uint64_t total_memory_bytes = 0;
    std::uint64_t recommended_working_set_bytes = 0;
    bool unified_memory = false;  ///< device and host share physical memory
    /// Every binding offset and heap placement is a multiple of this (a power of two).
    std::uint64_t min_offset_alignment = 256;
    /// Kernel parameters up to this many bytes go inline (Metal setBytes: 4 KiB; CUDA
    /// kernel arguments; Vulkan push constants); larger ones go in a buffer.
    std::uint64_t max_inline_bytes = 4096;
    /// Largest range one kernel can bind (Vulkan maxStorageBufferRange); tiles fit it.
    std::uint64_t max_buffer_bytes = UINT64_MAX;
    /// Largest single native allocation.
    std::uint64_t max_allocation_bytes = UINT64_MAX;
    /// Device memory a queue takes for its GEMM kernels on first use (cuBLAS's
    /// workspace: 32 MiB on Hopper), outside any allocator a caller passes; tiled GEMMs
    /// take it out of their budget so that the budget holds for everything they use.
    std::uint64_t gemm_workspace_bytes = 0;
    /// Compute queues a tiled GEMM spreads its tiles over (Pipeline compute_lanes): 2
    /// where kernels of separate queues run at once, so the next tile's GEMM fills the
    /// device while the last wave of the current one drains (CUDA streams; on the
    /// H200 a run of 16384×2816×16384 SGEMMs went from 52.4 to 54.0 TFLOP/s); 1 where
    /// they would not (one hardware queue) or would fight for the same cores (CPU).
    std::uint32_t compute_lanes = 1;

    /// "cpu:0", "cuda:1": how selectors and reports name the device.
    [[nodiscard]] std::string id() const { return backend + ":" + std::to_string(index); }
};

/// True when a parameter block of `bytes` may be passed inline on this device
/// (the setBytes rule); otherwise it goes in a buffer. The one place that decides.
[[nodiscard]] inline bool fits_inline(const DeviceInfo& info, std::uint64_t bytes) noexcept {
    return bytes <= info.max_inline_bytes;
}

}  // namespace outcore
