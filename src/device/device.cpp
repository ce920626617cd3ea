#include "outcore/device/device.hpp"

#include <fmt/format.h>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/monitor/environment.hpp"
#include "outcore/monitor/hooks.hpp"

namespace outcore {

namespace {
std::atomic<std::uint64_t> g_next_device_id{1};

std::size_t slot(MemoryKind kind) noexcept { return static_cast<std::size_t>(kind); }
}  // namespace

Device::Device(DeviceInfo info) : info_(std::move(info)), id_(g_next_device_id.fetch_add(1)) {
    if (!is_power_of_two(info_.min_offset_alignment)) {
        throw InternalError(info_.backend, fmt::format("device alignment {} is not a power of two",
                                                       info_.min_offset_alignment));
    }
    monitor::start_from_environment();  // OUTCORE_TRACE and friends, once per process
    snapshot_source_ = monitor::Source([this](monitor::Snapshot& s) {
        const auto add = [&](monitor::TierGauge& g, MemoryKind kind) {
            g.resident_bytes += allocated_bytes(kind);
            g.peak_bytes += peak_bytes(kind);
        };
        add(s.device, MemoryKind::Device);
        add(s.host, MemoryKind::HostPinned);
        add(s.host, MemoryKind::HostCached);
        for (std::size_t k = 0; k < kMemoryKindCount; ++k) {
            s.live_allocations += count_[k].load(std::memory_order_relaxed);
        }
    });
}

std::uint64_t Device::allocated_bytes(MemoryKind kind) const noexcept {
    return bytes_[slot(kind)].load(std::memory_order_relaxed);
}

std::uint64_t Device::allocation_count(MemoryKind kind) const noexcept {
    return count_[slot(kind)].load(std::memory_order_relaxed);
}

std::uint64_t Device::peak_bytes(MemoryKind kind) const noexcept {
    return peak_[slot(kind)].load(std::memory_order_relaxed);
}

RawBlock Device::do_allocate(const AllocationRequest& request) {
    if (request.bytes > info_.max_allocation_bytes) {
        throw OutOfMemory(info_.backend, "larger than the device's largest allocation",
                          OutOfMemoryInfo{.requested_bytes = request.bytes,
                                          .tier = tier_of(request.kind),
                                          .budget_bytes = info_.max_allocation_bytes,
                                          .in_use_bytes = allocated_bytes(request.kind)});
    }
    RawBlock block = do_allocate_native(request);
    block.kind = request.kind;
    block.device_id = id_;
    const std::uint64_t now =
        bytes_[slot(request.kind)].fetch_add(block.bytes, std::memory_order_relaxed) + block.bytes;
    count_[slot(request.kind)].fetch_add(1, std::memory_order_relaxed);
    std::atomic<std::uint64_t>& peak = peak_[slot(request.kind)];
    std::uint64_t seen = peak.load(std::memory_order_relaxed);
    while (seen < now && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {}
    if (monitor::observed()) {
        monitor::detail::emit_allocate({.device_id = id_,
                                        .kind = block.kind,
                                        .bytes = block.bytes,
                                        .tag = request.tag,
                                        .native = block.native,
                                        .offset = block.offset,
                                        .time_ns = monitor::now_ns()});
    }
    return block;
}

void Device::do_deallocate(const RawBlock& block) noexcept {
    do_deallocate_native(block);
    bytes_[slot(block.kind)].fetch_sub(block.bytes, std::memory_order_relaxed);
    count_[slot(block.kind)].fetch_sub(1, std::memory_order_relaxed);
    if (monitor::observed()) {
        monitor::detail::emit_free({.device_id = id_,
                                    .kind = block.kind,
                                    .bytes = block.bytes,
                                    .tag = {},
                                    .native = block.native,
                                    .offset = block.offset,
                                    .time_ns = monitor::now_ns()});
    }
}

namespace {
void check_own(const Device& device, const BufferView& range, const char* what) {
    if (range.block.device_id != device.id()) {
        throw UsageError(device.info().backend, fmt::format("{}: the range belongs to another device", what));
    }
    if (range.offset > range.block.bytes || range.bytes > range.block.bytes - range.offset) {
        throw UsageError(device.info().backend, fmt::format("{}: range outside its block", what));
    }
}
}  // namespace

void Device::flush(const BufferView& range) {
    check_own(*this, range, "flush");
    if (range.block.kind == MemoryKind::HostCached) do_flush(range);
}

void Device::invalidate(const BufferView& range) {
    check_own(*this, range, "invalidate");
    if (range.block.kind == MemoryKind::HostCached) do_invalidate(range);
}

void Device::do_flush(const BufferView& /*range*/) {}
void Device::do_invalidate(const BufferView& /*range*/) {}

}  // namespace outcore
