#include "outcore/core/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace outcore::log {

namespace {
Level from_environment() noexcept {
    const char* env = std::getenv("OUTCORE_LOG");
    if (env == nullptr) return Level::Warn;
    const std::string_view v(env);
    if (v == "error") return Level::Error;
    if (v == "info") return Level::Info;
    if (v == "debug") return Level::Debug;
    return Level::Warn;
}

std::atomic<int>& current() noexcept {
    static std::atomic<int> value{static_cast<int>(from_environment())};
    return value;
}

std::string_view name(Level l) noexcept {
    switch (l) {
        case Level::Error: return "error";
        case Level::Warn: return "warning";
        case Level::Info: return "info";
        case Level::Debug: return "debug";
    }
    return "log";
}
}  // namespace

Level level() noexcept { return static_cast<Level>(current().load(std::memory_order_relaxed)); }

void set_level(Level lvl) noexcept { current().store(static_cast<int>(lvl), std::memory_order_relaxed); }

void write(Level lvl, std::string_view component, std::string_view message) noexcept {
    if (lvl > level()) return;
    try {
        // One fwrite per line: stdio locks the stream, so lines never interleave.
        const std::string line = fmt::format("outcore: {}: [{}] {}\n", name(lvl), component, message);
        std::fwrite(line.data(), 1, line.size(), stderr);
    } catch (...) {  // NOLINT(bugprone-empty-catch): logging must never throw
    }
}

}  // namespace outcore::log
