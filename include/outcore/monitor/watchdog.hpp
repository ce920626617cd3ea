// outcore/monitor/watchdog.hpp — two pure detectors the periodic reporter feeds with
// snapshots: GrowthWatchdog (live memory that only ever grows: a leak, or a cache
// without a bound) and ThrashWatchdog (the swap store re-fetching what it just
// evicted). Each returns a warning once per episode; neither reads a clock or a
// global, so tests drive them with made-up series.
//
//   monitor::GrowthWatchdog growth(
//       {.window_samples = 30, .min_r_squared = 0.9, .min_growth_bytes = 256 * kMiB});
//   monitor::ThrashWatchdog thrash({.max_thrash = 16, .window = std::chrono::seconds(10)});
//   for (;;) {
//       const monitor::Snapshot s = monitor::snapshot();
//       if (auto w = growth.add(s.time_ns, s.device.resident_bytes + s.host.resident_bytes))
//           log::warn("monitor", "{}", w->message);
//       if (auto w = thrash.add(s.time_ns, s.thrash_count)) log::warn("monitor", "{}", w->message);
//   }
//
// The growth rule. Over the last window_samples samples (t_i, y_i), it fires when all of
//   1. the least-squares slope of y over t is positive,
//   2. the fit is strong: R² ≥ min_r_squared (the samples lie close to one rising line),
//   3. the net growth y_last − y_first is at least min_growth_bytes, and
//   4. no sample after the first is at or below y_first (memory never came back to
//      where the window started).
// Why each: a positive slope alone fires on any noise; R² rejects noisy-flat series and
// sawtooths (allocate, free, allocate again: the normal life of a tiled pipeline),
// whose points scatter around any line; the growth minimum rejects a tiny, harmless
// drift (a counter, a log buffer) that is perfectly linear; condition 4 rejects a
// window in which memory came back to its starting level, which a leak never does (a
// sawtooth with a strong fit and a large amplitude still dips to its floor). What the
// rule cannot tell from a leak is a window lying wholly on the rising edge of a cycle
// longer than the window: make the window longer than the workload's longest phase.
// A window needs at least 3 samples; fewer than window_samples never fire, so
// the warning comes no sooner than window_samples × the reporting period after start.
//
// The thrash rule: it fires when thrash_count rose by more than max_thrash since the
// baseline, the newest sample at least `window` old (the first sample until one is
// that old; older ones are forgotten), so the rise is judged over one window of time. thrash_count is the
// swap store's count of swap-ins of units evicted only shortly before (StoreOptions::
// thrash_window): a few are normal, a steady stream means the working set exceeds the
// device budget and every pass re-reads what the previous one evicted.
//
// Episodes. After a warning a watchdog stays quiet while its condition keeps holding;
// once a sample makes the condition false the episode ends, and the next time it holds
// the watchdog warns again. Not thread-safe: one feeder (the Reporter's thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>

namespace outcore::monitor {

/// A watchdog's warning: which one ("growth", "thrash") and a one-line message.
struct WatchdogWarning {
    std::string kind;
    std::string message;
};

struct GrowthWatchdogOptions {
    /// Samples the rule looks at (the last N); at least 3. With the reporter's default
    /// 1 s period, 60 samples is one minute of steady growth.
    std::size_t window_samples = 60;
    /// Least fit (coefficient of determination) of the rising line, in (0, 1].
    double min_r_squared = 0.9;
    /// Least net growth across the window, bytes.
    std::uint64_t min_growth_bytes = 64ULL << 20;
};

class GrowthWatchdog {
public:
    /// UsageError for window_samples < 3 or min_r_squared outside (0, 1].
    explicit GrowthWatchdog(GrowthWatchdogOptions options = {});

    /// Adds one sample (times must not decrease). Returns a warning when this sample
    /// starts an episode of steady growth (see the rule above), else nullopt.
    [[nodiscard]] std::optional<WatchdogWarning> add(std::int64_t time_ns, std::uint64_t live_bytes);
    /// Whether the last sample satisfied the rule (an episode is in progress).
    [[nodiscard]] bool growing() const noexcept { return in_episode_; }
    [[nodiscard]] const GrowthWatchdogOptions& options() const noexcept { return options_; }

private:
    struct Sample {
        std::int64_t time_ns;
        std::uint64_t bytes;
    };
    /// The rule on the current window; fills slope (bytes/s) and R² when it holds.
    [[nodiscard]] bool holds(double& slope_bytes_per_s, double& r_squared) const;

    GrowthWatchdogOptions options_;
    std::deque<Sample> window_;
    bool in_episode_ = false;
};

struct ThrashWatchdogOptions {
    /// Most thrash events tolerated within `window`; one more fires.
    std::uint64_t max_thrash = 16;
    std::chrono::milliseconds window{std::chrono::seconds(10)};
};

class ThrashWatchdog {
public:
    /// UsageError for a window ≤ 0.
    explicit ThrashWatchdog(ThrashWatchdogOptions options = {});

    /// Adds one reading of the (monotonic) thrash counter. Returns a warning when the
    /// rise within the window first exceeds max_thrash, else nullopt. A counter that
    /// goes down (a store was destroyed) restarts the window.
    [[nodiscard]] std::optional<WatchdogWarning> add(std::int64_t time_ns, std::uint64_t thrash_count);
    [[nodiscard]] bool thrashing() const noexcept { return in_episode_; }
    [[nodiscard]] const ThrashWatchdogOptions& options() const noexcept { return options_; }

private:
    struct Sample {
        std::int64_t time_ns;
        std::uint64_t count;
    };
    ThrashWatchdogOptions options_;
    std::deque<Sample> window_;
    bool in_episode_ = false;
};

}  // namespace outcore::monitor
