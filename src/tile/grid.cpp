#include "outcore/tile/grid.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"

namespace outcore::tile {

std::uint64_t Extent::elements() const { return checked_mul(rows, cols, "tile"); }

TileGrid::TileGrid(Extent extent, TileShape shape, TailPolicy tail)
    : extent_(extent), shape_(shape), tail_(tail) {
    if (shape.rows == 0 || shape.cols == 0) {
        throw UsageError("tile",
                         fmt::format("tile shape {}x{} has a zero dimension", shape.rows, shape.cols));
    }
    tile_rows_ = ceil_div(extent.rows, shape.rows);
    tile_cols_ = ceil_div(extent.cols, shape.cols);
    // count() is noexcept: refuse here a grid whose tile count would wrap.
    (void)checked_mul(tile_rows_, tile_cols_, "tile");
}

TileRect TileGrid::tile(std::uint64_t index) const {
    if (tile_cols_ == 0 || index >= count()) {
        throw UsageError("tile", fmt::format("tile index {} out of range ({} tiles)", index, count()));
    }
    return tile(index / tile_cols_, index % tile_cols_);
}

namespace {
// Start and size of tile `i` along one axis of length `extent` cut into `nominal`.
struct Span {
    std::uint64_t start;
    std::uint64_t size;
};
Span span_of(std::uint64_t i, std::uint64_t extent, std::uint64_t nominal, TailPolicy tail) {
    const std::uint64_t start = i * nominal;  // i < ceil(extent/nominal): no overflow
    const std::uint64_t size = std::min(nominal, extent - start);
    if (tail == TailPolicy::ShiftInwards && size < nominal && extent >= nominal) {
        // Full-size tile moved back so it ends at the edge, overlapping its neighbour.
        return {extent - nominal, nominal};
    }
    return {start, size};
}
}  // namespace

TileRect TileGrid::tile(std::uint64_t tile_row, std::uint64_t tile_col) const {
    if (tile_row >= tile_rows_ || tile_col >= tile_cols_) {
        throw UsageError("tile", fmt::format("tile ({}, {}) out of range ({} x {} tiles)", tile_row, tile_col,
                                             tile_rows_, tile_cols_));
    }
    const Span r = span_of(tile_row, extent_.rows, shape_.rows, tail_);
    const Span c = span_of(tile_col, extent_.cols, shape_.cols, tail_);
    return TileRect{r.start, c.start, Extent{r.size, c.size}};
}

std::string_view to_string(TailPolicy tail) noexcept {
    switch (tail) {
        case TailPolicy::Shrink: return "shrink";
        case TailPolicy::ShiftInwards: return "shift-inwards";
    }
    return "?";
}

}  // namespace outcore::tile
