// Tests of ops::gemm's direct path on the CPU backend (where all host memory is device
// addressable): column-major HostMatrix operands declared device-readable go up as
// 2-D copies with no staging, and a device-readable C takes its tiles by 2-D
// downloads. The device then holds exactly the bytes the packed path puts there, so
// for one plan the direct result must equal the packed result bit for bit (same
// tiles, same sums), padding between the rows and ld included, and be close to the
// float64 reference. Covered: every transpose combination, every schedule forced with
// ragged tiles, β ≠ 0 with a direct input C, C in place, every mix of direct and
// packed operands, f32, f64 and bf16 (2-byte inputs, 4-byte C), panel rings with
// every prefetch depth; paced C downloads; no staging when everything is direct;
// progress to 1.0.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gemm_test_support.hpp"
#include "outcore/backends/cpu.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/io/matrix.hpp"
#include "outcore/ops/gemm.hpp"
#include "outcore/tile/gemm_plan.hpp"
#include "support/test_seed.hpp"

namespace {

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
using outcore::tile::GemmPlan;
using outcore::tile::GemmSchedule;

using outcore::gemm_test::expect_nothing_held;
using outcore::gemm_test::make_device;

/// Which operands are device-readable.
struct Direct {
    bool a = false, b = false, c = false, c_in = false;
    [[nodiscard]] bool all() const noexcept { return a && b && c && c_in; }
};
constexpr Direct kPacked{};
constexpr Direct kAllDirect{.a = true, .b = true, .c = true, .c_in = true};

/// Column-major operands with ld > rows. C starts as NaN inside and a random byte
/// pattern in the padding, which no run may touch.
struct Problem {
    std::uint64_t m, n, k;
    DType type;
    GemmOptions options;
    Matrix a, b, c0, c;

    Problem(std::mt19937_64& rng, std::uint64_t m_, std::uint64_t n_, std::uint64_t k_, DType t, bool ta,
            bool tb, double beta)
        : m(m_),
          n(n_),
          k(k_),
          type(t),
          a(ta ? k_ : m_, ta ? m_ : k_, t, Layout::ColMajor, 1 + rng() % 5),
          b(tb ? n_ : k_, tb ? k_ : n_, t, Layout::ColMajor, 1 + rng() % 5),
          c0(m_, n_, out_type(t), Layout::ColMajor, 1 + rng() % 5),
          c(m_, n_, out_type(t), Layout::ColMajor, 1 + rng() % 5) {
        for (auto& byte : c.storage) byte = static_cast<std::byte>(rng() & 0xFF);
        a.randomize(rng);
        b.randomize(rng);
        c0.randomize(rng);
        c.poison();
        options.type = t;
        options.trans_a = ta;
        options.trans_b = tb;
        options.alpha = std::uniform_real_distribution<double>(-2.0, 2.0)(rng);
        options.beta = beta;
        options.measure_rates = false;
        options.budget_bytes = kGiB;
    }
    static DType out_type(DType t) { return outcore::gemm_c_dtype(t); }
};

struct Result {
    std::vector<std::byte> c;  // C's storage, padding included
    GemmReport report;
    std::vector<double> progress;
};

/// Runs `plan` on a fresh copy of the problem's C with the operands in `direct`
/// declared device-readable; `in_place` reads β·C from C itself (which then starts
/// as C0 inside).
Result run(Device& device, const Problem& pb, const GemmPlan& plan, Direct direct, bool in_place = false) {
    Matrix a = pb.a;
    Matrix b = pb.b;
    Matrix c0 = pb.c0;
    Matrix c = pb.c;
    if (in_place) {
        for (std::uint64_t j = 0; j < pb.n; ++j)
            for (std::uint64_t i = 0; i < pb.m; ++i) c.set(i, j, pb.c0.get(i, j));
    }
    HostMatrix ha = a.host();
    HostMatrix hb = b.host();
    HostMatrix hc = c.host();
    HostMatrix hc0 = c0.host();
    ha.set_device_readable(direct.a);
    hb.set_device_readable(direct.b);
    hc.set_device_readable(direct.c);
    hc0.set_device_readable(direct.c_in);
    EXPECT_EQ(ha.direct().has_value(), direct.a);
    EXPECT_EQ(hc.direct_sink().has_value(), direct.c);
    GemmOptions o = pb.options;
    o.c_in = in_place ? &hc : &hc0;
    if (in_place) hc.set_device_readable(direct.c || direct.c_in);
    Result r;
    o.progress = [&r](double f) { r.progress.push_back(f); };
    r.report = outcore::ops::execute_gemm(device, plan, ha, hb, hc, o);
    r.c = c.storage;
    return r;
}

/// Index of the first differing byte, or -1.
std::int64_t first_difference(const std::vector<std::byte>& x, const std::vector<std::byte>& y) {
    if (x.size() != y.size()) return 0;
    const auto it = std::mismatch(x.begin(), x.end(), y.begin());
    return it.first == x.end() ? -1 : it.first - x.begin();
}

/// The padding rows of C (between m and ld) still hold their starting bytes.
bool padding_intact(const Problem& pb, const std::vector<std::byte>& c) {
    const std::uint64_t w = outcore::dtype_bytes(pb.c.type);
    for (std::uint64_t j = 0; j < pb.n; ++j) {
        const std::uint64_t from = (pb.m + j * pb.c.ld) * w;
        const std::uint64_t to = (j + 1) * pb.c.ld * w;
        if (!std::equal(c.begin() + static_cast<std::ptrdiff_t>(from),
                        c.begin() + static_cast<std::ptrdiff_t>(to),
                        pb.c.storage.begin() + static_cast<std::ptrdiff_t>(from))) {
            return false;
        }
    }
    return true;
}

/// Checks a direct run against the packed run of the same plan and the reference.
void expect_same_as_packed(const Problem& pb, const Result& direct, const Result& packed) {
    EXPECT_EQ(first_difference(direct.c, packed.c), -1) << "the direct result differs from the packed one";
    EXPECT_TRUE(padding_intact(pb, direct.c)) << "the direct path wrote between m and ldc";
    EXPECT_TRUE(padding_intact(pb, packed.c));
    Matrix got = pb.c;
    got.storage = direct.c;
    GemmOptions o = pb.options;
    const std::vector<double> ref = reference(pb.a, pb.b, pb.options.beta != 0.0 ? &pb.c0 : nullptr, o);
    EXPECT_LE(relative_error(got, ref), error_bound(pb.type, GemmCompute::Exact, pb.k));
    // The same tiles moved: only the way they were copied differs.
    EXPECT_EQ(direct.report.bytes_moved, packed.report.bytes_moved);
    EXPECT_EQ(direct.report.bytes_moved, direct.report.plan.bytes_moved);
    EXPECT_EQ(direct.report.pipeline.upload_count, packed.report.pipeline.upload_count);
    EXPECT_EQ(direct.report.pipeline.compute_count,
              direct.report.plan.kernel_calls + (direct.report.drain_parts - 1));
    EXPECT_EQ(direct.report.drain_parts, packed.report.drain_parts);
    EXPECT_LE(direct.report.peak_device_bytes, direct.report.budget_bytes);
    EXPECT_EQ(direct.progress.size(), direct.report.plan.c_grid().count());
    EXPECT_TRUE(std::is_sorted(direct.progress.begin(), direct.progress.end()));
    if (!direct.progress.empty()) {
        EXPECT_DOUBLE_EQ(direct.progress.back(), 1.0);
    }
}

std::vector<DType> types(Device& device) {
    std::vector<DType> out = {DType::F32, DType::F64};
    if (device.kernels().supports_gemm(DType::BF16, GemmCompute::Exact)) out.push_back(DType::BF16);
    return out;
}

GemmPlan fixed_plan(Device& device, const Problem& pb, GemmSchedule s, std::uint64_t tm, std::uint64_t tn,
                    std::uint64_t tk) {
    GemmOptions o = pb.options;
    o.schedule = s;
    o.tile_m = tm;
    o.tile_n = tn;
    o.tile_k = tk;
    Matrix a = pb.a, b = pb.b, c = pb.c, c0 = pb.c0;
    const HostMatrix hc0 = c0.host();
    o.c_in = &hc0;
    return outcore::ops::plan_gemm(device, a.host(), b.host(), c.host(), o);
}

TEST(GemmDirect, EveryTransposeAndScheduleEqualsThePackedPathBitForBit) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    const std::vector<DType> ts = types(*device);
    std::uniform_int_distribution<std::uint64_t> dim(41, 110);  // above the largest tile
    std::uniform_int_distribution<std::uint64_t> tile(7, 40);
    int i = 0;
    for (GemmSchedule s :
         {GemmSchedule::SquareC, GemmSchedule::APanelResident, GemmSchedule::BPanelResident}) {
        for (int t = 0; t < 4; ++t) {
            for (const bool beta : {false, true}) {
                const DType type = ts[static_cast<std::size_t>(i++) % ts.size()];
                const Problem pb(rng, dim(rng), dim(rng), dim(rng), type, (t & 1) != 0, (t & 2) != 0,
                                 beta ? std::uniform_real_distribution<double>(-2.0, 2.0)(rng) : 0.0);
                const GemmPlan plan = fixed_plan(*device, pb, s, tile(rng), tile(rng), tile(rng));
                SCOPED_TRACE(fmt::format("{}x{}x{} {} ta={} tb={} beta={} {} tiles {}x{}x{}", pb.m, pb.n,
                                         pb.k, outcore::to_string(type), pb.options.trans_a,
                                         pb.options.trans_b, pb.options.beta, outcore::tile::to_string(s),
                                         plan.tile_m, plan.tile_n, plan.tile_k));
                ASSERT_EQ(plan.schedule, s);
                ASSERT_GT(plan.c_grid().count(), 1U);
                const Result packed = run(*device, pb, plan, kPacked);
                const Result direct = run(*device, pb, plan, kAllDirect);
                expect_same_as_packed(pb, direct, packed);
                // Nothing to stage when every operand moves directly.
                EXPECT_EQ(direct.report.pipeline.staging_bytes, 0U);
                EXPECT_GT(packed.report.pipeline.staging_bytes, 0U);
                expect_nothing_held(*device);
            }
        }
    }
}

// Every subset of {A, B, C, input C} direct, the rest packed: all equal bit for bit.
TEST(GemmDirect, EveryMixOfDirectAndPackedOperands) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    for (GemmSchedule s :
         {GemmSchedule::SquareC, GemmSchedule::APanelResident, GemmSchedule::BPanelResident}) {
        const Problem pb(rng, 71, 53, 67, DType::F32, rng() % 2 == 0, rng() % 2 == 0, 0.75);
        const GemmPlan plan = fixed_plan(*device, pb, s, 24, 20, 16);
        SCOPED_TRACE(outcore::tile::to_string(s));
        const Result packed = run(*device, pb, plan, kPacked);
        for (unsigned mask = 1; mask < 16; ++mask) {
            const Direct d{
                .a = (mask & 1) != 0, .b = (mask & 2) != 0, .c = (mask & 4) != 0, .c_in = (mask & 8) != 0};
            SCOPED_TRACE(testing::Message()
                         << "direct A " << d.a << " B " << d.b << " C " << d.c << " input C " << d.c_in);
            const Result direct = run(*device, pb, plan, d);
            expect_same_as_packed(pb, direct, packed);
            EXPECT_EQ(direct.report.pipeline.staging_bytes == 0, d.all());
            EXPECT_LT(direct.report.pipeline.staging_bytes, packed.report.pipeline.staging_bytes);
        }
        expect_nothing_held(*device);
    }
}

// β·C read from C itself, both as a direct input and a direct sink: each tile's input
// goes up before its result comes down, and the answer equals the packed in-place run.
TEST(GemmDirect, InPlaceBetaWithADirectC) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    for (GemmSchedule s :
         {GemmSchedule::SquareC, GemmSchedule::APanelResident, GemmSchedule::BPanelResident}) {
        const Problem pb(rng, 97, 61, 45, DType::F32, rng() % 2 == 0, rng() % 2 == 0, -0.5);
        const GemmPlan plan = fixed_plan(*device, pb, s, 32, 24, 16);
        SCOPED_TRACE(outcore::tile::to_string(s));
        const Result packed = run(*device, pb, plan, kPacked, /*in_place=*/true);
        const Result direct = run(*device, pb, plan, kAllDirect, /*in_place=*/true);
        expect_same_as_packed(pb, direct, packed);
        EXPECT_EQ(direct.report.pipeline.staging_bytes, 0U);
        expect_nothing_held(*device);
    }
}

// Panel rings with no spare chunk slot, some, and a whole second panel's worth: the
// direct uploads never wait for a staging buffer, so only the slot hazards order
// them; the answer must not change.
TEST(GemmDirectThreads, PanelRingsWithEveryPrefetchDepth) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    for (GemmSchedule s : {GemmSchedule::APanelResident, GemmSchedule::BPanelResident}) {
        const Problem pb(rng, 173, 151, 97, DType::F32, rng() % 2 == 0, rng() % 2 == 0,
                         rng() % 2 == 0 ? 0.0 : 0.5);
        const GemmPlan roomy = fixed_plan(*device, pb, s, 48, 40, 24);
        const std::uint64_t chunk =
            s == GemmSchedule::APanelResident ? roomy.a_slot_bytes : roomy.b_slot_bytes;
        ASSERT_EQ(roomy.prefetch_chunks, roomy.k_chunks());
        ASSERT_EQ(roomy.c_slots, 3U);  // the budget left after the prefetch buys a third
        const std::uint64_t minimum = roomy.device_bytes - roomy.prefetch_chunks * chunk - roomy.c_slot_bytes;
        for (const std::uint64_t extra : {std::uint64_t{0}, std::uint64_t{2}, roomy.k_chunks()}) {
            Problem tight = pb;
            tight.options.budget_bytes = minimum + extra * chunk;
            const GemmPlan plan = fixed_plan(*device, tight, s, 48, 40, 24);
            SCOPED_TRACE(testing::Message() << outcore::tile::to_string(s) << ", prefetch " << extra);
            ASSERT_EQ(plan.prefetch_chunks, extra);
            ASSERT_EQ(plan.c_slots, 2U);
            const Result packed = run(*device, tight, plan, kPacked);
            const Result direct = run(*device, tight, plan, kAllDirect);
            expect_same_as_packed(tight, direct, packed);
            EXPECT_EQ(direct.report.peak_device_bytes, plan.device_bytes);
        }
    }
    expect_nothing_held(*device);
}

// Paced C downloads (GemmOptions::pace_c_downloads): each tile but the last goes down in
// column pieces issued after the next tile's GEMMs. The same GEMMs run, so C is the
// same bits as the unpaced run, for every schedule and β; the pieces are counted;
// nothing is paced through staging (C packed) or with one k chunk. Unset, the rates
// the options give decide: directions that share the link pace, a full-duplex link not.
TEST(GemmDirectThreads, PacedDownloadsEqualWholeTilesBitForBit) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    for (GemmSchedule s :
         {GemmSchedule::SquareC, GemmSchedule::APanelResident, GemmSchedule::BPanelResident}) {
        for (const double beta : {0.0, 0.75}) {
            Problem pb(rng, 97, 83, 71, DType::F32, rng() % 2 == 0, rng() % 2 == 0, beta);
            const GemmPlan plan = fixed_plan(*device, pb, s, 32, 24, 16);
            SCOPED_TRACE(testing::Message() << outcore::tile::to_string(s) << " beta " << beta);
            ASSERT_GE(plan.k_chunks(), 3U);
            pb.options.pace_c_downloads = false;
            const Result whole = run(*device, pb, plan, kAllDirect);
            EXPECT_EQ(whole.report.paced_downloads, 0U);
            pb.options.pace_c_downloads = true;
            const Result paced = run(*device, pb, plan, kAllDirect);
            expect_same_as_packed(pb, paced, whole);
            // Every tile but the last in min(k_chunks - 1, 8) pieces, issued after GEMMs
            // of the tiles that follow (the last tile's GEMMs take the one before it).
            const std::uint64_t tiles = plan.c_grid().count();
            const std::uint64_t pieces = std::min<std::uint64_t>(plan.k_chunks() - 1, 8);
            EXPECT_EQ(paced.report.paced_downloads, (tiles - 1) * pieces);
            EXPECT_EQ(paced.report.pipeline.download_count,
                      whole.report.pipeline.download_count + (tiles - 1) * (pieces - 1));
            const Result packed = run(*device, pb, plan, Direct{.a = true, .b = true, .c = false});
            EXPECT_EQ(packed.report.paced_downloads, 0U) << "a packed C was paced";
            EXPECT_EQ(first_difference(packed.c, whole.c), -1);
        }
    }
    // One k chunk: nothing to spread.
    Problem one(rng, 64, 64, 16, DType::F32, false, false, 0.0);
    one.options.pace_c_downloads = true;
    const GemmPlan single = fixed_plan(*device, one, GemmSchedule::SquareC, 16, 16, 16);
    EXPECT_EQ(run(*device, one, single, kAllDirect).report.paced_downloads, 0U);
    // Unset: the given rates decide (48 GB/s each way, 58 both: shared; 101: not), for
    // tiles of two 4 MiB pieces at least.
    Problem pb(rng, 1024, 4096, 48, DType::F32, false, false, 0.0);
    const GemmPlan plan = fixed_plan(*device, pb, GemmSchedule::SquareC, 1024, 2048, 16);
    pb.options.link_bytes_per_second = 48e9;
    pb.options.link_d2h_bytes_per_second = 49e9;
    pb.options.link_duplex_bytes_per_second = 58e9;
    EXPECT_GT(run(*device, pb, plan, kAllDirect).report.paced_downloads, 0U);
    pb.options.link_duplex_bytes_per_second = 101e9;
    EXPECT_EQ(run(*device, pb, plan, kAllDirect).report.paced_downloads, 0U);
    expect_nothing_held(*device);
}

// A tile in two drain parts (the last tile's slot, here also tile 0's with two C slots)
// shares its pieces out over the parts: with k_chunks = 4, three pieces in all (two and
// one), none left for after the next tile's last GEMM.
TEST(GemmDirectThreads, PacedPiecesAreSharedOutOverDrainParts) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    Problem pb(rng, 64, 1536, 64, DType::F32, false, false, 0.0);
    pb.options.c_slots = 2;
    pb.options.pace_c_downloads = false;
    const GemmPlan plan = fixed_plan(*device, pb, GemmSchedule::SquareC, 64, 512, 16);
    ASSERT_EQ(plan.c_slots, 2U);
    ASSERT_EQ(plan.k_chunks(), 4U);
    const Result whole = run(*device, pb, plan, kAllDirect);
    ASSERT_EQ(whole.report.drain_parts, 2U);
    ASSERT_EQ(whole.report.pipeline.download_count, 5U);  // tiles 0 and 2 in two parts, tile 1 whole
    pb.options.pace_c_downloads = true;
    const Result paced = run(*device, pb, plan, kAllDirect);
    expect_same_as_packed(pb, paced, whole);
    EXPECT_EQ(paced.report.paced_downloads, 6U);          // tiles 0 and 1, three pieces each
    EXPECT_EQ(paced.report.pipeline.download_count, 8U);  // and the last tile's two parts
    expect_nothing_held(*device);
}

// Only column-major memory is offered directly: a row-major operand declared
// device-readable stays packed, and the answer is still the same bits.
TEST(GemmDirect, RowMajorOperandsStayPacked) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    const Problem pb(rng, 50, 40, 30, DType::F64, rng() % 2 == 0, rng() % 2 == 0, 0.0);
    const GemmPlan plan = fixed_plan(*device, pb, GemmSchedule::SquareC, 16, 16, 16);
    const Result packed = run(*device, pb, plan, kPacked);

    Matrix a_rows(pb.a.rows, pb.a.cols, pb.type, Layout::RowMajor, 3);
    for (std::uint64_t j = 0; j < pb.a.cols; ++j)
        for (std::uint64_t i = 0; i < pb.a.rows; ++i) a_rows.set(i, j, pb.a.get(i, j));
    Matrix b = pb.b;
    Matrix c = pb.c;
    HostMatrix ha = a_rows.host();
    HostMatrix hb = b.host();
    HostMatrix hc = c.host();
    ha.set_device_readable(true);
    hb.set_device_readable(true);
    hc.set_device_readable(true);
    EXPECT_FALSE(ha.direct().has_value());
    EXPECT_FALSE(ha.direct_sink().has_value());
    ASSERT_TRUE(hb.direct().has_value());
    EXPECT_EQ(hb.direct()->ld_elements, pb.b.ld);
    GemmOptions o = pb.options;
    const GemmReport r = outcore::ops::execute_gemm(*device, plan, ha, hb, hc, o);
    EXPECT_EQ(first_difference(c.storage, packed.c), -1);
    EXPECT_GT(r.pipeline.staging_bytes, 0U);  // A still goes through staging
    // A read-only matrix can be a direct source but never a direct sink.
    const HostMatrix ro(static_cast<const void*>(pb.b.storage.data()), pb.b.rows, pb.b.cols, pb.b.ld,
                        Layout::ColMajor, pb.type);
    HostMatrix ro_direct = ro;
    ro_direct.set_device_readable(true);
    EXPECT_TRUE(ro_direct.direct().has_value());
    EXPECT_FALSE(ro_direct.direct_sink().has_value());
    expect_nothing_held(*device);
}

}  // namespace
