// outcore/alloc/alias_planner.hpp — offsets for resources that may share memory
// because they are never live at the same time (Metal's makeAliasable, planned ahead).
//
// Each resource has a size, an alignment and a lifetime [first_use, last_use] in
// steps (inclusive). The planner gives every resource an offset in one arena such
// that two resources whose lifetimes intersect never overlap in memory, and reports
// the arena's size (peak_bytes) next to what no aliasing would need (sum_bytes).
//
//   outcore::alloc::AliasPlanner planner;
//   auto a = planner.add({.bytes = 64 * kMiB, .alignment = 256, .first_use = 0, .last_use = 1});
//   auto b = planner.add({.bytes = 64 * kMiB, .alignment = 256, .first_use = 2, .last_use = 3});
//   outcore::alloc::AliasPlan plan = planner.plan();   // b reuses a's bytes
//   plan.validate();                                   // proves it; throws InternalError if not
//   heap_block = heap.allocate({.bytes = plan.peak_bytes});
//   use(heap_block, plan.offsets_bytes[a]);
//
// The algorithm is the greedy-by-size one of TFLite's arena planner and ggml-alloc:
// resources sorted by size (largest first), each placed at the lowest aligned offset
// that does not collide with an already placed resource whose lifetime intersects.
// It is a heuristic (the optimum is NP-hard); if it ever needs more than laying the
// resources out back to back, that layout is returned instead, so
// live_lower_bound_bytes <= peak_bytes <= sum_bytes always holds.
//
// Pure: no device calls, no allocation of device memory. Not thread-safe (a value type).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace outcore::alloc {

/// One resource to place.
struct AliasResource {
    /// Size; must be > 0.
    std::uint64_t bytes = 0;
    /// Required alignment of the offset; a power of two.
    std::uint64_t alignment = 1;
    /// First step at which the resource is live.
    std::uint64_t first_use = 0;
    /// Last step at which the resource is live (inclusive); >= first_use.
    std::uint64_t last_use = 0;
    /// Optional name for messages; must outlive the planner (a string literal).
    std::string_view tag = {};

    /// True when both are live at some common step.
    [[nodiscard]] bool lifetime_intersects(const AliasResource& other) const noexcept {
        return first_use <= other.last_use && other.first_use <= last_use;
    }
};

/// The result: an offset per resource, in the order the resources were added.
struct AliasPlan {
    std::vector<AliasResource> resources;
    /// offsets_bytes[i] is resource i's offset from the start of the arena.
    std::vector<std::uint64_t> offsets_bytes;
    /// Arena size the plan needs: max over resources of offset + bytes (0 if none).
    std::uint64_t peak_bytes = 0;
    /// Arena size without aliasing: every resource back to back, each aligned.
    std::uint64_t sum_bytes = 0;
    /// No plan can need less: max over steps of the bytes live at that step.
    std::uint64_t live_lower_bound_bytes = 0;
    /// True when the greedy placement was worse than no aliasing and the back-to-back
    /// layout was returned instead.
    bool fell_back_to_sequential = false;

    /// Bytes aliasing saves against no aliasing.
    [[nodiscard]] std::uint64_t saved_bytes() const noexcept { return sum_bytes - peak_bytes; }

    /// Proves the plan: every offset aligned, no two resources with intersecting
    /// lifetimes overlapping in memory, peak_bytes the true maximum end, and
    /// live_lower_bound_bytes <= peak_bytes <= sum_bytes. Throws InternalError naming
    /// the first offending resource (or pair). O(n^2).
    void validate() const;
};

/// Collects resources and plans their offsets. A value type; not thread-safe.
class AliasPlanner {
public:
    /// Adds a resource and returns its index in the plan. Throws UsageError for 0
    /// bytes, a non-power-of-two alignment or first_use > last_use.
    std::size_t add(const AliasResource& resource);
    /// Number of resources added.
    [[nodiscard]] std::size_t size() const noexcept { return resources_.size(); }
    [[nodiscard]] const std::vector<AliasResource>& resources() const noexcept { return resources_; }
    /// Removes every resource.
    void clear() noexcept { resources_.clear(); }

    /// Plans offsets for every resource added so far. Deterministic: the same
    /// resources in the same order give the same plan. Throws UsageError when the
    /// arena size would overflow 2^64-1 bytes.
    [[nodiscard]] AliasPlan plan() const;

private:
    std::vector<AliasResource> resources_;
};

/// Checks and plans `resources` in one call (as AliasPlanner::add each, then plan).
/// Throws UsageError on a bad resource (naming its index) or on overflow.
[[nodiscard]] AliasPlan plan_aliasing(std::span<const AliasResource> resources);

/// Max over steps of the sum of bytes live at that step: the least memory any valid
/// plan needs (alignment aside). Throws UsageError on a bad resource or overflow.
[[nodiscard]] std::uint64_t live_lower_bound_bytes(std::span<const AliasResource> resources);

}  // namespace outcore::alloc
