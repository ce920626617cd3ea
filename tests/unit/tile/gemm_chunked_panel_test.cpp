// Tests of tile::chunk_a_panel (GemmPlan::a_chunk_k): which plans may have their A panel
// in chunks along k, which chunk it picks, and that the chunked plan holds its budget
// and moves the bytes the whole-panel plan moved. The executor's side is in
// tests/unit/ops/gemm_test.cpp (Gemm.APanelInChunks*).
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/tile/gemm_plan.hpp"

namespace {

using outcore::kGiB;
using outcore::kMiB;
using outcore::tile::chunk_a_panel;
using outcore::tile::GemmPlan;
using outcore::tile::GemmProblem;
using outcore::tile::GemmSchedule;
using outcore::tile::narrower_chunked_panel;
using outcore::tile::plan_gemm_fixed;
using outcore::tile::PlanLimits;
using outcore::tile::two_chunked_panels;

// The H200 tf32 case: A-panel rows of 16384, B whole-k per 512-column tile.
GemmProblem tf32_case() {
    return {.m = 32768,
            .n = 32768,
            .k = 32768,
            .type = outcore::DType::F32,
            .compute = outcore::GemmCompute::FastTF32};
}

// The chunk picked: of k halved down to kMinPanelChunkK, those that leave at least one
// chunk of the next panel room, the nearest to kPanelChunkK (4096 wherever it fits: the
// H100's best; 2048 where only a narrower chunk fits the spare bytes; none where nothing
// does). Only the panel's ring changes: B, C and the bytes moved are the whole plan's.
TEST(GemmChunkedPanel, PicksTheChunkNearestTheBestMeasuredThatPrefetches) {
    const GemmProblem p = tf32_case();
    const PlanLimits roomy{.budget_bytes = 64 * kGiB, .min_offset_alignment = 256};
    const GemmPlan sized = plan_gemm_fixed(p, roomy, GemmSchedule::APanelResident, 16384, 512, 32768, 1, 3);
    const std::uint64_t others = sized.device_bytes - std::uint64_t{sized.a_slots} * sized.a_slot_bytes;
    const std::uint64_t panel = 16384ULL * 32768 * 4;
    struct Want {
        std::uint64_t budget, chunk_k, ahead;
    };
    for (const Want want :
         {Want{3 * kGiB, 4096, (3 * kGiB - others - panel) / (256 * kMiB)}, Want{6 * kGiB, 4096, 8},
          Want{others + panel + 300 * kMiB, 4096, 1}, Want{others + panel + 200 * kMiB, 2048, 1},
          Want{others + panel + 100 * kMiB, 0, 0}}) {
        const PlanLimits lim{.budget_bytes = want.budget, .min_offset_alignment = 256};
        const GemmPlan whole = plan_gemm_fixed(p, lim, GemmSchedule::APanelResident, 16384, 512, 32768, 1, 3);
        const GemmPlan chunked = chunk_a_panel(whole, lim);
        SCOPED_TRACE(want.budget);
        EXPECT_EQ(chunked.a_chunk_k, want.chunk_k);
        EXPECT_EQ(chunked.prefetch_chunks, want.ahead);
        if (want.chunk_k == 0) {
            EXPECT_EQ(chunked.device_bytes, whole.device_bytes);
            continue;
        }
        const std::uint64_t chunks = p.k / chunked.a_chunk_k;
        EXPECT_EQ(chunked.a_slot_bytes, 16384 * chunked.a_chunk_k * 4);
        EXPECT_EQ(chunked.a_slots, chunks + chunked.prefetch_chunks);
        EXPECT_LE(chunked.device_bytes, want.budget);
        EXPECT_EQ(chunked.device_bytes - std::uint64_t{chunked.a_slots} * chunked.a_slot_bytes,
                  whole.device_bytes - std::uint64_t{whole.a_slots} * whole.a_slot_bytes);
        EXPECT_EQ(chunked.b_slot_bytes, whole.b_slot_bytes);
        EXPECT_EQ(chunked.c_slots, whole.c_slots);
        EXPECT_EQ(chunked.bytes_moved, whole.bytes_moved);
        EXPECT_EQ(chunked.tile_k, p.k);
        // Any chunk asked for gets the spare regions the budget leaves it, a panel at most.
        for (std::uint64_t ck = p.k / 2; ck >= outcore::tile::kMinPanelChunkK; ck /= 2) {
            const std::uint64_t bytes = 16384 * ck * 4;
            const std::uint64_t ahead = std::min((want.budget - others) / bytes - p.k / ck, p.k / ck);
            EXPECT_EQ(chunk_a_panel(whole, lim, ck).prefetch_chunks, ahead) << ck;
        }
    }
}

// A 16-bit C sums a chunked tile's GEMMs in an f32 tile (GemmPlan::acc_bytes) out of the
// budget: the bf16 1.5 GiB case's plan (16384×1536 tiles, 3 C slots) has 176 MiB spare,
// which after the 96 MiB of sums holds one chunk of 2048 columns (64 MiB), not of 4096.
// Where the sums leave no spare chunk, the panel stays whole.
TEST(GemmChunkedPanel, ASixteenBitCPaysForItsTileOfSums) {
    const GemmProblem p{.m = 32768, .n = 32768, .k = 32768, .type = outcore::DType::BF16, .narrow_c = true};
    const PlanLimits lim{.budget_bytes = 1536 * kMiB, .min_offset_alignment = 256};
    const GemmPlan whole = plan_gemm_fixed(p, lim, GemmSchedule::APanelResident, 16384, 1536, 32768, 1, 3);
    const std::uint64_t others = whole.device_bytes - std::uint64_t{whole.a_slots} * whole.a_slot_bytes;
    const std::uint64_t sums = 16384ULL * 1536 * 4;
    const GemmPlan chunked = chunk_a_panel(whole, lim);
    EXPECT_EQ(chunked.acc_bytes, sums);
    EXPECT_EQ(chunked.a_chunk_k, 2048U);
    EXPECT_EQ(chunked.prefetch_chunks, (lim.budget_bytes - others - sums) / (16384 * 2048 * 2) - 16);
    EXPECT_EQ(chunked.prefetch_chunks, 1U);
    EXPECT_EQ(chunked.device_bytes, others + sums + std::uint64_t{chunked.a_slots} * chunked.a_slot_bytes);
    EXPECT_LE(chunked.device_bytes, lim.budget_bytes);
    EXPECT_EQ(chunked.bytes_moved, whole.bytes_moved);
    // The same plan with an f32 C has no tile of sums.
    GemmProblem wide = p;
    wide.narrow_c = false;
    const PlanLimits roomy{.budget_bytes = 4 * kGiB, .min_offset_alignment = 256};
    EXPECT_EQ(chunk_a_panel(
                  plan_gemm_fixed(wide, roomy, GemmSchedule::APanelResident, 16384, 1536, 32768, 1, 3), roomy)
                  .acc_bytes,
              0U);
    // Room for the whole panel and the sums but no spare chunk: left whole; asked, fits.
    PlanLimits tight = lim;
    tight.budget_bytes = others + std::uint64_t{16} * 16384 * 2048 * 2 + sums;
    const GemmPlan snug = plan_gemm_fixed(p, tight, GemmSchedule::APanelResident, 16384, 1536, 32768, 1, 3);
    const GemmPlan left = chunk_a_panel(snug, tight);
    EXPECT_EQ(left.a_chunk_k, 0U);
    EXPECT_EQ(left.acc_bytes, 0U);
    const GemmPlan asked = chunk_a_panel(snug, tight, 2048);
    EXPECT_EQ(asked.prefetch_chunks, 0U);
    EXPECT_EQ(asked.device_bytes, tight.budget_bytes);
    tight.budget_bytes -= 256;
    EXPECT_THROW(
        (void)chunk_a_panel(plan_gemm_fixed(p, tight, GemmSchedule::APanelResident, 16384, 1536, 32768, 1, 3),
                            tight, 2048),
        outcore::UsageError)
        << "the sums do not fit beside a whole panel";
}

// Where the planner's tiles leave no room for a chunk of the next panel (a bf16 C's tile of
// sums tips 16384×1536 over 1.5 GiB less the H100's two workspaces), the same rows in
// narrower tiles that chunk: of 1280, 1024 and 768 (down to half the width: 512-wide tiles
// try only 256), those with the most chunks ahead (one each), the fastest by the estimates;
// where the tiles chunk with few ahead, narrower ones with more; none where none fits or the
// plan is another, none where the narrower tiles are more than kNarrowerSlack slower by the
// estimates.
TEST(GemmChunkedPanel, NarrowerTilesWhereThePlannersLeaveLittleRoomForChunks) {
    const GemmProblem p{.m = 32768, .n = 32768, .k = 32768, .type = outcore::DType::BF16, .narrow_c = true};
    PlanLimits lim{.budget_bytes = 1536 * kMiB - 64 * kMiB,
                   .min_offset_alignment = 256,
                   .compute_flops = 7e14,
                   .link_bytes_per_second = 55e9,
                   .link_duplex_bytes_per_second = 100e9};
    auto a_panel = [&](std::uint64_t tile_n, const PlanLimits& limits) {
        return plan_gemm_fixed(p, limits, GemmSchedule::APanelResident, 16384, tile_n, 32768);
    };
    const GemmPlan wide = a_panel(1536, lim);
    ASSERT_EQ(chunk_a_panel(wide, lim).a_chunk_k, 0U);
    const std::optional<GemmPlan> narrower = narrower_chunked_panel(wide, lim);
    ASSERT_TRUE(narrower.has_value());
    EXPECT_EQ(narrower->schedule, GemmSchedule::APanelResident);
    EXPECT_EQ(narrower->tile_m, 16384U);
    EXPECT_EQ(narrower->tile_k, 32768U);
    EXPECT_NE(narrower->a_chunk_k, 0U);
    EXPECT_LE(narrower->device_bytes, lim.budget_bytes);
    // The fastest of the narrower widths that chunk, counted here from their own plans.
    std::uint64_t want = 0;
    double fastest = 0;
    for (const std::uint64_t n : {1280, 1024, 768}) {
        const GemmPlan c = chunk_a_panel(a_panel(n, lim), lim);
        if (c.a_chunk_k == 0) continue;
        if (want == 0 || c.total_seconds < fastest) {
            want = n;
            fastest = c.total_seconds;
        }
    }
    EXPECT_EQ(narrower->tile_n, want);
    EXPECT_DOUBLE_EQ(narrower->total_seconds, fastest);
    EXPECT_GT(narrower->total_seconds, 0);

    // Tiles that chunk with one chunk of the next panel ahead: narrower ones with two, the
    // most any hold (768-wide ones hold one); none for tiles that hold as many as any
    // narrower ones (512: 256-wide ones hold two too).
    ASSERT_EQ(chunk_a_panel(a_panel(1024, lim), lim).prefetch_chunks, 1U);
    ASSERT_EQ(chunk_a_panel(a_panel(768, lim), lim).prefetch_chunks, 1U);
    for (const std::uint64_t n : {1024, 768}) {
        const std::optional<GemmPlan> more = narrower_chunked_panel(a_panel(n, lim), lim);
        ASSERT_TRUE(more.has_value()) << n;
        EXPECT_EQ(more->tile_n, 512U) << n;
        EXPECT_EQ(more->prefetch_chunks, 2U) << n;
        EXPECT_LE(more->device_bytes, lim.budget_bytes) << n;
    }
    // More ahead before faster: with an f32 C and 1572 MiB, 16384×1024 tiles hold one chunk
    // ahead, 768-wide ones two and 512-wide ones three, whose GEMMs measured a little slower.
    GemmProblem wide_c = p;
    wide_c.narrow_c = false;
    PlanLimits rated = lim;
    rated.budget_bytes = 1572 * kMiB;
    rated.gemm_shape_flops = [](std::uint64_t, std::uint64_t n, std::uint64_t) {
        return n > 512 ? 7e14 : 6.8e14;
    };
    auto wide_panel = [&](std::uint64_t n) {
        return chunk_a_panel(plan_gemm_fixed(wide_c, rated, GemmSchedule::APanelResident, 16384, n, 32768),
                             rated);
    };
    ASSERT_EQ(wide_panel(1024).prefetch_chunks, 1U);
    ASSERT_EQ(wide_panel(768).prefetch_chunks, 2U);
    ASSERT_EQ(wide_panel(512).prefetch_chunks, 3U);
    ASSERT_LT(wide_panel(768).total_seconds, wide_panel(512).total_seconds);
    const std::optional<GemmPlan> ahead = narrower_chunked_panel(
        plan_gemm_fixed(wide_c, rated, GemmSchedule::APanelResident, 16384, 1024, 32768), rated);
    ASSERT_TRUE(ahead.has_value());
    EXPECT_EQ(ahead->tile_n, 512U);
    EXPECT_EQ(ahead->prefetch_chunks, 3U);
    ASSERT_EQ(chunk_a_panel(a_panel(512, lim), lim).prefetch_chunks, 2U);
    EXPECT_FALSE(narrower_chunked_panel(a_panel(512, lim), lim).has_value());
    // Nor for another schedule or a k in chunks (an f32 C).
    EXPECT_FALSE(
        narrower_chunked_panel(plan_gemm_fixed(p, lim, GemmSchedule::SquareC, 4096, 4096, 32768), lim)
            .has_value());
    GemmProblem f32_c = p;
    f32_c.narrow_c = false;
    EXPECT_FALSE(narrower_chunked_panel(
                     plan_gemm_fixed(f32_c, lim, GemmSchedule::APanelResident, 16384, 1536, 16384), lim)
                     .has_value());
    // Room for 16384×512 whole and for no narrower tiles (256) in chunks.
    PlanLimits snug = lim;
    snug.budget_bytes = a_panel(512, lim).device_bytes;
    ASSERT_EQ(chunk_a_panel(a_panel(512, snug), snug).a_chunk_k, 0U);
    EXPECT_FALSE(narrower_chunked_panel(a_panel(512, snug), snug).has_value());
    snug.budget_bytes += 64 * kMiB;  // now 256-wide tiles hold a chunk of 2048 ahead
    ASSERT_EQ(chunk_a_panel(a_panel(512, snug), snug).a_chunk_k, 0U);
    ASSERT_TRUE(narrower_chunked_panel(a_panel(512, snug), snug).has_value());
    EXPECT_EQ(narrower_chunked_panel(a_panel(512, snug), snug)->tile_n, 256U);
    // Narrower GEMMs measured at under half the rate: chunks are not worth them.
    PlanLimits slow = lim;
    slow.gemm_shape_flops = [](std::uint64_t, std::uint64_t n, std::uint64_t) {
        return n >= 1536 ? 7e14 : 3e14;
    };
    EXPECT_FALSE(narrower_chunked_panel(a_panel(1536, slow), slow).has_value());
}

TEST(GemmChunkedPanel, PlansThatCannotHaveItAreLeftWholeOrRefused) {
    const PlanLimits lim{.budget_bytes = 3 * kGiB, .min_offset_alignment = 256};
    auto expect_left_whole = [&](const GemmPlan& plan, const PlanLimits& limits, const char* why) {
        const GemmPlan out = chunk_a_panel(plan, limits);
        EXPECT_EQ(out.a_chunk_k, 0U) << why;
        EXPECT_EQ(out.device_bytes, plan.device_bytes) << why;
        EXPECT_THROW((void)chunk_a_panel(plan, limits, 4096), outcore::UsageError) << why;
    };
    GemmProblem p = tf32_case();
    p.trans_a = true;
    expect_left_whole(plan_gemm_fixed(p, lim, GemmSchedule::APanelResident, 16384, 512, 32768), lim,
                      "transposed A");
    p = tf32_case();
    expect_left_whole(plan_gemm_fixed(p, lim, GemmSchedule::APanelResident, 16384, 512, 4096), lim,
                      "k already in chunks");
    expect_left_whole(plan_gemm_fixed(p, lim, GemmSchedule::BPanelResident, 512, 16384, 32768), lim,
                      "a B panel");
    p.m = 16384;
    expect_left_whole(plan_gemm_fixed(p, lim, GemmSchedule::APanelResident, 16384, 512, 32768), lim,
                      "a single panel");
    // A shorter last panel is no obstacle: its chunks sit in regions sized for the first.
    p.m = 30000;
    const GemmPlan uneven =
        chunk_a_panel(plan_gemm_fixed(p, lim, GemmSchedule::APanelResident, 18432, 512, 32768), lim);
    EXPECT_EQ(uneven.a_chunk_k, 4096U);
    EXPECT_EQ(uneven.a_slot_bytes, 18432U * 4096 * 4);
    EXPECT_LE(uneven.device_bytes, lim.budget_bytes);
    // A ring over the largest binding is no candidate.
    p = tf32_case();
    PlanLimits narrow = lim;
    narrow.max_buffer_bytes = 2 * kGiB + 64 * kMiB;
    const GemmPlan whole = plan_gemm_fixed(p, narrow, GemmSchedule::APanelResident, 16384, 512, 32768);
    const GemmPlan out = chunk_a_panel(whole, narrow);
    EXPECT_LE(std::uint64_t{out.a_slots} * out.a_slot_bytes, narrow.max_buffer_bytes);
    // No spare byte: nothing to prefetch, left whole; a chunk asked for still fits.
    PlanLimits tight = lim;
    tight.budget_bytes = whole.device_bytes;
    const GemmPlan snug = plan_gemm_fixed(p, tight, GemmSchedule::APanelResident, 16384, 512, 32768, 1, 2);
    tight.budget_bytes = snug.device_bytes;
    EXPECT_EQ(chunk_a_panel(snug, tight).a_chunk_k, 0U);
    const GemmPlan asked = chunk_a_panel(snug, tight, 8192);
    EXPECT_EQ(asked.prefetch_chunks, 0U);
    EXPECT_EQ(asked.device_bytes, snug.device_bytes);
    EXPECT_THROW((void)chunk_a_panel(snug, tight, 3000), outcore::UsageError) << "does not divide k";
}

// All of A as one panel (the planner's tf32 6 GiB choice on H100s: 32768×1536, k in
// chunks of 16384) makes its 4 GiB upload the run's lead-in; two_chunked_panels offers
// two 16384-row panels over the whole k, in chunks, with the whole next panel ahead, at a
// measured width. Nothing where the plan has panels already, is not an a-panel, A is
// transposed, m is too small to halve, or the budget holds all of A but not two such
// panels with all of the next one ahead.
TEST(GemmTwoChunkedPanels, ASingleWholeAPanelBecomesTwoChunkedOnes) {
    GemmProblem p = tf32_case();
    const PlanLimits six{.budget_bytes = 6 * kGiB - 64 * kMiB,
                         .min_offset_alignment = 256,
                         .compute_flops = 370e12,
                         .link_bytes_per_second = 55.3e9};
    const GemmPlan whole_a = plan_gemm_fixed(p, six, GemmSchedule::APanelResident, 32768, 1536, 16384);
    const std::optional<GemmPlan> two = two_chunked_panels(whole_a, six);
    ASSERT_TRUE(two.has_value());
    EXPECT_EQ(two->schedule, GemmSchedule::APanelResident);
    EXPECT_EQ(two->tile_m, 16384U);
    EXPECT_EQ(two->tile_k, p.k);
    EXPECT_TRUE(two->tile_n == 1024 || two->tile_n == 512) << two->tile_n;
    EXPECT_NE(two->a_chunk_k, 0U);
    EXPECT_EQ(two->prefetch_chunks, p.k / two->a_chunk_k) << "the whole next panel ahead";
    EXPECT_LE(two->device_bytes, six.budget_bytes);
    // Not for plans with panels already, other schedules, a transposed A.
    EXPECT_FALSE(two_chunked_panels(*two, six).has_value());
    EXPECT_FALSE(
        two_chunked_panels(plan_gemm_fixed(p, six, GemmSchedule::APanelResident, 16384, 512, 32768), six)
            .has_value());
    EXPECT_FALSE(two_chunked_panels(plan_gemm_fixed(p, six, GemmSchedule::SquareC, 8192, 8192, 2048), six)
                     .has_value());
    GemmProblem t = p;
    t.trans_a = true;
    EXPECT_FALSE(
        two_chunked_panels(plan_gemm_fixed(t, six, GemmSchedule::APanelResident, 32768, 1536, 16384), six)
            .has_value());
    // 4 GiB + 96 MiB holds all of A with 256-wide tiles, but beside a 16384-row panel and
    // 512-wide B and C slots only 7 of the next panel's 8 chunks.
    PlanLimits tight = six;
    tight.budget_bytes = 4 * kGiB + 96 * kMiB;
    const GemmPlan whole_tight =
        plan_gemm_fixed(p, tight, GemmSchedule::APanelResident, 32768, 256, 2048, 1, 2);
    EXPECT_FALSE(two_chunked_panels(whole_tight, tight).has_value());
    // A's 256 rows cannot make two panels of whole multiples of 256.
    GemmProblem low = p;
    low.m = 256;
    EXPECT_FALSE(
        two_chunked_panels(plan_gemm_fixed(low, six, GemmSchedule::APanelResident, 256, 1024, 32768), six)
            .has_value());
}

}  // namespace
