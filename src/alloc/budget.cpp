#include "outcore/alloc/budget.hpp"

#include <fmt/format.h>

#include <string>

#include "outcore/core/error.hpp"

namespace outcore::alloc {
namespace {
constexpr std::string_view kComponent = "budget";
}  // namespace

Budget::Budget(Allocator& upstream, BudgetOptions options)
    : upstream_(upstream),
      kind_(options.kind),
      watermark_bytes_(options.watermark_bytes),
      on_watermark_(std::move(options.on_watermark)),
      limit_bytes_(options.limit_bytes) {
    snapshot_source_ = monitor::Source([this](monitor::Snapshot& s) {
        const bool host = kind_ && tier_of(*kind_) != Tier::Device;
        std::lock_guard lock(mutex_);
        (host ? s.host : s.device).budget_bytes += limit_bytes_;
    });
}

std::uint64_t Budget::bytes_used() const {
    std::lock_guard lock(mutex_);
    return used_bytes_;
}

std::uint64_t Budget::limit_bytes() const {
    std::lock_guard lock(mutex_);
    return limit_bytes_;
}

void Budget::set_limit(std::uint64_t limit_bytes) {
    std::lock_guard lock(mutex_);
    limit_bytes_ = limit_bytes;
}

void Budget::reserve(std::uint64_t bytes, const AllocationRequest& request, std::string_view reason) {
    // The watermark is judged when an allocation is committed (do_allocate), not
    // here, so a reservation that upstream then refuses never fires it.
    std::lock_guard lock(mutex_);
    // Written so it cannot overflow: used_bytes_ may exceed a lowered limit.
    const bool fits = used_bytes_ <= limit_bytes_ && bytes <= limit_bytes_ - used_bytes_;
    if (!fits) {
        OutOfMemoryInfo info;
        info.requested_bytes = request.bytes;
        info.tier = tier_of(request.kind);
        info.budget_bytes = limit_bytes_;
        info.in_use_bytes = used_bytes_;
        // largest_free_bytes stays 0: a budget has no address ranges, and what is left
        // (budget - in use) is in the message already.
        throw OutOfMemory(kComponent, reason, info);
    }
    used_bytes_ += bytes;
}

void Budget::unreserve(std::uint64_t bytes) noexcept {
    std::lock_guard lock(mutex_);
    used_bytes_ -= bytes;
    if (watermark_bytes_ != 0 && used_bytes_ < watermark_bytes_) above_watermark_ = false;
}

RawBlock Budget::do_allocate(const AllocationRequest& request) {
    if (!counts(request.kind)) return upstream_.allocate_raw(request);

    reserve(request.bytes, request, "budget exceeded");
    RawBlock raw;
    try {
        raw = upstream_.allocate_raw(request);
    } catch (...) {
        unreserve(request.bytes);
        throw;
    }

    // Count what upstream really handed out, so deallocate (which sees only the
    // block) gives back exactly what was taken.
    if (raw.bytes > request.bytes) {
        try {
            reserve(raw.bytes - request.bytes, request,
                    fmt::format("budget exceeded (upstream rounded {} bytes up to {})", request.bytes,
                                raw.bytes));
        } catch (...) {
            upstream_.deallocate_raw(raw);
            unreserve(request.bytes);
            throw;
        }
    } else if (raw.bytes < request.bytes) {
        unreserve(request.bytes - raw.bytes);
    }

    std::optional<BudgetWatermark> crossed;
    {
        std::lock_guard lock(mutex_);
        if (watermark_bytes_ != 0 && !above_watermark_ && used_bytes_ >= watermark_bytes_) {
            above_watermark_ = true;
            crossed = BudgetWatermark{used_bytes_, watermark_bytes_, limit_bytes_};
        }
    }
    if (crossed && on_watermark_) {
        try {
            on_watermark_(*crossed);
        } catch (...) {
            do_deallocate(raw);
            throw;
        }
    }
    return raw;
}

void Budget::do_deallocate(const RawBlock& block) noexcept {
    // Upstream first: once the bytes are unreserved another thread may ask upstream
    // for them, and they must be free there by then.
    upstream_.deallocate_raw(block);
    if (counts(block.kind)) unreserve(block.bytes);
}

}  // namespace outcore::alloc
