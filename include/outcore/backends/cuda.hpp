// outcore/backends/cuda.hpp — the CUDA backend: NVIDIA GPUs through the CUDA runtime
// and cuBLAS. Present only in builds with OUTCORE_WITH_CUDA (the outcore::cuda target).
//
//   auto dev = outcore::open_device("cuda:0");              // usually through the registry
//   auto dev = outcore::cuda::make_cuda_device({.ordinal = 1, .reserve_bytes = 2 * kGiB});
//   outcore::Block slot = dev->allocate({.bytes = 64 * kMiB});     // cudaMalloc
//   outcore::Block staging = dev->allocate({.bytes = 64 * kMiB, .kind = MemoryKind::HostPinned});
//
// Memory: Device = cudaMalloc (no host pointer), HostPinned = cudaHostAlloc (portable,
// mapped: kernels may read it over PCIe), HostCached = pageable host memory whose
// flush/invalidate are no-ops (copies read and write it when the queue reaches them).
// Never managed memory. Queues are non-blocking streams, events are CUDA events,
// GEMM is cuBLAS (f32, f32 with tf32, f64, bf16 → f32), filters are CUDA kernels
// that match the CPU backend bit for bit. DeviceInfo: recommended_working_set_bytes
// is the free memory when the device was opened less the reserve.
#pragma once

#include <cstdint>
#include <memory>

#include "outcore/device/device.hpp"

namespace outcore::cuda {

struct CudaDeviceOptions {
    /// CUDA device ordinal (as cudaSetDevice counts, after CUDA_VISIBLE_DEVICES).
    std::uint32_t ordinal = 0;
    /// Bytes of free device memory left out of recommended_working_set_bytes, for the
    /// CUDA context, cuBLAS and other users of the GPU; 0 = default_reserve_bytes(total).
    std::uint64_t reserve_bytes = 0;
};

/// The default reserve: max(512 MiB, 5% of the device's total memory).
[[nodiscard]] std::uint64_t default_reserve_bytes(std::uint64_t total_memory_bytes) noexcept;

/// Opens one GPU. Throws UsageError for an ordinal the runtime does not have and
/// BackendError when the runtime fails (no driver, no device). The device is
/// thread-safe and must outlive every Block, Queue and Event made from it.
[[nodiscard]] std::unique_ptr<Device> make_cuda_device(const CudaDeviceOptions& options = {});

}  // namespace outcore::cuda
