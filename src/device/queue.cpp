#include "outcore/device/queue.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "outcore/core/error.hpp"
#include "outcore/device/device.hpp"

namespace outcore {

void Queue::check_view(const BufferView& view, const char* what) const {
    if (view.block.device_id != device_->id()) {
        throw UsageError("queue", fmt::format("{}: the buffer belongs to another device", what));
    }
    if (view.offset > view.block.bytes || view.bytes > view.block.bytes - view.offset) {
        throw UsageError("queue", fmt::format("{}: range [{}, +{}) outside a block of {} bytes", what,
                                              view.offset, view.bytes, view.block.bytes));
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
        if (a < b + dst.bytes && b < a + src.bytes)
            throw UsageError("queue", "copy between overlapping ranges");
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

std::uint64_t Copy2D::buffer_span_bytes() const noexcept {
    return rows == 0 || width_bytes == 0 ? 0 : (rows - 1) * buffer_pitch_bytes + width_bytes;
}

std::uint64_t Copy2D::host_span_bytes() const noexcept {
    return rows == 0 || width_bytes == 0 ? 0 : (rows - 1) * host_pitch_bytes + width_bytes;
}

void Copy2D::validate(const char* what) const {
    if (width_bytes > host_pitch_bytes || width_bytes > buffer_pitch_bytes) {
        throw UsageError("queue", fmt::format("{}: run of {} bytes wider than its pitch ({} host, {} buffer)",
                                              what, width_bytes, host_pitch_bytes, buffer_pitch_bytes));
    }
    if (rows == 0 || width_bytes == 0) return;
    const std::uint64_t limit = UINT64_MAX - width_bytes;
    if (rows - 1 > limit / std::max<std::uint64_t>(1, buffer_pitch_bytes) ||
        rows - 1 > limit / std::max<std::uint64_t>(1, host_pitch_bytes)) {
        throw UsageError("queue", fmt::format("{}: {} runs of pitch {} overflow", what, rows,
                                              std::max(host_pitch_bytes, buffer_pitch_bytes)));
    }
}

namespace {

/// UsageError unless `shape` is a well-formed 2-D copy that fits `view`.
void check_2d(const BufferView& view, const Copy2D& shape, const char* what) {
    shape.validate(what);
    if (shape.buffer_span_bytes() > view.bytes) {
        throw UsageError("queue", fmt::format("{}: {} runs span {} bytes, the buffer has {}", what,
                                              shape.rows, shape.buffer_span_bytes(), view.bytes));
    }
}

}  // namespace

void Queue::upload_2d(const void* src, const BufferView& dst, const Copy2D& shape) {
    check_view(dst, "upload_2d destination");
    if (src == nullptr) throw UsageError("queue", "upload_2d from a null host pointer");
    check_2d(dst, shape, "upload_2d");
    if (shape.rows == 0 || shape.width_bytes == 0) return;
    do_copy_2d(dst, HostRange{src, nullptr}, shape);
}

void Queue::download_2d(const BufferView& src, void* dst, const Copy2D& shape) {
    check_view(src, "download_2d source");
    if (dst == nullptr) throw UsageError("queue", "download_2d into a null host pointer");
    check_2d(src, shape, "download_2d");
    if (shape.rows == 0 || shape.width_bytes == 0) return;
    do_copy_2d(src, HostRange{nullptr, dst}, shape);
}

void Queue::do_copy_2d(const BufferView& buffer, HostRange host, const Copy2D& shape) {
    for (std::uint64_t r = 0; r < shape.rows; ++r) {
        const BufferView run = buffer.sub(r * shape.buffer_pitch_bytes, shape.width_bytes);
        const std::uint64_t h = r * shape.host_pitch_bytes;
        if (host.src != nullptr) {
            do_copy({}, run, HostRange{static_cast<const std::byte*>(host.src) + h, nullptr},
                    shape.width_bytes);
        } else {
            do_copy(run, {}, HostRange{nullptr, static_cast<std::byte*>(host.dst) + h}, shape.width_bytes);
        }
    }
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
