// GEMM planner with per-shape rates (PlanLimits::gemm_shape_flops): which shapes it
// asks for, that estimates use them, and that a slow favourite loses to a faster shape.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <set>
#include <tuple>
#include <vector>

#include "outcore/core/size.hpp"
#include "outcore/tile/gemm_plan.hpp"

namespace outcore::tile {
namespace {

using Shape = std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>;
constexpr std::uint64_t kN = 32768;

PlanLimits h200_tf32(std::uint64_t budget) {
    return PlanLimits{.budget_bytes = budget,
                      .compute_flops = 330e12,
                      .link_bytes_per_second = 55.3e9,
                      .link_d2h_bytes_per_second = 55.4e9,
                      .link_duplex_bytes_per_second = 101.7e9};
}

const GemmProblem kTf32{.m = kN, .n = kN, .k = kN, .type = DType::F32, .compute = GemmCompute::FastTF32};

Shape shape_of(const GemmPlan& p) { return {p.tile_m, p.tile_n, p.tile_k}; }

TEST(GemmShapeRates, AsksForAFewShapesAndEstimatesWithTheirRates) {
    PlanLimits lim = h200_tf32(3 * kGiB);
    const GemmPlan single = plan_gemm(kTf32, lim);
    EXPECT_EQ(single.shape_flops, 0.0);

    std::set<Shape> asked;
    int calls = 0;
    lim.gemm_shape_flops = [&](std::uint64_t m, std::uint64_t n, std::uint64_t k) {
        ++calls;
        asked.insert({m, n, k});
        return 0.8 * 330e12;  // every shape 20% below the square probe
    };
    const GemmPlan shaped = plan_gemm(kTf32, lim);
    EXPECT_GE(calls, 1);
    EXPECT_LE(asked.size(), kMaxShapeProbes);
    EXPECT_EQ(static_cast<std::size_t>(calls), asked.size());  // each shape once
    EXPECT_TRUE(asked.contains(shape_of(single)));             // the single rate's favourite is among them
    EXPECT_TRUE(asked.contains(shape_of(shaped)));
    EXPECT_DOUBLE_EQ(shaped.shape_flops, 0.8 * 330e12);
    EXPECT_DOUBLE_EQ(shaped.compute_seconds, shaped.flop_count / (0.8 * 330e12));
    EXPECT_GT(shaped.total_seconds, single.total_seconds);  // slower compute, never faster
    EXPECT_LE(shaped.device_bytes, lim.budget_bytes);
}

TEST(GemmShapeRates, ASlowFavouriteLosesToAFasterShape) {
    PlanLimits lim = h200_tf32(3 * kGiB);
    const GemmPlan single = plan_gemm(kTf32, lim);
    const Shape slow = shape_of(single);
    lim.gemm_shape_flops = [&](std::uint64_t m, std::uint64_t n, std::uint64_t k) {
        return Shape{m, n, k} == slow ? 0.5 * 330e12 : 330e12;
    };
    const GemmPlan shaped = plan_gemm(kTf32, lim);
    EXPECT_NE(shape_of(shaped), slow);
    EXPECT_DOUBLE_EQ(shaped.shape_flops, 330e12);
    // The favourite costed at its measured rate is slower than the new choice.
    const GemmPlan favourite =
        plan_gemm_fixed(kTf32, lim, single.schedule, single.tile_m, single.tile_n, single.tile_k);
    EXPECT_DOUBLE_EQ(favourite.shape_flops, 0.5 * 330e12);
    EXPECT_GT(favourite.total_seconds, shaped.total_seconds);
}

// gemm_shapes_ahead hears every shape before the first is asked for, in the order they
// are then asked (ops::plan_gemm measures them together there).
TEST(GemmShapeRates, EveryShapeIsNamedAheadInTheOrderItIsAskedFor) {
    PlanLimits lim = h200_tf32(3 * kGiB);
    std::vector<Shape> ahead;
    std::vector<Shape> asked;
    int ahead_calls = 0;
    lim.gemm_shapes_ahead = [&](const std::vector<std::array<std::uint64_t, 3>>& shapes) {
        ++ahead_calls;
        EXPECT_TRUE(asked.empty()) << "named after a shape was asked for";
        for (const auto& [m, n, k] : shapes) ahead.emplace_back(m, n, k);
    };
    lim.gemm_shape_flops = [&](std::uint64_t m, std::uint64_t n, std::uint64_t k) {
        asked.emplace_back(m, n, k);
        return 300e12;
    };
    const GemmPlan plan = plan_gemm(kTf32, lim);
    EXPECT_EQ(ahead_calls, 1);
    EXPECT_FALSE(ahead.empty());
    EXPECT_LE(ahead.size(), kMaxShapeProbes);
    EXPECT_EQ(ahead, asked);
    EXPECT_NE(std::find(ahead.begin(), ahead.end(), shape_of(plan)), ahead.end());
}

TEST(GemmShapeRates, UnknownShapeRatesLeaveTheSingleRatePlan) {
    PlanLimits lim = h200_tf32(6 * kGiB);
    const GemmPlan single = plan_gemm(kTf32, lim);
    lim.gemm_shape_flops = [](std::uint64_t, std::uint64_t, std::uint64_t) { return 0.0; };
    const GemmPlan shaped = plan_gemm(kTf32, lim);
    EXPECT_EQ(shape_of(shaped), shape_of(single));
    EXPECT_EQ(shaped.schedule, single.schedule);
    EXPECT_EQ(shaped.shape_flops, 0.0);
    EXPECT_DOUBLE_EQ(shaped.total_seconds, single.total_seconds);
}

TEST(GemmShapeRates, NotAskedWithoutATimeModel) {
    PlanLimits lim{.budget_bytes = 3 * kGiB};  // rates unknown: fewest bytes
    int calls = 0;
    lim.gemm_shape_flops = [&](std::uint64_t, std::uint64_t, std::uint64_t) {
        ++calls;
        return 1e12;
    };
    const GemmPlan plan = plan_gemm(kTf32, lim);
    (void)plan_gemm_fixed(kTf32, lim, plan.schedule, plan.tile_m, plan.tile_n, plan.tile_k);
    EXPECT_EQ(calls, 0);
    EXPECT_EQ(plan.shape_flops, 0.0);
}

}  // namespace
}  // namespace outcore::tile
