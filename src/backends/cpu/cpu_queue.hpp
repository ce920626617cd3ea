// cpu_queue.hpp — the CPU backend's queues and events (private to the backend).
//
// A CpuQueue owns one worker thread that runs closures in submission order, so a
// copy happens when the worker reaches it, never at submission: the same
// asynchrony a GPU stream has, which is what makes the CPU backend a faithful
// reference. The worker, the events and their failure rules are
// device/worker_queue.hpp, shared with the Vulkan backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "device/worker_queue.hpp"
#include "outcore/device/queue.hpp"

namespace outcore::cpu {

using Signal = detail::HostSignal;
using CpuEvent = detail::WorkerEvent;

/// An ordered queue backed by one worker thread (detail::WorkerQueue): copies and
/// fills are host memcpy/memset tasks the worker runs in order.
class CpuQueue final : public detail::WorkerQueue {
public:
    CpuQueue(Device& device, QueueRole role);
    /// Drains every submitted item, joins the worker; logs an unreported failure.
    ~CpuQueue() override;

private:
    void do_copy(const BufferView& src, const BufferView& dst, HostRange host, std::uint64_t bytes) override;
    void do_copy_2d(const BufferView& buffer, HostRange host, const Copy2D& shape) override;
    void do_fill(const BufferView& dst, std::byte value) override;
};

/// Address of a view's first byte in host memory. Every CPU block, Device kind
/// included, is host memory at RawBlock::native (+ offsets); RawBlock::host stays null
/// for Device memory on purpose, so only the backend takes this path.
[[nodiscard]] inline std::byte* address_of(const BufferView& view) noexcept {
    return reinterpret_cast<std::byte*>(view.block.native + view.native_offset());
}

}  // namespace outcore::cpu
