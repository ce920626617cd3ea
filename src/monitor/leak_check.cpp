// The process-wide leak checker behind outcore/monitor/leak_check.hpp and its check at
// exit. The live-allocation table, stacks and grouping are alloc::Tracking's
// (src/alloc/live_set.hpp).
#include "outcore/monitor/leak_check.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>

#include "alloc/live_set.hpp"
#include "monitor/environment.hpp"
#include "outcore/core/size.hpp"

namespace outcore::monitor {
namespace {

constexpr std::string_view kComponent = "leak_check";

alloc::detail::BlockKey key_of(const AllocationEvent& e) noexcept {
    return {.device_id = e.device_id, .native = e.native, .offset = e.offset, .kind = e.kind};
}

// The process-wide checker. Never destroyed: the atexit handler and frees made by the
// destructors of static objects (which may run after it) use it; it stays reachable
// through this pointer, so LeakSanitizer does not count it.
struct Process {
    std::mutex mutex;
    std::unique_ptr<LeakChecker> checker;  // non-null while tracking
    std::atomic<bool> tracking{false};
    bool exit_check_armed = false;
    bool exit_handler_registered = false;
};

Process& process() {
    static Process* const p = new Process;
    return *p;
}

// Written with stdio only: by the time the atexit handler runs, statics constructed
// after tracking started (the logger's among them) may already be destroyed.
void print_report(const alloc::LeakReport& report, std::string_view when) {
    const std::string text =
        fmt::format("outcore: error: [{}] {} block(s), {} still allocated {}\n{}", kComponent, report.count,
                    format_size(report.bytes), when, alloc::format_leak_report(report));
    std::fputs(text.c_str(), stderr);
    std::fflush(stderr);
}

void check_at_exit() noexcept {
    Process& p = process();
    try {
        std::lock_guard lock(p.mutex);
        if (!p.exit_check_armed || !p.checker) return;
        const alloc::LeakReport report = p.checker->leak_report();
        if (report.empty()) return;
        print_report(report, "at exit (OUTCORE_LEAK_CHECK)");
        std::fflush(nullptr);  // keep what the program wrote to stdout
        std::_Exit(kLeakExitCode);
    } catch (...) {  // no memory to make the report: the exit status stays the program's
    }
}

// Under p.mutex.
void start_locked(Process& p, const LeakCheckOptions& options) {
    auto checker = std::make_unique<LeakChecker>(options);
    add_observer(*checker);
    p.checker = std::move(checker);
    p.tracking.store(true, std::memory_order_relaxed);
}

// Under p.mutex.
void arm_exit_check_locked(Process& p) {
    if (!p.exit_handler_registered) {
        if (std::atexit(&check_at_exit) != 0) {
            throw InternalError(kComponent, "std::atexit refused the leak check's exit handler");
        }
        p.exit_handler_registered = true;
    }
    p.exit_check_armed = true;
}

}  // namespace

// ----- LeakChecker -----------------------------------------------------------------------

LeakChecker::LeakChecker(const LeakCheckOptions& options)
    : capture_stacks_(options.capture_stack_traces.value_or(alloc::detail::kStacksByDefault)),
      stack_depth_(options.stack_depth),
      live_(std::make_unique<alloc::detail::LiveSet>()) {}

LeakChecker::~LeakChecker() = default;

void LeakChecker::on_allocate(const AllocationEvent& event) noexcept {
    try {
        std::vector<void*> frames;
        if (capture_stacks_) frames = alloc::detail::capture_stack(stack_depth_);
        // Device ids are never reused, so a key that is already live means a backend
        // reported one allocation twice; the first record is kept.
        (void)live_->add(key_of(event), {.tag = event.tag,
                                         .bytes = event.bytes,
                                         .kind = event.kind,
                                         .device_id = event.device_id,
                                         .allocated_at = std::chrono::steady_clock::time_point(
                                             std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                 std::chrono::nanoseconds(event.time_ns))),
                                         .frames = std::move(frames)});
    } catch (...) {  // bad_alloc: observers must not throw; count what the report misses
        dropped_.fetch_add(1, std::memory_order_relaxed);
    }
}

void LeakChecker::on_free(const AllocationEvent& event) noexcept {
    // false for an allocation made before this checker was registered: not ours.
    (void)live_->remove(key_of(event));
}

std::vector<alloc::LiveAllocation> LeakChecker::live_allocations() const { return live_->live_allocations(); }

std::uint64_t LeakChecker::live_count() const { return live_->size(); }

alloc::LeakReport LeakChecker::leak_report() const { return live_->leak_report(); }

std::uint64_t LeakChecker::dropped_count() const noexcept { return dropped_.load(std::memory_order_relaxed); }

// ----- The process-wide checker ----------------------------------------------------------

void start_leak_tracking(const LeakCheckOptions& options) {
    Process& p = process();
    std::lock_guard lock(p.mutex);
    if (p.checker) {
        throw UsageError(kComponent, "leak tracking is already on (call stop_leak_tracking() first)");
    }
    start_locked(p, options);
    if (options.check_at_exit) arm_exit_check_locked(p);
}

void stop_leak_tracking() noexcept {
    Process& p = process();
    std::lock_guard lock(p.mutex);
    if (!p.checker) return;
    // After remove_observer returns no thread is inside the checker's callbacks.
    remove_observer(*p.checker);
    p.checker.reset();
    p.tracking.store(false, std::memory_order_relaxed);
}

bool leak_tracking() noexcept { return process().tracking.load(std::memory_order_relaxed); }

alloc::LeakReport leak_report() {
    Process& p = process();
    std::lock_guard lock(p.mutex);
    if (!p.checker)
        throw UsageError(kComponent, "leak_report() needs leak tracking on (start_leak_tracking)");
    return p.checker->leak_report();
}

std::optional<alloc::LeakReport> check_leaks_now() {
    Process& p = process();
    std::lock_guard lock(p.mutex);
    p.exit_check_armed = false;
    if (!p.checker) return std::nullopt;
    return p.checker->leak_report();
}

int leak_check_exit_code(int code) noexcept {
    try {
        const std::optional<alloc::LeakReport> report = check_leaks_now();
        if (!report || report->empty()) return code;
        print_report(*report, "at the end of the program");
        return code == 0 ? kLeakExitCode : code;
    } catch (...) {  // no memory for the report: the leak goes unreported, the code stands
        return code;
    }
}

namespace detail {

void start_leak_check_from_environment() {
    const char* value = std::getenv("OUTCORE_LEAK_CHECK");
    const std::string_view v = value == nullptr ? std::string_view() : std::string_view(value);
    if (v.empty() || v == "0") return;
    if (v != "1" && v != "stacks") {
        throw UsageError(kComponent,
                         fmt::format("OUTCORE_LEAK_CHECK must be 0, 1 or stacks (got \"{}\")", v));
    }
    Process& p = process();
    std::lock_guard lock(p.mutex);
    // Called once per process by start_from_environment, but harmless again: tracking
    // started earlier (by the environment or by code) keeps its options and gains the
    // check at exit.
    if (!p.checker) {
        start_locked(p, {.capture_stack_traces = v == "stacks" ? std::optional<bool>(true) : std::nullopt,
                         .stack_depth = LeakCheckOptions{}.stack_depth,
                         .check_at_exit = true});
    }
    arm_exit_check_locked(p);
}

}  // namespace detail
}  // namespace outcore::monitor
