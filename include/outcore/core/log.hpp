// outcore/core/log.hpp — one-line diagnostics on stderr.
//
//   outcore::log::warn("swap", "thrashing: {} re-fetches in 1 s", count);
//
// The level comes from OUTCORE_LOG (error, warn, info, debug; default warn).
// Thread-safe: each line is written whole.
#pragma once

#include <fmt/format.h>

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

}  // namespace outcore::log
