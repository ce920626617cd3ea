// Watchdogs: the growth rule fires once on a steadily growing series and stays quiet
// on flat, sawtooth, noisy-flat and slowly drifting ones; a new episode warns again.
// The thrash rule fires on a rising counter, not on a stable or slowly rising one.
#include "outcore/monitor/watchdog.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "support/test_seed.hpp"

namespace outcore::monitor {
namespace {

constexpr std::int64_t kSecondNs = 1'000'000'000;

GrowthWatchdogOptions growth_options() {
    GrowthWatchdogOptions o;
    o.window_samples = 30;
    o.min_r_squared = 0.9;
    o.min_growth_bytes = 64 * kMiB;
    return o;
}

/// Feeds `series` (one sample a second) and returns the indices that warned.
std::vector<std::size_t> feed(GrowthWatchdog& w, const std::vector<std::uint64_t>& series) {
    std::vector<std::size_t> fired;
    for (std::size_t i = 0; i < series.size(); ++i) {
        if (auto warning = w.add(static_cast<std::int64_t>(i) * kSecondNs, series[i])) {
            EXPECT_EQ(warning->kind, "growth");
            EXPECT_FALSE(warning->message.empty());
            fired.push_back(i);
        }
    }
    return fired;
}

TEST(GrowthWatchdog, FiresOnceOnSteadyGrowth) {
    std::mt19937_64 rng(test::seed());
    std::uniform_int_distribution<std::int64_t> noise(-static_cast<std::int64_t>(kMiB),
                                                      static_cast<std::int64_t>(kMiB));
    std::vector<std::uint64_t> series;
    for (std::uint64_t i = 0; i < 200; ++i) {
        series.push_back(kGiB + i * 10 * kMiB + static_cast<std::uint64_t>(noise(rng)));  // a leak, 10 MiB/s
    }
    GrowthWatchdog w(growth_options());
    const std::vector<std::size_t> fired = feed(w, series);
    ASSERT_EQ(fired.size(), 1U) << "once per episode";
    // Not before the window is full: the first full window is samples 0..29.
    EXPECT_EQ(fired.front(), growth_options().window_samples - 1);
    EXPECT_TRUE(w.growing());
}

TEST(GrowthWatchdog, QuietOnFlat) {
    GrowthWatchdog w(growth_options());
    EXPECT_TRUE(feed(w, std::vector<std::uint64_t>(300, 3 * kGiB)).empty());
    EXPECT_FALSE(w.growing());
}

TEST(GrowthWatchdog, QuietOnSawtooth) {
    // A tiled pipeline: rises from 100 MiB to 1 GiB over 10 samples, frees, again. Each
    // ramp alone is perfectly linear and grows far past the minimum.
    std::vector<std::uint64_t> series;
    for (std::uint64_t i = 0; i < 300; ++i) series.push_back(100 * kMiB + (i % 10) * 100 * kMiB);
    GrowthWatchdog w(growth_options());
    EXPECT_TRUE(feed(w, series).empty());
}

TEST(GrowthWatchdog, QuietOnNoisyFlat) {
    std::mt19937_64 rng(test::seed());
    std::uniform_int_distribution<std::uint64_t> noise(0, 128 * kMiB);
    std::vector<std::uint64_t> series;
    for (int i = 0; i < 1000; ++i) series.push_back(2 * kGiB + noise(rng));
    GrowthWatchdog w(growth_options());
    EXPECT_TRUE(feed(w, series).empty());
}

TEST(GrowthWatchdog, QuietOnSmallLinearDrift) {
    // Perfectly linear, but 1 MiB a second stays under the 64 MiB minimum in 30 s.
    std::vector<std::uint64_t> series;
    for (std::uint64_t i = 0; i < 300; ++i) series.push_back(kGiB + i * kMiB);
    GrowthWatchdog w(growth_options());
    // The window spans 29 s: 29 MiB of growth.
    EXPECT_TRUE(feed(w, series).empty());
}

TEST(GrowthWatchdog, QuietWhenMemoryReturnsToTheStartLevel) {
    // Grows linearly except for one dip back to the start: a strong fit, but the dip
    // shows the memory was reusable (rule 4).
    std::vector<std::uint64_t> series;
    for (std::uint64_t i = 0; i < 30; ++i) series.push_back(kGiB + i * 20 * kMiB);
    series[15] = kGiB;
    GrowthWatchdog w(growth_options());
    EXPECT_TRUE(feed(w, series).empty());
    // The same without the dip fires: the dip is what kept it quiet.
    series[15] = kGiB + 15 * 20 * kMiB;
    GrowthWatchdog w2(growth_options());
    EXPECT_EQ(feed(w2, series).size(), 1U);
}

TEST(GrowthWatchdog, WarnsAgainInANewEpisode) {
    std::vector<std::uint64_t> series;
    std::uint64_t level = kGiB;
    for (int i = 0; i < 60; ++i) series.push_back(level += 10 * kMiB);  // grows: warns
    for (int i = 0; i < 60; ++i) series.push_back(level);               // flat: episode ends
    for (int i = 0; i < 60; ++i) series.push_back(level += 10 * kMiB);  // grows again: warns
    GrowthWatchdog w(growth_options());
    EXPECT_EQ(feed(w, series).size(), 2U);
}

TEST(GrowthWatchdog, RejectsBadOptions) {
    GrowthWatchdogOptions o = growth_options();
    o.window_samples = 2;
    EXPECT_THROW(GrowthWatchdog{o}, UsageError);
    o = growth_options();
    o.min_r_squared = 0;
    EXPECT_THROW(GrowthWatchdog{o}, UsageError);
    o.min_r_squared = 1.5;
    EXPECT_THROW(GrowthWatchdog{o}, UsageError);
}

ThrashWatchdogOptions thrash_options() {
    ThrashWatchdogOptions o;
    o.max_thrash = 16;
    o.window = std::chrono::seconds(10);
    return o;
}

/// Feeds thrash counts one a second; returns the indices that warned.
std::vector<std::size_t> feed(ThrashWatchdog& w, const std::vector<std::uint64_t>& counts) {
    std::vector<std::size_t> fired;
    for (std::size_t i = 0; i < counts.size(); ++i) {
        if (auto warning = w.add(static_cast<std::int64_t>(i) * kSecondNs, counts[i])) {
            EXPECT_EQ(warning->kind, "thrash");
            EXPECT_FALSE(warning->message.empty());
            fired.push_back(i);
        }
    }
    return fired;
}

TEST(ThrashWatchdog, FiresOnceWhenTheCountRises) {
    std::vector<std::uint64_t> counts;
    for (std::uint64_t i = 0; i < 100; ++i) counts.push_back(i * 5);  // 5 a second
    ThrashWatchdog w(thrash_options());
    const std::vector<std::size_t> fired = feed(w, counts);
    ASSERT_EQ(fired.size(), 1U);
    // The first sample whose rise over the baseline exceeds 16: 4 s × 5 = 20.
    EXPECT_EQ(fired.front(), 4U);
    EXPECT_TRUE(w.thrashing());
}

TEST(ThrashWatchdog, QuietWhenStableOrSlow) {
    ThrashWatchdog stable(thrash_options());
    EXPECT_TRUE(feed(stable, std::vector<std::uint64_t>(100, 1000)).empty());
    // One a second: a rise of 10 over each 10 s window, under the 16 allowed.
    std::vector<std::uint64_t> slow;
    for (std::uint64_t i = 0; i < 100; ++i) slow.push_back(i);
    ThrashWatchdog w(thrash_options());
    EXPECT_TRUE(feed(w, slow).empty());
    EXPECT_FALSE(w.thrashing());
}

TEST(ThrashWatchdog, WarnsAgainAfterCalmAndSurvivesACounterReset) {
    std::vector<std::uint64_t> counts;
    std::uint64_t c = 0;
    for (int i = 0; i < 10; ++i) counts.push_back(c += 10);  // thrash: warns
    for (int i = 0; i < 20; ++i) counts.push_back(c);        // calm for 20 s: episode ends
    for (int i = 0; i < 10; ++i) counts.push_back(c += 10);  // thrash again: warns
    for (int i = 0; i < 20; ++i) counts.push_back(c);
    for (int i = 0; i < 5; ++i) counts.push_back(i);  // the store was replaced: the count restarts, no wrap
    ThrashWatchdog w(thrash_options());
    EXPECT_EQ(feed(w, counts).size(), 2U);
}

TEST(ThrashWatchdog, RejectsAnEmptyWindow) {
    ThrashWatchdogOptions o = thrash_options();
    o.window = std::chrono::milliseconds(0);
    EXPECT_THROW(ThrashWatchdog{o}, UsageError);
}

}  // namespace
}  // namespace outcore::monitor
