// Tests of ops::gemm with a C of the inputs' 16-bit type (tile::GemmProblem::narrow_c)
// on the CPU backend: bf16 and f16 inputs with a bf16 / f16 C give, bit for bit, the
// f32-C run of the same plan rounded once to nearest even, for every schedule, both
// transposes, β = 0 and β ≠ 0 (the input C widened), packed and device-readable C,
// and the planner's own choice; C's downloads are half the f32 run's. Every plan has
// one k chunk (a 16-bit C holds no partial sums): the planner only makes such plans
// and a forced shallower tile_k is a UsageError, as is a 16-bit C for f32 inputs. With
// the A panel in chunks the tiles made of several GEMMs sum in an f32 tile and round once.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "gemm_test_support.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/io/matrix.hpp"
#include "outcore/ops/gemm.hpp"
#include "outcore/tile/gemm_plan.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::DType;
using outcore::kGiB;
using outcore::gemm_test::expect_nothing_held;
using outcore::gemm_test::make_device;
using outcore::gemm_test::Matrix;
using outcore::io::HostMatrix;
using outcore::io::Layout;
using outcore::ops::GemmOptions;
using outcore::ops::GemmReport;
using outcore::tile::GemmPlan;
using outcore::tile::GemmSchedule;

/// A (m×k or k×m), B, an input C0 exact in the 16-bit type, and options.
struct Problem {
    std::uint64_t m, n, k;
    DType type;
    GemmOptions options;
    Matrix a, b, c0_narrow, c0_wide;

    Problem(std::mt19937_64& rng, std::uint64_t m_, std::uint64_t n_, std::uint64_t k_, DType t, bool ta,
            bool tb, double beta)
        : m(m_),
          n(n_),
          k(k_),
          type(t),
          a(ta ? k_ : m_, ta ? m_ : k_, t, Layout::ColMajor),
          b(tb ? n_ : k_, tb ? k_ : n_, t, Layout::ColMajor),
          c0_narrow(m_, n_, t, Layout::ColMajor),
          c0_wide(m_, n_, DType::F32, Layout::ColMajor) {
        a.randomize(rng);
        b.randomize(rng);
        c0_narrow.randomize(rng);
        for (std::uint64_t j = 0; j < n; ++j)
            for (std::uint64_t i = 0; i < m; ++i) c0_wide.set(i, j, c0_narrow.get(i, j));
        options.type = t;
        options.trans_a = ta;
        options.trans_b = tb;
        options.alpha = 0.75;
        options.beta = beta;
        options.measure_rates = false;
        options.budget_bytes = kGiB;
        options.one_call_per_chunk = true;  // one GEMM call per tile, as the narrow run makes
    }
};

struct Result {
    Matrix c;
    GemmReport report;
};

/// Runs `plan` (or the planner's, when null) with a C of `c_type`, device-readable or not.
Result run(outcore::Device& device, Problem& pb, DType c_type, bool direct, const GemmPlan* plan) {
    Result r{Matrix(pb.m, pb.n, c_type, Layout::ColMajor), {}};
    r.c.poison();
    HostMatrix ha = pb.a.host();
    HostMatrix hb = pb.b.host();
    HostMatrix hc = r.c.host();
    HostMatrix hc0 = c_type == DType::F32 ? pb.c0_wide.host() : pb.c0_narrow.host();
    for (HostMatrix* h : {&ha, &hb, &hc, &hc0}) h->set_device_readable(direct);
    GemmOptions o = pb.options;
    o.c_in = &hc0;
    r.report = plan != nullptr ? outcore::ops::execute_gemm(device, *plan, ha, hb, hc, o)
                               : outcore::ops::gemm(device, ha, hb, hc, o);
    return r;
}

GemmPlan fixed_plan(outcore::Device& device, Problem& pb, DType c_type, GemmSchedule s, std::uint64_t tm,
                    std::uint64_t tn, std::uint64_t tk) {
    GemmOptions o = pb.options;
    o.schedule = s;
    o.tile_m = tm;
    o.tile_n = tn;
    o.tile_k = tk;
    Matrix c(pb.m, pb.n, c_type, Layout::ColMajor);
    const HostMatrix hc0 = c_type == DType::F32 ? pb.c0_wide.host() : pb.c0_narrow.host();
    o.c_in = &hc0;
    return outcore::ops::plan_gemm(device, pb.a.host(), pb.b.host(), c.host(), o);
}

/// Every element of `narrow` is `wide`'s rounded to nearest even.
void expect_rounded(const Matrix& narrow, const Matrix& wide) {
    const auto round = narrow.type == DType::BF16 ? outcore::f32_to_bf16 : outcore::f32_to_f16;
    std::uint64_t wrong = 0;
    for (std::uint64_t j = 0; j < wide.cols; ++j) {
        for (std::uint64_t i = 0; i < wide.rows; ++i) {
            const double w = wide.get(i, j);
            const auto want = round(static_cast<float>(w));
            const std::uint16_t got =
                *reinterpret_cast<const std::uint16_t*>(narrow.storage.data() + narrow.index(i, j) * 2);
            if (got != want && ++wrong <= 3)
                ADD_FAILURE() << "C(" << i << ", " << j << "): " << got << " for " << w;
        }
    }
    EXPECT_EQ(wrong, 0U);
}

TEST(GemmNarrowC, A16BitCIsTheF32RunRoundedOnce) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    std::uniform_int_distribution<std::uint64_t> dim(41, 90);
    std::uniform_int_distribution<std::uint64_t> tile(9, 40);
    int i = 0;
    for (const GemmSchedule s :
         {GemmSchedule::SquareC, GemmSchedule::APanelResident, GemmSchedule::BPanelResident}) {
        for (const double beta : {0.0, -0.5}) {
            const DType type = i++ % 2 == 0 ? DType::BF16 : DType::F16;
            Problem pb(rng, dim(rng), dim(rng), dim(rng), type, rng() % 2 == 0, rng() % 2 == 0, beta);
            const std::uint64_t tm = tile(rng), tn = tile(rng);
            const GemmPlan narrow = fixed_plan(*device, pb, type, s, tm, tn, pb.k);
            const GemmPlan wide = fixed_plan(*device, pb, DType::F32, s, tm, tn, pb.k);
            SCOPED_TRACE(testing::Message()
                         << outcore::to_string(type) << " " << pb.m << "x" << pb.n << "x" << pb.k << " "
                         << outcore::tile::to_string(s) << " tiles " << tm << "x" << tn << " beta " << beta);
            ASSERT_TRUE(narrow.problem.narrow_c);
            ASSERT_EQ(narrow.k_chunks(), 1U);
            ASSERT_GT(narrow.c_grid().count(), 1U);
            EXPECT_GE(narrow.c_slot_bytes, tm * tn * 2);  // 2-byte C (slots are aligned up)
            EXPECT_LT(narrow.c_slot_bytes, tm * tn * 4);
            for (const bool direct : {false, true}) {
                SCOPED_TRACE(direct ? "device-readable C" : "packed C");
                const Result r32 = run(*device, pb, DType::F32, direct, &wide);
                const Result r16 = run(*device, pb, type, direct, &narrow);
                expect_rounded(r16.c, r32.c);
                EXPECT_EQ(r16.report.pipeline.bytes_downloaded * 2, r32.report.pipeline.bytes_downloaded);
            }
        }
    }
    expect_nothing_held(*device);
}

// The planner's own plan for a 16-bit C has one k chunk even where the budget would
// rather cut k; its result is the f32 C's (of that plan) rounded.
TEST(GemmNarrowC, ThePlannerKeepsTheWholeKInOneChunk) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    Problem pb(rng, 200, 180, 160, DType::BF16, false, true, 0.25);
    pb.options.budget_bytes = 96 * outcore::kKiB;  // well under the operands' 190 KiB
    Matrix c(pb.m, pb.n, DType::BF16, Layout::ColMajor);
    GemmOptions o = pb.options;
    const HostMatrix hc0 = pb.c0_narrow.host();
    o.c_in = &hc0;
    const GemmPlan plan = outcore::ops::plan_gemm(*device, pb.a.host(), pb.b.host(), c.host(), o);
    ASSERT_TRUE(plan.problem.narrow_c);
    EXPECT_EQ(plan.tile_k, pb.k);
    EXPECT_GT(plan.c_grid().count(), 1U);
    const Result r16 = run(*device, pb, DType::BF16, true, nullptr);
    EXPECT_EQ(r16.report.plan.tile_k, pb.k);
    pb.options.budget_bytes = kGiB;  // the same tiles with an f32 C need more
    const GemmPlan wide = fixed_plan(*device, pb, DType::F32, r16.report.plan.schedule,
                                     r16.report.plan.tile_m, r16.report.plan.tile_n, pb.k);
    const Result r32 = run(*device, pb, DType::F32, true, &wide);
    expect_rounded(r16.c, r32.c);
    expect_nothing_held(*device);
}

/// `pb`'s a-panel plan of tm × tn tiles over the whole k with its panel in chunks of ck
/// columns and room for `spare` chunks of the next panel (chunk_a_panel), for a C of
/// `c_type`: a 16-bit C also holds an f32 tile of sums.
GemmPlan chunked_plan(outcore::Device& device, Problem& pb, DType c_type, std::uint64_t tm, std::uint64_t tn,
                      std::uint64_t ck, std::uint64_t spare) {
    const GemmPlan whole = fixed_plan(device, pb, c_type, GemmSchedule::APanelResident, tm, tn, pb.k);
    const std::uint64_t align = device.info().min_offset_alignment;
    const std::uint64_t sums = whole.problem.narrow_c ? outcore::align_up(tm * tn * 4, align) : 0;
    outcore::tile::PlanLimits limits{.min_offset_alignment = align};
    limits.budget_bytes = whole.device_bytes - std::uint64_t{whole.a_slots} * whole.a_slot_bytes + sums +
                          (pb.k / ck + spare) * tm * ck * 2;
    return outcore::tile::chunk_a_panel(whole, limits, ck);
}

// With the A panel in chunks (GemmPlan::a_chunk_k) a row's first and last tiles are
// several GEMMs: a 16-bit C sums them in an f32 tile and rounds once, so the result is
// still the f32-C run of the same plan rounded, bit for bit — with none, some or all of
// the next panel ahead, β = 0 or not, one lane or two, packed or device-readable C.
TEST(GemmNarrowC, AChunkedPanelSumsInF32AndRoundsOnce) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    for (int variant = 0; variant < 8; ++variant) {
        const DType type = variant % 2 == 0 ? DType::BF16 : DType::F16;
        const std::uint64_t tm = 32, ck = 16, chunks = 2 + rng() % 3, rows = 2 + rng() % 2;
        const std::uint64_t spare = variant % 3 == 0 ? 0 : variant % 3 == 1 ? 1 : chunks;
        Problem pb(rng, tm * rows, 50 + rng() % 60, ck * chunks, type, false, rng() % 2 == 0,
                   variant % 4 < 2 ? 0.0 : -0.5);
        pb.options.one_call_per_chunk = false;
        pb.options.compute_lanes = variant % 4 == 1 || variant % 4 == 3 ? 2U : 1U;
        const std::uint64_t tn = 16 + rng() % 24;
        const GemmPlan narrow = chunked_plan(*device, pb, type, tm, tn, ck, spare);
        const GemmPlan wide = chunked_plan(*device, pb, DType::F32, tm, tn, ck, spare);
        SCOPED_TRACE(testing::Message()
                     << outcore::to_string(type) << " " << pb.m << "x" << pb.n << "x" << pb.k << " tiles "
                     << tm << "x" << tn << ", " << spare << " spare, beta " << pb.options.beta << ", "
                     << pb.options.compute_lanes << " lanes");
        ASSERT_EQ(narrow.a_chunk_k, ck);
        ASSERT_EQ(wide.a_chunk_k, ck);
        ASSERT_EQ(narrow.a_slots, chunks + spare);
        ASSERT_EQ(wide.a_slots, narrow.a_slots);  // the same ring: the same GEMMs
        EXPECT_GE(narrow.acc_bytes, tm * tn * 4);
        EXPECT_EQ(wide.acc_bytes, 0U);
        for (const bool direct : {false, true}) {
            SCOPED_TRACE(direct ? "device-readable C" : "packed C");
            const Result r32 = run(*device, pb, DType::F32, direct, &wide);
            const Result r16 = run(*device, pb, type, direct, &narrow);
            expect_rounded(r16.c, r32.c);
            EXPECT_EQ(r16.report.peak_device_bytes, narrow.device_bytes);
            EXPECT_LE(narrow.device_bytes, narrow.acc_bytes + wide.device_bytes);
            EXPECT_EQ(r16.report.pipeline.bytes_downloaded * 2, r32.report.pipeline.bytes_downloaded);
        }
    }
    expect_nothing_held(*device);
}

TEST(GemmNarrowC, ShallowChunksAndF32InputsAreRefused) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    Problem pb(rng, 64, 64, 64, DType::BF16, false, false, 0.0);
    EXPECT_THROW((void)fixed_plan(*device, pb, DType::BF16, GemmSchedule::SquareC, 32, 32, 16),
                 outcore::UsageError);
    // f32 inputs take an f32 C only.
    Problem f32(rng, 32, 32, 32, DType::F32, false, false, 0.0);
    Matrix c(32, 32, DType::BF16, Layout::ColMajor);
    EXPECT_THROW((void)outcore::ops::plan_gemm(*device, f32.a.host(), f32.b.host(), c.host(), f32.options),
                 outcore::UsageError);
    expect_nothing_held(*device);
}

}  // namespace
