// Tests of ops::gemm on the CPU backend against a float64 reference: random shapes
// (including sizes no tile divides: 1, 7, 1023, 4097), every transpose combination,
// β ≠ 0, f32 and f64 (and bf16 / tf32 where the backend has them), budgets at the
// planner's minimum, just above it and far above it, every schedule forced, row-major
// callers. Outputs are poisoned with NaN first and every element must be written.
// Every run must stay within its budget (the Budget adaptor under the pipeline would
// throw; the peak is also checked) and give every byte back; a source or sink that
// fails mid-run must surface exactly its error. Suites named *Threads also run under TSan.
// Over 800 lines: the tests of one executor (src/ops/gemm.cpp) over its schedules and
// options, sharing run_case (gemm_case.hpp); the chunked panel's retained B is in
// gemm_retained_test.cpp.
#include "outcore/ops/gemm.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gemm_case.hpp"
#include "gemm_test_support.hpp"
#include "outcore/backends/cpu.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/io/matrix.hpp"
#include "outcore/tile/gemm_plan.hpp"
#include "outcore/tile/rates.hpp"
#include "outcore/tile/staging_cache.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::Copy2D;
using outcore::Device;
using outcore::DType;
using outcore::GemmCompute;
using outcore::kGiB;
using outcore::MemoryKind;
using outcore::gemm_test::error_bound;
using outcore::gemm_test::Matrix;
using outcore::gemm_test::reference;
using outcore::gemm_test::relative_error;
using outcore::io::HostMatrix;
using outcore::io::Layout;
using outcore::ops::GemmOptions;
using outcore::ops::GemmReport;
using outcore::tile::GemmSchedule;

using outcore::gemm_test::Bound;
using outcore::gemm_test::Case;
using outcore::gemm_test::describe;
using outcore::gemm_test::expect_nothing_held;
using outcore::gemm_test::make_device;
using outcore::gemm_test::Operands;
using outcore::gemm_test::options_for;
using outcore::gemm_test::run_case;

TEST(Gemm, EveryTransposeAndScheduleF32AndF64) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    std::uniform_int_distribution<std::uint64_t> dim(1, 150);
    for (DType type : {DType::F32, DType::F64}) {
        for (int t = 0; t < 4; ++t) {
            for (GemmSchedule s :
                 {GemmSchedule::SquareC, GemmSchedule::APanelResident, GemmSchedule::BPanelResident}) {
                Case cs;
                cs.m = dim(rng);
                cs.n = dim(rng);
                cs.k = dim(rng);
                cs.type = type;
                cs.trans_a = (t & 1) != 0;
                cs.trans_b = (t & 2) != 0;
                cs.alpha = std::uniform_real_distribution<double>(-2.0, 2.0)(rng);
                cs.beta = rng() % 2 == 0 ? 0.0 : std::uniform_real_distribution<double>(-2.0, 2.0)(rng);
                cs.schedule = s;
                cs.depth = 2 + static_cast<std::uint32_t>(rng() % 2);
                cs.lanes = 1 + static_cast<std::uint32_t>(t % 2);  // two compute queues half the time
                cs.split = rng() % 2 == 0;                         // with two: C tiles split or not
                cs.operand_fraction = 0.2;
                (void)run_case(*device, cs, rng);
            }
        }
    }
}

// split_c_tiles with two lanes and several k chunks: each C tile is two column parts
// (ragged: odd widths, a last tile one column wide), every transpose, β ≠ 0; run_case
// checks results and GEMM calls. Unsplit with it off, one lane or one k chunk.
TEST(Gemm, TwoLanesComputeEachTileAsTwoColumnParts) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    for (int t = 0; t < 4; ++t) {
        for (GemmSchedule s : {GemmSchedule::SquareC, GemmSchedule::BPanelResident}) {
            Case cs{.m = 70, .n = 67, .k = 150, .trans_a = (t & 1) != 0, .trans_b = (t & 2) != 0};
            cs.beta = t % 2 == 0 ? 0.0 : -0.75;
            cs.schedule = s;
            cs.lanes = 2;
            cs.split = true;
            cs.tile_m = 32, cs.tile_n = 33, cs.tile_k = 40;  // n tiles 33, 33, 1; 4 k chunks
            cs.budget_bytes = 64 << 20;
            EXPECT_TRUE(run_case(*device, cs, rng).c_tiles_split);
            Case unsplit = cs;
            unsplit.split = false;
            EXPECT_FALSE(run_case(*device, unsplit, rng).c_tiles_split);
            Case one_lane = cs;
            one_lane.lanes = 1;
            EXPECT_FALSE(run_case(*device, one_lane, rng).c_tiles_split);
            Case one_chunk = cs;
            one_chunk.tile_k = 150;
            EXPECT_FALSE(run_case(*device, one_chunk, rng).c_tiles_split);
        }
    }
}

TEST(Gemm, SizesThatNoTileDivides) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    struct Shape {
        std::uint64_t m, n, k;
    };
    const Shape shapes[] = {{1, 1, 1},       {7, 7, 7},     {1, 7, 1023},   {1023, 1, 7},  {7, 1023, 33},
                            {1023, 65, 130}, {4097, 7, 33}, {33, 4097, 17}, {17, 9, 4097}, {1023, 1023, 7}};
    int i = 0;
    for (const Shape& s : shapes) {
        Case cs;
        cs.m = s.m;
        cs.n = s.n;
        cs.k = s.k;
        cs.type = i % 2 == 0 ? DType::F32 : DType::F64;
        cs.trans_a = rng() % 2 == 0;
        cs.trans_b = rng() % 2 == 0;
        cs.beta = i % 3 == 0 ? 0.5 : 0.0;
        cs.operand_fraction = 0.15;
        const GemmReport r = run_case(*device, cs, rng);
        if (s.m * s.n * s.k > 64) {
            EXPECT_GT(r.plan.kernel_calls, 1U) << "expected a tiled run for " << describe(cs);
        }
        ++i;
    }
}

TEST(Gemm, BudgetAtTheMinimumJustAboveAndFarAbove) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    std::uniform_int_distribution<std::uint64_t> dim(1, 20);
    for (int t = 0; t < 6; ++t) {
        Case cs;
        cs.m = dim(rng);
        cs.n = dim(rng);
        cs.k = dim(rng);
        cs.type = t % 2 == 0 ? DType::F32 : DType::F64;
        cs.trans_a = rng() % 2 == 0;
        cs.trans_b = rng() % 2 == 0;
        cs.beta = t % 3 == 0 ? -0.75 : 0.0;
        Bound bound(cs, rng);
        auto& [ops, a, b, c, c0, o] = bound;
        o.budget_bytes = 1;
        const std::uint64_t minimum = outcore::tile::gemm_minimum_budget(
            outcore::ops::gemm_problem(a, b, c, o), outcore::ops::gemm_limits(*device, o));
        // Below the minimum: a UsageError that states it.
        o.budget_bytes = minimum - 1;
        try {
            (void)outcore::ops::gemm(*device, a, b, c, o);
            ADD_FAILURE() << "a budget below the minimum was accepted";
        } catch (const outcore::UsageError& e) {
            EXPECT_NE(std::string(e.what()).find(outcore::format_size(minimum)), std::string::npos)
                << e.what();
        }
        expect_nothing_held(*device);
        const std::uint64_t operands =
            (ops.a.rows * ops.a.cols + ops.b.rows * ops.b.cols + cs.m * cs.n) * outcore::dtype_bytes(cs.type);
        for (const std::uint64_t budget : {minimum, minimum + 1, minimum + minimum / 10 + 64}) {
            cs.budget_bytes = budget;
            const GemmReport r = run_case(*device, cs, rng);
            if (budget == minimum) {
                EXPECT_EQ(r.peak_device_bytes, minimum);
            }
        }
        // Far above: one tile, the compulsory traffic only.
        cs.budget_bytes = 8 * operands + minimum;
        const GemmReport r = run_case(*device, cs, rng);
        EXPECT_EQ(r.plan.kernel_calls, 1U);
        EXPECT_EQ(r.bytes_moved, r.lower_bound_bytes);
    }
}

// Panel schedules with no spare chunk slots, some, and a whole second panel's worth:
// the next panel streams into slots as the current one releases them, and the
// answer must not change.
TEST(GemmThreads, PanelRingsWithEveryPrefetchDepth) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    for (GemmSchedule s : {GemmSchedule::APanelResident, GemmSchedule::BPanelResident}) {
        for (std::uint32_t depth : {2U, 3U}) {
            Case cs{
                .m = 173, .n = 151, .k = 97, .type = DType::F32, .tile_m = 48, .tile_n = 40, .tile_k = 24};
            cs.schedule = s;
            cs.depth = depth;
            cs.trans_a = rng() % 2 == 0;
            cs.trans_b = rng() % 2 == 0;
            cs.beta = rng() % 2 == 0 ? 0.0 : 0.5;
            // The fixed tiles' footprint without prefetch (or a third C slot), and one
            // panel chunk.
            Bound bound(cs, rng);
            auto& [ops, a, b, c, c0, o] = bound;
            o.budget_bytes = outcore::kGiB;
            const outcore::tile::GemmPlan roomy = outcore::ops::plan_gemm(*device, a, b, c, o);
            const std::uint64_t chunk =
                s == GemmSchedule::APanelResident ? roomy.a_slot_bytes : roomy.b_slot_bytes;
            ASSERT_EQ(roomy.prefetch_chunks, roomy.k_chunks());
            ASSERT_EQ(roomy.c_slots, 3U);
            const std::uint64_t minimum =
                roomy.device_bytes - roomy.prefetch_chunks * chunk - roomy.c_slot_bytes;
            for (const std::uint64_t extra : {std::uint64_t{0}, std::uint64_t{2}, roomy.k_chunks()}) {
                cs.budget_bytes = minimum + extra * chunk;
                const GemmReport r = run_case(*device, cs, rng);
                EXPECT_EQ(r.plan.prefetch_chunks, extra);
                EXPECT_EQ(r.plan.c_slots, 2U);  // prefetch first; nothing left for a third
                EXPECT_GE(s == GemmSchedule::APanelResident ? r.plan.c_grid().tile_rows()
                                                            : r.plan.c_grid().tile_cols(),
                          3U);
            }
        }
    }
}

TEST(Gemm, BetaNonZeroInPlace) {
    // The input C and the sink are the same memory: every tile is read before it is written.
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    for (GemmSchedule s :
         {GemmSchedule::SquareC, GemmSchedule::APanelResident, GemmSchedule::BPanelResident}) {
        Case cs{.m = 97, .n = 61, .k = 45, .type = DType::F32, .alpha = 1.5, .beta = -0.5};
        cs.schedule = s;
        Operands ops(cs, rng);
        ops.c.storage = ops.c0.storage;
        HostMatrix a = ops.a.host();
        HostMatrix b = ops.b.host();
        HostMatrix c = ops.c.host();
        GemmOptions o = options_for(cs);
        o.c_in = &c;
        o.budget_bytes = (97 * 45 + 45 * 61 + 97 * 61) * 4 / 5;
        const GemmReport r = outcore::ops::gemm(*device, a, b, c, o);
        EXPECT_GT(r.plan.kernel_calls, 1U);
        EXPECT_LE(relative_error(ops.c, reference(ops.a, ops.b, &ops.c0, o)),
                  error_bound(cs.type, cs.compute, cs.k));
        expect_nothing_held(*device);
    }
}

TEST(Gemm, RowMajorCallers) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    for (int t = 0; t < 4; ++t) {
        Case cs{.m = 130, .n = 77, .k = 91, .type = t < 2 ? DType::F32 : DType::F64};
        cs.trans_a = (t & 1) != 0;
        cs.trans_b = (t & 2) == 0;
        cs.layout = Layout::RowMajor;
        cs.beta = 0.25;
        (void)run_case(*device, cs, rng);
    }
}

TEST(Gemm, ReducedPrecisionWhereTheBackendHasIt) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    for (const auto& [type, compute] :
         {std::pair{DType::BF16, GemmCompute::Exact}, std::pair{DType::F16, GemmCompute::Exact},
          std::pair{DType::F32, GemmCompute::FastTF32}}) {
        if (!device->kernels().supports_gemm(type, compute)) continue;
        Case cs{.m = 150, .n = 70, .k = 120, .type = type, .compute = compute, .trans_a = true, .beta = 0.5};
        (void)run_case(*device, cs, rng);
    }
    // A type the kernels lack is a UsageError before anything moves.
    Case cs{.m = 4, .n = 4, .k = 4, .type = DType::F64, .compute = GemmCompute::FastTF32};
    Operands ops(cs, rng);
    HostMatrix a = ops.a.host();
    HostMatrix b = ops.b.host();
    HostMatrix c = ops.c.host();
    EXPECT_THROW((void)outcore::ops::gemm(*device, a, b, c, options_for(cs)), outcore::UsageError);
    expect_nothing_held(*device);
}

// An option that needs forced tiles, set on a planned run: a UsageError.
void expect_refused_when_planned(Device& device, std::mt19937_64& rng,
                                 const std::function<void(GemmOptions&)>& set) {
    Bound bound(Case{.m = 40, .n = 40, .k = 40}, rng);
    auto& [ops, a, b, c, c0, o] = bound;
    o.budget_bytes = 64 * outcore::kMiB;
    set(o);
    EXPECT_THROW((void)outcore::ops::gemm(device, a, b, c, o), outcore::UsageError);
}

// The last tile's last k chunk goes part by part (kDrainParts, whole multiples of
// kDrainColumnStep columns) and each part down on its own; every tile that shares its
// C slot reaches the slot through the same parts (one download each). Only where
// every tile row is tile_m high and a tile is at least two steps wide.
TEST(Gemm, TheLastTileDrainsInColumnParts) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    for (const GemmSchedule s :
         {GemmSchedule::SquareC, GemmSchedule::APanelResident, GemmSchedule::BPanelResident}) {
        for (const double beta : {0.0, 0.5}) {
            // 3 × 3 tiles of 64 × 256, two C slots: tiles 0, 2, 4, 6 and 8 (the last) share
            // its slot, so 5 × 2 part downloads and 4 whole ones.
            Case cs{.m = 192,
                    .n = 768,
                    .k = 40 + rng() % 40,
                    .trans_a = rng() % 2 == 0,
                    .trans_b = rng() % 2 == 0,
                    .beta = beta,
                    .schedule = s,
                    .budget_bytes = 64 * outcore::kMiB,
                    .tile_m = 64,
                    .tile_n = 256,
                    .tile_k = 32,
                    .c_slots = 2};
            SCOPED_TRACE(outcore::tile::to_string(s));
            const GemmReport r = run_case(*device, cs, rng);
            EXPECT_EQ(r.drain_parts, 2U);
            EXPECT_EQ(r.pipeline.download_count, 5U * 2 + 4);
            // The last tile 224 wide (736 = 2 × 256 + 224): parts of 128 and 96.
            cs.n = 736;
            EXPECT_EQ(run_case(*device, cs, rng).drain_parts, 2U);
            cs.n = 600;  // the last tile 88 wide, one part: no regions at all
            EXPECT_EQ(run_case(*device, cs, rng).drain_parts, 1U);
            // The last row 8 high (200 = 3 × 64 + 8): no parts, one download per tile.
            cs.n = 768;
            cs.m = 200;
            const GemmReport ragged = run_case(*device, cs, rng);
            EXPECT_EQ(ragged.drain_parts, 1U);
            EXPECT_EQ(ragged.pipeline.download_count, ragged.plan.c_grid().count());
            // Tiles narrower than two steps: none.
            cs.m = 192;
            cs.tile_n = 192;
            EXPECT_EQ(run_case(*device, cs, rng).drain_parts, 1U);
        }
    }
}

// C rings of two to five slots (the planner makes two or three): GEMM j + slots
// waits for tile j's download, whatever the schedule, transposes and β.
TEST(Gemm, CRingsOfAnyDepthGiveTheSameAnswer) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    for (const GemmSchedule s :
         {GemmSchedule::SquareC, GemmSchedule::APanelResident, GemmSchedule::BPanelResident}) {
        for (const std::uint32_t slots : {2U, 3U, 5U}) {
            Case cs{.m = 150 + rng() % 40,
                    .n = 140 + rng() % 40,
                    .k = 90 + rng() % 40,
                    .trans_a = rng() % 2 == 0,
                    .trans_b = rng() % 2 == 0,
                    .beta = rng() % 2 == 0 ? 0.0 : 0.5,
                    .schedule = s,
                    .budget_bytes = 64 * outcore::kMiB,
                    .tile_m = 48,
                    .tile_n = 40,
                    .tile_k = 32,
                    .c_slots = slots};
            const GemmReport r = run_case(*device, cs, rng);
            EXPECT_EQ(r.plan.c_slots, slots) << outcore::tile::to_string(s);
        }
    }
    // A slot count is for forced tiles only.
    expect_refused_when_planned(*device, rng, [](GemmOptions& o) { o.c_slots = 3; });
}

// An A panel in chunks along k (GemmPlan::a_chunk_k), every variant in turn: no spare
// region, a whole next panel of them, or some (an odd panel then starts on its last
// chunks, up ahead); two to four panels, the last one as high as the others or shorter
// (its columns tile_m apart in the regions); f32, f64 and bf16; B either way round; β ≠ 0;
// operands packed or read straight from host memory; one compute lane or two; 40-column
// tiles, or 256 so the last tile drains in column parts — the reference result, the
// planned bytes and GEMM calls (run_case), exactly the spare regions asked for, the
// budget held.
TEST(Gemm, APanelInChunksGivesTheSameAnswerWhateverItPrefetches) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    bool drained = false;
    for (int variant = 0; variant < 24; ++variant) {
        const std::uint64_t tile_m = variant % 2 == 0 ? 32 : 48;
        const std::uint64_t rows = 2 + static_cast<std::uint64_t>(variant) % 3;
        const std::uint64_t ck = variant % 4 < 2 ? 16 : 24;
        const std::uint64_t chunks = 2 + rng() % 4;
        const DType type = variant % 6 == 5 ? DType::BF16 : (variant % 6 == 4 ? DType::F64 : DType::F32);
        const std::uint64_t tile_n = variant % 4 == 3 ? 256 : 40;
        const std::uint64_t shorter_by = (variant / 3) % 2 == 1 ? 1 + rng() % (tile_m - 1) : 0;
        Case cs{.m = tile_m * rows - shorter_by,
                .n = tile_n == 256 ? 400 + rng() % 100 : 60 + rng() % 100,
                .k = ck * chunks,
                .type = type,
                .trans_b = rng() % 2 == 0,
                .beta = variant % 5 == 0 ? 0.5 : 0.0,
                .schedule = GemmSchedule::APanelResident,
                .lanes = variant % 3 == 1 ? 2U : 1U,
                .tile_m = tile_m,
                .tile_n = tile_n,
                .tile_k = ck * chunks,
                .c_slots = 3,
                .panel_chunk_k = ck,
                .device_readable = variant % 4 == 1};
        // What the plan holds besides its panel, then room for a whole panel and `spare`
        // more chunks: none, all of the next panel, or some.
        const std::uint64_t w = outcore::dtype_bytes(type);
        const outcore::tile::GemmProblem problem{.m = cs.m,
                                                 .n = cs.n,
                                                 .k = cs.k,
                                                 .type = type,
                                                 .trans_b = cs.trans_b,
                                                 .beta_nonzero = cs.beta != 0};
        const outcore::tile::PlanLimits roomy{.budget_bytes = 1 * outcore::kGiB,
                                              .min_offset_alignment = device->info().min_offset_alignment};
        const auto whole = outcore::tile::plan_gemm_fixed(problem, roomy, GemmSchedule::APanelResident,
                                                          tile_m, tile_n, cs.k, 1, 3);
        const std::uint64_t others = whole.device_bytes - std::uint64_t{whole.a_slots} * whole.a_slot_bytes;
        const std::uint64_t spare = variant % 3 == 0   ? 0
                                    : variant % 3 == 2 ? chunks
                                                       : 1 + rng() % (chunks - 1);
        cs.budget_bytes = others + (chunks + spare) * tile_m * ck * w;
        const GemmReport r = run_case(*device, cs, rng);
        ASSERT_EQ(r.plan.a_chunk_k, ck);
        EXPECT_EQ(r.plan.prefetch_chunks, spare);
        EXPECT_EQ(r.plan.a_slots, chunks + spare);
        // Each row's last tile sends the next row's first B ahead of the chunks it frees.
        const std::uint64_t cols = (cs.n + tile_n - 1) / tile_n;
        EXPECT_EQ(r.b_ahead, cols > 1 && r.plan.b_slots > 1 ? rows - 1 : 0U);
        drained = drained || r.drain_parts > 1;
    }
    EXPECT_TRUE(drained) << "a last tile drained in column parts";
}

// Where a plan cannot have its panel in chunks, asking for them is refused before
// anything runs; unasked (0), a plan keeps its whole panel.
TEST(Gemm, APanelInChunksIsRefusedWhereThePlanCannotHaveIt) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    auto run = [&](Case cs) { (void)run_case(*device, cs, rng); };
    const Case base{.m = 96,
                    .n = 80,
                    .k = 64,
                    .schedule = GemmSchedule::APanelResident,
                    .budget_bytes = 64 * outcore::kMiB,
                    .tile_m = 32,
                    .tile_n = 40,
                    .tile_k = 64,
                    .panel_chunk_k = 16};
    Case c = base;
    c.trans_a = true;  // its chunks would not join into one matrix
    EXPECT_THROW(run(c), outcore::UsageError);
    c = base;
    c.panel_chunk_k = 24;  // does not divide k
    EXPECT_THROW(run(c), outcore::UsageError);
    c = base;
    c.tile_k = 32;  // the plan already streams k in chunks
    EXPECT_THROW(run(c), outcore::UsageError);
    c = base;
    c.schedule = GemmSchedule::BPanelResident;
    c.tile_m = 40;
    c.tile_n = 32;
    EXPECT_THROW(run(c), outcore::UsageError);
    c = base;
    c.split = true;
    c.lanes = 2;
    EXPECT_THROW(run(c), outcore::UsageError);
    c = base;
    c.panel_chunk_k = 0;
    EXPECT_EQ(run_case(*device, c, rng).plan.a_chunk_k, 0U);
    c.panel_chunk_k = 16;
    EXPECT_EQ(run_case(*device, c, rng).plan.a_chunk_k, 16U);
    // Unset: the default, which chunks panels on the CUDA backend only (kChunkedPanels).
    c.panel_chunk_k = std::nullopt;
    EXPECT_EQ(run_case(*device, c, rng).plan.a_chunk_k, 0U);
}

// A single resident panel (all of A, or all of B) with its first tiles grouped k
// outer (GemmPlan::group): the result, the bytes moved and the budget are as for any
// plan. A group larger than the panel's tiles, or on a plan of several panels, is refused.
TEST(Gemm, ASinglePanelGroupsItsFirstTilesKOuter) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    for (const GemmSchedule s : {GemmSchedule::APanelResident, GemmSchedule::BPanelResident}) {
        for (int variant = 0; variant < 4; ++variant) {
            const bool a_panel = s == GemmSchedule::APanelResident;
            Case cs{.m = 300 + rng() % 40,
                    .n = 280 + rng() % 40,
                    .k = 250 + rng() % 40,
                    .trans_a = (variant & 1) != 0,
                    .trans_b = (variant & 2) != 0,
                    .beta = variant == 3 ? 0.5 : 0.0,
                    .schedule = s,
                    .budget_bytes = 64 * outcore::kMiB,
                    .tile_m = a_panel ? 400U : 48U,
                    .tile_n = a_panel ? 48U : 400U,
                    .tile_k = 64,
                    .group = static_cast<std::uint32_t>(2 + variant)};
            const GemmReport r = run_case(*device, cs, rng);
            EXPECT_EQ(r.plan.group, cs.group) << outcore::tile::to_string(s) << " variant " << variant;
            EXPECT_GE(r.plan.c_slots, r.plan.group);
        }
    }
    const outcore::tile::GemmProblem p{.m = 300, .n = 300, .k = 200};
    const outcore::tile::PlanLimits lim{.budget_bytes = 64 * outcore::kMiB};
    EXPECT_THROW((void)outcore::tile::plan_gemm_fixed(p, lim, GemmSchedule::APanelResident, 300, 48, 64, 8),
                 outcore::UsageError)
        << "7 tiles, a group of 8";
    EXPECT_THROW((void)outcore::tile::plan_gemm_fixed(p, lim, GemmSchedule::APanelResident, 150, 48, 64, 2),
                 outcore::UsageError)
        << "two panels";
    EXPECT_NO_THROW(
        (void)outcore::tile::plan_gemm_fixed(p, lim, GemmSchedule::APanelResident, 300, 48, 64, 7));
    // A group is for forced tiles only.
    expect_refused_when_planned(*device, rng, [](GemmOptions& o) { o.group = 2; });
}

TEST(Gemm, MismatchedOperandsAreUsageErrors) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    Bound bound(Case{.m = 8, .n = 6, .k = 5}, rng);
    auto& [ops, a, b, c, c0, o] = bound;
    o.c_in = nullptr;  // β = 0
    o.budget_bytes = outcore::kMiB;
    o.trans_a = true;  // op(A) is now 5x8: k disagrees
    EXPECT_THROW((void)outcore::ops::gemm(*device, a, b, c, o), outcore::UsageError);
    o.trans_a = false;
    o.type = DType::F64;  // the matrices hold f32
    EXPECT_THROW((void)outcore::ops::gemm(*device, a, b, c, o), outcore::UsageError);
    o.type = DType::F32;
    o.beta = 1.0;  // no input C
    EXPECT_THROW((void)outcore::ops::gemm(*device, a, b, c, o), outcore::UsageError);
    o.beta = 0.0;
    HostMatrix wrong_c(ops.c.storage.data(), 6, 8, 8, Layout::ColMajor, DType::F32);
    EXPECT_THROW((void)outcore::ops::gemm(*device, a, b, wrong_c, o), outcore::UsageError);
    expect_nothing_held(*device);
}

struct InjectedFailure : outcore::IoError {
    InjectedFailure() : outcore::IoError("test", "injected failure", 5, "test.npy", "pread") {}
};

/// Delegates to a HostMatrix and throws on its `fail_at`-th read (0-based).
class FailingSource final : public outcore::io::MatrixSource {
public:
    FailingSource(const HostMatrix& inner, int fail_at) : inner_(inner), fail_at_(fail_at) {}
    [[nodiscard]] std::uint64_t rows() const noexcept override { return inner_.rows(); }
    [[nodiscard]] std::uint64_t cols() const noexcept override { return inner_.cols(); }
    [[nodiscard]] DType dtype() const noexcept override { return inner_.dtype(); }
    [[nodiscard]] int reads() const noexcept { return count_.load(); }

private:
    void do_read(std::uint64_t r, std::uint64_t c, std::uint64_t rows, std::uint64_t cols, std::byte* dst,
                 std::uint64_t ld) const override {
        if (count_.fetch_add(1) == fail_at_) throw InjectedFailure();
        inner_.read(r, c, rows, cols, dst, ld);
    }
    const HostMatrix& inner_;
    int fail_at_;
    mutable std::atomic<int> count_{0};
};

/// Delegates to a HostMatrix and throws on its `fail_at`-th write.
class FailingSink final : public outcore::io::MatrixSink {
public:
    FailingSink(HostMatrix& inner, int fail_at) : inner_(inner), fail_at_(fail_at) {}
    [[nodiscard]] std::uint64_t rows() const noexcept override { return inner_.rows(); }
    [[nodiscard]] std::uint64_t cols() const noexcept override { return inner_.cols(); }
    [[nodiscard]] DType dtype() const noexcept override { return inner_.dtype(); }

private:
    void do_write(std::uint64_t r, std::uint64_t c, std::uint64_t rows, std::uint64_t cols,
                  const std::byte* src, std::uint64_t ld) override {
        if (count_++ == fail_at_) throw InjectedFailure();
        inner_.write(r, c, rows, cols, src, ld);
    }
    HostMatrix& inner_;
    int fail_at_;
    int count_ = 0;
};

TEST(GemmThreads, FailingSourceOrSinkGivesItsErrorAndLeaksNothing) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    Case cs{.m = 200, .n = 150, .k = 120, .type = DType::F32};
    Operands ops(cs, rng);
    HostMatrix a = ops.a.host();
    HostMatrix b = ops.b.host();
    HostMatrix c = ops.c.host();
    GemmOptions o = options_for(cs);
    o.budget_bytes = (200 * 120 + 120 * 150 + 200 * 150) * 4 / 6;
    // How many reads and writes a clean run makes.
    FailingSource count_a(a, -1);
    const GemmReport clean = outcore::ops::gemm(*device, count_a, b, c, o);
    const int a_reads = count_a.reads();
    const auto c_writes = static_cast<int>(clean.plan.c_grid().count());
    ASSERT_GT(a_reads, 2);
    ASSERT_GT(c_writes, 2);
    for (int i = 0; i < 4; ++i) {
        const int at = static_cast<int>(rng() % static_cast<std::uint64_t>(a_reads));
        FailingSource failing(a, at);
        EXPECT_THROW((void)outcore::ops::gemm(*device, failing, b, c, o), InjectedFailure) << "read " << at;
        expect_nothing_held(*device);
    }
    for (int i = 0; i < 4; ++i) {
        const int at = static_cast<int>(rng() % static_cast<std::uint64_t>(c_writes));
        FailingSink failing(c, at);
        EXPECT_THROW((void)outcore::ops::gemm(*device, a, b, failing, o), InjectedFailure) << "write " << at;
        expect_nothing_held(*device);
    }
}

TEST(Gemm, MeasuredRatesFeedThePlanner) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    const outcore::tile::DeviceRates& rates = outcore::tile::cached_rates(*device, DType::F32);
    EXPECT_GT(rates.f32_flops, 0.0);
    EXPECT_GT(rates.upload_bytes_per_second, 0.0);
    EXPECT_GT(rates.download_bytes_per_second, 0.0);
    EXPECT_EQ(&outcore::tile::cached_rates(*device, DType::F32), &rates);  // one entry per device
    EXPECT_GT(outcore::tile::cached_rates(*device, DType::F64).f64_flops, 0.0);
    Case cs{.m = 300, .n = 250, .k = 200, .type = DType::F32, .beta = 0.5};
    Bound bound(cs, rng);
    auto& [ops, a, b, c, c0, o] = bound;
    o.measure_rates = true;
    o.budget_bytes = (300 * 200 + 200 * 250 + 300 * 250) * 4 / 4;
    const outcore::tile::PlanLimits limits = outcore::ops::gemm_limits(*device, o);
    EXPECT_EQ(limits.compute_flops, rates.f32_flops);
    EXPECT_EQ(limits.link_bytes_per_second, rates.upload_bytes_per_second);
    const GemmReport r = outcore::ops::gemm(*device, a, b, c, o);
    EXPECT_GT(r.plan.total_seconds, 0.0);  // the time model was used
    ASSERT_TRUE(limits.gemm_shape_flops);
    EXPECT_GT(r.plan.shape_flops, 0.0);  // with its tile shape's rate, measured on the device
    EXPECT_LE(relative_error(ops.c, reference(ops.a, ops.b, &ops.c0, o)),
              error_bound(cs.type, cs.compute, cs.k));
    expect_nothing_held(*device);
}

TEST(Gemm, ShapeRatesAreMeasuredOnceAndOnlyWhenCheap) {
    auto device = make_device();
    const outcore::tile::GemmShape shape{.type = DType::F32, .trans_a = true, .m = 96, .n = 80, .k = 64};
    const double rate = outcore::tile::cached_gemm_shape_flops(*device, shape, 1e9);
    EXPECT_GT(rate, 0.0);
    EXPECT_EQ(outcore::tile::cached_gemm_shape_flops(*device, shape, 1e9), rate);  // cached
    // One call expected to take 2·96·80·64 / 1e3 s: far above the limit, not run.
    outcore::tile::GemmShape big = shape;
    big.k = 65;
    EXPECT_EQ(outcore::tile::cached_gemm_shape_flops(*device, big, 1e3), 0.0);
    expect_nothing_held(*device);
}

TEST(Gemm, CopyRatesAreMeasuredOncePerRunAndPitch) {
    auto device = make_device();
    std::vector<float> host(64 * 1024, 1.0F);
    const Copy2D pitched{
        .width_bytes = 256, .rows = 200, .host_pitch_bytes = 1024, .buffer_pitch_bytes = 256};
    const double rate = outcore::tile::cached_upload_2d_rate(*device, host.data(), pitched);
    EXPECT_GT(rate, 0.0);
    Copy2D more_rows = pitched;
    more_rows.rows = 250;  // same runs: the cached figure
    EXPECT_EQ(outcore::tile::cached_upload_2d_rate(*device, host.data(), more_rows), rate);
    // One run is the link's contiguous rate: not probed.
    const Copy2D contiguous{
        .width_bytes = 1024, .rows = 200, .host_pitch_bytes = 1024, .buffer_pitch_bytes = 1024};
    EXPECT_EQ(outcore::tile::cached_upload_2d_rate(*device, host.data(), contiguous), 0.0);
    EXPECT_EQ(outcore::tile::cached_upload_2d_rate(*device, nullptr, pitched), 0.0);
    expect_nothing_held(*device);
}

TEST(Gemm, DirectOperandsArePlannedWithTheirCopyRates) {
    // Every transpose, β ≠ 0 (C's runs read from c_in): the probes read only inside the
    // operands (ASan), and the planned run is right.
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    for (const bool ta : {false, true}) {
        for (const bool tb : {false, true}) {
            Case cs{
                .m = 300, .n = 250, .k = 200, .type = DType::F32, .trans_a = ta, .trans_b = tb, .beta = 0.5};
            SCOPED_TRACE(describe(cs));
            Bound bound(cs, rng);
            auto& [ops, a, b, c, c0, o] = bound;
            for (HostMatrix* m : {&a, &b, &c, &c0}) m->set_device_readable(true);
            o.measure_rates = true;
            o.budget_bytes = (300 * 200 + 200 * 250 + 2 * 300 * 250) * 4 / 5;
            const outcore::tile::GemmPlan plan = outcore::ops::plan_gemm(*device, a, b, c, o);
            EXPECT_GT(plan.total_seconds, 0.0);
            (void)outcore::ops::execute_gemm(*device, plan, a, b, c, o);
            EXPECT_LE(relative_error(ops.c, reference(ops.a, ops.b, &ops.c0, o)),
                      error_bound(cs.type, cs.compute, cs.k));
            expect_nothing_held(*device);
        }
    }
}

TEST(Gemm, StagingCacheMakesRepeatedRunsAllocationFree) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    outcore::tile::StagingCache cache(*device);
    Case cs{.m = 200, .n = 180, .k = 160, .type = DType::F32};
    Operands ops(cs, rng);
    HostMatrix a = ops.a.host();
    HostMatrix b = ops.b.host();
    HostMatrix c = ops.c.host();
    GemmOptions o = options_for(cs);
    o.budget_bytes = (200 * 160 + 160 * 180 + 200 * 180) * 4 / 5;
    o.staging_cache = &cache;
    const std::vector<double> ref = reference(ops.a, ops.b, nullptr, o);
    for (int run = 0; run < 3; ++run) {
        ops.c.poison();
        const GemmReport r = outcore::ops::gemm(*device, a, b, c, o);
        EXPECT_LE(relative_error(ops.c, ref), error_bound(cs.type, cs.compute, cs.k));
        EXPECT_GT(r.pipeline.staging_bytes, 0U);
        EXPECT_EQ(cache.free_bytes(), device->allocated_bytes(MemoryKind::HostPinned));
        EXPECT_EQ(device->allocated_bytes(MemoryKind::Device), 0U);
    }
    const std::uint64_t after_first = cache.allocation_count();
    (void)outcore::ops::gemm(*device, a, b, c, o);
    EXPECT_EQ(cache.allocation_count(), after_first);
}

TEST(Gemm, DeviceCacheMakesRepeatedRunsAllocateNoDeviceMemory) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    Case cs{.m = 200, .n = 180, .k = 160, .type = DType::F32};
    Operands ops(cs, rng);
    HostMatrix a = ops.a.host();
    HostMatrix b = ops.b.host();
    HostMatrix c = ops.c.host();
    GemmOptions o = options_for(cs);
    o.budget_bytes = (200 * 160 + 160 * 180 + 200 * 180) * 4 / 5;
    const std::vector<double> ref = reference(ops.a, ops.b, nullptr, o);
    {
        outcore::alloc::BlockCache slots(*device);
        o.device_cache = &slots;
        for (int run = 0; run < 3; ++run) {
            ops.c.poison();
            const GemmReport r = outcore::ops::gemm(*device, a, b, c, o);
            EXPECT_LE(relative_error(ops.c, ref), error_bound(cs.type, cs.compute, cs.k));
            EXPECT_LE(r.peak_device_bytes, o.budget_bytes);
            // The slots' block waits in the cache, still the device's memory.
            EXPECT_EQ(slots.statistics().free_bytes, device->allocated_bytes(MemoryKind::Device));
            EXPECT_GT(slots.statistics().free_bytes, 0U);
        }
        EXPECT_EQ(slots.statistics().misses, 1U);  // the first run's slots only
        EXPECT_EQ(slots.statistics().hits, 2U);
    }
    EXPECT_EQ(device->allocated_bytes(MemoryKind::Device), 0U);
}

/// A budget for the panel plan `bound`'s options make, less its spare panel slots: no
/// room for the next panel's chunks ahead.
std::uint64_t budget_without_prefetch(Device& device, const Bound& bound) {
    const outcore::tile::GemmPlan roomy = outcore::ops::plan_gemm(device, bound.a, bound.b, bound.c, bound.o);
    EXPECT_GT(roomy.prefetch_chunks, 0U) << "the budget leaves no spare panel slot to take away";
    return roomy.device_bytes - roomy.prefetch_chunks * roomy.a_slot_bytes;
}

// A-panel runs send each A chunk up in k-pieces and issue each row's first tile piece
// by piece (ops/gemm.cpp, kFirstChunkPieces), so the device starts before a whole
// chunk has landed; square-C runs their first GEMM. Chunks of a full and a short k,
// every B layout, β ≠ 0, both lanes; an A panel with the next panel's first chunk
// prefetched, or (a budget with no room for it) going up behind the row's last step
// with the next row's first B ahead of it.
TEST(Gemm, FirstChunkGoesUpInPiecesForAPanelAndSquareC) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    for (const GemmSchedule s : {GemmSchedule::APanelResident, GemmSchedule::SquareC}) {
        for (const bool tb : {false, true}) {
            for (const std::uint32_t lanes : {1U, 2U}) {
                const bool tight = s == GemmSchedule::APanelResident && lanes == 2;
                Case cs{.m = 256,
                        .n = 200,
                        .k = 1500,  // chunks of 1024 (4 pieces of 256) and 476 (2 pieces)
                        .type = DType::F32,
                        .trans_b = tb,
                        .beta = 0.75,
                        .schedule = s,
                        .budget_bytes = 64 * outcore::kMiB,
                        .lanes = lanes,
                        .tile_m = 128,
                        .tile_n = 96,
                        .tile_k = 1024};
                SCOPED_TRACE(describe(cs));
                Bound bound(cs, rng);
                auto& [ops, a, b, c, c0, o] = bound;
                o.budget_bytes = cs.budget_bytes;
                // No spare A slot: the next panel's first chunk waits for the row's last step.
                if (tight) o.budget_bytes = budget_without_prefetch(*device, bound);
                // Square-C streams A in pieces only from device-readable memory.
                const bool square = s == GemmSchedule::SquareC;
                if (square) {
                    a.set_device_readable(true);
                    HostMatrix packed = ops.a.host();
                    const GemmReport whole = outcore::ops::gemm(*device, packed, b, c, o);
                    EXPECT_EQ(whole.pipeline.compute_count, whole.plan.kernel_calls) << "packed A: no pieces";
                }
                const GemmReport r = outcore::ops::gemm(*device, a, b, c, o);
                EXPECT_LE(relative_error(ops.c, reference(ops.a, ops.b, &ops.c0, o)),
                          error_bound(cs.type, cs.compute, cs.k));
                // Square-C: the first GEMM is four, three more kernel calls than the
                // plan's. A panel: each row's first tile is 4 + 2, four more a row. (The
                // last tile, 8 columns wide, drains whole.)
                EXPECT_EQ(r.drain_parts, 1U);
                EXPECT_EQ(r.pipeline.compute_count, r.plan.kernel_calls + (square ? 3 : 2 * 4));
                // The next panel's first chunk in a spare slot, or (tight) up behind the
                // row's last step with the next row's first B ahead of it.
                if (s == GemmSchedule::APanelResident) {
                    EXPECT_EQ(r.b_ahead, tight ? 1U : 0U);
                }
                if (tight) {
                    EXPECT_EQ(r.plan.prefetch_chunks, 0U);
                }
                // Every piece is its own upload: A as 4 + 2 pieces for each of 2 panels
                // (a-panel) or 6 tiles (square-c); 6 tiles × 2 B chunks; 6 C tiles in.
                const std::uint64_t a_chunks = s == GemmSchedule::APanelResident ? 2 : 6;
                EXPECT_EQ(r.pipeline.upload_count, a_chunks * 6 + 6 * 2 + 6);
                EXPECT_EQ(r.bytes_moved, r.plan.bytes_moved);
                expect_nothing_held(*device);
            }
        }
    }
}

// A packed (staged) A that goes up in k pieces fills one piece per staging buffer, so the
// ring's buffers hold a piece, not a whole chunk: 256 KiB against 1 MiB here, where A's
// chunks are the largest upload. (On a GPU host, an .npy A of the f32 bench's plan took
// 4 GiB of pinned staging, 2.4 s to allocate, for 256 MiB fills.)
TEST(Gemm, AStagedInPiecesTakesStagingOfAPiece) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    const Case cs{.m = 512,
                  .n = 96,
                  .k = 2048,  // chunks of 1024 in 4 pieces of 256
                  .type = DType::F32,
                  .schedule = GemmSchedule::APanelResident,
                  .budget_bytes = 64 * outcore::kMiB,
                  .tile_m = 256,
                  .tile_n = 32,
                  .tile_k = 1024};
    SCOPED_TRACE(describe(cs));
    Bound bound(cs, rng);
    auto& [ops, a, b, c, c0, o] = bound;
    o.budget_bytes = cs.budget_bytes;
    const GemmReport r = outcore::ops::gemm(*device, a, b, c, o);
    EXPECT_LE(relative_error(ops.c, reference(ops.a, ops.b, &ops.c0, o)),
              error_bound(cs.type, cs.compute, cs.k));
    // A in 4 pieces a chunk: 2 panels × 2 chunks × 4; B 2 chunks for each of 6 tiles.
    EXPECT_EQ(r.pipeline.upload_count, 2 * 2 * 4 + 6 * 2);
    const std::uint64_t piece = 256 * 256 * 4;  // the largest fill: B's chunks are 128 KiB
    const std::uint64_t rings = 2 * std::max<std::uint64_t>(r.plan.depth, 2);  // A and B streams
    const std::uint64_t c_staging = 2 * 256 * 32 * 4;                          // C's download ring
    EXPECT_EQ(r.pipeline.staging_bytes, rings * piece + c_staging);
    expect_nothing_held(*device);
}

// With no spare A slot the next panel's first chunk goes up behind the row's last step,
// and the next row's first B chunk just ahead of it (so that row's first GEMM can start
// on its first piece) — only at the row's last step: were it sent earlier, a later step
// of the row would reuse its B slot before the next row read it (k in 4 chunks here, a
// B ring of 2), and C would be wrong.
TEST(Gemm, ARowsFirstBGoesUpAheadOfTheNextPanelOnlyAtTheRowsLastStep) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    for (const std::uint64_t k : {1500U, 3500U}) {
        Case cs{.m = 384,
                .n = 200,
                .k = k,  // chunks of 1024 (4 pieces of 256) and a short one
                .type = DType::F32,
                .trans_b = rng() % 2 == 0,
                .schedule = GemmSchedule::APanelResident,
                .budget_bytes = 64 * outcore::kMiB,
                .tile_m = 128,
                .tile_n = 96,
                .tile_k = 1024};
        SCOPED_TRACE(describe(cs));
        Bound bound(cs, rng);
        auto& [ops, a, b, c, c0, o] = bound;
        o.budget_bytes = cs.budget_bytes;
        o.budget_bytes = budget_without_prefetch(*device, bound);
        const GemmReport r = outcore::ops::gemm(*device, a, b, c, o);
        ASSERT_EQ(r.plan.prefetch_chunks, 0U);
        ASSERT_EQ(r.plan.b_slots, 2U);
        EXPECT_LE(relative_error(ops.c, reference(ops.a, ops.b, nullptr, o)),
                  error_bound(cs.type, cs.compute, cs.k));
        // Three rows, each first tile in pieces: 4 per full chunk, 2 for the short one.
        const std::uint64_t extra = k == 1500 ? 3 + 1 : 3 + 3 + 3 + 1;
        EXPECT_EQ(r.pipeline.compute_count, r.plan.kernel_calls + 3 * extra);
        EXPECT_EQ(r.bytes_moved, r.plan.bytes_moved);
        // Two chunks: at both panel switches the next panel's first chunk waits for the
        // row's last step, and the next row's B goes ahead of it. Four: that chunk goes
        // up at the last tile's second step, where the B cannot go ahead.
        EXPECT_EQ(r.b_ahead, k == 1500 ? 2U : 0U);
    }
    expect_nothing_held(*device);
}

// A single column of A-panel tiles: every tile is its row's first, in pieces, except the
// run's last, which drains in column parts (one GEMM a part) instead.
TEST(Gemm, ASingleColumnOfRowsStillDrainsItsLastTileInParts) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    Case cs{.m = 192,
            .n = 256,
            .k = 1000,  // pieces of 256, 256, 256 and 232
            .type = DType::F32,
            .schedule = GemmSchedule::APanelResident,
            .budget_bytes = 64 * outcore::kMiB,
            .tile_m = 64,
            .tile_n = 256,
            .tile_k = 1024,
            .c_slots = 2};
    Bound bound(cs, rng);
    auto& [ops, a, b, c, c0, o] = bound;
    o.budget_bytes = cs.budget_bytes;
    const GemmReport r = outcore::ops::gemm(*device, a, b, c, o);
    EXPECT_LE(relative_error(ops.c, reference(ops.a, ops.b, nullptr, o)),
              error_bound(cs.type, cs.compute, cs.k));
    EXPECT_EQ(r.drain_parts, 2U);
    // Three tiles of one GEMM each; the first two in 4 pieces, the last in 2 parts.
    EXPECT_EQ(r.plan.kernel_calls, 3U);
    EXPECT_EQ(r.pipeline.compute_count, 3U + 3 + 3 + 1);
    expect_nothing_held(*device);
}

TEST(Gemm, PlanThenExecuteAndFixedTiles) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    Case cs{.m = 300, .n = 200, .k = 100, .type = DType::F64, .trans_b = true};
    Operands ops(cs, rng);
    HostMatrix a = ops.a.host();
    HostMatrix b = ops.b.host();
    HostMatrix c = ops.c.host();
    GemmOptions o = options_for(cs);
    o.budget_bytes = 4 * outcore::kMiB;
    o.schedule = GemmSchedule::SquareC;
    o.tile_m = 128;
    o.tile_n = 96;
    o.tile_k = 40;
    const outcore::tile::GemmPlan plan = outcore::ops::plan_gemm(*device, a, b, c, o);
    EXPECT_EQ(plan.tile_m, 128U);
    EXPECT_EQ(plan.tile_k, 40U);
    const GemmReport r = outcore::ops::execute_gemm(*device, plan, a, b, c, o);
    EXPECT_EQ(r.plan.kernel_calls, 3U * 3U * 3U);
    EXPECT_LE(relative_error(ops.c, reference(ops.a, ops.b, nullptr, o)),
              error_bound(cs.type, cs.compute, cs.k));
    // A plan for another problem is refused.
    GemmOptions other = o;
    other.trans_b = false;
    Matrix b2(cs.k, cs.n, cs.type, Layout::ColMajor);
    b2.randomize(rng);
    HostMatrix hb2 = b2.host();
    EXPECT_THROW((void)outcore::ops::execute_gemm(*device, plan, a, hb2, c, other), outcore::UsageError);
    expect_nothing_held(*device);
}

}  // namespace
