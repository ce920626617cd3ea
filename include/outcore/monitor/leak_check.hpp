// outcore/monitor/leak_check.hpp — process-wide leak checking: which device memory is
// still allocated, by tag, and (optionally) who allocated it.
//
//   monitor::start_leak_tracking();                    // stacks on in debug builds
//   {
//       Block a = device->allocate({.bytes = kMiB, .tag = "tile.in"});
//       alloc::LeakReport r = monitor::leak_report();  // 1 block of "tile.in", 1 MiB
//       std::fputs(alloc::format_leak_report(r).c_str(), stderr);
//   }
//   monitor::leak_report().empty();                    // true: a was freed
//   monitor::stop_leak_tracking();
//
// Or with no code at all: OUTCORE_LEAK_CHECK=1 (OUTCORE_LEAK_CHECK=stacks for stacks in
// release builds) tracks from the first Device on and, at exit, prints the report to
// stderr and ends the process with kLeakExitCode (8) if anything is still allocated.
//
// A LeakChecker observes every Device's allocate and free (outcore/monitor/hooks.hpp),
// so it sees native allocations: a Heap's or BufferPool's large blocks, under the tag of
// the request that made them, not their sub-allocations (alloc::Tracking over the Heap
// reports those). The report types are alloc::Tracking's (outcore/alloc/tracking.hpp).
// Allocations made before tracking started are not known: they are never reported, and
// their frees are ignored.
//
// The check at exit and the order of destruction. The check is an std::atexit handler,
// registered the first time tracking starts with check_at_exit (as OUTCORE_LEAK_CHECK
// does, in the first Device's constructor). exit() runs atexit handlers and the
// destructors of static objects in the reverse order of their registration, so:
//   - static objects constructed after tracking started are destroyed before the check:
//     memory they free then is not a leak;
//   - static objects constructed before (namespace-scope statics, function-local ones
//     first used earlier) are destroyed after it: device memory they still hold at exit
//     is reported. Free it before main returns, or construct its owner later.
// The checker's own state is never destroyed, so a block freed by a late destructor
// is still reported to it safely. With leaks, the handler ends the process with std::_Exit (after
// flushing stdio): nothing registered before it runs, and the exit status passed to
// exit() is replaced by kLeakExitCode (the handler cannot see it). A program that wants
// its own failure code to win calls leak_check_exit_code(code) at the end of main.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "outcore/alloc/tracking.hpp"
#include "outcore/core/error.hpp"
#include "outcore/monitor/hooks.hpp"

namespace outcore::alloc::detail {
class LiveSet;
}  // namespace outcore::alloc::detail

namespace outcore::monitor {

/// The exit status of a process whose leak check found memory still allocated.
inline constexpr int kLeakExitCode = static_cast<int>(ExitCode::Leak);
static_assert(kLeakExitCode == 8, "documented in README.md and docs/observability.md");

struct LeakCheckOptions {
    /// Record the allocating stack (glibc backtrace) of every allocation. std::nullopt:
    /// on when outcore itself was built without NDEBUG (debug builds), else off.
    std::optional<bool> capture_stack_traces = std::nullopt;
    /// Frames kept per stack, innermost first; the first few are outcore's own (the
    /// monitor hooks and Device::allocate), the caller's follow.
    std::size_t stack_depth = 24;
    /// Also check at exit (see the file comment): print the report and end the process
    /// with kLeakExitCode when anything tracked is still allocated.
    bool check_at_exit = false;
};

/// An Observer that keeps every live Device allocation with its tag, kind, bytes,
/// device, time and (optionally) stack. Use it directly for a checker of one's own:
///
///   monitor::LeakChecker checker({.capture_stack_traces = false});
///   monitor::ObserverRegistration reg(checker);
///   ... work ...
///   EXPECT_TRUE(checker.leak_report().empty());
///
/// Thread-safe. Frees of allocations made before it was registered are ignored.
class LeakChecker final : public Observer {
public:
    explicit LeakChecker(const LeakCheckOptions& options = {});
    ~LeakChecker() override;
    LeakChecker(const LeakChecker&) = delete;
    LeakChecker& operator=(const LeakChecker&) = delete;

    void on_allocate(const AllocationEvent& event) noexcept override;
    void on_free(const AllocationEvent& event) noexcept override;

    /// Every live allocation, in allocation order. Symbolizes stacks: meant for reports.
    [[nodiscard]] std::vector<alloc::LiveAllocation> live_allocations() const;
    [[nodiscard]] std::uint64_t live_count() const;
    /// What is live now, grouped by tag.
    [[nodiscard]] alloc::LeakReport leak_report() const;
    [[nodiscard]] bool captures_stack_traces() const noexcept { return capture_stacks_; }
    /// Allocations not recorded because host memory ran out while recording them
    /// (observers must not throw): they are missing from the reports.
    [[nodiscard]] std::uint64_t dropped_count() const noexcept;

private:
    const bool capture_stacks_;
    const std::size_t stack_depth_;
    std::unique_ptr<alloc::detail::LiveSet> live_;
    std::atomic<std::uint64_t> dropped_{0};
};

/// Starts the process-wide LeakChecker: from now on every Device allocation is
/// tracked. Throws UsageError if tracking is already on. Thread-safe.
void start_leak_tracking(const LeakCheckOptions& options = {});
/// Stops tracking and forgets what was tracked (a later start begins afresh; the check
/// at exit, if requested, then finds nothing). No-op when off. Thread-safe.
void stop_leak_tracking() noexcept;
/// Whether the process-wide LeakChecker is on.
[[nodiscard]] bool leak_tracking() noexcept;

/// What is allocated now and was allocated while tracking was on, grouped by tag.
/// Allocations made before start_leak_tracking are not known. Throws UsageError when
/// tracking is off.
[[nodiscard]] alloc::LeakReport leak_report();

/// Runs the exit check now instead of at exit: returns what is still allocated
/// (std::nullopt when tracking is off) and disarms the atexit check, so a report is
/// never printed twice. Does not print.
[[nodiscard]] std::optional<alloc::LeakReport> check_leaks_now();

/// For the end of main: `return monitor::leak_check_exit_code(code);`. When tracking is
/// on and something is still allocated, prints the report to stderr and returns
/// kLeakExitCode if `code` is 0 (a failure's own code wins); otherwise returns `code`.
/// Disarms the atexit check (check_leaks_now). Never throws.
[[nodiscard]] int leak_check_exit_code(int code) noexcept;

}  // namespace outcore::monitor
