// outcore/device/device.hpp — one compute device: its memory, queues, events, kernels.
//
//   std::unique_ptr<outcore::Device> dev = outcore::open_device();   // registry.hpp
//   const outcore::DeviceInfo& info = dev->info();
//   outcore::Block slot = dev->allocate({.bytes = 64 * kMiB, .kind = MemoryKind::Device});
//   auto q = dev->create_queue(QueueRole::Upload);
//   dev->allocated_bytes();     // device memory in use: Metal's currentAllocatedSize
//
// A Device is an Allocator of native memory of every MemoryKind. It counts what it
// hands out per kind; backends only implement the private do_* functions. A Device
// must outlive every Block, Queue and Event made from it. Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "outcore/device/allocator.hpp"
#include "outcore/device/device_info.hpp"
#include "outcore/device/event.hpp"
#include "outcore/device/kernels.hpp"
#include "outcore/device/queue.hpp"
#include "outcore/monitor/snapshot.hpp"

namespace outcore {

class Device : public Allocator {
public:
    ~Device() override = default;

    [[nodiscard]] const DeviceInfo& info() const noexcept { return info_; }
    /// Unique per Device object in this process; stamped into every RawBlock it makes.
    [[nodiscard]] std::uint64_t id() const noexcept { return id_; }

    /// Bytes of Device memory currently allocated from this device.
    [[nodiscard]] std::uint64_t allocated_bytes() const noexcept {
        return allocated_bytes(MemoryKind::Device);
    }
    /// Bytes currently allocated of one kind.
    [[nodiscard]] std::uint64_t allocated_bytes(MemoryKind kind) const noexcept;
    /// Live allocations of one kind.
    [[nodiscard]] std::uint64_t allocation_count(MemoryKind kind) const noexcept;
    /// Most bytes of one kind allocated at once since the device was opened.
    [[nodiscard]] std::uint64_t peak_bytes(MemoryKind kind) const noexcept;

    /// A new queue. Throws BackendError if the backend cannot make one.
    [[nodiscard]] std::unique_ptr<Queue> create_queue(QueueRole role = QueueRole::General) {
        return do_create_queue(role);
    }
    /// A new event, not yet recorded (so complete).
    [[nodiscard]] std::unique_ptr<Event> create_event() { return do_create_event(); }
    /// The device's kernels; lives as long as the device.
    [[nodiscard]] Kernels& kernels() { return do_kernels(); }

    /// HostCached memory: makes host writes in `range` visible to the device
    /// (didModifyRange:). A no-op for other kinds. Throws UsageError on a bad range.
    void flush(const BufferView& range);
    /// HostCached memory: makes device writes in `range` visible to the host
    /// (synchronizeResource:). A no-op for other kinds.
    void invalidate(const BufferView& range);

protected:
    explicit Device(DeviceInfo info);

private:
    RawBlock do_allocate(const AllocationRequest& request) final;
    void do_deallocate(const RawBlock& block) noexcept final;

    /// Native allocation. Throw OutOfMemory (with tier and numbers) when refused.
    virtual RawBlock do_allocate_native(const AllocationRequest& request) = 0;
    virtual void do_deallocate_native(const RawBlock& block) noexcept = 0;
    virtual std::unique_ptr<Queue> do_create_queue(QueueRole role) = 0;
    virtual std::unique_ptr<Event> do_create_event() = 0;
    virtual Kernels& do_kernels() = 0;
    /// Default: nothing (coherent memory). Called only for HostCached ranges.
    virtual void do_flush(const BufferView& range);
    /// Default: nothing. Called only for HostCached ranges.
    virtual void do_invalidate(const BufferView& range);

    DeviceInfo info_;
    std::uint64_t id_;
    std::array<std::atomic<std::uint64_t>, kMemoryKindCount> bytes_{};
    std::array<std::atomic<std::uint64_t>, kMemoryKindCount> count_{};
    std::array<std::atomic<std::uint64_t>, kMemoryKindCount> peak_{};
    /// Adds this device's memory to monitor::snapshot(); declared last, so it is
    /// unregistered before the counters it reads are destroyed.
    monitor::Source snapshot_source_;
};

}  // namespace outcore
