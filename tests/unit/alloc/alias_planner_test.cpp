// AliasPlanner: properties on random lifetime sets, a hand case, validate() and bad input.
#include "outcore/alloc/alias_planner.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "support/test_seed.hpp"

namespace outcore::alloc {
namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

// Independent of the planner: brute force over every step that starts a lifetime
// (the live sum can only rise at such a step).
std::uint64_t brute_force_live_peak(const std::vector<AliasResource>& rs) {
    std::uint64_t best = 0;
    for (const AliasResource& at : rs) {
        std::uint64_t live = 0;
        for (const AliasResource& r : rs) {
            if (r.first_use <= at.first_use && at.first_use <= r.last_use) live += r.bytes;
        }
        best = std::max(best, live);
    }
    return best;
}

// Independent of AliasPlan::validate: every pair, every offset.
void expect_valid_independently(const AliasPlan& plan) {
    ASSERT_EQ(plan.offsets_bytes.size(), plan.resources.size());
    std::uint64_t end_max = 0;
    for (std::size_t i = 0; i < plan.resources.size(); ++i) {
        const AliasResource& a = plan.resources[i];
        EXPECT_EQ(plan.offsets_bytes[i] % a.alignment, 0U) << "resource " << i;
        end_max = std::max(end_max, plan.offsets_bytes[i] + a.bytes);
        for (std::size_t j = i + 1; j < plan.resources.size(); ++j) {
            const AliasResource& b = plan.resources[j];
            const bool live_together = a.first_use <= b.last_use && b.first_use <= a.last_use;
            const bool memory_overlaps = plan.offsets_bytes[i] < plan.offsets_bytes[j] + b.bytes &&
                                         plan.offsets_bytes[j] < plan.offsets_bytes[i] + a.bytes;
            EXPECT_FALSE(live_together && memory_overlaps) << "resources " << i << " and " << j;
        }
    }
    EXPECT_EQ(plan.peak_bytes, end_max);
}

std::vector<AliasResource> random_resources(std::mt19937_64& rng, bool aligned) {
    std::uniform_int_distribution<std::size_t> count(1, 40);
    std::uniform_int_distribution<int> size_class(0, 3);
    std::uniform_int_distribution<int> align_log(0, 12);
    std::uniform_int_distribution<std::uint64_t> start(0, 60);
    std::uniform_int_distribution<std::uint64_t> length(0, 25);
    std::vector<AliasResource> rs(count(rng));
    for (AliasResource& r : rs) {
        // Mixed magnitudes: a few bytes up to a few MiB, so small ones fill gaps.
        const std::uint64_t top = std::uint64_t{1} << (4 + 6 * size_class(rng));
        r.bytes = std::uniform_int_distribution<std::uint64_t>(1, top)(rng);
        r.alignment = aligned ? std::uint64_t{1} << align_log(rng) : 1;
        r.first_use = start(rng);
        r.last_use = r.first_use + length(rng);
    }
    return rs;
}

TEST(AliasPlanner, RandomLifetimeSetsHoldTheirProperties) {
    std::mt19937_64 rng(test::seed());
    const std::uint64_t sets = test::scaled(1000);
    std::uint64_t aliased_sets = 0;
    for (std::uint64_t s = 0; s < sets; ++s) {
        const bool aligned = (s % 2) == 0;
        const std::vector<AliasResource> rs = random_resources(rng, aligned);
        AliasPlanner planner;
        for (const AliasResource& r : rs) planner.add(r);
        const AliasPlan plan = planner.plan();

        ASSERT_NO_THROW(plan.validate()) << "set " << s;
        expect_valid_independently(plan);
        const std::uint64_t bound = brute_force_live_peak(rs);
        EXPECT_EQ(plan.live_lower_bound_bytes, bound);
        EXPECT_EQ(live_lower_bound_bytes(rs), bound);
        EXPECT_GE(plan.peak_bytes, bound) << "set " << s;
        EXPECT_LE(plan.peak_bytes, plan.sum_bytes) << "set " << s;
        std::uint64_t raw_sum = 0;
        for (const AliasResource& r : rs) raw_sum += r.bytes;
        EXPECT_GE(plan.sum_bytes, raw_sum);
        if (!aligned) {
            // Without padding the greedy end of each resource is bounded by the bytes
            // placed before it, so it can never be worse than no aliasing.
            EXPECT_FALSE(plan.fell_back_to_sequential) << "set " << s;
            EXPECT_EQ(plan.sum_bytes, raw_sum);
        }
        if (plan.peak_bytes < plan.sum_bytes) ++aliased_sets;

        // Deterministic: same input, same plan, whichever entry point.
        const AliasPlan again = planner.plan();
        EXPECT_EQ(again.offsets_bytes, plan.offsets_bytes);
        EXPECT_EQ(plan_aliasing(rs).offsets_bytes, plan.offsets_bytes);
        if (HasFailure()) break;
    }
    // Random lifetimes in a short window overlap often but not always: aliasing
    // must pay off in most sets, or the planner is not aliasing at all.
    if (sets >= 100) {
        EXPECT_GT(aliased_sets, sets / 2);
    }
}

TEST(AliasPlanner, TwoGenerationsShareMemoryAndHalveThePeak) {
    AliasPlanner planner;
    const std::uint64_t mib = kMiB;
    const auto a = planner.add({.bytes = mib, .alignment = 256, .first_use = 0, .last_use = 1, .tag = "a"});
    const auto b = planner.add({.bytes = mib, .alignment = 256, .first_use = 0, .last_use = 1, .tag = "b"});
    const auto c = planner.add({.bytes = mib, .alignment = 256, .first_use = 2, .last_use = 3, .tag = "c"});
    const auto d = planner.add({.bytes = mib, .alignment = 256, .first_use = 2, .last_use = 3, .tag = "d"});
    const AliasPlan plan = planner.plan();
    plan.validate();
    EXPECT_EQ(plan.sum_bytes, 4 * mib);
    EXPECT_EQ(plan.peak_bytes, 2 * mib);
    EXPECT_EQ(plan.live_lower_bound_bytes, 2 * mib);
    EXPECT_EQ(plan.saved_bytes(), 2 * mib);
    // The second generation sits exactly on the first one's bytes.
    std::vector<std::uint64_t> first{plan.offsets_bytes[a], plan.offsets_bytes[b]};
    std::vector<std::uint64_t> second{plan.offsets_bytes[c], plan.offsets_bytes[d]};
    std::sort(first.begin(), first.end());
    std::sort(second.begin(), second.end());
    EXPECT_EQ(first, second);
    EXPECT_EQ(first, (std::vector<std::uint64_t>{0, mib}));
}

TEST(AliasPlanner, LastUseIsInclusive) {
    // Sharing step 5 means both are live at step 5: they must not alias.
    const std::vector<AliasResource> rs{{.bytes = 100, .first_use = 0, .last_use = 5},
                                        {.bytes = 100, .first_use = 5, .last_use = 9}};
    const AliasPlan plan = plan_aliasing(rs);
    plan.validate();
    EXPECT_EQ(plan.peak_bytes, 200U);
    const std::vector<AliasResource> apart{{.bytes = 100, .first_use = 0, .last_use = 4},
                                           {.bytes = 100, .first_use = 5, .last_use = 9}};
    EXPECT_EQ(plan_aliasing(apart).peak_bytes, 100U);
}

TEST(AliasPlanner, SmallResourceFillsAGapAtItsAlignment) {
    // x lands at [0,1001) and y, 1024-aligned, at [1024,2024); z (16 bytes,
    // 16-aligned) is live with both and fits the gap between them at 1008.
    const std::vector<AliasResource> rs{
        {.bytes = 1001, .alignment = 1, .first_use = 0, .last_use = 3},
        {.bytes = 1000, .alignment = 1024, .first_use = 0, .last_use = 3},
        {.bytes = 16, .alignment = 16, .first_use = 1, .last_use = 2},
    };
    const AliasPlan plan = plan_aliasing(rs);
    plan.validate();
    EXPECT_EQ(plan.offsets_bytes[2], 1008U);
    EXPECT_EQ(plan.peak_bytes, 2024U);
}

TEST(AliasPlanner, EmptyPlanIsValid) {
    const AliasPlan plan = AliasPlanner{}.plan();
    plan.validate();
    EXPECT_EQ(plan.peak_bytes, 0U);
    EXPECT_EQ(plan.sum_bytes, 0U);
}

TEST(AliasPlanner, ValidateNamesTheOverlappingPair) {
    AliasPlan plan = plan_aliasing(std::vector<AliasResource>{
        {.bytes = 64, .alignment = 64, .first_use = 0, .last_use = 4, .tag = "left"},
        {.bytes = 64, .alignment = 64, .first_use = 2, .last_use = 6, .tag = "right"},
        {.bytes = 64, .alignment = 64, .first_use = 7, .last_use = 8, .tag = "later"}});
    plan.validate();
    AliasPlan broken = plan;
    broken.offsets_bytes[1] = broken.offsets_bytes[0] + 32;  // misaligned (64 required)
    EXPECT_THROW(broken.validate(), InternalError);

    broken = plan;
    broken.offsets_bytes[1] = broken.offsets_bytes[0];
    try {
        broken.validate();
        FAIL() << "overlap not detected";
    } catch (const InternalError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("left"), std::string::npos) << what;
        EXPECT_NE(what.find("right"), std::string::npos) << what;
    }

    // Overlap in memory with a resource that is never live at the same time is fine.
    broken = plan;
    broken.offsets_bytes[2] = broken.offsets_bytes[1];
    EXPECT_NO_THROW(broken.validate());

    broken = plan;
    broken.peak_bytes += 1;
    EXPECT_THROW(broken.validate(), InternalError);
}

TEST(AliasPlanner, BadInputIsUsageError) {
    AliasPlanner planner;
    EXPECT_THROW(planner.add({.bytes = 0, .first_use = 0, .last_use = 0}), UsageError);
    EXPECT_THROW(planner.add({.bytes = 8, .alignment = 0, .first_use = 0, .last_use = 0}), UsageError);
    EXPECT_THROW(planner.add({.bytes = 8, .alignment = 3, .first_use = 0, .last_use = 0}), UsageError);
    EXPECT_THROW(planner.add({.bytes = 8, .alignment = 1, .first_use = 3, .last_use = 2}), UsageError);
    EXPECT_THROW(planner.add({.bytes = kMax, .alignment = 2, .first_use = 0, .last_use = 0}), UsageError);
    EXPECT_EQ(planner.size(), 0U);

    // Each fits alone, together they overflow a 64-bit arena.
    const std::uint64_t half = (std::uint64_t{1} << 63);
    planner.add({.bytes = half, .first_use = 0, .last_use = 1});
    planner.add({.bytes = half, .first_use = 1, .last_use = 2});
    EXPECT_THROW((void)planner.plan(), UsageError);
    const std::vector<AliasResource> bad{{.bytes = 1, .first_use = 2, .last_use = 1}};
    EXPECT_THROW((void)plan_aliasing(bad), UsageError);
    EXPECT_THROW((void)live_lower_bound_bytes(bad), UsageError);
}

TEST(AliasPlanner, HugeStepNumbersDoNotWrap) {
    const std::vector<AliasResource> rs{{.bytes = 10, .first_use = kMax - 1, .last_use = kMax},
                                        {.bytes = 20, .first_use = kMax, .last_use = kMax},
                                        {.bytes = 40, .first_use = 0, .last_use = kMax - 2}};
    const AliasPlan plan = plan_aliasing(rs);
    plan.validate();
    EXPECT_EQ(plan.live_lower_bound_bytes, 40U);
    EXPECT_EQ(plan.peak_bytes, 40U);  // the first two share a step, the third lives apart
}

}  // namespace
}  // namespace outcore::alloc
