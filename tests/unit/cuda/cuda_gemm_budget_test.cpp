// The tiled GEMM's device budget on CUDA covers cuBLAS's workspace too: the compute
// queue takes it outside the pipeline's allocator, so the plan leaves room for it
// (budgets of at least four workspaces; smaller ones hold it beside the budget).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "cuda_test_support.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/io/matrix.hpp"
#include "outcore/ops/gemm.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::cuda::test::CudaTest;

TEST_F(CudaTest, GemmBudgetCoversTheCublasWorkspace) {
    // One workspace per compute lane (each lane's queue has its own cuBLAS handle).
    const std::uint64_t workspace = dev().info().gemm_workspace_bytes * dev().info().compute_lanes;
    ASSERT_GT(workspace, 0U);
    std::mt19937_64 rng(outcore::test::seed());
    const std::uint64_t n = 4096;  // 64 MiB per operand
    std::vector<float> a(n * n), b(n * n), c(n * n);
    std::uniform_real_distribution<float> u(-1, 1);
    for (float& x : a) x = u(rng);
    for (float& x : b) x = u(rng);
    using outcore::io::HostMatrix;
    using outcore::io::Layout;
    HostMatrix ha(a.data(), n, n, n, Layout::ColMajor, outcore::DType::F32);
    HostMatrix hb(b.data(), n, n, n, Layout::ColMajor, outcore::DType::F32);
    HostMatrix hc(c.data(), n, n, n, Layout::ColMajor, outcore::DType::F32);
    outcore::ops::GemmOptions o{.type = outcore::DType::F32};
    o.measure_rates = false;
    o.budget_bytes = 4 * workspace + 24 * outcore::kMiB;  // under the operands' 192 MiB
    const outcore::tile::GemmPlan plan = outcore::ops::plan_gemm(dev(), ha, hb, hc, o);
    EXPECT_LE(plan.device_bytes + workspace, o.budget_bytes);
    const outcore::ops::GemmReport r = outcore::ops::execute_gemm(dev(), plan, ha, hb, hc, o);
    EXPECT_LE(r.peak_device_bytes + workspace, o.budget_bytes);
    // A budget under four workspaces keeps its whole size for the slots (the workspace
    // is held beside it) and still runs.
    o.budget_bytes = workspace;
    const outcore::tile::GemmPlan small = outcore::ops::plan_gemm(dev(), ha, hb, hc, o);
    EXPECT_LE(small.device_bytes, o.budget_bytes);
    (void)outcore::ops::execute_gemm(dev(), small, ha, hb, hc, o);
}

}  // namespace
