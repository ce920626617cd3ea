#include "support/test_seed.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace outcore::test {

std::uint64_t seed() {
    std::uint64_t value = 0;
    if (const char* env = std::getenv("OUTCORE_TEST_SEED"); env != nullptr && *env != '\0') {
        value = std::strtoull(env, nullptr, 10);
    } else {
        value = (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
    }
    ::testing::Test::RecordProperty("seed", std::to_string(value));
    std::printf("seed: %llu (replay with OUTCORE_TEST_SEED=%llu)\n", static_cast<unsigned long long>(value),
                static_cast<unsigned long long>(value));
    return value;
}

std::uint64_t scaled(std::uint64_t iterations) {
    double scale = 1.0;
    if (const char* env = std::getenv("OUTCORE_TEST_SCALE"); env != nullptr && *env != '\0') {
        scale = std::strtod(env, nullptr);
    }
    return std::max<std::uint64_t>(1, static_cast<std::uint64_t>(static_cast<double>(iterations) * scale));
}

}  // namespace outcore::test
