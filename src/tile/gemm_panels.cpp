// gemm_panels.cpp — an A panel in chunks along k (chunk_a_panel), and two chunked panels
// instead of all of A in one (two_chunked_panels); docs/tiling.md, "The A panel in chunks"
// and "A shorter last panel".
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

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

std::optional<GemmPlan> two_chunked_panels(const GemmPlan& plan, const PlanLimits& limits) {
    const GemmProblem& p = plan.problem;
    if (plan.schedule != GemmSchedule::APanelResident || plan.tile_m < p.m || p.trans_a) return std::nullopt;
    const std::uint64_t tile_m = align_up(ceil_div(p.m, 2), 256);
    if (tile_m >= p.m) return std::nullopt;
    std::optional<GemmPlan> best;
    for (const std::uint64_t tile_n : kTwoPanelWidths) {
        if (tile_n > p.n) continue;
        GemmPlan c;
        try {
            c = chunk_a_panel(plan_gemm_fixed(p, limits, GemmSchedule::APanelResident, tile_m, tile_n, p.k),
                              limits);
        } catch (const UsageError&) {
            continue;  // does not fit
        }
        // The whole next panel ahead: no row change waits for the panel.
        if (c.a_chunk_k == 0 || 2 * std::uint64_t{c.prefetch_chunks} < c.a_slots) continue;
        if (!best || c.total_seconds < best->total_seconds) best = c;
    }
    return best;
}

}  // namespace outcore::tile
