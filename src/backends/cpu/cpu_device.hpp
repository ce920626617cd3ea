// cpu_device.hpp — CpuDevice, the CPU backend's Device (private to the backend;
// users go through make_cpu_device or the registry).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "cpu_kernels.hpp"
#include "outcore/backends/cpu.hpp"
#include "outcore/device/device.hpp"
#include "outcore/device/registry.hpp"

namespace outcore::cpu {

/// The registry entry (cpu_backend.cpp); builtin_backends.cpp declares it too.
[[nodiscard]] BackendEntry backend_entry();

/// The DeviceInfo a device opened with `options` reports. Throws UsageError for bad
/// options (fraction outside (0, 1], alignment not a power of two).
[[nodiscard]] DeviceInfo make_device_info(const CpuDeviceOptions& options);

/// Host memory posing as a discrete GPU. Device-kind memory is counted against
/// total_memory_bytes as a hard capacity, reserved atomically before the host
/// allocation so concurrent callers can never overshoot it. Host kinds are plain
/// aligned host memory, not counted against that capacity. Thread-safe.
class CpuDevice final : public Device {
public:
    explicit CpuDevice(const CpuDeviceOptions& options);

    /// The hard capacity of Device memory in bytes (== info().total_memory_bytes).
    [[nodiscard]] std::uint64_t capacity_bytes() const noexcept { return capacity_bytes_; }

private:
    RawBlock do_allocate_native(const AllocationRequest& request) override;
    void do_deallocate_native(const RawBlock& block) noexcept override;
    std::unique_ptr<Queue> do_create_queue(QueueRole role) override;
    std::unique_ptr<Event> do_create_event() override;
    Kernels& do_kernels() override { return kernels_; }
    // flush/invalidate keep Device's no-op defaults: host memory is coherent.

    /// Reserves `bytes` of the capacity or throws OutOfMemory (tier Device).
    void reserve_device_bytes(std::uint64_t bytes);

    std::uint64_t capacity_bytes_;
    std::atomic<std::uint64_t> device_bytes_{0};  ///< reserved Device-kind bytes
    CpuKernels kernels_;
};

}  // namespace outcore::cpu
