// cuda_device.hpp — CudaDevice and its event pool (private to the CUDA backend; users
// go through make_cuda_device or the registry).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "cuda_kernels.hpp"
#include "outcore/backends/cuda.hpp"
#include "outcore/device/device.hpp"
#include "outcore/device/registry.hpp"

namespace outcore::cuda {

/// The registry entry (cuda_backend.cpp); builtin_backends.cpp declares it too.
[[nodiscard]] BackendEntry backend_entry();

/// What device `options.ordinal` reports: properties, and free memory now less the
/// reserve. Makes the device current on the calling thread for the duration and
/// restores the previous one. Throws BackendError.
[[nodiscard]] DeviceInfo make_device_info(const CudaDeviceOptions& options);

/// Restores the calling thread's current device on destruction (probes and opens
/// must not change what the caller's own CUDA code sees).
class CurrentDeviceScope {
public:
    CurrentDeviceScope() noexcept;
    CurrentDeviceScope(const CurrentDeviceScope&) = delete;
    CurrentDeviceScope& operator=(const CurrentDeviceScope&) = delete;
    ~CurrentDeviceScope();

private:
    int previous_ = -1;
};

/// Reusable cudaEvent_t (DisableTiming) of one device. Each record of an outcore
/// Event takes its own native event (see RecordSlot), so records are plentiful and
/// short-lived: pooling keeps cudaEventCreate off the submission path. Thread-safe.
class EventPool {
public:
    /// Events of device `ordinal`, made with `flags` (default: no timing, the cheapest;
    /// the trace's device timestamps use cudaEventDefault).
    explicit EventPool(int ordinal, unsigned flags = cudaEventDisableTiming) noexcept
        : ordinal_(ordinal), flags_(flags) {}
    EventPool(const EventPool&) = delete;
    EventPool& operator=(const EventPool&) = delete;
    ~EventPool();

    /// A free native event, created on this pool's device if none is free. Throws BackendError.
    [[nodiscard]] cudaEvent_t acquire();
    /// Takes an event back (it may still be pending on a stream: re-recording is legal).
    void release(cudaEvent_t event) noexcept;

private:
    int ordinal_;
    unsigned flags_;
    std::mutex mutex_;
    std::vector<cudaEvent_t> free_;
};

/// One GPU. Device memory is cudaMalloc'd (counted by outcore's accounting, which
/// tests cross-check against cudaMemGetInfo); a request aligned above 256 bytes
/// over-allocates and keeps the base address in RawBlock::cookie. Thread-safe.
class CudaDevice final : public Device {
public:
    explicit CudaDevice(const CudaDeviceOptions& options);
    ~CudaDevice() override;

    [[nodiscard]] int ordinal() const noexcept { return ordinal_; }
    [[nodiscard]] EventPool& events() noexcept { return events_; }
    /// Largest dynamic shared memory a block may use (the opt-in limit).
    [[nodiscard]] int max_shared_bytes() const noexcept { return max_shared_bytes_; }
    /// cuBLAS workspace each queue allocates on its first GEMM (Hopper wants 32 MiB).
    [[nodiscard]] std::uint64_t cublas_workspace_bytes() const noexcept { return cublas_workspace_bytes_; }

private:
    RawBlock do_allocate_native(const AllocationRequest& request) override;
    void do_deallocate_native(const RawBlock& block) noexcept override;
    std::unique_ptr<Queue> do_create_queue(QueueRole role) override;
    std::unique_ptr<Event> do_create_event() override;
    Kernels& do_kernels() override { return kernels_; }
    // flush/invalidate keep Device's no-op defaults: HostCached memory is pageable host
    // memory that copies (cudaMemcpyAsync, which stages it) read when they run.

    [[noreturn]] void throw_out_of_memory(const AllocationRequest& request, const char* call) const;

    int ordinal_;
    int max_shared_bytes_ = 48 * 1024;
    std::uint64_t cublas_workspace_bytes_ = 4ULL << 20;
    EventPool events_;
    CudaKernels kernels_;
};

/// The address the GPU uses for a view: Device memory at native + offset, host kinds
/// at their host address (the same address on the device under unified addressing;
/// for HostCached a pageable address only copies may use).
[[nodiscard]] inline void* device_address(const BufferView& view) noexcept {
    return reinterpret_cast<void*>(view.block.native + view.native_offset());
}

}  // namespace outcore::cuda
