// outcore/tile/filter_plan.hpp — how an image filter with a halo is cut into tiles.
//
//   tile::FilterProblem p{.image = {32768, 32768}, .channels = 1, .type = DType::F32,
//                         .halo = 24, .separable = true};
//   tile::FilterPlan plan = tile::plan_filter(p, {.budget_bytes = kGiB});
//   for (std::uint64_t i = 0; i < plan.grid.count(); ++i) {
//       TileRect out = plan.grid.tile(i);
//       TileRect in = plan.input_rect(out);   // out grown by the halo, clamped to the image
//       ...                                   // upload `in`, filter, download `out`
//   }
//
// Pure: no device calls. Pixels are `channels` interleaved samples of `type`; the
// output has the input's type and shape. Each output tile reads its input grown by
// `halo` pixels on every side, clamped to the image: edge modes (clamp, mirror, zero)
// are applied on the device, so pixels outside the image never cross the link.
// Tiles as wide as the image ("row strips") read whole rows, which TIFF strips and
// .npy files store contiguously, and have no left or right halo.
#pragma once

#include <cstdint>

#include "outcore/device/dtype.hpp"
#include "outcore/tile/grid.hpp"
#include "outcore/tile/limits.hpp"

namespace outcore::tile {

struct FilterProblem {
    Extent image{};              ///< rows × cols, in pixels
    std::uint32_t channels = 1;  ///< 1..4 interleaved samples per pixel
    DType type = DType::F32;     ///< U8, U16 or F32
    std::uint32_t halo = 0;      ///< kernel radius in pixels (a 15×15 kernel has 7)
    /// Two passes (horizontal, then vertical): needs a device-only intermediate of
    /// (input rows) × (tile cols) samples, kept as 4-byte floats so integer images
    /// lose nothing between passes. One buffer, reused by every tile.
    bool separable = false;
    TailPolicy tail = TailPolicy::Shrink;  ///< edge tiles (filters are write-once: both are valid)
    bool strips_only = false;              ///< only full-width tiles (sources that read whole rows)
};

/// A chosen tiling and everything it will cost. Slot sizes are multiples of
/// min_offset_alignment, so slots laid back to back in one heap are all aligned.
struct FilterPlan {
    FilterProblem problem{};
    TileShape tile{};                      ///< nominal output tile (≤ the image)
    TileGrid grid{};                       ///< output tiles, row-major
    bool row_strips = false;               ///< tile.cols == image cols
    std::uint32_t depth = 0;               ///< input slots: min(limits.pipeline_depth, tiles)
    std::uint32_t output_slots = 0;        ///< min(2, tiles): one fills while the last downloads
    std::uint64_t input_slot_bytes = 0;    ///< the largest input_rect of any tile
    std::uint64_t intermediate_bytes = 0;  ///< separable only: one device-only buffer, else 0
    std::uint64_t output_slot_bytes = 0;
    std::uint64_t device_bytes = 0;       ///< depth·input + output_slots·output + intermediate ≤ budget
    std::uint64_t bytes_to_device = 0;    ///< Σ input_rect bytes over the tiles
    std::uint64_t bytes_to_host = 0;      ///< Σ output tile bytes (overlaps twice for ShiftInwards)
    std::uint64_t bytes_moved = 0;        ///< to device + to host
    std::uint64_t lower_bound_bytes = 0;  ///< the image in once and out once
    double halo_overhead_fraction = 0;    ///< (bytes_moved − lower bound) / lower bound
    /// Model estimates (0 when link_bytes_per_second is unknown): filters are taken
    /// as link-bound (a GPU filters far faster than PCIe carries pixels); total =
    /// transfer + fill (first input up) + drain (last output down).
    double transfer_seconds = 0, fill_seconds = 0, drain_seconds = 0, total_seconds = 0;

    /// The input an output tile reads: grown by the halo, clamped to the image.
    [[nodiscard]] TileRect input_rect(const TileRect& output_tile) const noexcept;
};

/// The best tiling within the budget: with the link rate unknown, the largest tiles
/// (fewest halo bytes); with it known, the shortest estimated time. Row strips are
/// preferred whenever their halo overhead is at most twice the best tile's.
/// Throws UsageError for an empty image, channels outside 1..4, a type other than
/// u8/u16/f32, bad limits, an image whose bytes overflow 64 bits, and a budget below
/// filter_minimum_budget() (the message states the minimum). Pure, thread-safe.
[[nodiscard]] FilterPlan plan_filter(const FilterProblem& problem, const PlanLimits& limits);

/// The smallest budget plan_filter accepts (limits.budget_bytes is ignored).
[[nodiscard]] std::uint64_t filter_minimum_budget(const FilterProblem& problem, const PlanLimits& limits);

}  // namespace outcore::tile
