// log::debug_if_slow: a line only at debug level and only past the threshold.
#include "outcore/core/log.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace outcore::log {
namespace {

struct LevelGuard {
    Level saved = level();
    ~LevelGuard() { set_level(saved); }
};

TEST(Log, DebugIfSlowLogsOnlySlowWorkAtDebugLevel) {
    const LevelGuard guard;
    const auto long_ago = std::chrono::steady_clock::now() - std::chrono::milliseconds(50);
    set_level(Level::Debug);
    testing::internal::CaptureStderr();
    debug_if_slow("test", long_ago, 10.0, "freeing {} bytes", 42);
    debug_if_slow("test", std::chrono::steady_clock::now(), 10'000.0, "not slow");
    const std::string at_debug = testing::internal::GetCapturedStderr();
    EXPECT_NE(at_debug.find("[test] freeing 42 bytes took "), std::string::npos) << at_debug;
    EXPECT_NE(at_debug.find(" ms"), std::string::npos) << at_debug;
    EXPECT_EQ(at_debug.find("not slow"), std::string::npos) << at_debug;

    set_level(Level::Info);
    testing::internal::CaptureStderr();
    debug_if_slow("test", long_ago, 10.0, "freeing {} bytes", 42);
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace outcore::log
