// support/traced_device_checks.hpp — the checks every device-timed backend's trace
// tests share (CUDA events, Vulkan timestamps): what a claimed queue reports, and that
// a traced out-of-core GEMM reports each copy and kernel once.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "outcore/device/device.hpp"
#include "outcore/device/kernels.hpp"
#include "outcore/device/queue.hpp"
#include "outcore/io/matrix.hpp"
#include "outcore/monitor/device_time.hpp"
#include "outcore/ops/gemm.hpp"
#include "support/op_collector.hpp"
#include "support/test_seed.hpp"

namespace outcore::test {

/// While `c` observes: a fill of `a` claimed with an empty name (reported as "fill"),
/// a fill of `b` nobody claimed (not reported), a GEMM claimed as "gemm"; then waits.
inline void run_claimed_fill_unclaimed_fill_and_gemm(Device& dev, Queue& q, const GemmTileArgs& args,
                                                     const BufferView& a, const BufferView& b,
                                                     OpCollector& c) {
    const monitor::ObserverRegistration reg(c);
    {
        const monitor::OpNameScope claimed("");
        q.fill(a, std::byte{0});
    }
    q.fill(b, std::byte{0});  // unclaimed: not reported
    {
        const monitor::OpNameScope name("gemm");
        dev.kernels().gemm(q, args);
    }
    q.synchronize();
}

/// Runs an n³ f32 ops::gemm of seeded random operands with `options` while observing
/// it, and checks that the uploads, downloads and kernels reported add up to the
/// pipeline's own counts (each reported once, kernels named "gemm").
inline void expect_traced_gemm_reports_each_copy_once(Device& dev, std::uint64_t n,
                                                      ops::GemmOptions options) {
    std::mt19937_64 rng(seed());
    std::vector<float> a(n * n), b(n * n), c(n * n);
    std::uniform_real_distribution<float> u(-1, 1);
    for (float& x : a) x = u(rng);
    for (float& x : b) x = u(rng);
    const io::HostMatrix ha(a.data(), n, n, n, io::Layout::ColMajor, DType::F32);
    const io::HostMatrix hb(b.data(), n, n, n, io::Layout::ColMajor, DType::F32);
    io::HostMatrix hc(c.data(), n, n, n, io::Layout::ColMajor, DType::F32);
    OpCollector col;
    ops::GemmReport r;
    {
        const monitor::ObserverRegistration reg(col);
        r = ops::gemm(dev, ha, hb, hc, options);
    }
    std::uint64_t up = 0, down = 0, kernels = 0;
    for (const auto& s : col.seen()) {
        if (s.queue == "upload" && s.kind == monitor::OpKind::Upload) up += s.bytes;
        if (s.queue == "download" && s.kind == monitor::OpKind::Download) down += s.bytes;
        if (s.queue == "compute" && s.kind == monitor::OpKind::Kernel) {
            ++kernels;
            EXPECT_EQ(s.name, "gemm");
        }
    }
    EXPECT_EQ(up, r.pipeline.bytes_uploaded);
    EXPECT_EQ(down, r.pipeline.bytes_downloaded);
    EXPECT_EQ(kernels, r.pipeline.compute_count) << "one kernel per compute step";
    if (options.budget_bytes > 0 && options.budget_bytes < 3 * n * n * 4) {
        EXPECT_GT(r.pipeline.compute_count, 1U) << "the budget splits the work";
    }
}

}  // namespace outcore::test
