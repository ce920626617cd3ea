// Filter planner: properties on random images, recounts by walking the tile grid,
// strips, the minimum budget and overflow.
#include "outcore/tile/filter_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "plan_test_util.hpp"
#include "support/test_seed.hpp"

namespace outcore::tile {
namespace {

using test_util::coin;
using test_util::log_uniform;
__extension__ typedef unsigned __int128 Wide;

std::uint64_t pixel_bytes(const FilterProblem& p) {
    return std::uint64_t{p.channels} * (p.type == DType::U8 ? 1 : p.type == DType::U16 ? 2 : 4);
}

FilterProblem random_problem(std::mt19937_64& rng) {
    FilterProblem p;
    p.image = {log_uniform(rng, 1, 100000), log_uniform(rng, 1, 100000)};
    p.channels = std::uniform_int_distribution<std::uint32_t>(1, 4)(rng);
    const DType types[] = {DType::U8, DType::U16, DType::F32};
    p.type = types[std::uniform_int_distribution<int>(0, 2)(rng)];
    p.halo = coin(rng, 0.1) ? 0 : static_cast<std::uint32_t>(log_uniform(rng, 1, coin(rng, 0.9) ? 64 : 5000));
    p.separable = coin(rng);
    p.tail = coin(rng, 0.3) ? TailPolicy::ShiftInwards : TailPolicy::Shrink;
    p.strips_only = coin(rng, 0.15);
    return p;
}

// The input rectangle of an output tile, computed here independently of the planner.
TileRect grown(const FilterProblem& p, const TileRect& t) {
    const std::int64_t h = p.halo;
    const auto rows = static_cast<std::int64_t>(p.image.rows);
    const auto cols = static_cast<std::int64_t>(p.image.cols);
    const std::int64_t r0 = std::max<std::int64_t>(0, static_cast<std::int64_t>(t.row) - h);
    const std::int64_t r1 = std::min<std::int64_t>(rows, static_cast<std::int64_t>(t.row + t.size.rows) + h);
    const std::int64_t c0 = std::max<std::int64_t>(0, static_cast<std::int64_t>(t.col) - h);
    const std::int64_t c1 = std::min<std::int64_t>(cols, static_cast<std::int64_t>(t.col + t.size.cols) + h);
    return TileRect{static_cast<std::uint64_t>(r0), static_cast<std::uint64_t>(c0),
                    Extent{static_cast<std::uint64_t>(r1 - r0), static_cast<std::uint64_t>(c1 - c0)}};
}

void check_plan(const FilterPlan& plan, const PlanLimits& lim) {
    const FilterProblem& p = plan.problem;
    const std::uint64_t px = pixel_bytes(p);
    const TileGrid& g = plan.grid;
    ASSERT_EQ(g.extent(), p.image);
    ASSERT_EQ(g.shape(), plan.tile);
    ASSERT_EQ(g.tail(), p.tail);
    ASSERT_GE(plan.tile.rows, 1U);
    ASSERT_GE(plan.tile.cols, 1U);
    ASSERT_LE(plan.tile.rows, p.image.rows);
    ASSERT_LE(plan.tile.cols, p.image.cols);
    ASSERT_EQ(plan.row_strips, plan.tile.cols == p.image.cols);
    if (p.strips_only) {
        ASSERT_TRUE(plan.row_strips);
    }

    for (const std::uint64_t slot :
         {plan.input_slot_bytes, plan.output_slot_bytes, plan.intermediate_bytes}) {
        ASSERT_EQ(slot % lim.min_offset_alignment, 0U);
        ASSERT_LE(slot, lim.max_buffer_bytes);
    }
    ASSERT_EQ(plan.depth, std::min<std::uint64_t>(lim.pipeline_depth, g.count()));
    ASSERT_EQ(plan.output_slots, g.count() == 1 ? 1U : 2U);
    const Wide device = Wide{plan.depth} * plan.input_slot_bytes +
                        Wide{plan.output_slots} * plan.output_slot_bytes + plan.intermediate_bytes;
    ASSERT_TRUE(device == plan.device_bytes);
    ASSERT_LE(plan.device_bytes, lim.budget_bytes);
    ASSERT_GE(plan.output_slot_bytes, plan.tile.rows * plan.tile.cols * px);
    if (!p.separable) {
        ASSERT_EQ(plan.intermediate_bytes, 0U);
    }

    const std::uint64_t image_bytes = p.image.rows * p.image.cols * px;
    ASSERT_EQ(plan.lower_bound_bytes, 2 * image_bytes);
    ASSERT_GE(plan.bytes_moved, plan.lower_bound_bytes);
    ASSERT_EQ(plan.bytes_moved, plan.bytes_to_device + plan.bytes_to_host);
    ASSERT_NEAR(plan.halo_overhead_fraction,
                (static_cast<double>(plan.bytes_moved) - 2.0 * static_cast<double>(image_bytes)) /
                    (2.0 * static_cast<double>(image_bytes)),
                1e-9);

    // Walk the grid: every input rectangle fits its slot (and the intermediate), the
    // plan's own input_rect agrees, bytes recount exactly, and Shrink covers each
    // output pixel once (per axis: tiles abut), ShiftInwards with full tiles.
    if (g.count() <= 20000) {
        Wide up = 0;
        Wide down = 0;
        for (std::uint64_t i = 0; i < g.count(); ++i) {
            const TileRect t = g.tile(i);
            const TileRect in = grown(p, t);
            ASSERT_EQ(plan.input_rect(t), in);
            ASSERT_LE(in.size.rows * in.size.cols * px, plan.input_slot_bytes);
            if (p.separable) {
                ASSERT_LE(in.size.rows * t.size.cols * p.channels * 4, plan.intermediate_bytes);
            }
            if (p.tail == TailPolicy::ShiftInwards) {
                ASSERT_EQ(t.size, plan.tile);
            }
            up += Wide{in.size.rows} * in.size.cols * px;
            down += Wide{t.size.rows} * t.size.cols * px;
        }
        ASSERT_TRUE(up == plan.bytes_to_device) << plan.bytes_to_device;
        ASSERT_TRUE(down == plan.bytes_to_host) << plan.bytes_to_host;
        if (p.tail == TailPolicy::Shrink) {
            ASSERT_EQ(plan.bytes_to_host, image_bytes);
        }
    }
    if (g.tile_rows() <= 100000 && g.tile_cols() <= 100000) {
        std::uint64_t end = 0;
        for (std::uint64_t i = 0; i < g.tile_rows(); ++i) {
            const TileRect t = g.tile(i, 0);
            if (p.tail == TailPolicy::Shrink) {
                ASSERT_EQ(t.row, end);
            }
            ASSERT_LE(t.row, end);
            end = t.row + t.size.rows;
        }
        ASSERT_EQ(end, p.image.rows);
        end = 0;
        for (std::uint64_t j = 0; j < g.tile_cols(); ++j) {
            const TileRect t = g.tile(0, j);
            if (p.tail == TailPolicy::Shrink) {
                ASSERT_EQ(t.col, end);
            }
            ASSERT_LE(t.col, end);
            end = t.col + t.size.cols;
        }
        ASSERT_EQ(end, p.image.cols);
    }
    if (lim.link_bytes_per_second > 0) {
        ASSERT_GE(plan.total_seconds, plan.transfer_seconds);
        ASSERT_GT(plan.transfer_seconds, 0.0);
    }
}

TEST(FilterPlan, RandomProblemsFitMoveAtLeastTheBoundAndRecount) {
    std::mt19937_64 rng(test::seed());
    const std::uint64_t trials = test::scaled(1000);
    for (std::uint64_t trial = 0; trial < trials; ++trial) {
        const FilterProblem p = random_problem(rng);
        PlanLimits lim = test_util::random_limits(rng);
        std::uint64_t minimum = 0;
        try {
            minimum = filter_minimum_budget(p, lim);
        } catch (const UsageError&) {
            // A strip or a halo larger than the largest binding: nothing fits at all.
            ASSERT_NE(lim.max_buffer_bytes, UINT64_MAX);
            continue;
        }
        const std::uint64_t image = p.image.rows * p.image.cols * pixel_bytes(p);
        const double hi = static_cast<double>(std::max(2 * minimum, 8 * image));
        lim.budget_bytes = log_uniform(rng, static_cast<double>(minimum), hi);
        SCOPED_TRACE(testing::Message()
                     << "trial " << trial << ": " << p.image.rows << "x" << p.image.cols << "x" << p.channels
                     << " " << to_string(p.type) << " halo " << p.halo << " sep " << p.separable << " "
                     << to_string(p.tail) << " strips " << p.strips_only << " budget " << lim.budget_bytes);
        const FilterPlan plan = plan_filter(p, lim);
        check_plan(plan, lim);
        if (HasFatalFailure()) return;
    }
}

TEST(FilterPlan, MinimumBudgetIsExact) {
    std::mt19937_64 rng(test::seed());
    for (std::uint64_t trial = 0; trial < test::scaled(300); ++trial) {
        const FilterProblem p = random_problem(rng);
        PlanLimits lim = test_util::random_limits(rng);
        lim.max_buffer_bytes = UINT64_MAX;
        const std::uint64_t minimum = filter_minimum_budget(p, lim);
        lim.budget_bytes = minimum;
        check_plan(plan_filter(p, lim), lim);
        if (HasFatalFailure()) return;
        lim.budget_bytes = minimum - 1;
        try {
            (void)plan_filter(p, lim);
            FAIL() << "a budget one byte below the minimum was accepted";
        } catch (const UsageError& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find(format_size(minimum)), std::string::npos) << what;
            EXPECT_NE(what.find(std::to_string(minimum) + " bytes"), std::string::npos) << what;
        }
    }
}

TEST(FilterPlan, AmpleBudgetTakesTheWholeImage) {
    std::mt19937_64 rng(test::seed());
    for (std::uint64_t trial = 0; trial < test::scaled(200); ++trial) {
        FilterProblem p = random_problem(rng);
        p.image = {log_uniform(rng, 1, 3000), log_uniform(rng, 1, 3000)};
        PlanLimits lim = test_util::random_limits(rng);
        lim.max_buffer_bytes = UINT64_MAX;
        lim.link_bytes_per_second = 0;  // untimed: fewest bytes, largest tiles
        lim.budget_bytes = 64 * p.image.rows * p.image.cols * pixel_bytes(p) + kMiB;
        const FilterPlan plan = plan_filter(p, lim);
        check_plan(plan, lim);
        EXPECT_EQ(plan.tile, p.image);
        EXPECT_EQ(plan.bytes_moved, plan.lower_bound_bytes);
        EXPECT_EQ(plan.halo_overhead_fraction, 0.0);
    }
}

TEST(FilterPlan, StripsWhenTheirHaloCostsAtMostTwiceTheBest) {
    std::mt19937_64 rng(test::seed());
    for (std::uint64_t trial = 0; trial < test::scaled(300); ++trial) {
        FilterProblem p = random_problem(rng);
        p.strips_only = false;
        PlanLimits lim = test_util::random_limits(rng);
        lim.max_buffer_bytes = UINT64_MAX;
        lim.link_bytes_per_second = 0;  // untimed: the best plan of each kind has the least halo
        const std::uint64_t image = p.image.rows * p.image.cols * pixel_bytes(p);
        lim.budget_bytes = std::max(filter_minimum_budget(p, lim), log_uniform(rng, 1, 2.0 * image));
        const FilterPlan plan = plan_filter(p, lim);
        FilterProblem strips = p;
        strips.strips_only = true;
        PlanLimits strip_lim = lim;
        if (lim.budget_bytes < filter_minimum_budget(strips, lim)) {
            EXPECT_FALSE(plan.row_strips);  // no strip fits
            continue;
        }
        const FilterPlan strip = plan_filter(strips, strip_lim);
        if (plan.row_strips) {
            EXPECT_EQ(plan.bytes_moved, strip.bytes_moved);
            EXPECT_EQ(plan.tile, strip.tile);
        } else {
            EXPECT_GT(strip.halo_overhead_fraction, 2.0 * plan.halo_overhead_fraction);
        }
        if (p.halo == 0 && p.tail == TailPolicy::Shrink) {  // no halo: strips are free
            EXPECT_TRUE(plan.row_strips);
        }
    }
}

TEST(FilterPlan, SeparableIntermediateNeverCrossesTheLink) {
    std::mt19937_64 rng(test::seed());
    for (std::uint64_t trial = 0; trial < test::scaled(200); ++trial) {
        FilterProblem p = random_problem(rng);
        PlanLimits lim = test_util::random_limits(rng);
        lim.max_buffer_bytes = UINT64_MAX;
        p.separable = true;
        lim.budget_bytes = filter_minimum_budget(p, lim) * 4;
        const FilterPlan sep = plan_filter(p, lim);
        check_plan(sep, lim);
        EXPECT_GT(sep.intermediate_bytes, 0U);
        // The same tiles without the second pass move exactly the same bytes.
        p.separable = false;
        lim.budget_bytes = std::max(lim.budget_bytes, filter_minimum_budget(p, lim));
        const FilterPlan one = plan_filter(p, lim);
        if (one.tile == sep.tile) {
            EXPECT_EQ(one.bytes_moved, sep.bytes_moved);
        }
    }
}

TEST(FilterPlan, InputRectClampsAtTheEdges) {
    FilterProblem p{.image = {100, 50}, .halo = 8};
    FilterPlan plan;
    plan.problem = p;
    EXPECT_EQ(plan.input_rect({0, 0, {10, 10}}), (TileRect{0, 0, {18, 18}}));
    EXPECT_EQ(plan.input_rect({40, 20, {10, 10}}), (TileRect{32, 12, {26, 26}}));
    EXPECT_EQ(plan.input_rect({95, 45, {5, 5}}), (TileRect{87, 37, {13, 13}}));
    EXPECT_EQ(plan.input_rect({0, 0, {100, 50}}), (TileRect{0, 0, {100, 50}}));
}

TEST(FilterPlan, RejectsBadProblems) {
    const PlanLimits lim{.budget_bytes = kGiB};
    EXPECT_THROW((void)plan_filter({.image = {0, 10}}, lim), UsageError);
    EXPECT_THROW((void)plan_filter({.image = {10, 10}, .channels = 0}, lim), UsageError);
    EXPECT_THROW((void)plan_filter({.image = {10, 10}, .channels = 5}, lim), UsageError);
    EXPECT_THROW((void)plan_filter({.image = {10, 10}, .type = DType::F64}, lim), UsageError);
    // Overflow is an error, never a wrap.
    EXPECT_THROW((void)plan_filter({.image = {1ULL << 32, 1ULL << 32}}, lim), UsageError);
    EXPECT_THROW((void)filter_minimum_budget({.image = {UINT64_MAX, UINT64_MAX}}, lim), UsageError);
    // A halo wider than the image is clamped, not an error.
    const FilterPlan wide = plan_filter({.image = {10, 10}, .halo = 4000000000U}, lim);
    EXPECT_EQ(wide.bytes_moved, wide.lower_bound_bytes);
}

TEST(FilterPlan, HugeImagesAreUsageErrorsOrValidPlans) {
    const std::uint64_t sizes[] = {1, 1ULL << 31, 1ULL << 32, 46341ULL * 46341ULL, 1ULL << 63, UINT64_MAX};
    for (const std::uint64_t rows : sizes) {
        for (const std::uint64_t cols : sizes) {
            for (const std::uint64_t budget : {kMiB, std::uint64_t{UINT64_MAX}}) {
                const FilterProblem p{.image = {rows, cols}, .halo = 3};
                const PlanLimits lim{.budget_bytes = budget};
                try {
                    check_plan(plan_filter(p, lim), lim);
                } catch (const UsageError&) {}
            }
        }
    }
}

// Issue 4's blur: 32768² f32, 1 GiB, σ = 8 (radius 24 = 3σ). Printed for docs/tiling.md.
TEST(FilterPlan, H200GaussianCase) {
    const FilterProblem p{
        .image = {32768, 32768}, .channels = 1, .type = DType::F32, .halo = 24, .separable = true};
    const PlanLimits lim{.budget_bytes = kGiB,
                         .link_bytes_per_second = 55.3e9,
                         .link_d2h_bytes_per_second = 55.4e9,
                         .link_duplex_bytes_per_second = 101.7e9};
    const FilterPlan plan = plan_filter(p, lim);
    check_plan(plan, lim);
    const double bound = 2.0 * 32768.0 * 32768.0 * 4 / 101.7e9;  // the image once each way, both at once
    std::printf(
        "gaussian 32768² f32 halo 24, 1 GiB: tile %lu×%lu%s, device %s, moved %s (lower bound %s, halo "
        "+%.2f%%), transfer %.4f s, model %.4f s, PCIe bound %.4f s, model ceiling %.1f%%\n",
        static_cast<unsigned long>(plan.tile.rows), static_cast<unsigned long>(plan.tile.cols),
        plan.row_strips ? " (strips)" : "", format_size(plan.device_bytes).c_str(),
        format_size(plan.bytes_moved).c_str(), format_size(plan.lower_bound_bytes).c_str(),
        100 * plan.halo_overhead_fraction, plan.transfer_seconds, plan.total_seconds, bound,
        100 * bound / plan.total_seconds);
    EXPECT_GT(bound / plan.total_seconds, 0.85);  // the target is within the model's reach
}

}  // namespace
}  // namespace outcore::tile
