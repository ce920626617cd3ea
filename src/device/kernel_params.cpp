#include "outcore/device/kernel_params.hpp"

#include <memory>

#include "outcore/device/device.hpp"

namespace outcore {

KernelParams KernelParams::make(Device& device, Queue& queue, std::span<const std::byte> bytes) {
    KernelParams p;
    p.size_ = bytes.size();
    if (fits_inline(device.info(), bytes.size())) {
        p.inline_.assign(bytes.begin(), bytes.end());
        return p;
    }
    p.buffer_ = device.allocate({.bytes = bytes.size(), .kind = MemoryKind::Device, .tag = "kernel.params"});
    // Staging copy: the caller's span may die before the queue reaches the upload.
    auto staging = std::make_shared<std::vector<std::byte>>(bytes.begin(), bytes.end());
    queue.upload(staging->data(), BufferView(p.buffer_));
    queue.host_task([staging] {});  // keeps the staging bytes alive until the upload ran
    return p;
}

}  // namespace outcore
