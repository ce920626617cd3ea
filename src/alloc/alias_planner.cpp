#include "outcore/alloc/alias_planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <utility>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"

namespace outcore::alloc {
namespace {

constexpr std::string_view kComponent = "alias-planner";

std::string describe(const std::vector<AliasResource>& resources, std::size_t i) {
    const AliasResource& r = resources[i];
    if (r.tag.empty()) return fmt::format("resource {}", i);
    return fmt::format("resource {} ('{}')", i, r.tag);
}

void check_resource(const AliasResource& r, std::size_t index) {
    if (r.bytes == 0) {
        throw UsageError(kComponent, fmt::format("resource {} has 0 bytes", index));
    }
    if (!is_power_of_two(r.alignment)) {
        throw UsageError(kComponent,
                         fmt::format("resource {} alignment {} is not a power of two", index, r.alignment));
    }
    if (r.first_use > r.last_use) {
        throw UsageError(kComponent, fmt::format("resource {} first_use {} is after last_use {}", index,
                                                 r.first_use, r.last_use));
    }
    // The resource must fit somewhere in a 64-bit arena at its alignment.
    if (r.bytes > ~std::uint64_t{0} - (r.alignment - 1)) {
        throw UsageError(kComponent,
                         fmt::format("resource {} of {} bytes overflows the arena", index, r.bytes));
    }
}

// Overflow-aware helpers: "does not fit in 2^64" is a value here so the greedy pass
// can fall back instead of failing.
std::optional<std::uint64_t> add_u64(std::uint64_t a, std::uint64_t b) {
    if (a > ~std::uint64_t{0} - b) return std::nullopt;
    return a + b;
}
std::optional<std::uint64_t> align_up_u64(std::uint64_t value, std::uint64_t alignment) {
    auto bumped = add_u64(value, alignment - 1);
    if (!bumped) return std::nullopt;
    return *bumped & ~(alignment - 1);
}

struct Interval {
    std::uint64_t begin;
    std::uint64_t end;
};

// Back to back in order of decreasing alignment (then size, then index), which keeps
// padding small: what a heap without aliasing would need.
std::optional<std::vector<std::uint64_t>> place_sequential(const std::vector<AliasResource>& resources,
                                                           std::uint64_t& end_bytes) {
    std::vector<std::size_t> order(resources.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        const AliasResource& ra = resources[a];
        const AliasResource& rb = resources[b];
        if (ra.alignment != rb.alignment) return ra.alignment > rb.alignment;
        if (ra.bytes != rb.bytes) return ra.bytes > rb.bytes;
        return a < b;
    });
    std::vector<std::uint64_t> offsets(resources.size(), 0);
    std::uint64_t end = 0;
    for (std::size_t i : order) {
        auto offset = align_up_u64(end, resources[i].alignment);
        if (!offset) return std::nullopt;
        auto next = add_u64(*offset, resources[i].bytes);
        if (!next) return std::nullopt;
        offsets[i] = *offset;
        end = *next;
    }
    end_bytes = end;
    return offsets;
}

// Greedy by size: largest first, each at the lowest aligned offset free of every
// already placed resource whose lifetime intersects. nullopt on 64-bit overflow.
std::optional<std::vector<std::uint64_t>> place_greedy(const std::vector<AliasResource>& resources,
                                                       std::uint64_t& peak_bytes) {
    std::vector<std::size_t> order(resources.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    // Ties broken by alignment then index so the plan is deterministic.
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        const AliasResource& ra = resources[a];
        const AliasResource& rb = resources[b];
        if (ra.bytes != rb.bytes) return ra.bytes > rb.bytes;
        if (ra.alignment != rb.alignment) return ra.alignment > rb.alignment;
        return a < b;
    });

    std::vector<std::uint64_t> offsets(resources.size(), 0);
    std::vector<std::size_t> placed;
    placed.reserve(resources.size());
    std::vector<Interval> busy;
    std::uint64_t peak = 0;
    for (std::size_t i : order) {
        const AliasResource& r = resources[i];
        busy.clear();
        for (std::size_t j : placed) {
            if (r.lifetime_intersects(resources[j]))
                busy.push_back({offsets[j], offsets[j] + resources[j].bytes});
        }
        std::sort(busy.begin(), busy.end(),
                  [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
        // Invariant: every interval already scanned ends at or before x, so the first
        // interval starting at or after x + bytes leaves room at x.
        std::uint64_t x = 0;
        for (const Interval& iv : busy) {
            auto x_end = add_u64(x, r.bytes);
            if (!x_end) return std::nullopt;
            if (*x_end <= iv.begin) break;
            if (iv.end > x) {
                auto next = align_up_u64(iv.end, r.alignment);
                if (!next) return std::nullopt;
                x = *next;
            }
        }
        auto end = add_u64(x, r.bytes);
        if (!end) return std::nullopt;
        offsets[i] = x;
        peak = std::max(peak, *end);
        placed.push_back(i);
    }
    peak_bytes = peak;
    return offsets;
}

std::uint64_t lower_bound_of(const std::vector<AliasResource>& resources) {
    // Sweep over lifetime events; at equal steps starts come before ends because
    // last_use is inclusive.
    struct Event {
        std::uint64_t step;
        bool is_end;
        std::uint64_t bytes;
    };
    std::vector<Event> events;
    events.reserve(resources.size() * 2);
    for (const AliasResource& r : resources) {
        events.push_back({r.first_use, false, r.bytes});
        events.push_back({r.last_use, true, r.bytes});
    }
    std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
        if (a.step != b.step) return a.step < b.step;
        return !a.is_end && b.is_end;
    });
    std::uint64_t live = 0;
    std::uint64_t best = 0;
    for (const Event& e : events) {
        if (e.is_end) {
            live -= e.bytes;
        } else {
            live = checked_add(live, e.bytes, kComponent);
            best = std::max(best, live);
        }
    }
    return best;
}

}  // namespace

void AliasPlan::validate() const {
    if (offsets_bytes.size() != resources.size()) {
        throw InternalError(kComponent, fmt::format("plan has {} offsets for {} resources",
                                                    offsets_bytes.size(), resources.size()));
    }
    std::uint64_t max_end = 0;
    for (std::size_t i = 0; i < resources.size(); ++i) {
        const AliasResource& r = resources[i];
        const std::uint64_t offset = offsets_bytes[i];
        if (r.bytes == 0 || !is_power_of_two(r.alignment) || r.first_use > r.last_use) {
            throw InternalError(kComponent, fmt::format("{} is malformed", describe(resources, i)));
        }
        if (offset % r.alignment != 0) {
            throw InternalError(kComponent, fmt::format("{} at offset {} is not aligned to {}",
                                                        describe(resources, i), offset, r.alignment));
        }
        if (offset > ~std::uint64_t{0} - r.bytes) {
            throw InternalError(kComponent,
                                fmt::format("{} at offset {} overflows", describe(resources, i), offset));
        }
        max_end = std::max(max_end, offset + r.bytes);
    }
    for (std::size_t i = 0; i < resources.size(); ++i) {
        const AliasResource& a = resources[i];
        const std::uint64_t a_begin = offsets_bytes[i];
        const std::uint64_t a_end = a_begin + a.bytes;
        for (std::size_t j = i + 1; j < resources.size(); ++j) {
            const AliasResource& b = resources[j];
            if (!a.lifetime_intersects(b)) continue;
            const std::uint64_t b_begin = offsets_bytes[j];
            const std::uint64_t b_end = b_begin + b.bytes;
            if (a_begin < b_end && b_begin < a_end) {
                throw InternalError(
                    kComponent,
                    fmt::format("{} and {} overlap in memory ([{}, {}) and [{}, {})) while both live "
                                "(steps {}..{})",
                                describe(resources, i), describe(resources, j), a_begin, a_end, b_begin,
                                b_end, std::max(a.first_use, b.first_use), std::min(a.last_use, b.last_use)));
            }
        }
    }
    if (max_end != peak_bytes) {
        throw InternalError(kComponent,
                            fmt::format("peak_bytes {} but resources end at {}", peak_bytes, max_end));
    }
    const std::uint64_t bound = lower_bound_of(resources);
    if (bound != live_lower_bound_bytes) {
        throw InternalError(kComponent, fmt::format("live_lower_bound_bytes {} but live bytes peak at {}",
                                                    live_lower_bound_bytes, bound));
    }
    if (peak_bytes < bound || peak_bytes > sum_bytes) {
        throw InternalError(kComponent, fmt::format("peak_bytes {} outside [live lower bound {}, sum {}]",
                                                    peak_bytes, bound, sum_bytes));
    }
}

std::size_t AliasPlanner::add(const AliasResource& resource) {
    check_resource(resource, resources_.size());
    resources_.push_back(resource);
    return resources_.size() - 1;
}

AliasPlan AliasPlanner::plan() const {
    AliasPlan plan;
    plan.resources = resources_;
    std::uint64_t sequential_end = 0;
    auto sequential = place_sequential(resources_, sequential_end);
    if (!sequential) {
        throw UsageError(kComponent, fmt::format("{} resources need more than 2^64-1 bytes without aliasing",
                                                 resources_.size()));
    }
    plan.sum_bytes = sequential_end;
    plan.live_lower_bound_bytes = lower_bound_of(resources_);

    std::uint64_t greedy_peak = 0;
    auto greedy = place_greedy(resources_, greedy_peak);
    if (greedy && greedy_peak <= sequential_end) {
        plan.offsets_bytes = std::move(*greedy);
        plan.peak_bytes = greedy_peak;
    } else {
        // Alignment padding can make greedy placement worse than no aliasing at all;
        // never hand out a plan that needs more than not aliasing.
        plan.offsets_bytes = std::move(*sequential);
        plan.peak_bytes = sequential_end;
        plan.fell_back_to_sequential = true;
    }
    return plan;
}

AliasPlan plan_aliasing(std::span<const AliasResource> resources) {
    AliasPlanner planner;
    for (const AliasResource& r : resources) planner.add(r);
    return planner.plan();
}

std::uint64_t live_lower_bound_bytes(std::span<const AliasResource> resources) {
    std::vector<AliasResource> copy(resources.begin(), resources.end());
    for (std::size_t i = 0; i < copy.size(); ++i) check_resource(copy[i], i);
    return lower_bound_of(copy);
}

}  // namespace outcore::alloc
