// The growth and thrash rules of outcore/monitor/watchdog.hpp.
#include "outcore/monitor/watchdog.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"

namespace outcore::monitor {

namespace {
constexpr const char* kComponent = "watchdog";
constexpr double kNsPerSecond = 1e9;
}  // namespace

GrowthWatchdog::GrowthWatchdog(GrowthWatchdogOptions options) : options_(options) {
    if (options_.window_samples < 3) {
        throw UsageError(kComponent,
                         fmt::format("growth window of {} samples (at least 3)", options_.window_samples));
    }
    if (!(options_.min_r_squared > 0.0 && options_.min_r_squared <= 1.0)) {
        throw UsageError(kComponent,
                         fmt::format("growth fit threshold R² = {} outside (0, 1]", options_.min_r_squared));
    }
}

bool GrowthWatchdog::holds(double& slope_bytes_per_s, double& r_squared) const {
    if (window_.size() < options_.window_samples) return false;
    const Sample& first = window_.front();
    const Sample& last = window_.back();
    // 3. net growth, and 4. never back at the starting level (cheap checks first).
    if (last.bytes < first.bytes || last.bytes - first.bytes < options_.min_growth_bytes) return false;
    if (std::any_of(window_.begin() + 1, window_.end(),
                    [&](const Sample& s) { return s.bytes <= first.bytes; }))
        return false;
    // 1. and 2.: least squares of y on t, both centred (t relative to the first sample,
    // in seconds; y relative to the first sample, so doubles keep their precision).
    const auto n = static_cast<double>(window_.size());
    double mean_t = 0, mean_y = 0;
    for (const Sample& s : window_) {
        mean_t += static_cast<double>(s.time_ns - first.time_ns) / kNsPerSecond;
        mean_y += static_cast<double>(s.bytes - first.bytes);  // ≥ 0 by check 4
    }
    mean_t /= n;
    mean_y /= n;
    double stt = 0, syy = 0, sty = 0;
    for (const Sample& s : window_) {
        const double dt = static_cast<double>(s.time_ns - first.time_ns) / kNsPerSecond - mean_t;
        const double dy = static_cast<double>(s.bytes - first.bytes) - mean_y;
        stt += dt * dt;
        syy += dy * dy;
        sty += dt * dy;
    }
    if (stt <= 0 || syy <= 0) return false;  // all at one time, or flat
    slope_bytes_per_s = sty / stt;
    r_squared = sty * sty / (stt * syy);
    return slope_bytes_per_s > 0 && r_squared >= options_.min_r_squared;
}

std::optional<WatchdogWarning> GrowthWatchdog::add(std::int64_t time_ns, std::uint64_t live_bytes) {
    window_.push_back({time_ns, live_bytes});
    while (window_.size() > options_.window_samples) window_.pop_front();
    double slope = 0, r2 = 0;
    const bool now = holds(slope, r2);
    const bool starts = now && !in_episode_;
    in_episode_ = now;
    if (!starts) return std::nullopt;
    const Sample& first = window_.front();
    const Sample& last = window_.back();
    const double seconds = static_cast<double>(last.time_ns - first.time_ns) / kNsPerSecond;
    return WatchdogWarning{
        .kind = "growth",
        .message = fmt::format("live memory grew steadily by {} in {:.1f} s ({} to {}, {}/s, R² {:.3f}): "
                               "a leak or an unbounded cache?",
                               format_size(last.bytes - first.bytes), seconds, format_size(first.bytes),
                               format_size(last.bytes), format_size(static_cast<std::uint64_t>(slope)), r2)};
}

ThrashWatchdog::ThrashWatchdog(ThrashWatchdogOptions options) : options_(options) {
    if (options_.window.count() <= 0) {
        throw UsageError(kComponent,
                         fmt::format("thrash window of {} ms (must be positive)", options_.window.count()));
    }
}

std::optional<WatchdogWarning> ThrashWatchdog::add(std::int64_t time_ns, std::uint64_t thrash_count) {
    if (!window_.empty() && thrash_count < window_.back().count) window_.clear();  // counter restarted
    window_.push_back({time_ns, thrash_count});
    const std::int64_t window_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(options_.window).count();
    // Keep the newest sample at least `window` old as the baseline: the rise is then
    // measured over (at least) the whole window, not just the samples inside it.
    while (window_.size() >= 2 && time_ns - window_[1].time_ns >= window_ns) window_.pop_front();
    const Sample& base = window_.front();
    const std::uint64_t rise = thrash_count - base.count;
    const bool now = rise > options_.max_thrash;
    const bool starts = now && !in_episode_;
    in_episode_ = now;
    if (!starts) return std::nullopt;
    const double seconds = static_cast<double>(time_ns - base.time_ns) / kNsPerSecond;
    return WatchdogWarning{
        .kind = "thrash",
        .message = fmt::format("thrashing: {} swap-ins of recently evicted units in {:.1f} s (more than "
                               "{} in {} ms): the working set exceeds the device budget",
                               rise, seconds, options_.max_thrash, options_.window.count())};
}

}  // namespace outcore::monitor
