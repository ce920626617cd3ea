// outcore/backends/cpu.hpp — the CPU backend: host memory with the semantics of a
// discrete GPU, and the reference every other backend is compared against.
//
//   outcore::cpu::CpuDeviceOptions opts{.total_memory_bytes = 256 * outcore::kMiB};
//   std::unique_ptr<outcore::Device> dev = outcore::cpu::make_cpu_device(opts);
//   outcore::Block b = dev->allocate({.bytes = 64 * outcore::kMiB});   // counted against 256 MiB
//   auto q = dev->create_queue();
//   q->upload(src, b);             // a memcpy on the queue's worker thread, later
//   q->synchronize();
//
// Device memory is an aligned host allocation that the device counts against
// total_memory_bytes as a hard capacity (the simulated "card is full": OutOfMemory
// for Tier::Device). Its RawBlock has no host pointer, exactly like GPU memory, so
// code that touches device memory from the host fails in tests. Each queue is one
// worker thread that runs its work in submission order. GEMM is OpenBLAS: f32, f64,
// and bf16 (widened to f32, accumulated and stored in f32); GemmCompute::FastTF32 is
// computed exactly in f32, a legal implementation since the mode permits reduced
// precision but never requires it.
// Usually opened through the registry (open_device("cpu:0")) rather than directly.
#pragma once

#include <cstdint>
#include <memory>

#include "outcore/device/device.hpp"

namespace outcore::cpu {

struct CpuDeviceOptions {
    /// The simulated device capacity; 0 = the machine's physical RAM (sysconf).
    std::uint64_t total_memory_bytes = 0;
    /// recommended_working_set_bytes = fraction × total, in (0, 1].
    double working_set_fraction = 0.75;
    /// Ordinal reported in DeviceInfo::index ("cpu:<index>").
    std::uint32_t index = 0;
    /// DeviceInfo::min_offset_alignment; a power of two, at least 64 in practice.
    std::uint64_t min_offset_alignment = 64;
    /// DeviceInfo::max_inline_bytes.
    std::uint64_t max_inline_bytes = 4096;
};

/// The machine's physical memory in bytes (sysconf pages × page size).
[[nodiscard]] std::uint64_t physical_memory_bytes() noexcept;

/// Opens a CPU device. Throws UsageError for a fraction outside (0, 1] or an
/// alignment that is not a power of two. The device is thread-safe and must outlive
/// every Block, Queue and Event made from it.
[[nodiscard]] std::unique_ptr<Device> make_cpu_device(const CpuDeviceOptions& options = {});

}  // namespace outcore::cpu
