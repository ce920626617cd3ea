// gemm_case.hpp — one GEMM test case run end to end on a device and checked against
// everything a run promises (run_case): the float64 reference, the budget and peak, the
// plan's bytes moved and kernel calls, every tile's progress, nothing left allocated.
// Shared by the GEMM test files.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gemm_test_support.hpp"
#include "outcore/core/error.hpp"
#include "outcore/ops/gemm.hpp"
#include "outcore/tile/gemm_plan.hpp"

namespace outcore::gemm_test {

using ops::GemmReport;
using tile::GemmSchedule;

struct Case {
    std::uint64_t m = 1, n = 1, k = 1;
    DType type = DType::F32;
    GemmCompute compute = GemmCompute::Exact;
    bool trans_a = false, trans_b = false;
    double alpha = 1.0, beta = 0.0;
    Layout layout = Layout::ColMajor;
    std::optional<GemmSchedule> schedule = std::nullopt;
    /// Budget: exact bytes if non-zero, else operand_fraction of the operands' bytes
    /// (never below the planner's minimum).
    std::uint64_t budget_bytes = 0;
    double operand_fraction = 0.25;
    std::uint32_t depth = 2;
    std::uint32_t lanes = 0;                           // compute lanes (0: the device's)
    bool split = false;                                // GemmOptions::split_c_tiles
    std::uint64_t tile_m = 0, tile_n = 0, tile_k = 0;  ///< fixed tiles (with a schedule), 0: planned
    /// Rates for the planner's time model (0: unknown, plans by bytes alone).
    double flops = 0, link_bytes_per_second = 0;
    std::uint32_t group = 1;    ///< with fixed tiles of a single panel
    std::uint32_t c_slots = 0;  ///< with fixed tiles: C slots (0: the planner's)
    std::optional<std::uint64_t> panel_chunk_k = std::nullopt;     ///< GemmOptions::panel_chunk_k
    std::optional<std::uint32_t> retained_b = std::nullopt;        ///< GemmOptions::retained_b
    std::optional<std::uint32_t> retained_k_outer = std::nullopt;  ///< GemmOptions::retained_k_outer
    bool device_readable = false;  ///< operands and C straight from host memory
};

inline std::string describe(const Case& c) {
    return fmt::format("{}x{}x{} {}{} ta={} tb={} alpha={} beta={} {} schedule={} depth={}", c.m, c.n, c.k,
                       outcore::to_string(c.type), c.compute == GemmCompute::FastTF32 ? "(tf32)" : "",
                       c.trans_a, c.trans_b, c.alpha, c.beta, outcore::io::to_string(c.layout),
                       c.schedule ? outcore::tile::to_string(*c.schedule) : "auto", c.depth);
}

struct Operands {
    Matrix a, b, c, c0;
    Operands(const Case& cs, std::mt19937_64& rng)
        : a(cs.trans_a ? cs.k : cs.m, cs.trans_a ? cs.m : cs.k, cs.type, cs.layout),
          b(cs.trans_b ? cs.n : cs.k, cs.trans_b ? cs.k : cs.n, cs.type, cs.layout),
          c(cs.m, cs.n, outcore::gemm_c_dtype(cs.type), cs.layout),
          c0(cs.m, cs.n, outcore::gemm_c_dtype(cs.type), cs.layout) {
        a.randomize(rng);
        b.randomize(rng);
        c0.randomize(rng);
        c.poison();
    }
};

inline GemmOptions options_for(const Case& cs) {
    GemmOptions o;
    o.type = cs.type;
    o.compute = cs.compute;
    o.trans_a = cs.trans_a;
    o.trans_b = cs.trans_b;
    o.alpha = cs.alpha;
    o.beta = cs.beta;
    o.schedule = cs.schedule;
    o.pipeline_depth = cs.depth;
    o.compute_lanes = cs.lanes;
    o.split_c_tiles = cs.split;
    o.tile_m = cs.tile_m;
    o.tile_n = cs.tile_n;
    o.tile_k = cs.tile_k;
    o.group = cs.group;
    o.c_slots = cs.c_slots;
    o.panel_chunk_k = cs.panel_chunk_k;
    o.retained_b = cs.retained_b;
    o.retained_k_outer = cs.retained_k_outer;
    // Plans from bytes alone: the same seed gives the same plans (measured rates are
    // covered by their own test).
    o.measure_rates = false;
    o.compute_flops = cs.flops;
    o.link_bytes_per_second = o.link_d2h_bytes_per_second = cs.link_bytes_per_second;
    o.link_duplex_bytes_per_second = 2 * cs.link_bytes_per_second;
    return o;
}

/// A case's operands with host views of them, and its options with the input C set
/// (c_in points into the object: not copyable).
struct Bound {
    Operands ops;
    HostMatrix a, b, c, c0;
    GemmOptions o;
    Bound(const Case& cs, std::mt19937_64& rng)
        : ops(cs, rng),
          a(ops.a.host()),
          b(ops.b.host()),
          c(ops.c.host()),
          c0(ops.c0.host()),
          o(options_for(cs)) {
        o.c_in = &c0;
        if (cs.device_readable) {
            for (HostMatrix* m : {&a, &b, &c, &c0}) m->set_device_readable(true);
        }
    }
    Bound(const Bound&) = delete;
    Bound& operator=(const Bound&) = delete;
};

/// Runs one case end to end and checks everything a run promises.
inline GemmReport run_case(Device& device, const Case& cs, std::mt19937_64& rng) {
    SCOPED_TRACE(describe(cs));
    Bound bound(cs, rng);
    auto& [ops, a, b, c, c0, o] = bound;
    o.budget_bytes = 1;  // replaced below; gemm_limits only reads the device here
    const outcore::tile::GemmProblem problem = outcore::ops::gemm_problem(a, b, c, o);
    const outcore::tile::PlanLimits limits = outcore::ops::gemm_limits(device, o);
    const std::uint64_t minimum = outcore::tile::gemm_minimum_budget(problem, limits);
    if (cs.budget_bytes != 0) {
        o.budget_bytes = cs.budget_bytes;
    } else {
        const auto operands = static_cast<double>(ops.a.rows * ops.a.cols + ops.b.rows * ops.b.cols) *
                                  outcore::dtype_bytes(cs.type) +
                              static_cast<double>(cs.m * cs.n) * outcore::dtype_bytes(ops.c.type);
        o.budget_bytes = std::max(minimum, static_cast<std::uint64_t>(operands * cs.operand_fraction));
        // gemm_minimum_budget is the best schedule's minimum; a forced schedule can need
        // more, so grow the derived budget until that schedule has a plan.
        for (int i = 0; cs.schedule && cs.tile_m == 0 && i < 64; ++i) {
            outcore::tile::PlanLimits forced = limits;
            forced.budget_bytes = o.budget_bytes;
            try {
                (void)outcore::tile::plan_gemm(problem, forced, *cs.schedule);
                break;
            } catch (const outcore::UsageError&) {
                o.budget_bytes *= 2;
            }
        }
    }
    std::vector<double> progress;
    o.progress = [&progress](double f) { progress.push_back(f); };
    // Every tile written once, by its index in c_grid() order (progress runs where this does).
    std::vector<int> written;
    o.tile_written = [&written](std::uint64_t t) {
        if (written.size() <= t) written.resize(t + 1, 0);
        ++written[t];
    };

    const GemmReport r = outcore::ops::gemm(device, a, b, c, o);
    const Matrix* c0_in = cs.beta != 0 ? &ops.c0 : nullptr;
    const double err =
        scaled_error(ops.c, reference(ops.a, ops.b, c0_in, o), reference(ops.a, ops.b, c0_in, o, true));
    EXPECT_LE(err, error_bound(cs.type, cs.compute, cs.k))
        << "plan " << outcore::tile::to_string(r.plan.schedule) << " tiles " << r.plan.tile_m << "x"
        << r.plan.tile_n << "x" << r.plan.tile_k;
    if (cs.schedule) {
        EXPECT_EQ(r.plan.schedule, *cs.schedule);
    }
    EXPECT_EQ(r.budget_bytes, o.budget_bytes);
    EXPECT_LE(r.peak_device_bytes, r.budget_bytes);
    EXPECT_EQ(r.peak_device_bytes, r.plan.device_bytes);
    EXPECT_EQ(r.bytes_moved, r.plan.bytes_moved);  // the planner's count is what moved
    EXPECT_GE(r.bytes_moved, r.lower_bound_bytes);
    EXPECT_GE(r.hidden_transfer_fraction, 0.0);
    EXPECT_LE(r.hidden_transfer_fraction, 1.0);
    EXPECT_GT(r.seconds, 0.0);
    // A split tile (two lanes, several k chunks) adds a GEMM per k chunk for its right
    // part: the columns past half the tile's, rounded up to whole 4-byte words of B.
    // The last tile's drain parts each add a GEMM to its last k chunk's.
    std::uint64_t calls = r.plan.kernel_calls + (r.drain_parts - 1);
    if (r.c_tiles_split) {
        const outcore::tile::TileGrid grid = r.plan.c_grid();
        const std::uint64_t step = std::max<std::uint64_t>(1, 4 / outcore::dtype_bytes(cs.type));
        for (std::uint64_t i = 0; i < grid.tile_rows(); ++i) {
            for (std::uint64_t j = 0; j < grid.tile_cols(); ++j) {
                const std::uint64_t cols = grid.tile(i, j).size.cols;
                if (cols > ((cols + 1) / 2 + step - 1) / step * step) calls += r.plan.k_chunks();
            }
        }
    }
    EXPECT_EQ(r.pipeline.compute_count, calls);
    EXPECT_EQ(progress.size(), r.plan.c_grid().count());
    EXPECT_EQ(written, std::vector<int>(r.plan.c_grid().count(), 1)) << "each tile written once";
    EXPECT_TRUE(std::is_sorted(progress.begin(), progress.end()));
    if (!progress.empty()) {
        EXPECT_DOUBLE_EQ(progress.back(), 1.0);
    }
    expect_nothing_held(device);
    return r;
}

}  // namespace outcore::gemm_test
