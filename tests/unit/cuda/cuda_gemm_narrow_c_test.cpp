// A chunked A panel (GemmPlan::a_chunk_k) with a bf16 C on CUDA: the first and last tiles
// of a row sum their per-chunk GEMMs in an f32 tile and one conversion kernel rounds them
// (ops/gemm.cpp); the tiles between store bf16 from cuBLAS. Every element is within half a
// bf16 step (plus cuBLAS's own f32 rounding) of the f32-C run of the same plan, and the
// run holds its budget with the tile of sums in it. And the default plan on CUDA: where the
// planner's a-panel tiles leave no room for chunks beside the tile of sums, narrower ones
// in chunks (tile::narrower_chunked_panel, through ops::plan_gemm's choose_plan).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "cuda_test_support.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/dtype.hpp"
#include "outcore/io/matrix.hpp"
#include "outcore/ops/gemm.hpp"
#include "outcore/tile/gemm_plan.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::DType;
using outcore::cuda::test::CudaTest;
using outcore::io::HostMatrix;
using outcore::io::Layout;

/// Random bf16 A (m×k) and B (k×n), column-major, and a bf16 and an f32 C for them.
struct Bf16Case {
    Bf16Case(std::uint64_t m_, std::uint64_t n_, std::uint64_t k_)
        : m(m_), n(n_), a(m_ * k_), b(k_ * n_), c16(m_ * n_), c32(m_ * n_) {
        std::mt19937_64 rng(outcore::test::seed());
        std::uniform_real_distribution<float> u(-1, 1);
        for (auto& x : a) x = outcore::f32_to_bf16(u(rng));
        for (auto& x : b) x = outcore::f32_to_bf16(u(rng));
        ha.emplace(a.data(), m_, k_, m_, Layout::ColMajor, DType::BF16);
        hb.emplace(b.data(), k_, n_, k_, Layout::ColMajor, DType::BF16);
        hc16.emplace(c16.data(), m_, n_, m_, Layout::ColMajor, DType::BF16);
        hc32.emplace(c32.data(), m_, n_, m_, Layout::ColMajor, DType::F32);
    }
    /// Elements of the bf16 C more than half a bf16 step (plus cuBLAS's own f32 rounding in
    /// another order) from the f32 C; the first three are reported.
    [[nodiscard]] std::uint64_t off_by_more_than_rounding() const {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < m * n; ++i) {
            const double want = c32[i];
            const double got = outcore::bf16_to_f32(c16[i]);
            // bf16 keeps 8 significant bits: rounding is within 2^-9 relative; allow
            // cuBLAS's f32 sums in another order on top.
            if (!(std::fabs(got - want) <= std::fabs(want) * 0x1p-8 + 1e-3) && ++wrong <= 3)
                ADD_FAILURE() << "C[" << i << "] = " << got << ", the f32 run " << want;
        }
        return wrong;
    }

    std::uint64_t m, n;
    std::vector<std::uint16_t> a, b, c16;
    std::vector<float> c32;
    std::optional<HostMatrix> ha, hb, hc16, hc32;
};

TEST_F(CudaTest, AChunkedPanelWithABf16CRoundsItsF32SumsOnce) {
    const std::uint64_t k = 4096;
    Bf16Case x(2048, 1536, k);
    HostMatrix &ha = *x.ha, &hb = *x.hb, &hc16 = *x.hc16, &hc32 = *x.hc32;
    outcore::ops::GemmOptions o{.type = DType::BF16};
    o.measure_rates = false;
    o.budget_bytes = outcore::kGiB;
    o.schedule = outcore::tile::GemmSchedule::APanelResident;
    o.tile_m = 1024;  // two panels
    o.tile_n = 512;   // three tiles a row: first, middle, last
    o.tile_k = k;
    o.panel_chunk_k = 1024;
    for (const bool direct : {false, true}) {
        SCOPED_TRACE(direct ? "device-readable operands" : "packed operands");
        for (HostMatrix* h : {&ha, &hb, &hc16, &hc32}) h->set_device_readable(direct);
        const outcore::tile::GemmPlan narrow = outcore::ops::plan_gemm(dev(), ha, hb, hc16, o);
        const outcore::tile::GemmPlan wide = outcore::ops::plan_gemm(dev(), ha, hb, hc32, o);
        ASSERT_EQ(narrow.a_chunk_k, 1024U);
        ASSERT_EQ(wide.a_chunk_k, 1024U);
        ASSERT_GE(narrow.acc_bytes, 1024U * 512 * 4);
        const outcore::ops::GemmReport r16 = outcore::ops::execute_gemm(dev(), narrow, ha, hb, hc16, o);
        (void)outcore::ops::execute_gemm(dev(), wide, ha, hb, hc32, o);
        EXPECT_LE(r16.peak_device_bytes, o.budget_bytes);
        EXPECT_EQ(x.off_by_more_than_rounding(), 0U);
    }
}

// Planned without rates (fewest bytes), 2048×2048×8192 under 36 MiB takes 1024×512 a-panel
// tiles over the whole k, which with a bf16 C's 2 MiB tile of sums leave no room for a chunk
// of the next panel: the default plan is 1024×256 in chunks of 4096 instead (with an f32 C
// the planner takes square C tiles and nothing changes). Forced tiles are left as they are.
// The narrowed bf16-C run agrees with the f32-C run within bf16's rounding and holds its budget.
TEST_F(CudaTest, TheDefaultPlanTakesNarrowerTilesWhereTheChosenLeaveNoRoomForChunks) {
    const std::uint64_t k = 8192;
    Bf16Case x(2048, 2048, k);
    HostMatrix &ha = *x.ha, &hb = *x.hb, &hc16 = *x.hc16, &hc32 = *x.hc32;
    outcore::ops::GemmOptions o{.type = DType::BF16};
    o.measure_rates = false;
    o.budget_bytes = 36 * outcore::kMiB;
    const outcore::tile::GemmPlan plan = outcore::ops::plan_gemm(dev(), ha, hb, hc16, o);
    EXPECT_EQ(plan.schedule, outcore::tile::GemmSchedule::APanelResident);
    EXPECT_EQ(plan.tile_m, 1024U);
    EXPECT_EQ(plan.tile_n, 256U);
    EXPECT_EQ(plan.tile_k, k);
    EXPECT_EQ(plan.a_chunk_k, 4096U);
    EXPECT_GE(plan.prefetch_chunks, 1U);

    outcore::ops::GemmOptions forced = o;
    forced.schedule = outcore::tile::GemmSchedule::APanelResident;
    forced.tile_m = 1024;
    forced.tile_n = 512;
    forced.tile_k = k;
    const outcore::tile::GemmPlan kept = outcore::ops::plan_gemm(dev(), ha, hb, hc16, forced);
    EXPECT_EQ(kept.tile_n, 512U);
    EXPECT_EQ(kept.a_chunk_k, 0U);

    const outcore::tile::GemmPlan wide = outcore::ops::plan_gemm(dev(), ha, hb, hc32, o);
    EXPECT_EQ(wide.schedule, outcore::tile::GemmSchedule::SquareC);
    const outcore::ops::GemmReport r16 = outcore::ops::execute_gemm(dev(), plan, ha, hb, hc16, o);
    (void)outcore::ops::execute_gemm(dev(), wide, ha, hb, hc32, o);
    EXPECT_LE(r16.peak_device_bytes, o.budget_bytes);
    EXPECT_EQ(x.off_by_more_than_rounding(), 0U);
}

}  // namespace
