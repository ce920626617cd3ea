#include "outcore/tile/filter_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <optional>
#include <vector>

#include "outcore/core/error.hpp"
#include "plan_math.hpp"

namespace outcore::tile {

using detail::Count;

namespace {

constexpr std::uint32_t kOutputSlots = 2;
constexpr std::uint64_t kIntermediateSampleBytes = 4;  // f32 between the two passes
constexpr double kStripOverheadFactor = 2.0;           // strips may cost this much more halo

void validate(const FilterProblem& p) {
    if (p.image.rows == 0 || p.image.cols == 0) {
        throw UsageError("tile", fmt::format("filter: image {}x{} is empty", p.image.rows, p.image.cols));
    }
    if (p.channels < 1 || p.channels > 4) {
        throw UsageError("tile", fmt::format("filter: {} channels (1 to 4 are supported)", p.channels));
    }
    if (p.type != DType::U8 && p.type != DType::U16 && p.type != DType::F32) {
        throw UsageError("tile",
                         fmt::format("filter: {} pixels (u8, u16 and f32 are supported)", to_string(p.type)));
    }
}

std::string describe(const FilterProblem& p) {
    return fmt::format("filter on {}x{}x{} {} with halo {}", p.image.rows, p.image.cols, p.channels,
                       to_string(p.type), p.halo);
}

// One image axis cut into output tiles, with the input spans their halos make.
struct HaloAxis {
    detail::Axis out;
    std::uint64_t in_sum = 0;    // Σ input span over the tiles
    std::uint64_t in_max = 0;    // largest input span
    std::uint64_t in_first = 0;  // input span of tile 0
};

// Σ_{j=0}^{count-1} min(h, base + j·step), in closed form (count may be millions).
Count sum_min(std::uint64_t h, std::uint64_t base, std::uint64_t step, std::uint64_t count) {
    // j < below: base + j·step < h (unsaturated); the rest contribute h each.
    const std::uint64_t below = base >= h ? 0 : std::min(count, ceil_div(h - base, step));
    // below·(below−1)/2 without overflowing before the division: halve the even factor.
    const Count tri = below < 2        ? Count(0)
                      : below % 2 == 0 ? Count(below / 2) * (below - 1)
                                       : Count(below) * ((below - 1) / 2);
    return Count(below) * base + tri * step + Count(count - below) * h;
}

// Spans of the first count-1 tiles (all full size, starting at i·t) and of the last
// tile (ending at the extent). Each span is the tile plus min(h, room) on each side.
std::optional<HaloAxis> halo_axis(std::uint64_t extent, std::uint64_t tile, std::uint64_t halo,
                                  TailPolicy tail) {
    HaloAxis a;
    a.out = detail::make_axis(extent, tile, tail);
    const std::uint64_t t = a.out.tile;
    const std::uint64_t n = a.out.count;
    const std::uint64_t h = std::min(halo, extent);
    const std::uint64_t last_start = extent - a.out.last;
    const std::uint64_t tail_room = extent - (n - 1) * t;  // room right of tile n-2
    auto span = [&](std::uint64_t i) {
        if (i + 1 == n) return a.out.last + std::min(h, last_start);
        return t + std::min(h, i * t) + std::min(h, tail_room + (n - 2 - i) * t);
    };
    const Count left = sum_min(h, 0, t, n - 1);
    const Count right = sum_min(h, tail_room, t, n - 1);
    const Count in_sum = Count(a.out.sum) + left + right + std::min(h, last_start);
    if (!in_sum.ok()) return std::nullopt;
    a.in_sum = in_sum.value();
    a.in_first = span(0);
    // span(i) over the full tiles is concave (left halo grows, then the right one
    // shrinks): its maximum sits next to where either halo saturates.
    a.in_max = span(n - 1);
    if (n >= 2) {
        const std::uint64_t sat_left = ceil_div(h, t);
        const std::uint64_t sat_right = h > tail_room ? ceil_div(h - tail_room, t) : 0;
        const std::uint64_t last_full = n - 2;
        for (const std::uint64_t i : {std::uint64_t{0}, sat_left, sat_left - (sat_left > 0 ? 1 : 0),
                                      last_full - std::min(last_full, sat_right),
                                      last_full - std::min(last_full, sat_right + 1), last_full}) {
            a.in_max = std::max(a.in_max, span(std::min(i, last_full)));
        }
    }
    return a;
}

struct Context {
    const FilterProblem& problem;
    const PlanLimits& limits;
    std::uint64_t pixel_bytes = 0;
    detail::LinkModel link;
};

// Footprint of a candidate; false when a slot overflows or exceeds the largest binding.
bool fill_memory(const Context& cx, const HaloAxis& ar, const HaloAxis& ac, FilterPlan& out) {
    const std::uint64_t align = cx.limits.min_offset_alignment;
    const Count tiles = Count(ar.out.count) * ac.out.count;
    const Count in_slot = detail::align_count(Count(ar.in_max) * ac.in_max * cx.pixel_bytes, align);
    const Count out_slot = detail::align_count(Count(ar.out.tile) * ac.out.tile * cx.pixel_bytes, align);
    const Count mid =
        cx.problem.separable
            ? detail::align_count(
                  Count(ar.in_max) * ac.out.tile * cx.problem.channels * kIntermediateSampleBytes, align)
            : Count(0);
    const std::uint32_t depth = cx.limits.pipeline_depth;
    const std::uint32_t in_slots =
        tiles.ok() && tiles.value() < depth ? static_cast<std::uint32_t>(tiles.value()) : depth;
    const std::uint32_t out_slots = tiles.ok() && tiles.value() == 1 ? 1 : kOutputSlots;
    const Count device = Count(in_slots) * in_slot + Count(out_slots) * out_slot + mid;
    if (!device.ok()) return false;
    const std::uint64_t max_slot = cx.limits.max_buffer_bytes;
    if (in_slot.value() > max_slot || out_slot.value() > max_slot || mid.value() > max_slot) return false;
    out.depth = in_slots;
    out.output_slots = out_slots;
    out.input_slot_bytes = in_slot.value();
    out.output_slot_bytes = out_slot.value();
    out.intermediate_bytes = mid.value();
    out.device_bytes = device.value();
    return true;
}

bool fill_cost(const Context& cx, const HaloAxis& ar, const HaloAxis& ac, FilterPlan& out) {
    const Count up = Count(ar.in_sum) * ac.in_sum * cx.pixel_bytes;
    const Count down = Count(ar.out.sum) * ac.out.sum * cx.pixel_bytes;
    const Count moved = up + down;
    if (!moved.ok()) return false;
    out.bytes_to_device = up.value();
    out.bytes_to_host = down.value();
    out.bytes_moved = moved.value();
    out.transfer_seconds =
        cx.link.seconds(static_cast<double>(up.value()), static_cast<double>(down.value()));
    out.fill_seconds = cx.link.up_seconds(static_cast<double>(ar.in_first * ac.in_first * cx.pixel_bytes));
    out.drain_seconds = cx.link.down_seconds(static_cast<double>(ar.out.last * ac.out.last * cx.pixel_bytes));
    out.total_seconds = cx.link.known() ? out.transfer_seconds + out.fill_seconds + out.drain_seconds : 0.0;
    return true;
}

bool better(const FilterPlan& a, const FilterPlan& b, bool timed) {
    if (timed) {
        if (detail::clearly_less(a.total_seconds, b.total_seconds)) return true;
        if (detail::clearly_less(b.total_seconds, a.total_seconds)) return false;
    }
    if (a.bytes_moved != b.bytes_moved) return a.bytes_moved < b.bytes_moved;
    const double area_a = static_cast<double>(a.tile.rows) * static_cast<double>(a.tile.cols);
    const double area_b = static_cast<double>(b.tile.rows) * static_cast<double>(b.tile.cols);
    if (area_a != area_b) return area_a > area_b;
    return a.tile.cols > b.tile.cols;  // wider reads longer contiguous runs
}

struct SearchResult {
    std::optional<FilterPlan> best;
    std::optional<FilterPlan> best_strip;
    std::uint64_t minimum_device_bytes = std::numeric_limits<std::uint64_t>::max();
};

std::vector<HaloAxis> axes(std::uint64_t extent, const std::vector<std::uint64_t>& tiles, std::uint64_t halo,
                           TailPolicy tail) {
    std::vector<HaloAxis> out;
    for (const std::uint64_t t : tiles) {
        if (auto a = halo_axis(extent, t, halo, tail)) out.push_back(*a);
    }
    return out;
}

SearchResult search(const Context& cx) {
    const FilterProblem& p = cx.problem;
    const std::vector<HaloAxis> rows =
        axes(p.image.rows, detail::tile_candidates(p.image.rows), p.halo, p.tail);
    const std::vector<HaloAxis> cols =
        axes(p.image.cols,
             p.strips_only ? std::vector<std::uint64_t>{p.image.cols} : detail::tile_candidates(p.image.cols),
             p.halo, p.tail);
    const bool timed = cx.link.known();
    const double image_bytes = static_cast<double>(p.image.rows) * static_cast<double>(p.image.cols) *
                               static_cast<double>(cx.pixel_bytes);
    SearchResult r;
    FilterPlan c;
    c.problem = p;
    for (const HaloAxis& ar : rows) {
        for (const HaloAxis& ac : cols) {
            if (!fill_memory(cx, ar, ac, c)) continue;
            r.minimum_device_bytes = std::min(r.minimum_device_bytes, c.device_bytes);
            if (c.device_bytes > cx.limits.budget_bytes || !fill_cost(cx, ar, ac, c)) continue;
            c.tile = {ar.out.tile, ac.out.tile};
            c.row_strips = ac.out.tile == p.image.cols;
            c.halo_overhead_fraction =
                (static_cast<double>(c.bytes_moved) - 2.0 * image_bytes) / (2.0 * image_bytes);
            if (!r.best || better(c, *r.best, timed)) r.best = c;
            if (c.row_strips && (!r.best_strip || better(c, *r.best_strip, timed))) r.best_strip = c;
        }
    }
    return r;
}

Context make_context(const FilterProblem& problem, const PlanLimits& limits) {
    validate(problem);
    detail::validate_limits(limits, "filter");
    const std::uint64_t pixel = std::uint64_t{dtype_bytes(problem.type)} * problem.channels;
    // Both directions carry the whole image at least once: that must fit 64 bits.
    if (!(Count(problem.image.rows) * problem.image.cols * pixel * 2).ok()) {
        throw UsageError("tile", fmt::format("{}: the image exceeds 2^63 bytes", describe(problem)));
    }
    return Context{problem, limits, pixel, detail::link_model(limits)};
}

[[noreturn]] void throw_no_fit(const Context& cx, std::uint64_t minimum_device_bytes) {
    if (minimum_device_bytes == std::numeric_limits<std::uint64_t>::max()) {
        throw UsageError("tile", fmt::format("{}: no tiling fits max_buffer_bytes {}", describe(cx.problem),
                                             cx.limits.max_buffer_bytes));
    }
    detail::throw_below_minimum(describe(cx.problem), minimum_device_bytes, cx.limits.budget_bytes);
}

}  // namespace

TileRect FilterPlan::input_rect(const TileRect& o) const noexcept {
    const std::uint64_t h = problem.halo;
    auto grow = [h](std::uint64_t start, std::uint64_t size, std::uint64_t extent) {
        const std::uint64_t lo = start - std::min(start, h);
        const std::uint64_t end = start + size;  // ≤ extent
        const std::uint64_t hi = end + std::min(h, extent - end);
        return std::pair{lo, hi - lo};
    };
    const auto [row, rows] = grow(o.row, o.size.rows, problem.image.rows);
    const auto [col, cols] = grow(o.col, o.size.cols, problem.image.cols);
    return TileRect{row, col, Extent{rows, cols}};
}

FilterPlan plan_filter(const FilterProblem& problem, const PlanLimits& limits) {
    const Context cx = make_context(problem, limits);
    const SearchResult r = search(cx);
    if (!r.best) throw_no_fit(cx, r.minimum_device_bytes);
    // Strips read whole rows, which files store contiguously: worth some extra halo.
    const bool strips = r.best_strip && (problem.strips_only ||
                                         r.best_strip->halo_overhead_fraction <=
                                             kStripOverheadFactor * r.best->halo_overhead_fraction + 1e-12);
    FilterPlan plan = strips ? *r.best_strip : *r.best;
    plan.grid = TileGrid(problem.image, plan.tile, problem.tail);
    plan.lower_bound_bytes = 2 * problem.image.rows * problem.image.cols * cx.pixel_bytes;  // checked above
    return plan;
}

std::uint64_t filter_minimum_budget(const FilterProblem& problem, const PlanLimits& limits) {
    PlanLimits none = limits;
    none.budget_bytes = 0;  // nothing fits: the search only records footprints
    const Context cx = make_context(problem, none);
    const SearchResult r = search(cx);
    if (r.minimum_device_bytes == std::numeric_limits<std::uint64_t>::max())
        throw_no_fit(cx, r.minimum_device_bytes);
    return r.minimum_device_bytes;
}

}  // namespace outcore::tile
