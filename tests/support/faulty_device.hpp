// tests/support/faulty_device.hpp — a Device that wraps another (normally the CPU
// backend) and fails on command: the N-th allocation of a MemoryKind, or the N-th
// copy, once (transient) or from N on (persistent). For out-of-memory and copy-failure
// sweeps of code above the device interface.
//
//   auto dev = outcore::test::FaultyDevice::cpu({.total_memory_bytes = 256 * kMiB});
//   dev->fail_allocation(MemoryKind::Device, 3);            // the 3rd Device allocation throws OutOfMemory
//   dev->fail_copy(2, {.persistent = true});                // copies 2, 3, ... fail
//   ... run the scenario ...
//   if (dev->injected() == 0) { /* N passed the end of the scenario: the sweep is done */ }
//   dev->disarm();
//
// An allocation fault throws OutOfMemory (tier of the kind) from allocate(), as a
// backend does when it refuses. A copy fault (upload, download, copy, fill) is by
// default asynchronous, as on a GPU: the copy is replaced by queued work that throws
// BackendError, reported by the queue's synchronize() or an event's wait(); with
// CopyFault::at_submit the submitting call throws instead. Counting starts at the
// call to fail_*; each counter is per device (all queues together). Thread-safe.
// Blocks, queues and events carry this device's id, so code under test cannot tell it
// from a real backend; kernels() run the wrapped device's kernels on its queues.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>

#include "outcore/backends/cpu.hpp"
#include "outcore/device/device.hpp"

namespace outcore::test {

struct CopyFault {
    /// Every copy from the N-th on fails (else only the N-th).
    bool persistent = false;
    /// The submitting call throws (else the queued work fails, seen at synchronize).
    bool at_submit = false;
};

class FaultyDevice final : public Device {
public:
    /// Wraps `inner`, which it owns.
    explicit FaultyDevice(std::unique_ptr<Device> inner);
    /// A FaultyDevice over a new CPU device.
    [[nodiscard]] static std::unique_ptr<FaultyDevice> cpu(const cpu::CpuDeviceOptions& options = {});
    ~FaultyDevice() override;

    /// The N-th allocation of `kind` from now (1-based) throws OutOfMemory; with
    /// `persistent`, every one from the N-th on. Replaces an earlier allocation fault.
    void fail_allocation(MemoryKind kind, std::uint64_t nth, bool persistent = false);
    /// The N-th copy from now fails (see CopyFault). Replaces an earlier copy fault.
    void fail_copy(std::uint64_t nth, CopyFault mode = {});
    /// No more faults (counters keep counting).
    void disarm();

    /// Allocations of `kind` / copies since the last fail_* call (or construction).
    [[nodiscard]] std::uint64_t allocations(MemoryKind kind) const;
    [[nodiscard]] std::uint64_t copies() const;
    /// Faults injected since the last fail_* call.
    [[nodiscard]] std::uint64_t injected() const;

    [[nodiscard]] Device& inner() noexcept { return *inner_; }

    // --- used by FaultyQueue --------------------------------------------------------
    /// Counts one copy; true when it must fail.
    [[nodiscard]] bool next_copy_fails(bool& at_submit);
    /// The view with the wrapped device's id, for the wrapped device's queues.
    [[nodiscard]] BufferView to_inner(BufferView view) const noexcept;

private:
    RawBlock do_allocate_native(const AllocationRequest& request) override;
    void do_deallocate_native(const RawBlock& block) noexcept override;
    std::unique_ptr<Queue> do_create_queue(QueueRole role) override;
    std::unique_ptr<Event> do_create_event() override;
    Kernels& do_kernels() override;
    void do_flush(const BufferView& range) override;
    void do_invalidate(const BufferView& range) override;

    std::unique_ptr<Device> inner_;
    std::unique_ptr<Kernels> kernels_;  ///< the inner device's, on the inner queues and views

    mutable std::mutex mutex_;
    std::array<std::uint64_t, kMemoryKindCount> allocations_{};
    bool alloc_armed_ = false;
    MemoryKind alloc_kind_ = MemoryKind::Device;
    std::uint64_t alloc_nth_ = 0;
    bool alloc_persistent_ = false;
    std::uint64_t copies_ = 0;
    bool copy_armed_ = false;
    std::uint64_t copy_nth_ = 0;
    CopyFault copy_mode_{};
    std::uint64_t injected_ = 0;
};

}  // namespace outcore::test
