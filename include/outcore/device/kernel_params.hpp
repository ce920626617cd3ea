// outcore/device/kernel_params.hpp — kernel parameters inline or in a buffer: the
// one place that applies Metal's setBytes rule (≤ 4 KiB inline, else a buffer).
//
//   KernelParams p = KernelParams::make(device, queue, std::as_bytes(std::span(taps)));
//   args.weights = p.view();   // kernels read p either way
//
// Inline parameters travel with the launch (CUDA kernel arguments, Vulkan push
// constants, Metal setBytes); larger ones are uploaded once into a device buffer the
// KernelParams owns. DeviceInfo::max_inline_bytes decides (fits_inline).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "outcore/device/block.hpp"

namespace outcore {

class Device;
class Queue;

class KernelParams {
public:
    KernelParams() = default;
    /// Inline when fits_inline(device.info(), bytes.size()), else a Device buffer
    /// filled by an upload on `queue` (ordered before later work on that queue).
    /// Throws OutOfMemory if the buffer cannot be had.
    [[nodiscard]] static KernelParams make(Device& device, Queue& queue, std::span<const std::byte> bytes);

    [[nodiscard]] bool is_inline() const noexcept { return !buffer_; }
    /// The inline bytes (empty when in a buffer).
    [[nodiscard]] std::span<const std::byte> inline_bytes() const noexcept { return inline_; }
    /// The buffer holding the bytes (an empty view when inline).
    [[nodiscard]] BufferView buffer() const noexcept { return buffer_ ? BufferView(buffer_) : BufferView{}; }
    [[nodiscard]] std::size_t size_bytes() const noexcept { return size_; }

private:
    std::vector<std::byte> inline_;
    Block buffer_;
    std::size_t size_ = 0;
};

}  // namespace outcore
