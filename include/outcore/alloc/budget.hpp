// outcore/alloc/budget.hpp — a hard memory limit as an Allocator over another one.
//
// Budget reserves a request's bytes against its limit before it asks upstream, and
// gives them back if upstream throws (as rmm's limiting_resource_adaptor does), so
// concurrent requests can never together exceed the limit. A soft watermark below
// the limit calls a function once each time usage rises to it.
//
//   outcore::alloc::Budget budget(device, {
//       .limit_bytes = 2 * kGiB,
//       .kind = MemoryKind::Device,                 // other kinds pass through uncounted
//       .watermark_bytes = 3 * kGiB / 2,
//       .on_watermark = [&](const BudgetWatermark& w) { store.start_evicting(); },
//   });
//   outcore::Block b = budget.allocate({.bytes = 64 * kMiB, .tag = "slot"});
//   // over the limit: OutOfMemory with requested, tier, budget and in_use filled
//
// Thread-safe. The upstream is held by reference and must outlive the Budget; the
// Budget must outlive every Block it hands out. Each Budget adds its limit to the
// budget of its kind's tier in monitor::snapshot() (device for a Budget counting every
// kind); the bytes themselves are counted by the Device.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string_view>

#include "outcore/device/allocator.hpp"
#include "outcore/monitor/snapshot.hpp"

namespace outcore::alloc {

/// What the watermark callback is told.
struct BudgetWatermark {
    /// Usage right after the allocation that reached the watermark.
    std::uint64_t used_bytes = 0;
    std::uint64_t watermark_bytes = 0;
    std::uint64_t limit_bytes = 0;
};

struct BudgetOptions {
    /// Hard limit: requests that would take usage above it throw OutOfMemory.
    std::uint64_t limit_bytes = 0;
    /// The one kind the limit counts; std::nullopt counts every kind. Requests of
    /// other kinds pass through unchecked and uncounted.
    std::optional<MemoryKind> kind = std::nullopt;
    /// Soft watermark; 0 turns it off. When usage rises from below it to at or above
    /// it, on_watermark is called once; it can fire again after usage falls below.
    std::uint64_t watermark_bytes = 0;
    /// Called outside the Budget's lock, on the allocating thread, after the
    /// allocation succeeded; it may allocate or free through this Budget. If it
    /// throws, that allocation is given back and the exception propagates.
    std::function<void(const BudgetWatermark&)> on_watermark = {};
};

class Budget final : public Allocator {
public:
    /// Wraps `upstream` (held by reference, must outlive this).
    Budget(Allocator& upstream, BudgetOptions options);
    ~Budget() override = default;

    /// Bytes currently counted against the limit (the counted kind(s) only).
    [[nodiscard]] std::uint64_t bytes_used() const;
    /// The current hard limit.
    [[nodiscard]] std::uint64_t limit_bytes() const;
    /// Changes the limit at runtime. A limit below bytes_used() is allowed: blocks
    /// already handed out stay valid, and new requests fail until usage drops.
    void set_limit(std::uint64_t limit_bytes);
    [[nodiscard]] std::uint64_t watermark_bytes() const noexcept { return watermark_bytes_; }
    /// Whether requests of `kind` count against the limit.
    [[nodiscard]] bool counts(MemoryKind kind) const noexcept { return !kind_ || *kind_ == kind; }

private:
    RawBlock do_allocate(const AllocationRequest& request) override;
    void do_deallocate(const RawBlock& block) noexcept override;

    /// Adds `bytes` to the usage if it stays within the limit; otherwise throws
    /// OutOfMemory for `request` (usage unchanged).
    void reserve(std::uint64_t bytes, const AllocationRequest& request, std::string_view reason);
    void unreserve(std::uint64_t bytes) noexcept;

    Allocator& upstream_;
    const std::optional<MemoryKind> kind_;
    const std::uint64_t watermark_bytes_;
    const std::function<void(const BudgetWatermark&)> on_watermark_;

    mutable std::mutex mutex_;
    std::uint64_t used_bytes_ = 0;   // guarded by mutex_
    std::uint64_t limit_bytes_ = 0;  // guarded by mutex_
    bool above_watermark_ = false;   // guarded by mutex_
    /// Adds limit_bytes_ to monitor::snapshot(); last, so it goes first.
    monitor::Source snapshot_source_;
};

}  // namespace outcore::alloc
