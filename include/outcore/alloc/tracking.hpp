// outcore/alloc/tracking.hpp — remembers every live allocation, for leak reports.
//
// Each live block is kept with its tag, size, kind, time of allocation and, when
// enabled, the stack that allocated it. leak_report() groups what is still live by
// tag; at destruction anything still live is reported through outcore/core/log.hpp.
//
//   outcore::alloc::Tracking tracking(stats);        // stacks on in debug builds
//   {
//       outcore::Block a = tracking.allocate({.bytes = kMiB, .tag = "tile.in"});
//       outcore::alloc::LeakReport r = tracking.leak_report();   // 1 block of "tile.in"
//       std::fputs(tracking.format_leak_report().c_str(), stderr);
//   }
//   tracking.leak_report().empty();                  // true: a was freed
//
// Thread-safe. The upstream is held by reference and must outlive the Tracking,
// which must outlive its Blocks (a leaked Block freed after it is a use-after-free:
// that is what the destruction report is there to point at).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "outcore/device/allocator.hpp"

namespace outcore::alloc {

struct TrackingOptions {
    /// Record the allocating stack (glibc backtrace) with every block. std::nullopt:
    /// on when outcore itself was built without NDEBUG (debug builds), else off.
    std::optional<bool> capture_stack_traces = std::nullopt;
    /// Frames kept per stack (outcore's own frames included).
    std::size_t stack_depth = 16;
    /// At destruction, log the leak report (level error) if anything is still live.
    bool report_at_destruction = true;
};

/// One block still live.
struct LiveAllocation {
    /// The request's tag ("" when untagged); points into the caller's literal.
    std::string_view tag;
    std::uint64_t bytes = 0;
    MemoryKind kind = MemoryKind::Device;
    std::chrono::steady_clock::time_point allocated_at{};
    /// Allocation order through this Tracking, from 0.
    std::uint64_t sequence = 0;
    /// Symbolized frames, innermost first; empty when stacks are not captured.
    std::vector<std::string> stack;
    /// Device::id() of the memory's device (RawBlock::device_id; 0 for memory no device owns).
    std::uint64_t device_id = 0;
};

/// The live blocks of one tag.
struct LeakGroup {
    std::string tag;
    std::uint64_t count = 0;
    std::uint64_t bytes = 0;
    /// Age of the group's oldest block when the report was made, in nanoseconds.
    std::uint64_t oldest_age_ns = 0;
    /// Stack of the oldest block; empty when stacks are not captured.
    std::vector<std::string> oldest_stack;
};

struct LeakReport {
    std::uint64_t count = 0;
    std::uint64_t bytes = 0;
    /// One group per tag, largest bytes first (ties by tag).
    std::vector<LeakGroup> groups;

    [[nodiscard]] bool empty() const noexcept { return count == 0; }
};

/// Text for people: a header line, then one line per tag with its oldest stack.
/// Empty string for an empty report.
[[nodiscard]] std::string format_leak_report(const LeakReport& report);

class Tracking final : public Allocator {
public:
    /// Wraps `upstream` (held by reference, must outlive this).
    explicit Tracking(Allocator& upstream, TrackingOptions options = {});
    /// Logs the leak report if enabled and anything is live. noexcept.
    ~Tracking() override;

    /// Every live block, in allocation order. Symbolizes stacks: meant for reports.
    [[nodiscard]] std::vector<LiveAllocation> live_allocations() const;
    [[nodiscard]] std::uint64_t live_count() const;
    /// What is live now, grouped by tag.
    [[nodiscard]] LeakReport leak_report() const;
    /// format_leak_report(leak_report()).
    [[nodiscard]] std::string format_leak_report() const;
    [[nodiscard]] bool captures_stack_traces() const noexcept { return capture_stacks_; }

private:
    RawBlock do_allocate(const AllocationRequest& request) override;
    void do_deallocate(const RawBlock& block) noexcept override;

    struct State;
    Allocator& upstream_;
    const bool capture_stacks_;
    const std::size_t stack_depth_;
    const bool report_at_destruction_;
    std::unique_ptr<State> state_;  // the live blocks, under one lock
};

}  // namespace outcore::alloc
