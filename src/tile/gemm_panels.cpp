// gemm_panels.cpp — an A panel in chunks along k (chunk_a_panel) and a shorter last
// panel where the last row would leave the link idle (balance_a_panels); docs/tiling.md,
// "The A panel in chunks" and "A shorter last panel".
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/tile/gemm_plan.hpp"
#include "plan_math.hpp"

namespace outcore::tile {

GemmPlan chunk_a_panel(const GemmPlan& plan, const PlanLimits& limits, std::uint64_t chunk_k) {
    const GemmProblem& p = plan.problem;
    const std::uint64_t w = gemm_input_bytes(p.type);
    const bool fits_shape = plan.schedule == GemmSchedule::APanelResident && plan.tile_k == p.k &&
                            plan.a_chunk_k == 0 && plan.group == 1 && plan.tile_m < p.m && !p.trans_a;
    if (!fits_shape) {
        if (chunk_k == 0) return plan;
        throw UsageError("tile", fmt::format("{}: only an a-panel plan over the whole k, of two or more "
                                             "panels, A not transposed, has its panel in chunks",
                                             detail::describe_gemm(p)));
    }
    const std::uint64_t align = std::max<std::uint64_t>(limits.min_offset_alignment, 1);
    // A 16-bit C: the per-chunk sums of a row's first and last tiles in one f32 tile.
    const std::uint64_t acc = p.narrow_c ? align_up(plan.tile_m * plan.tile_n * 4, align) : 0;
    // What the plan holds besides its A panel ring.
    const std::uint64_t others = plan.device_bytes - std::uint64_t{plan.a_slots} * plan.a_slot_bytes + acc;
    struct Cut {
        std::uint64_t chunk_k = 0, chunks = 0, prefetch = 0, bytes = 0;
    };
    // A chunk of ck columns: its slots and prefetch, or nothing where it does not fit.
    auto cut = [&](std::uint64_t ck) -> std::optional<Cut> {
        if (ck == 0 || ck >= p.k || p.k % ck != 0 || acc > limits.max_buffer_bytes) return std::nullopt;
        const std::uint64_t bytes = plan.tile_m * ck * w;
        if (bytes % align != 0 || others > limits.budget_bytes) return std::nullopt;
        const std::uint64_t chunks = p.k / ck;
        const std::uint64_t slots = std::min((limits.budget_bytes - others) / bytes, 2 * chunks);
        if (slots < chunks || slots * bytes > limits.max_buffer_bytes) return std::nullopt;
        return Cut{ck, chunks, slots - chunks, bytes};
    };
    std::optional<Cut> best;
    if (chunk_k != 0) {
        best = cut(chunk_k);
        if (!best) {
            throw UsageError("tile",
                             fmt::format("{}: A chunks of {} columns do not divide k, are not aligned "
                                         "or do not fit the budget with a whole panel",
                                         detail::describe_gemm(p), chunk_k));
        }
    } else {
        // k halved until kMinPanelChunkK; of those that prefetch anything, the nearest to
        // kPanelChunkK (in factors of two; ties: the smaller).
        auto distance = [](std::uint64_t ck) {
            double d = std::log2(static_cast<double>(ck) / static_cast<double>(kPanelChunkK));
            return d < 0 ? -d + 0.5 : d;
        };
        for (std::uint64_t ck = p.k / 2; ck >= kMinPanelChunkK && p.k % ck == 0; ck /= 2) {
            const std::optional<Cut> c = cut(ck);
            if (c && c->prefetch > 0 && (!best || distance(ck) < distance(best->chunk_k))) best = c;
            if (ck % 2 != 0) break;
        }
        if (!best) return plan;
    }
    GemmPlan out = plan;
    out.a_chunk_k = best->chunk_k;
    out.acc_bytes = acc;
    out.a_slot_bytes = best->bytes;
    out.a_slots = static_cast<std::uint32_t>(best->chunks + best->prefetch);
    out.prefetch_chunks = static_cast<std::uint32_t>(best->prefetch);
    out.device_bytes = others + std::uint64_t{out.a_slots} * out.a_slot_bytes;
    // A row's first tile runs a GEMM per chunk, and so does its last where a next panel
    // takes its chunks' regions; the others one over the panel (one contiguous matrix).
    const std::uint64_t rows = ceil_div(p.m, plan.tile_m);
    const std::uint64_t cols = ceil_div(p.n, plan.tile_n);
    out.kernel_calls = 0;
    for (std::uint64_t r = 0; r < rows; ++r) {
        const std::uint64_t per_chunk = cols > 1 && r + 1 < rows ? 2 : 1;
        out.kernel_calls += per_chunk * best->chunks + (cols - per_chunk);
    }
    // The calls' overhead follows their count; the rest of the estimate is the plan's.
    if (plan.call_overhead_seconds > 0) {
        const double per_call = plan.call_overhead_seconds / static_cast<double>(plan.kernel_calls);
        out.call_overhead_seconds = per_call * static_cast<double>(out.kernel_calls);
        out.total_seconds += out.call_overhead_seconds - plan.call_overhead_seconds;
    }
    return out;
}

namespace {

/// Whether chunk_a_panel can take the plan: an a-panel over the whole k, two or more
/// panels, A not transposed.
bool chunkable(const GemmPlan& plan) {
    const GemmProblem& p = plan.problem;
    return plan.schedule == GemmSchedule::APanelResident && plan.tile_k == p.k && plan.a_chunk_k == 0 &&
           plan.group == 1 && plan.tile_m < p.m && !p.trans_a;
}

}  // namespace

double panel_rows_seconds(const GemmPlan& plan, const PlanLimits& limits) {
    const detail::LinkModel link = detail::link_model(limits);
    if (!chunkable(plan) && plan.a_chunk_k == 0) return 0;
    if (limits.compute_flops <= 0 || !link.known()) return 0;
    const GemmProblem& p = plan.problem;
    if (plan.schedule != GemmSchedule::APanelResident || plan.tile_k != p.k || plan.tile_m >= p.m ||
        plan.tail != TailPolicy::Shrink) {
        return 0;
    }
    const double w = gemm_input_bytes(p.type);
    const double wc = gemm_c_bytes(p);
    const auto k = static_cast<double>(p.k);
    const auto n = static_cast<double>(p.n);
    const auto tn = static_cast<double>(plan.tile_n);
    const std::uint64_t rows = ceil_div(p.m, plan.tile_m);
    const std::uint64_t last_rows = p.m - (rows - 1) * plan.tile_m;
    const std::uint64_t ck = plan.a_chunk_k != 0 ? plan.a_chunk_k : p.k;
    // Copies at the equal panels' run length (a panel a few thousand rows taller or
    // shorter goes up at nearly the same rate: no copy probe beyond the equal panels');
    // GEMMs at each row's own shape (cuBLAS runs 19456- or 20480-row tf32 GEMMs 15–35 %
    // slower than 16384-row ones: BENCHMARKS.md, ninth session).
    const std::uint64_t even = std::min(p.m, align_up(ceil_div(p.m, rows), 256));
    auto up = [&](GemmOperand op, std::uint64_t inner, double bytes) {
        double rate = limits.gemm_copy_rate
                          ? limits.gemm_copy_rate(op, op == GemmOperand::B ? plan.tile_n : even, inner)
                          : 0.0;
        if (!(rate > 0)) rate = link.up_bytes_per_second;
        return bytes / rate;
    };
    auto flops_for = [&](std::uint64_t height_rows) {
        double f = limits.gemm_shape_flops ? limits.gemm_shape_flops(height_rows, plan.tile_n, p.k) : 0.0;
        return f > 0 && std::isfinite(f) ? f : limits.compute_flops;
    };
    const double flops_full = flops_for(plan.tile_m);
    const double flops_last = last_rows == plan.tile_m ? flops_full : flops_for(last_rows);
    auto height = [&](std::uint64_t r) {
        return static_cast<double>(r + 1 < rows ? plan.tile_m : last_rows);
    };
    // Before the first GEMM: the first chunk of A, the first B and (β ≠ 0) the first C tile.
    const double first_chunk = up(GemmOperand::A, ck, height(0) * static_cast<double>(ck) * w);
    const double first_b = up(GemmOperand::B, p.k, k * tn * w);
    const double first_c = p.beta_nonzero ? up(GemmOperand::C, plan.tile_n, height(0) * tn * wc) : 0.0;
    double total = first_chunk + first_b + first_c;
    for (std::uint64_t r = 0; r < rows; ++r) {
        // A row's uploads: all of B, C with β ≠ 0, the next panel, and the first row its own.
        double link_s = up(GemmOperand::B, p.k, k * n * w);
        if (p.beta_nonzero) link_s += up(GemmOperand::C, plan.tile_n, height(r) * n * wc);
        if (r == 0) link_s += up(GemmOperand::A, ck, height(0) * k * w) - first_chunk - first_b - first_c;
        if (r + 1 < rows) link_s += up(GemmOperand::A, ck, height(r + 1) * k * w);
        const double compute_s = 2 * height(r) * n * k / (r + 1 < rows ? flops_full : flops_last);
        total += std::max(link_s, compute_s);
    }
    // The last C tile comes down after its GEMM (all of it: a plan of equal panels that
    // drains it in column parts hides some, a bias of well under kPanelBalanceGain), and
    // every GEMM call costs kernel_call_seconds.
    const double last_cols = static_cast<double>(p.n - (ceil_div(p.n, plan.tile_n) - 1) * plan.tile_n);
    return total + link.down_seconds(height(rows - 1) * last_cols * wc) +
           static_cast<double>(plan.kernel_calls) * limits.kernel_call_seconds;
}

GemmPlan balance_a_panels(const GemmPlan& plan, const PlanLimits& limits) {
    const GemmPlan chunked = chunk_a_panel(plan, limits);
    const double now = panel_rows_seconds(chunked, limits);
    // A shifted-in last panel would be as high as the others, overlapping the one before.
    if (chunked.a_chunk_k == 0 || !(now > 0) || plan.tail != TailPolicy::Shrink) return chunked;
    const GemmProblem& p = plan.problem;
    const std::uint64_t rows = ceil_div(p.m, plan.tile_m);
    std::optional<GemmPlan> best;
    double best_s = 0;
    // Taller panels, as many (the last one shorter, at least kMinLastPanelRows), at the
    // plan's width or half of it (not below kMinPanelTileN), in steps of kPanelRowStep rows.
    std::vector<std::uint64_t> widths{plan.tile_n};
    if (plan.tile_n / 2 >= kMinPanelTileN) widths.push_back(plan.tile_n / 2);
    for (const std::uint64_t tn : widths) {
        for (std::uint64_t tm = align_up(plan.tile_m + 1, kPanelRowStep);
             ceil_div(p.m, tm) == rows && p.m - (rows - 1) * tm >= kMinLastPanelRows; tm += kPanelRowStep) {
            GemmPlan c;
            try {
                c = chunk_a_panel(plan_gemm_fixed(p, limits, GemmSchedule::APanelResident, tm, tn, p.k),
                                  limits);
            } catch (const UsageError&) {
                break;  // no taller panel fits either
            }
            if (c.a_chunk_k == 0) break;  // nor prefetches anything
            const double s = panel_rows_seconds(c, limits);
            if (s > 0 && (!best || s < best_s)) best = c, best_s = s;
        }
    }
    return best && best_s < now * (1 - kPanelBalanceGain) ? *best : chunked;
}

}  // namespace outcore::tile
