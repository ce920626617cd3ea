// Tests of retained B chunks (GemmPlan::retained_b, tile::retain_b_chunks): an a-panel plan
// whose rows walk C in a serpentine, keep the B chunks a row's last tiles and the next
// row's first share, and run those first tiles k outer as the next panel's chunks land.
// On the CPU backend against the float64 reference (gemm_case.hpp's run_case checks the
// plan's bytes and calls, the budget, every tile written once), and the planner's choice.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "gemm_case.hpp"
#include "gemm_test_support.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/tile/gemm_plan.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::DType;
using outcore::gemm_test::Case;
using outcore::gemm_test::make_device;
using outcore::gemm_test::run_case;
using outcore::ops::GemmReport;
using outcore::tile::GemmPlan;
using outcore::tile::GemmProblem;
using outcore::tile::GemmSchedule;
using outcore::tile::PlanLimits;

/// B bytes the serpentine keeps: at each row change, the last `r` columns the row walked
/// (an even row's rightmost, an odd row's leftmost) go up only once.
std::uint64_t kept_bytes(std::uint64_t rows, std::uint64_t n, std::uint64_t tile_n, std::uint64_t k,
                         std::uint64_t w, std::uint64_t r) {
    const std::uint64_t cols = (n + tile_n - 1) / tile_n;
    auto width = [&](std::uint64_t j) { return std::min(tile_n, n - j * tile_n); };
    std::uint64_t kept = 0;
    for (std::uint64_t i = 0; i + 1 < rows; ++i) {
        for (std::uint64_t x = 0; x < r; ++x) kept += width(i % 2 == 0 ? cols - 1 - x : x) * k * w;
    }
    return kept;
}

// Every retained count up to half a row, with f32, f64 and bf16 inputs, B either way, β ≠ 0,
// packed and device-readable operands, one lane or two, a shorter last panel, two to four
// rows: the answer is the whole-panel plan's, and B's bytes up drop by what is kept.
TEST(GemmRetainedB, GivesTheSameAnswerAndUploadsTheSharedBOnce) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    for (int variant = 0; variant < 18; ++variant) {
        const std::uint64_t tile_m = variant % 2 == 0 ? 32 : 48;
        const std::uint64_t rows = 2 + static_cast<std::uint64_t>(variant) % 3;
        const std::uint64_t chunks = 2 + rng() % 3;
        const std::uint64_t tile_n = 24 + 8 * (rng() % 3);
        const std::uint64_t cols = 2 + rng() % 6;
        const DType type = variant % 6 == 5 ? DType::BF16 : (variant % 6 == 4 ? DType::F64 : DType::F32);
        const std::uint64_t shorter_by = variant % 4 == 3 ? 1 + rng() % (tile_m - 1) : 0;
        const std::uint64_t n = tile_n * (cols - 1) + 1 + rng() % tile_n;  // a narrower last column
        const std::uint64_t ck = 2048;                                     // retain_b_chunks's smallest chunk
        Case cs{.m = tile_m * rows - shorter_by,
                .n = n,
                .k = ck * chunks,
                .type = type,
                .trans_b = rng() % 2 == 0,
                .beta = variant % 5 == 0 ? 0.5 : 0.0,
                .schedule = GemmSchedule::APanelResident,
                .budget_bytes = outcore::kGiB,
                .lanes = variant % 3 == 1 ? 2U : 1U,
                .tile_m = tile_m,
                .tile_n = tile_n,
                .tile_k = ck * chunks,
                .device_readable = variant % 4 == 1};
        const std::uint32_t r = 1 + static_cast<std::uint32_t>(rng() % (cols / 2));
        cs.panel_chunk_k = ck;  // the same panel in chunks, nothing retained
        const GemmReport plain = run_case(*device, cs, rng);
        cs.panel_chunk_k.reset();
        cs.retained_b = r;
        const GemmReport kept = run_case(*device, cs, rng);
        ASSERT_EQ(kept.plan.retained_b, r);
        EXPECT_EQ(kept.plan.prefetch_chunks, 0U);
        EXPECT_EQ(kept.plan.b_slots, r + 2);
        EXPECT_GE(kept.plan.c_slots, r + 1);
        EXPECT_EQ(kept.b_ahead, 0U) << "the next row's first B is kept, not sent ahead";
        const std::uint64_t w = outcore::dtype_bytes(type);
        EXPECT_EQ(plain.pipeline.bytes_uploaded - kept.pipeline.bytes_uploaded,
                  kept_bytes(rows, n, tile_n, cs.k, w, r));
    }
}

// The planner keeps as many as the budget holds, at most half a row, at least
// kMinRetainedB by itself; a count asked for that does not fit, or a plan that cannot
// have it, is refused.
TEST(GemmRetainedB, ThePlannerKeepsWhatTheBudgetHolds) {
    const GemmProblem problem{.m = 96, .n = 400, .k = 8192, .type = DType::F32};
    PlanLimits limits{.budget_bytes = outcore::kGiB, .min_offset_alignment = 256};
    const GemmPlan base =
        outcore::tile::plan_gemm_fixed(problem, limits, GemmSchedule::APanelResident, 32, 40, 8192, 1, 2);
    const std::uint64_t a = 32 * 8192 * 4;  // the panel: 2 chunks of 4096
    auto device = [&](std::uint64_t r) {
        return a + (r + 2) * base.b_slot_bytes + std::max<std::uint64_t>(2, r + 1) * base.c_slot_bytes;
    };
    // 10 columns of tiles: at most 5.
    for (std::uint64_t want = 2; want <= 5; ++want) {
        limits.budget_bytes = device(want);
        GemmPlan p = outcore::tile::retain_b_chunks(base, limits);
        EXPECT_EQ(p.retained_b, want);
        EXPECT_EQ(p.a_chunk_k, 4096U);
        EXPECT_EQ(p.device_bytes, device(want));
        limits.budget_bytes = device(want) - 1;
        p = outcore::tile::retain_b_chunks(base, limits);
        EXPECT_EQ(p.retained_b, want - 1 >= outcore::tile::kMinRetainedB ? want - 1 : 0);
    }
    limits.budget_bytes = outcore::kGiB;
    EXPECT_EQ(outcore::tile::retain_b_chunks(base, limits).retained_b, 5U) << "half a row";
    EXPECT_EQ(outcore::tile::retain_b_chunks(base, limits, 3).retained_b, 3U);
    EXPECT_THROW((void)outcore::tile::retain_b_chunks(base, limits, 6), outcore::UsageError);
    limits.budget_bytes = device(3) - 1;
    EXPECT_THROW((void)outcore::tile::retain_b_chunks(base, limits, 3), outcore::UsageError);
    // B's bytes up: the plan's less the kept ones, at the two row changes.
    limits.budget_bytes = outcore::kGiB;
    const GemmPlan p = outcore::tile::retain_b_chunks(base, limits);
    EXPECT_EQ(base.bytes_to_device - p.bytes_to_device, kept_bytes(3, 400, 40, 8192, 4, 5));
    EXPECT_EQ(base.bytes_moved - p.bytes_moved, kept_bytes(3, 400, 40, 8192, 4, 5));
    // Plans that cannot have it: A transposed, a 16-bit C, a single panel, k in chunks.
    GemmProblem other = problem;
    other.trans_a = true;
    auto refused = [&](const GemmProblem& q, std::uint64_t tm, std::uint64_t tk) {
        const GemmPlan b =
            outcore::tile::plan_gemm_fixed(q, limits, GemmSchedule::APanelResident, tm, 40, tk);
        EXPECT_EQ(outcore::tile::retain_b_chunks(b, limits).retained_b, 0U);
        EXPECT_THROW((void)outcore::tile::retain_b_chunks(b, limits, 2), outcore::UsageError);
    };
    refused(other, 32, 8192);
    other = problem;
    other.type = DType::BF16;
    other.narrow_c = true;
    refused(other, 32, 8192);
    refused(problem, 96, 8192);
    refused(problem, 32, 4096);
}

}  // namespace
