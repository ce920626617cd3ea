// outcore/core/log.hpp — one-line diagnostics on stderr.
//
//   outcore::log::warn("swap", "thrashing: {} re-fetches in 1 s", count);
//
// The level comes from OUTCORE_LOG (error, warn, info, debug; default warn).
// Thread-safe: each line is written whole.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <string_view>

namespace outcore::log {

enum class Level : int { Error = 0, Warn = 1, Info = 2, Debug = 3 };

/// The current level (read once from OUTCORE_LOG, then as set_level left it).
[[nodiscard]] Level level() noexcept;
void set_level(Level level) noexcept;
/// Writes "outcore: <level>: [component] message\n" to stderr if `lvl` is enabled.
void write(Level lvl, std::string_view component, std::string_view message) noexcept;

template <typename... Args>
void error(std::string_view component, fmt::format_string<Args...> f, Args&&... args) {
    if (level() >= Level::Error) write(Level::Error, component, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(std::string_view component, fmt::format_string<Args...> f, Args&&... args) {
    if (level() >= Level::Warn) write(Level::Warn, component, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info(std::string_view component, fmt::format_string<Args...> f, Args&&... args) {
    if (level() >= Level::Info) write(Level::Info, component, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void debug(std::string_view component, fmt::format_string<Args...> f, Args&&... args) {
    if (level() >= Level::Debug) write(Level::Debug, component, fmt::format(f, std::forward<Args>(args)...));
}

/// At debug level, logs "<message> took N ms" when at least `threshold_ms` have passed
/// since `t0`: host work a device may be idling for (a backend's waits, driver calls,
/// packing). Never throws: a line that cannot be formatted is dropped.
///
///   const auto t0 = std::chrono::steady_clock::now();
///   vkFreeMemory(...);
///   log::debug_if_slow("vulkan", t0, 1.0, "vkFreeMemory of {} bytes", bytes);
template <typename... Args>
void debug_if_slow(std::string_view component, std::chrono::steady_clock::time_point t0, double threshold_ms,
                   fmt::format_string<Args...> f, Args&&... args) noexcept {
    if (level() < Level::Debug) return;
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (ms < threshold_ms) return;
    try {
        write(Level::Debug, component,
              fmt::format("{} took {:.2f} ms", fmt::format(f, std::forward<Args>(args)...), ms));
    } catch (...) {
        // A debug line that cannot be formatted is not worth a failure.
    }
}

}  // namespace outcore::log
