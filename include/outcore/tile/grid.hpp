// outcore/tile/grid.hpp — the vocabulary of tiling: extents, tile shapes, grids, and
// what happens at the ragged edge.
//
//   TileGrid g({.rows = 1000, .cols = 700}, {.rows = 256, .cols = 256}, TailPolicy::Shrink);
//   g.count();                   // 4 × 3 = 12 tiles
//   TileRect t = g.tile(11);     // row 768.., col 512.., 232 × 188 (shrunk edge tile)
//
// Pure: no device calls, no allocation beyond the object itself.
#pragma once

#include <cstdint>
#include <string_view>

namespace outcore::tile {

/// A 2-D size in elements: rows × cols.
struct Extent {
    std::uint64_t rows = 0;
    std::uint64_t cols = 0;
    [[nodiscard]] std::uint64_t elements() const;  ///< rows*cols; UsageError on overflow
    friend bool operator==(const Extent&, const Extent&) = default;
};

/// The nominal shape of a tile (edge tiles may differ, per TailPolicy).
using TileShape = Extent;

/// How edge tiles are formed when the extent is not a multiple of the tile shape.
/// (After Halide's TailStrategy.)
enum class TailPolicy : unsigned char {
    /// Edge tiles are smaller. Every element is computed exactly once and nothing is
    /// padded; kernels must take ragged sizes. The default: GEMM (BLAS takes any m, n,
    /// k) and filters (halos are clamped per tile anyway) both handle it.
    Shrink,
    /// Edge tiles are shifted inwards to full size, overlapping their neighbour. Every
    /// kernel call sees the same shape (good for shaders with fixed workgroup tiling),
    /// but overlapping elements are computed and written twice: only for pure,
    /// write-once outputs, and it moves more bytes. Useless when the extent is smaller
    /// than one tile (then it degrades to Shrink).
    ShiftInwards,
};

/// "shrink" or "shift-inwards" (for plans printed by the CLI).
[[nodiscard]] std::string_view to_string(TailPolicy tail) noexcept;

/// One tile: where it starts and its actual size.
struct TileRect {
    std::uint64_t row = 0;
    std::uint64_t col = 0;
    Extent size{};
    friend bool operator==(const TileRect&, const TileRect&) = default;
};

/// A row-major grid of tiles covering an extent.
class TileGrid {
public:
    TileGrid() = default;
    /// Throws UsageError for a zero tile dimension.
    TileGrid(Extent extent, TileShape shape, TailPolicy tail = TailPolicy::Shrink);

    [[nodiscard]] Extent extent() const noexcept { return extent_; }
    [[nodiscard]] TileShape shape() const noexcept { return shape_; }
    [[nodiscard]] TailPolicy tail() const noexcept { return tail_; }
    [[nodiscard]] std::uint64_t tile_rows() const noexcept { return tile_rows_; }  ///< tiles down
    [[nodiscard]] std::uint64_t tile_cols() const noexcept { return tile_cols_; }  ///< tiles across
    [[nodiscard]] std::uint64_t count() const noexcept { return tile_rows_ * tile_cols_; }
    /// Tile number `index` in row-major order; UsageError if out of range.
    [[nodiscard]] TileRect tile(std::uint64_t index) const;
    [[nodiscard]] TileRect tile(std::uint64_t tile_row, std::uint64_t tile_col) const;

private:
    Extent extent_{};
    TileShape shape_{};
    TailPolicy tail_ = TailPolicy::Shrink;
    std::uint64_t tile_rows_ = 0;
    std::uint64_t tile_cols_ = 0;
};

/// Ceiling division; b > 0.
[[nodiscard]] constexpr std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) noexcept {
    return a / b + (a % b != 0 ? 1 : 0);
}

}  // namespace outcore::tile
