// outcore/alloc/statistics.hpp — counts what passes through it: bytes in use, peak,
// allocations, overall, per tag and per MemoryKind (Metal's currentAllocatedSize,
// broken down).
//
//   outcore::alloc::Statistics stats(budget);
//   outcore::Block b = stats.allocate({.bytes = 4 * kMiB, .tag = "gemm.a"});
//   outcore::alloc::StatisticsSnapshot s = stats.snapshot();
//   s.total.current_bytes;                  // 4 MiB
//   s.by_tag.at("gemm.a").peak_bytes;       // 4 MiB
//   s.of(MemoryKind::Device).allocation_count;
//   stats.reset_peak();                     // peaks restart from current usage
//
// Bytes are what upstream handed out (RawBlock::bytes), so the counts balance: once
// every block is freed, every current_* is 0. Thread-safe. The upstream is held by
// reference and must outlive the Statistics, which must outlive its Blocks.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "outcore/device/allocator.hpp"

namespace outcore::alloc {

/// Counters for one slice of the traffic (all of it, one tag, or one kind).
struct AllocationCounters {
    /// Bytes live now.
    std::uint64_t current_bytes = 0;
    /// Highest current_bytes since construction or the last reset_peak().
    std::uint64_t peak_bytes = 0;
    /// Blocks live now.
    std::uint64_t current_count = 0;
    /// Allocations made since construction (monotonic).
    std::uint64_t allocation_count = 0;
    /// Bytes allocated since construction (monotonic; frees do not subtract).
    std::uint64_t total_allocated_bytes = 0;

    friend bool operator==(const AllocationCounters&, const AllocationCounters&) = default;
};

/// A copy of every counter at one moment.
struct StatisticsSnapshot {
    AllocationCounters total;
    /// Indexed by MemoryKind.
    std::array<AllocationCounters, kMemoryKindCount> by_kind{};
    /// Keyed by tag text; untagged requests count under "".
    std::map<std::string, AllocationCounters, std::less<>> by_tag;

    [[nodiscard]] const AllocationCounters& of(MemoryKind kind) const noexcept {
        return by_kind[static_cast<std::size_t>(kind)];
    }
};

class Statistics final : public Allocator {
public:
    /// Wraps `upstream` (held by reference, must outlive this).
    explicit Statistics(Allocator& upstream);
    ~Statistics() override;

    /// Every counter, copied under the lock (a consistent view).
    [[nodiscard]] StatisticsSnapshot snapshot() const;
    /// Overall counters only (cheaper than snapshot()).
    [[nodiscard]] AllocationCounters total() const;
    /// Sets every peak to its current value.
    void reset_peak();

private:
    RawBlock do_allocate(const AllocationRequest& request) override;
    void do_deallocate(const RawBlock& block) noexcept override;

    struct State;
    Allocator& upstream_;
    std::unique_ptr<State> state_;  // counters and the tag of each live block, under one lock
};

}  // namespace outcore::alloc
