// filter_tile.hpp — one output tile of a FilterSpec as kernel launches (private to
// ops/): the in-core reference and the tiled executor both go through here, so a
// tile and the whole image run exactly the same passes.
#pragma once

#include <cstdint>

#include "outcore/device/block.hpp"
#include "outcore/device/dtype.hpp"
#include "outcore/device/edge.hpp"
#include "outcore/device/kernel_params.hpp"
#include "outcore/ops/filter.hpp"
#include "outcore/tile/grid.hpp"

namespace outcore {
class Device;
class Kernels;
class Queue;
}  // namespace outcore

namespace outcore::ops::detail {

/// Where one tile's input — the tile and its halo, an `EdgePadding` area — meets the
/// image: image rows [row_lo, row_hi) × columns [col_lo, col_hi) are read into the area
/// at byte `inside_offset` (rows `area.row_stride` apart); the rest is edge fill.
struct HaloRegion {
    EdgePadding area;
    std::uint64_t row_lo = 0, row_hi = 0, col_lo = 0, col_hi = 0;
    std::uint64_t inside_offset = 0;
};
/// UsageError for a tile outside the image or a stride below an area row.
[[nodiscard]] HaloRegion halo_region(const ImageShape& image, const tile::TileRect& tile, std::uint32_t halo,
                                     EdgeMode edge, std::uint64_t stride_bytes);

/// Bytes of one row of the f32 intermediate of a separable tile `out_cols` wide.
[[nodiscard]] std::uint64_t intermediate_row_bytes(std::uint32_t channels, std::uint64_t out_cols);
/// Bytes of the f32 intermediate of a separable tile: (rows + 2·halo) rows of
/// intermediate_row_bytes; 0 for one-pass filters. UsageError on overflow.
[[nodiscard]] std::uint64_t intermediate_bytes(const FilterSpec& spec, std::uint32_t channels,
                                               tile::Extent out);

/// The spec's taps for `device`: inline, or a buffer uploaded on `queue` (the
/// setBytes rule). Empty for Sobel. Must outlive every tile enqueued with it.
[[nodiscard]] KernelParams make_weights(Device& device, Queue& queue, const FilterSpec& spec);

/// Where one tile's data lie on the device. Strides are in bytes.
struct FilterTileViews {
    BufferView in;  ///< (out rows + 2·halo) × (out cols + 2·halo) pixels of the image type
    std::uint64_t in_stride = 0;
    BufferView intermediate;  ///< separable only: see intermediate_bytes
    std::uint64_t intermediate_stride = 0;
    BufferView out;  ///< out rows × out cols pixels of out_type
    std::uint64_t out_stride = 0;
};

/// Enqueues the passes of `spec` for one output tile of size `out` on `queue`, in
/// order (a separable filter's row pass writes the intermediate, its column pass reads
/// it). Throws UsageError for views that do not fit and what the kernels throw.
void enqueue_filter_tile(Kernels& kernels, Queue& queue, const FilterSpec& spec, const KernelParams& weights,
                         const ImageShape& image, DType out_type, tile::Extent out,
                         const FilterTileViews& views);

}  // namespace outcore::ops::detail
