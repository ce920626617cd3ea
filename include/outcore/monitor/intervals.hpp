// outcore/monitor/intervals.hpp — arithmetic on busy intervals, shared by the
// pipeline's statistics (tile::PipelineStats) and the trace summary (`outcore report`),
// so that "busy time" and "hidden transfer" mean exactly the same thing in both.
//
//   std::vector<monitor::Interval> copies = ..., kernels = ...;
//   monitor::merge_intervals(kernels);                       // sorted, disjoint
//   std::int64_t hidden = monitor::overlap_ns(copies, kernels);  // |copies ∩ kernels|
//   std::int64_t exposed = monitor::busy_ns(copies) - hidden;
//
// An interval is [begin_ns, end_ns); one with end < begin counts as empty. The
// functions are templates over any range of objects with begin_ns / end_ns members
// (a std::deque of the pipeline's private intervals, a std::vector<Interval>).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace outcore::monitor {

/// A half-open time interval in nanoseconds.
struct Interval {
    std::int64_t begin_ns = 0;
    std::int64_t end_ns = 0;
    friend bool operator==(const Interval&, const Interval&) = default;
};

/// Total length of `intervals`, which must be disjoint (else overlaps count twice).
template <typename Range>
[[nodiscard]] std::int64_t busy_ns(const Range& intervals) {
    std::int64_t total = 0;
    for (const auto& i : intervals) total += std::max<std::int64_t>(0, i.end_ns - i.begin_ns);
    return total;
}

/// Sorts `intervals` and merges overlapping or touching ones, dropping empty ones:
/// afterwards they are sorted, disjoint, and busy_ns() is the length of their union.
inline void merge_intervals(std::vector<Interval>& intervals) {
    std::sort(intervals.begin(), intervals.end(),
              [](const Interval& a, const Interval& b) { return a.begin_ns < b.begin_ns; });
    std::size_t out = 0;
    for (const Interval& i : intervals) {
        if (i.end_ns <= i.begin_ns) continue;
        if (out > 0 && i.begin_ns <= intervals[out - 1].end_ns) {
            intervals[out - 1].end_ns = std::max(intervals[out - 1].end_ns, i.end_ns);
        } else {
            intervals[out++] = i;
        }
    }
    intervals.resize(out);
}

/// |X ∩ C|: the time during which both a member of `x` and a member of `c` run. Both
/// must be sorted by begin and disjoint within themselves (one queue's operations, or
/// merge_intervals output). Linear in |x| + |c|.
template <typename RangeX, typename RangeC>
[[nodiscard]] std::int64_t overlap_ns(const RangeX& x, const RangeC& c) {
    std::int64_t total = 0;
    auto first = std::begin(c);
    const auto last = std::end(c);
    for (const auto& a : x) {
        while (first != last && first->end_ns <= a.begin_ns) ++first;
        for (auto k = first; k != last && k->begin_ns < a.end_ns; ++k) {
            total +=
                std::max<std::int64_t>(0, std::min(a.end_ns, k->end_ns) - std::max(a.begin_ns, k->begin_ns));
        }
    }
    return total;
}

/// The hidden-transfer fraction of PipelineStats: hidden / transfer, 1 when transfer
/// is 0 (nothing to hide). See docs/pipeline.md.
[[nodiscard]] inline double hidden_fraction(std::int64_t hidden_ns, std::int64_t transfer_ns) noexcept {
    return transfer_ns > 0 ? static_cast<double>(hidden_ns) / static_cast<double>(transfer_ns) : 1.0;
}

}  // namespace outcore::monitor
