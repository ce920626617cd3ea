// outcore/backends/vulkan.hpp — the Vulkan backend: any Vulkan 1.2 device (NVIDIA,
// AMD, Intel; Mesa's lavapipe on the CPU; Apple GPUs through MoltenVK). Present only
// in builds with OUTCORE_WITH_VULKAN (the outcore::vulkan target).
//
//   auto dev = outcore::open_device("vulkan:0");                    // usually through the registry
//   auto dev = outcore::vulkan::make_vulkan_device({.index = 1});
//
// Devices are listed discrete GPUs first, then integrated, virtual and CPU ones;
// OUTCORE_VULKAN_DEVICE (an index in that list, or part of a device's name) keeps only
// one. OUTCORE_VULKAN_VALIDATION=1 turns on the Khronos validation layer and makes
// every validation message fatal (the tests run so). Memory: large VkDeviceMemory
// blocks per kind, sub-allocated by outcore's Heap (docs/backends.md); the budget is
// VK_EXT_memory_budget's, or 80% of the device-local heap, and outcore enforces the
// heap sizes itself (lavapipe never reports out-of-memory).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "outcore/device/device.hpp"

namespace outcore::vulkan {

/// The GEMM shader's blocking, as specialization constants: workgroups of
/// `workgroup`² threads, each computing `per_thread`² elements of C, through slices
/// `depth` deep. (workgroup · per_thread · depth) must be a multiple of workgroup²;
/// per_thread is at most 8.
/// `contiguous`: a thread's rows and columns are neighbours (else `workgroup` apart).
/// `vectorized` ("16x8x8v"): float32 runs shaders/gemm_v4.comp instead, 128x128 blocks
/// of C in vec4 registers, read from shared memory as vec4s (1.9x gemm.comp's best on
/// an H200); it takes workgroup 16, per_thread 8, depth 8 or 16 and not `contiguous`.
/// bf16, f16 and f64 then run gemm.comp at 16x4x16, contiguous.
/// The default, 16x8x8v, is the fastest measured on the H200 (39.3 TFLOP/s against
/// 20.5 for gemm.comp's best, 16x4x16c) and on lavapipe, with half the shared memory
/// of 16x8x16v (16 KiB).
struct GemmTile {
    std::uint32_t workgroup = 16;
    std::uint32_t per_thread = 8;
    std::uint32_t depth = 8;
    bool contiguous = false;
    bool vectorized = true;
};

struct VulkanDeviceOptions {
    /// Position in the list above.
    std::uint32_t index = 0;
    /// UsageError when the device cannot run it (invocations, shared memory).
    GemmTile gemm_tile{};
};

/// What the machine offers, in the order above (instance made and dropped); empty
/// with a reason when there is no loader, no driver or no device. Throws nothing.
struct VulkanProbe {
    std::vector<DeviceInfo> devices;
    std::string reason;
    bool software = false;  ///< every device is a CPU (lavapipe): never the default device
};
[[nodiscard]] VulkanProbe probe_vulkan();

/// Opens one device. Throws UsageError for an index out of range and BackendError
/// when Vulkan fails. Thread-safe; must outlive every Block, Queue and Event made from it.
[[nodiscard]] std::unique_ptr<Device> make_vulkan_device(const VulkanDeviceOptions& options = {});

}  // namespace outcore::vulkan
