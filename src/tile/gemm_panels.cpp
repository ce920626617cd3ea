// gemm_panels.cpp — an A panel in chunks along k (chunk_a_panel), narrower tiles where the
// planner's leave little room for that (narrower_chunked_panel), two chunked panels
// instead of all of A in one (two_chunked_panels), and chunked panels whose rows keep the
// B chunks they share (retain_b_chunks); docs/tiling.md, "The A panel in chunks", "A
// shorter last panel" and "A serpentine with retained B".
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <vector>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/tile/gemm_plan.hpp"
#include "plan_math.hpp"

namespace outcore::tile {

namespace {

/// `out` was made from `plan` with other GEMM calls (kernel_calls): their overhead follows
/// the count; the rest of the estimate stays the plan's.
void recount_calls(const GemmPlan& plan, GemmPlan& out) {
    if (plan.call_overhead_seconds <= 0 || plan.kernel_calls == 0) return;
    const double per_call = plan.call_overhead_seconds / static_cast<double>(plan.kernel_calls);
    out.call_overhead_seconds = per_call * static_cast<double>(out.kernel_calls);
    out.total_seconds += out.call_overhead_seconds - plan.call_overhead_seconds;
}

/// An a-panel plan over the whole k of two or more panels, A not transposed, its panel
/// whole: one chunk_a_panel may cut.
bool chunkable(const GemmPlan& plan) {
    const GemmProblem& p = plan.problem;
    return plan.schedule == GemmSchedule::APanelResident && plan.tile_k == p.k && plan.a_chunk_k == 0 &&
           plan.group == 1 && plan.tile_m < p.m && !p.trans_a;
}

}  // namespace

GemmPlan chunk_a_panel(const GemmPlan& plan, const PlanLimits& limits, std::uint64_t chunk_k) {
    const GemmProblem& p = plan.problem;
    const std::uint64_t w = gemm_input_bytes(p.type);
    const bool fits_shape = chunkable(plan);
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
    recount_calls(plan, out);
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

std::optional<GemmPlan> narrower_chunked_panel(const GemmPlan& plan, const PlanLimits& limits) {
    const GemmProblem& p = plan.problem;
    const bool fits_shape = chunkable(plan);
    if (!fits_shape) return std::nullopt;
    // Columns of the next panel a chunked plan holds ahead (chunks differ in width: a
    // chunk_a_panel plan takes 2048 where 4096 does not fit); none for a plan left whole.
    auto ahead = [](const GemmPlan& c) { return std::uint64_t{c.prefetch_chunks} * c.a_chunk_k; };
    const GemmPlan own = chunk_a_panel(plan, limits);
    const std::uint64_t own_ahead = ahead(own);
    if (own.a_chunk_k != 0 && own_ahead >= p.k) return std::nullopt;  // the whole next panel
    // The widths: multiples of kNarrowerWidthStep below the plan's, down to a third of it.
    const std::uint64_t narrowest = std::max(kNarrowerWidthStep, plan.tile_n / 3);
    std::vector<std::uint64_t> widths;
    for (std::uint64_t n = (plan.tile_n - 1) / kNarrowerWidthStep * kNarrowerWidthStep; n >= narrowest;
         n -= kNarrowerWidthStep)
        widths.push_back(n);
    if (limits.gemm_shapes_ahead && !widths.empty()) {
        std::vector<std::array<std::uint64_t, 3>> shapes;
        for (const std::uint64_t n : widths) shapes.push_back({plan.tile_m, n, p.k});
        limits.gemm_shapes_ahead(shapes);  // probed together, as the planner's own
    }
    std::optional<GemmPlan> best;
    for (const std::uint64_t n : widths) {
        GemmPlan c;
        try {
            c = chunk_a_panel(plan_gemm_fixed(p, limits, GemmSchedule::APanelResident, plan.tile_m, n, p.k),
                              limits);
        } catch (const UsageError&) {
            continue;  // does not fit
        }
        if (c.a_chunk_k == 0 || ahead(c) <= own_ahead ||
            c.total_seconds > plan.total_seconds * (1 + kNarrowerSlack))
            continue;
        if (!best || ahead(c) > ahead(*best) ||
            (ahead(c) == ahead(*best) && c.total_seconds < best->total_seconds))
            best = c;
    }
    return best;
}

GemmPlan retain_b_chunks(const GemmPlan& plan, const PlanLimits& limits, std::uint32_t retained,
                         double min_share) {
    const GemmProblem& p = plan.problem;
    const std::uint64_t w = gemm_input_bytes(p.type);
    const TileGrid grid = plan.c_grid();
    const std::uint64_t rows = grid.tile_rows();
    const std::uint64_t cols = grid.tile_cols();
    const bool fits_shape = plan.schedule == GemmSchedule::APanelResident && plan.tile_k == p.k &&
                            plan.group == 1 && rows >= 2 && cols >= 2 && !p.trans_a && !p.narrow_c &&
                            plan.retained_b == 0;
    if (!fits_shape) {
        if (retained == 0) return plan;
        throw UsageError("tile",
                         fmt::format("{}: only an a-panel plan over the whole k, of two or more panels "
                                     "and two or more tiles a row, A not transposed and C not 16-bit, "
                                     "retains B chunks",
                                     detail::describe_gemm(p)));
    }
    const std::uint64_t align = std::max<std::uint64_t>(limits.min_offset_alignment, 1);
    // The chunk: of k halved down to kMinPanelChunkK, the nearest to kPanelChunkK whose
    // slot is aligned and whose panel fits one binding.
    std::uint64_t ck = 0;
    auto distance = [](std::uint64_t c) {
        return std::abs(std::log2(static_cast<double>(c) / kPanelChunkK));
    };
    for (std::uint64_t c = p.k / 2; c >= kMinPanelChunkK && p.k % c == 0; c /= 2) {
        const std::uint64_t bytes = plan.tile_m * c * w;
        const bool usable = bytes % align == 0 && (p.k / c) * bytes <= limits.max_buffer_bytes;
        if (usable && (ck == 0 || distance(c) < distance(ck))) ck = c;
        if (c % 2 != 0) break;
    }
    const std::uint64_t chunks = ck == 0 ? 0 : p.k / ck;
    const std::uint64_t a_bytes = chunks * plan.tile_m * ck * w;
    const std::uint64_t streaming = std::max<std::uint32_t>(plan.b_slots, 2);
    // Device bytes with r retained chunks: the panel, r + the streaming B slots, and a C
    // slot for each tile of the group and the tile before it.
    auto device = [&](std::uint64_t r) {
        return a_bytes + (r + streaming) * plan.b_slot_bytes +
               std::max<std::uint64_t>(plan.c_slots, r + 1) * plan.c_slot_bytes;
    };
    std::uint64_t r = 0;
    if (ck != 0) {
        if (retained != 0) {
            r = 2 * retained <= cols && device(retained) <= limits.budget_bytes ? retained : 0;
        } else {
            for (r = cols / 2; r > 0 && device(r) > limits.budget_bytes; --r) {}
        }
    }
    if (r == 0 || (retained == 0 && r < kMinRetainedB)) {
        if (retained == 0) return plan;
        throw UsageError("tile",
                         fmt::format("{}: {} retained B chunks do not fit the budget with a whole panel in "
                                     "chunks, or a row has fewer than {} tiles, or no chunk of k is aligned",
                                     detail::describe_gemm(p), retained, 2 * retained));
    }
    GemmPlan out = plan;
    out.a_chunk_k = ck;
    out.acc_bytes = 0;
    out.a_slot_bytes = plan.tile_m * ck * w;
    out.a_slots = static_cast<std::uint32_t>(chunks);
    out.prefetch_chunks = 0;
    out.b_slots = static_cast<std::uint32_t>(r + streaming);
    out.c_slots = static_cast<std::uint32_t>(std::max<std::uint64_t>(plan.c_slots, r + 1));
    out.retained_b = static_cast<std::uint32_t>(r);
    out.device_bytes = device(r);
    // At each row change the last r columns the row walked are not uploaded again: an even
    // row's rightmost, an odd row's leftmost (the rows walk a serpentine).
    std::uint64_t kept = 0;
    for (std::uint64_t i = 0; i + 1 < rows; ++i) {
        for (std::uint64_t x = 0; x < r; ++x) {
            const std::uint64_t col = i % 2 == 0 ? cols - 1 - x : x;
            kept += grid.tile(i, col).size.cols * p.k * w;
        }
    }
    if (retained == 0 && static_cast<double>(kept) < min_share * static_cast<double>(plan.bytes_to_device))
        return plan;
    out.bytes_to_device -= kept;
    out.bytes_moved -= kept;
    std::uint32_t outer = static_cast<std::uint32_t>(chunks);
    // The group runs k outer while the new panel lands: chunk c lands about (c + 1)·u
    // after the panel starts (u: one chunk's upload) and the group computes a chunk in
    // r·t (t: one tile's GEMM over a chunk, at that shape's measured rate where the limits
    // have one, else the single rate, which is above what chunk-sized GEMMs reach and so
    // errs towards more chunks k outer). Where r·t > u the compute falls behind, and the
    // chunks after the first j = ⌈(chunks − 1)·u / (r·t)⌉ — by then all have landed — go
    // tile by tile.
    const double up = limits.gemm_copy_rate ? limits.gemm_copy_rate(GemmOperand::A, plan.tile_m, ck) : 0.0;
    const double up_rate = up > 0 ? up : limits.link_bytes_per_second;
    const double shape =
        limits.gemm_shape_flops ? limits.gemm_shape_flops(plan.tile_m, plan.tile_n, ck) : 0.0;
    const double flops = shape > 0 ? shape : limits.compute_flops;
    if (up_rate > 0 && flops > 0) {
        const double u = static_cast<double>(out.a_slot_bytes) / up_rate;
        const double t = 2.0 * static_cast<double>(plan.tile_m * plan.tile_n * ck) / flops;
        const double j = std::ceil(static_cast<double>(chunks - 1) * u / (static_cast<double>(r) * t));
        if (std::isfinite(j))
            outer = static_cast<std::uint32_t>(std::clamp(j, 1.0, static_cast<double>(chunks)));
    }
    // Counted from the plan's calls.
    out.kernel_calls = plan.kernel_calls;
    out.call_overhead_seconds = plan.call_overhead_seconds;
    out.total_seconds = plan.total_seconds;
    return with_retained_k_outer(out, outer);
}

GemmPlan with_retained_k_outer(const GemmPlan& plan, std::uint32_t outer) {
    if (plan.retained_b == 0 || plan.a_chunk_k == 0 || outer == 0 || outer > plan.a_slots) {
        throw UsageError("tile", fmt::format("{}: {} chunks k outer need a plan that retains B chunks and "
                                             "at most its {} panel chunks",
                                             detail::describe_gemm(plan.problem), outer, plan.a_slots));
    }
    const TileGrid grid = plan.c_grid();
    const std::uint64_t rows = grid.tile_rows();
    const std::uint64_t cols = grid.tile_cols();
    const std::uint64_t chunks = plan.a_slots;
    const std::uint64_t r = plan.retained_b;
    GemmPlan out = plan;
    out.retained_k_outer = outer;
    // Row 0's first tile runs a GEMM per chunk; the later rows' first r tiles one per
    // chunk k outer and one over the chunks left; a row's last tile one per chunk where
    // a next row follows; the others one over the panel.
    out.kernel_calls = 0;
    for (std::uint64_t i = 0; i < rows; ++i) {
        const std::uint64_t first = i == 0 ? 1 : r;
        const std::uint64_t first_calls = i == 0 ? chunks : r * (outer + (outer < chunks ? 1 : 0));
        const std::uint64_t last = i + 1 < rows ? chunks : 1;
        out.kernel_calls += first_calls + (cols - first - 1) + last;
    }
    recount_calls(plan, out);
    return out;
}

}  // namespace outcore::tile
