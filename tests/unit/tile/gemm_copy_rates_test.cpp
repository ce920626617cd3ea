// GEMM planner with measured copy rates (PlanLimits::gemm_copy_rate): what it asks
// for, that estimates use the rates, and that slow short runs steer the choice.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <tuple>

#include "outcore/core/size.hpp"
#include "outcore/tile/gemm_plan.hpp"

namespace outcore::tile {
namespace {

constexpr std::uint64_t kN = 32768;
constexpr double kUp = 55.3e9;

PlanLimits h200(std::uint64_t budget, double flops) {
    return PlanLimits{.budget_bytes = budget,
                      .compute_flops = flops,
                      .link_bytes_per_second = kUp,
                      .link_d2h_bytes_per_second = 55.4e9,
                      .link_duplex_bytes_per_second = 101.7e9};
}

const GemmProblem kBf16{.m = kN, .n = kN, .k = kN, .type = DType::BF16};

TEST(GemmCopyRates, AskedPerOperandWithItsChunkExtents) {
    PlanLimits lim = h200(kGiB + kGiB / 2, 680e12);
    using Ask = std::tuple<GemmOperand, std::uint64_t, std::uint64_t>;
    std::set<Ask> asked;
    lim.gemm_copy_rate = [&](GemmOperand op, std::uint64_t outer, std::uint64_t inner) {
        asked.insert({op, outer, inner});
        return 0.0;
    };
    const GemmPlan p = plan_gemm_fixed(kBf16, lim, GemmSchedule::APanelResident, 16384, 1536, 8192);
    EXPECT_EQ(asked, (std::set<Ask>{{GemmOperand::A, 16384, 8192},
                                    {GemmOperand::B, 1536, 8192},
                                    {GemmOperand::C, 16384, 1536}}));
    // Unknown rates (0) leave the estimate as the link rates make it.
    PlanLimits plain = h200(kGiB + kGiB / 2, 680e12);
    EXPECT_DOUBLE_EQ(
        p.total_seconds,
        plan_gemm_fixed(kBf16, plain, GemmSchedule::APanelResident, 16384, 1536, 8192).total_seconds);
}

TEST(GemmCopyRates, OneRateForEveryCopyIsASlowerLink) {
    // Every copy at half the link's rate: the same estimate as a link half as fast.
    PlanLimits lim = h200(3 * kGiB, 330e12);
    lim.gemm_copy_rate = [](GemmOperand, std::uint64_t, std::uint64_t) { return kUp / 2; };
    PlanLimits half = h200(3 * kGiB, 330e12);
    half.link_bytes_per_second /= 2;
    half.link_d2h_bytes_per_second /= 2;
    half.link_duplex_bytes_per_second /= 2;
    const GemmProblem f32{.m = kN, .n = kN, .k = kN, .type = DType::F32, .compute = GemmCompute::FastTF32};
    for (GemmSchedule s :
         {GemmSchedule::SquareC, GemmSchedule::APanelResident, GemmSchedule::BPanelResident}) {
        const GemmPlan a = plan_gemm_fixed(f32, lim, s, 8192, 4096, 4096);
        const GemmPlan b = plan_gemm_fixed(f32, half, s, 8192, 4096, 4096);
        EXPECT_NEAR(a.total_seconds, b.total_seconds, 1e-12 * b.total_seconds) << to_string(s);
        EXPECT_NEAR(a.transfer_seconds, b.transfer_seconds, 1e-12 * b.transfer_seconds) << to_string(s);
        EXPECT_EQ(a.bytes_moved, b.bytes_moved);
    }
    // Rates above the link's count as the link's.
    lim.gemm_copy_rate = [](GemmOperand, std::uint64_t, std::uint64_t) { return 4 * kUp; };
    PlanLimits plain = h200(3 * kGiB, 330e12);
    EXPECT_DOUBLE_EQ(plan_gemm_fixed(f32, lim, GemmSchedule::SquareC, 8192, 4096, 4096).total_seconds,
                     plan_gemm_fixed(f32, plain, GemmSchedule::SquareC, 8192, 4096, 4096).total_seconds);
}

// Column-major bf16 A (m × k) and B (k × n) in pinned memory, as on the H200: an A
// chunk's runs are tile_m·2 bytes, a B chunk's tile_k·2, a C tile's (f32) tile_m·4.
// Rates of 2-D runs 64 KiB apart measured there: 16 KiB 32 GB/s, 32 KiB 48 GB/s.
double h200_run_rate(std::uint64_t run_bytes) {
    if (run_bytes >= 64 * kKiB) return kUp;
    if (run_bytes >= 32 * kKiB) return 48e9;
    if (run_bytes >= 16 * kKiB) return 32e9;
    return 15e9;
}

TEST(GemmCopyRates, SlowShortRunsSteerTheChoice) {
    PlanLimits lim = h200(kGiB + kGiB / 2, 680e12);
    const GemmPlan single = plan_gemm(kBf16, lim);
    // Without copy rates the planner takes B chunks of short runs (the H200's choice,
    // 16384 × 1536 × 8192: 16 KiB runs, 0.62 of the bound where 32 KiB runs made 0.80).
    ASSERT_LT(single.tile_k * 2, 32 * kKiB);
    lim.gemm_copy_rate = [](GemmOperand op, std::uint64_t outer, std::uint64_t inner) {
        switch (op) {
            case GemmOperand::A: return h200_run_rate(outer * 2);
            case GemmOperand::B: return h200_run_rate(inner * 2);
            case GemmOperand::C: return h200_run_rate(outer * 4);
        }
        return 0.0;
    };
    const GemmPlan copied = plan_gemm(kBf16, lim);
    EXPECT_GE(copied.tile_k * 2, 32 * kKiB);
    EXPECT_LE(copied.device_bytes, lim.budget_bytes);
    // The old choice costed with its copies' rates is slower than the new one.
    const GemmPlan old =
        plan_gemm_fixed(kBf16, lim, single.schedule, single.tile_m, single.tile_n, single.tile_k);
    EXPECT_GT(old.total_seconds, single.total_seconds);
    EXPECT_GT(old.total_seconds, copied.total_seconds);
}

}  // namespace
}  // namespace outcore::tile
