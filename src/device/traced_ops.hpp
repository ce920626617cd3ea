// device/traced_ops.hpp — how backends that time their own queue work (CUDA events,
// Vulkan timestamps) name it in traces (private to outcore; docs/tracing.md).
#pragma once

#include <string_view>

#include "outcore/device/queue.hpp"
#include "outcore/monitor/hooks.hpp"

namespace outcore::detail {

/// The trace track of a queue's role (Pipeline's queue names; General queues are not
/// traced by the backend: the swap store reports its moves itself).
[[nodiscard]] constexpr std::string_view queue_track(QueueRole role) noexcept {
    switch (role) {
        case QueueRole::Upload: return "upload";
        case QueueRole::Download: return "download";
        default: return "compute";
    }
}

/// A copy from host memory to device memory is an upload, the other way a download,
/// anything else a device copy.
[[nodiscard]] constexpr monitor::OpKind copy_kind(bool from_host, bool to_host) noexcept {
    if (from_host && !to_host) return monitor::OpKind::Upload;
    if (!from_host && to_host) return monitor::OpKind::Download;
    return monitor::OpKind::DeviceCopy;
}

/// The name a traced copy of `kind` carries.
[[nodiscard]] constexpr std::string_view copy_name(monitor::OpKind kind) noexcept {
    switch (kind) {
        case monitor::OpKind::Upload: return "upload";
        case monitor::OpKind::Download: return "download";
        default: return "copy";
    }
}

}  // namespace outcore::detail
