// Tests of tile::chunk_a_panel (GemmPlan::a_chunk_k): which plans may have their A panel
// in chunks along k, which chunk it picks, and that the chunked plan holds its budget
// and moves the bytes the whole-panel plan moved. The executor's side is in
// tests/unit/ops/gemm_test.cpp (Gemm.APanelInChunks*).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

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

// The bf16-C case of an H100 at 1.5 GiB less its two workspaces, with rates like its own.
GemmProblem bf16_c_case() {
    return {.m = 32768, .n = 32768, .k = 32768, .type = outcore::DType::BF16, .narrow_c = true};
}
PlanLimits h100_bf16_limits() {
    return {.budget_bytes = 1536 * kMiB - 64 * kMiB,
            .min_offset_alignment = 256,
            .compute_flops = 7e14,
            .link_bytes_per_second = 55e9,
            .link_duplex_bytes_per_second = 100e9};
}
GemmPlan a_panel(const GemmProblem& p, const PlanLimits& limits, std::uint64_t tile_n) {
    return plan_gemm_fixed(p, limits, GemmSchedule::APanelResident, 16384, tile_n, p.k);
}
std::uint64_t columns_ahead(const GemmPlan& c) { return std::uint64_t{c.prefetch_chunks} * c.a_chunk_k; }

// Where the planner's tiles leave no room for a chunk of the next panel (a bf16 C's tile of
// sums tips 16384×1536 over the budget), the same rows in narrower tiles that chunk, down
// to a third of the width: of 1280 (one chunk of 2048 ahead), 1024, 768 (one of 4096) and
// 512 (two), the most columns ahead — 512; the candidates' shapes are announced to the
// probes first. Under 1400 MiB, where 1024-wide tiles hold one chunk of 2048 and 768- and
// 512-wide ones one of 4096, the columns decide, then (unknown rates) the wider: 768. None
// where no narrower tiles chunk, or for another plan.
TEST(GemmChunkedPanel, NarrowerTilesWhereThePlannersLeaveNoRoomForChunks) {
    const GemmProblem p = bf16_c_case();
    PlanLimits lim = h100_bf16_limits();
    std::vector<std::array<std::uint64_t, 3>> announced;
    lim.gemm_shapes_ahead = [&](const std::vector<std::array<std::uint64_t, 3>>& shapes) {
        announced.insert(announced.end(), shapes.begin(), shapes.end());
    };
    const GemmPlan wide = a_panel(p, lim, 1536);
    ASSERT_EQ(chunk_a_panel(wide, lim).a_chunk_k, 0U);
    ASSERT_EQ(columns_ahead(chunk_a_panel(a_panel(p, lim, 1280), lim)), 2048U);
    ASSERT_EQ(columns_ahead(chunk_a_panel(a_panel(p, lim, 1024), lim)), 4096U);
    ASSERT_EQ(columns_ahead(chunk_a_panel(a_panel(p, lim, 768), lim)), 4096U);
    ASSERT_EQ(columns_ahead(chunk_a_panel(a_panel(p, lim, 512), lim)), 8192U);
    announced.clear();
    const std::optional<GemmPlan> narrower = narrower_chunked_panel(wide, lim);
    ASSERT_TRUE(narrower.has_value());
    EXPECT_EQ(narrower->schedule, GemmSchedule::APanelResident);
    EXPECT_EQ(narrower->tile_m, 16384U);
    EXPECT_EQ(narrower->tile_n, 512U);
    EXPECT_EQ(narrower->tile_k, 32768U);
    EXPECT_EQ(narrower->a_chunk_k, 4096U);
    EXPECT_LE(narrower->device_bytes, lim.budget_bytes);
    const std::vector<std::array<std::uint64_t, 3>> candidates{
        {16384, 1280, 32768}, {16384, 1024, 32768}, {16384, 768, 32768}, {16384, 512, 32768}};
    EXPECT_EQ(announced, candidates);
    // Unknown rates: every estimate 0, so the columns ahead decide, ties to the wider.
    const PlanLimits unrated{.budget_bytes = 1400 * kMiB, .min_offset_alignment = 256};
    ASSERT_EQ(chunk_a_panel(a_panel(p, unrated, 1280), unrated).a_chunk_k, 0U);
    ASSERT_EQ(columns_ahead(chunk_a_panel(a_panel(p, unrated, 1024), unrated)), 2048U);
    ASSERT_EQ(columns_ahead(chunk_a_panel(a_panel(p, unrated, 768), unrated)), 4096U);
    ASSERT_EQ(columns_ahead(chunk_a_panel(a_panel(p, unrated, 512), unrated)), 4096U);
    const std::optional<GemmPlan> by_bytes = narrower_chunked_panel(a_panel(p, unrated, 1536), unrated);
    ASSERT_TRUE(by_bytes.has_value());
    EXPECT_EQ(by_bytes->tile_n, 768U);

    // Room for 16384×512 whole and for no narrower tiles (256) in chunks; 64 MiB more, and
    // 256-wide tiles hold a chunk of 2048 ahead.
    PlanLimits snug = lim;
    snug.budget_bytes = a_panel(p, lim, 512).device_bytes;
    ASSERT_EQ(chunk_a_panel(a_panel(p, snug, 512), snug).a_chunk_k, 0U);
    EXPECT_FALSE(narrower_chunked_panel(a_panel(p, snug, 512), snug).has_value());
    snug.budget_bytes += 64 * kMiB;
    ASSERT_EQ(chunk_a_panel(a_panel(p, snug, 512), snug).a_chunk_k, 0U);
    const std::optional<GemmPlan> quarter = narrower_chunked_panel(a_panel(p, snug, 512), snug);
    ASSERT_TRUE(quarter.has_value());
    EXPECT_EQ(quarter->tile_n, 256U);
    // Not for another schedule, nor for a k in chunks (an f32 C).
    EXPECT_FALSE(
        narrower_chunked_panel(plan_gemm_fixed(p, lim, GemmSchedule::SquareC, 4096, 4096, 32768), lim)
            .has_value());
    GemmProblem f32_c = p;
    f32_c.narrow_c = false;
    EXPECT_FALSE(narrower_chunked_panel(
                     plan_gemm_fixed(f32_c, lim, GemmSchedule::APanelResident, 16384, 1536, 16384), lim)
                     .has_value());
}

// Tiles that chunk with little of the next panel ahead: narrower ones with more. 1024- and
// 768-wide bf16-C tiles hold one chunk of 4096, 512- and 256-wide ones two (the 256-wide
// GEMMs measured at 0.68 of the 512-wide on an H100, so 512); 512-wide tiles hold as
// much as 256-wide ones (none then), and tiles whose chunks hold the whole next panel get
// none. With an f32 C at 1572 MiB, 1024-wide tiles hold one chunk, 768 two and 512 three:
// the most ahead wins over the faster estimate.
TEST(GemmChunkedPanel, NarrowerTilesHoldMoreOfTheNextPanelAhead) {
    const GemmProblem p = bf16_c_case();
    PlanLimits lim = h100_bf16_limits();
    lim.gemm_shape_flops = [](std::uint64_t, std::uint64_t n, std::uint64_t) {
        return n > 256 ? 7e14 : 4.8e14;
    };
    ASSERT_EQ(columns_ahead(chunk_a_panel(a_panel(p, lim, 1024), lim)), 4096U);
    ASSERT_EQ(columns_ahead(chunk_a_panel(a_panel(p, lim, 768), lim)), 4096U);
    ASSERT_EQ(columns_ahead(chunk_a_panel(a_panel(p, lim, 512), lim)), 8192U);
    for (const std::uint64_t n : {1024, 768}) {
        const std::optional<GemmPlan> more = narrower_chunked_panel(a_panel(p, lim, n), lim);
        ASSERT_TRUE(more.has_value()) << n;
        EXPECT_EQ(more->tile_n, 512U) << n;
        EXPECT_EQ(columns_ahead(*more), 8192U) << n;
        EXPECT_LE(more->device_bytes, lim.budget_bytes) << n;
    }
    ASSERT_EQ(columns_ahead(chunk_a_panel(a_panel(p, lim, 256), lim)), 8192U);
    EXPECT_FALSE(narrower_chunked_panel(a_panel(p, lim, 512), lim).has_value());
    // tf32 at 6 GiB: 16384×1024 in chunks hold the whole next panel.
    const PlanLimits six{.budget_bytes = 6 * kGiB, .min_offset_alignment = 256};
    const GemmPlan roomy = a_panel(tf32_case(), six, 1024);
    ASSERT_EQ(columns_ahead(chunk_a_panel(roomy, six)), 32768U);
    EXPECT_FALSE(narrower_chunked_panel(roomy, six).has_value());

    GemmProblem wide_c = p;
    wide_c.narrow_c = false;
    PlanLimits rated = lim;
    rated.budget_bytes = 1572 * kMiB;
    rated.gemm_shape_flops = [](std::uint64_t, std::uint64_t n, std::uint64_t) {
        return n > 512 ? 7e14 : 6.8e14;
    };
    ASSERT_EQ(chunk_a_panel(a_panel(wide_c, rated, 1024), rated).prefetch_chunks, 1U);
    ASSERT_EQ(chunk_a_panel(a_panel(wide_c, rated, 768), rated).prefetch_chunks, 2U);
    ASSERT_EQ(chunk_a_panel(a_panel(wide_c, rated, 512), rated).prefetch_chunks, 3U);
    ASSERT_LT(chunk_a_panel(a_panel(wide_c, rated, 768), rated).total_seconds,
              chunk_a_panel(a_panel(wide_c, rated, 512), rated).total_seconds);
    const std::optional<GemmPlan> ahead = narrower_chunked_panel(a_panel(wide_c, rated, 1024), rated);
    ASSERT_TRUE(ahead.has_value());
    EXPECT_EQ(ahead->tile_n, 512U);
    EXPECT_EQ(ahead->prefetch_chunks, 3U);
}

// Narrower tiles count only within kNarrowerSlack (5 %) of the plan's estimate: with an f32
// C at 1572 MiB and 512-wide GEMMs rated 6.4e14 (their plan 4.8 % slower than the 1024-wide
// one) the 512-wide tiles, three chunks ahead; rated 6.3e14 (6.0 % slower) the 768-wide ones
// (two ahead, 1 % faster) — not none; every narrower GEMM at 3e14, none. And the widths are
// multiples of kNarrowerWidthStep: 1000-wide tiles try 768 and 512, not 744.
TEST(GemmChunkedPanel, NarrowerTilesWithinTheSlackOfThePlansEstimate) {
    GemmProblem p = bf16_c_case();
    p.narrow_c = false;
    PlanLimits lim = h100_bf16_limits();
    lim.budget_bytes = 1572 * kMiB;
    auto rated = [&](double flops_512) {
        PlanLimits r = lim;
        r.gemm_shape_flops = [flops_512](std::uint64_t, std::uint64_t n, std::uint64_t) {
            return n > 512 ? 7e14 : flops_512;
        };
        return r;
    };
    for (const auto& [flops_512, want] : {std::pair{6.4e14, 512U}, std::pair{6.3e14, 768U}}) {
        const PlanLimits r = rated(flops_512);
        const GemmPlan plan = a_panel(p, r, 1024);
        const double slower = chunk_a_panel(a_panel(p, r, 512), r).total_seconds / plan.total_seconds;
        ASSERT_TRUE(want == 512U ? slower < 1 + outcore::tile::kNarrowerSlack
                                 : slower > 1 + outcore::tile::kNarrowerSlack)
            << slower;
        const std::optional<GemmPlan> narrower = narrower_chunked_panel(plan, r);
        ASSERT_TRUE(narrower.has_value()) << flops_512;
        EXPECT_EQ(narrower->tile_n, want) << flops_512;
    }
    const GemmProblem q = bf16_c_case();
    PlanLimits slow = h100_bf16_limits();
    slow.gemm_shape_flops = [](std::uint64_t, std::uint64_t n, std::uint64_t) {
        return n >= 1536 ? 7e14 : 3e14;
    };
    EXPECT_FALSE(narrower_chunked_panel(a_panel(q, slow, 1536), slow).has_value());

    std::vector<std::uint64_t> widths;
    PlanLimits odd = h100_bf16_limits();
    odd.gemm_shape_flops = [&](std::uint64_t, std::uint64_t n, std::uint64_t) {
        widths.push_back(n);
        return 7e14;
    };
    const GemmPlan thousand = a_panel(q, odd, 1000);
    widths.clear();
    (void)narrower_chunked_panel(thousand, odd);
    EXPECT_EQ(widths, (std::vector<std::uint64_t>{768, 512}));
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
