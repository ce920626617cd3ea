#include "cpu_queue.hpp"

#include <cstring>
#include <utility>

namespace outcore::cpu {

CpuQueue::CpuQueue(Device& device, QueueRole role) : WorkerQueue(device, role, "cpu") { start(); }

CpuQueue::~CpuQueue() { stop(); }

void CpuQueue::do_copy(const BufferView& src, const BufferView& dst, HostRange host, std::uint64_t bytes) {
    if (bytes == 0) return;
    // Resolve addresses now (they are plain numbers); touch the bytes only when the
    // worker gets here, as a GPU copy engine would.
    const std::byte* from = host.src != nullptr ? static_cast<const std::byte*>(host.src) : address_of(src);
    std::byte* to = host.dst != nullptr ? static_cast<std::byte*>(host.dst) : address_of(dst);
    const auto n = static_cast<std::size_t>(bytes);
    enqueue([from, to, n] { std::memcpy(to, from, n); });
}

void CpuQueue::do_copy_2d(const BufferView& buffer, HostRange host, const Copy2D& shape) {
    // One task for the whole region: the runs are copied back to back by the worker.
    std::byte* dev = address_of(buffer);
    const bool up = host.src != nullptr;
    const std::byte* from = up ? static_cast<const std::byte*>(host.src) : dev;
    std::byte* to = up ? dev : static_cast<std::byte*>(host.dst);
    const std::uint64_t from_pitch = up ? shape.host_pitch_bytes : shape.buffer_pitch_bytes;
    const std::uint64_t to_pitch = up ? shape.buffer_pitch_bytes : shape.host_pitch_bytes;
    enqueue([from, to, from_pitch, to_pitch, shape] {
        for (std::uint64_t r = 0; r < shape.rows; ++r) {
            std::memcpy(to + r * to_pitch, from + r * from_pitch,
                        static_cast<std::size_t>(shape.width_bytes));
        }
    });
}

void CpuQueue::do_fill(const BufferView& dst, std::byte value) {
    if (dst.bytes == 0) return;
    std::byte* to = address_of(dst);
    const auto n = static_cast<std::size_t>(dst.bytes);
    enqueue([to, value, n] { std::memset(to, std::to_integer<int>(value), n); });
}

}  // namespace outcore::cpu
