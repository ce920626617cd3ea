#include "outcore/device/queue.hpp"

#include <fmt/format.h>

#include "outcore/core/error.hpp"
#include "outcore/device/device.hpp"

namespace outcore {

void Queue::check_view(const BufferView& view, const char* what) const {
    if (view.block.device_id != device_->id()) {
        throw UsageError("queue", fmt::format("{}: the buffer belongs to another device", what));
    }
    if (view.offset > view.block.bytes || view.bytes > view.block.bytes - view.offset) {
        throw UsageError("queue", fmt::format("{}: range [{}, +{}) outside a block of {} bytes", what, view.offset,
                                              view.bytes, view.block.bytes));
    }
}

void Queue::copy(const BufferView& src, const BufferView& dst) {
    check_view(src, "copy source");
    check_view(dst, "copy destination");
    if (src.bytes != dst.bytes) {
        throw UsageError("queue", fmt::format("copy of {} bytes into {} bytes", src.bytes, dst.bytes));
    }
    if (src.block.native == dst.block.native) {
        const std::uint64_t a = src.native_offset();
        const std::uint64_t b = dst.native_offset();
        if (a < b + dst.bytes && b < a + src.bytes) throw UsageError("queue", "copy between overlapping ranges");
    }
    if (src.bytes == 0) return;
    do_copy(src, dst, {}, src.bytes);
}

void Queue::upload(const void* src, const BufferView& dst) {
    check_view(dst, "upload destination");
    if (src == nullptr) throw UsageError("queue", "upload from a null host pointer");
    if (dst.bytes == 0) return;
    do_copy({}, dst, HostRange{src, nullptr}, dst.bytes);
}

void Queue::download(const BufferView& src, void* dst) {
    check_view(src, "download source");
    if (dst == nullptr) throw UsageError("queue", "download into a null host pointer");
    if (src.bytes == 0) return;
    do_copy(src, {}, HostRange{nullptr, dst}, src.bytes);
}

void Queue::fill(const BufferView& dst, std::byte value) {
    check_view(dst, "fill");
    if (dst.bytes == 0) return;
    do_fill(dst, value);
}

void Queue::host_task(std::function<void()> task) {
    if (!task) throw UsageError("queue", "host_task without a function");
    do_host_task(std::move(task));
}

}  // namespace outcore
