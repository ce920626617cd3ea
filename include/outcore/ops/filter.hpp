// outcore/ops/filter.hpp — what an image filter computes, backend-neutral: the filter
// (Gaussian, box, Sobel, a user kernel), its taps, its halo and what lies beyond the
// image's edge; how a tile's input is filled with its halo; and the in-core reference
// that tiled runs must equal bit for bit.
//
//   ops::FilterSpec spec = ops::FilterSpec::gaussian(8.0);      // radius 24, 49 f32 taps
//   spec.edge = ops::EdgeMode::Mirror;
//   ops::ImageShape img{.extent = {.rows = 20000, .cols = 20000}, .channels = 1, .type = DType::F32};
//   // per output tile: (rows + 2·halo) × (cols + 2·halo) input pixels
//   ops::fill_halo(img, tile_rect, spec.halo(), spec.edge, read_region, staging, staging_stride);
//   auto ref = ops::filter_whole_image_reference(*cpu_device, spec, img, pixels, DType::F32);
//
// Pixels are interleaved channels (1..4) of u8, u16 or f32. Filters are correlations
// ("valid" over the halo-padded input); Gaussian and box run as two separable passes
// (a horizontal pass to an f32 intermediate, then a vertical pass to the output
// type), Sobel and Conv as one 2-D pass. Kernels::filter (device/kernels.hpp) runs the
// passes; the CPU backend documents the exact arithmetic and integer rounding.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "outcore/device/dtype.hpp"
#include "outcore/device/edge.hpp"
#include "outcore/tile/grid.hpp"

namespace outcore {
class Device;
}

namespace outcore::ops {

enum class FilterKind : unsigned char {
    Gaussian,  ///< separable, taps exp(−x²/2σ²) normalized, radius ceil(3σ)
    Box,       ///< separable, 2r+1 equal taps 1/(2r+1)
    Sobel,     ///< gradient magnitude sqrt(gx² + gy²) of the 3×3 Sobel kernels (radius 1)
    Conv,      ///< a user kernel of odd side ≤ 15, applied as a correlation
};

/// What a filter reads beyond the image's edge (outcore/device/edge.hpp): the device
/// kernels that fill halos share it.
using EdgeMode = outcore::EdgeMode;

/// "gaussian", "box", "sobel", "conv".
[[nodiscard]] std::string_view to_string(FilterKind kind) noexcept;
/// "clamp", "mirror", "zero".
[[nodiscard]] std::string_view to_string(EdgeMode edge) noexcept;
/// Inverse of to_string (exact, lower case); nullopt for unknown text.
[[nodiscard]] std::optional<FilterKind> parse_filter_kind(std::string_view text) noexcept;
[[nodiscard]] std::optional<EdgeMode> parse_edge_mode(std::string_view text) noexcept;

/// Largest side of a Conv kernel (15×15, radius 7).
inline constexpr std::uint32_t kMaxConvSide = 15;
/// Largest radius of a separable filter (a Gaussian of σ up to about 341).
inline constexpr std::uint32_t kMaxSeparableRadius = 1024;

/// One filter, complete: the factories fill every field; validate() checks a
/// hand-made one.
struct FilterSpec {
    FilterKind kind = FilterKind::Gaussian;
    double sigma = 0.0;        ///< Gaussian only (0 otherwise)
    std::uint32_t radius = 0;  ///< the halo: pixels needed beyond each side of a tile
    /// f32 taps. Gaussian and Box: the 2r+1 one-dimensional taps (both passes use
    /// them); Conv: (2r+1)² weights, row-major, weight (dy, dx) multiplies the pixel
    /// dy − r rows down and dx − r columns right; Sobel: empty.
    std::vector<float> kernel;
    EdgeMode edge = EdgeMode::Clamp;

    /// Gaussian of standard deviation `sigma` pixels: radius ceil(3σ), taps
    /// exp(−(t−r)²/2σ²) for t = 0..2r, normalized by their sum in double, then each
    /// rounded to the nearest float. Each rounding is within 2^−24 of its tap
    /// (relative), so the exact sum of the float taps is within 2^−24 of 1.
    /// Throws UsageError unless 0 < σ and the radius ≤ kMaxSeparableRadius.
    [[nodiscard]] static FilterSpec gaussian(double sigma, EdgeMode edge = EdgeMode::Clamp);
    /// Box blur of side 2r+1: every tap is float(1/(2r+1)). Radius 0 is the identity.
    /// Throws UsageError for a radius over kMaxSeparableRadius.
    [[nodiscard]] static FilterSpec box(std::uint32_t radius, EdgeMode edge = EdgeMode::Clamp);
    /// Sobel gradient magnitude (radius 1, unnormalized kernels).
    [[nodiscard]] static FilterSpec sobel(EdgeMode edge = EdgeMode::Clamp);
    /// A user kernel of `size` × `size` weights, row-major. Throws UsageError unless
    /// size is odd and ≤ kMaxConvSide, kernel.size() == size², and every weight finite.
    [[nodiscard]] static FilterSpec conv(std::vector<float> kernel, std::uint32_t size,
                                         EdgeMode edge = EdgeMode::Clamp);

    /// Pixels of input needed beyond each side of an output tile (== radius).
    [[nodiscard]] std::uint32_t halo() const noexcept { return radius; }
    /// True for Gaussian and Box (two 1-D passes through an f32 intermediate).
    [[nodiscard]] bool separable() const noexcept {
        return kind == FilterKind::Gaussian || kind == FilterKind::Box;
    }
    /// Throws UsageError when the fields disagree (tap count vs radius, Sobel radius,
    /// limits, non-finite weights).
    void validate() const;
};

/// Reads a Conv kernel from a text file: whitespace-separated numbers (a '#' starts a
/// comment to the end of its line) whose count is the square of an odd side ≤ 15,
/// row-major. Throws IoError when the file cannot be read and a one-line UsageError
/// naming the file for anything else (not a number, not finite, wrong count, over
/// 64 KiB).
[[nodiscard]] FilterSpec load_kernel_file(const std::string& path, EdgeMode edge = EdgeMode::Clamp);

/// An image's geometry and pixel format.
struct ImageShape {
    tile::Extent extent{};       ///< rows × cols in pixels
    std::uint32_t channels = 1;  ///< interleaved, 1..4
    DType type = DType::F32;     ///< U8, U16 or F32

    [[nodiscard]] std::uint64_t pixel_bytes() const noexcept {
        return std::uint64_t{dtype_bytes(type)} * channels;
    }
    /// cols × pixel_bytes; UsageError on overflow.
    [[nodiscard]] std::uint64_t row_bytes() const;
    /// Throws UsageError for an empty extent, channels outside 1..4 or another type.
    void validate() const;
};

/// Which image pixel a pixel at `index` (possibly outside [0, size)) reads under
/// `edge`; nullopt when it reads zero (EdgeMode::Zero outside the image).
/// `size` must be ≥ 1.
[[nodiscard]] std::optional<std::uint64_t> edge_source(std::int64_t index, std::uint64_t size,
                                                       EdgeMode edge) noexcept;

/// Reads the image pixels of rows [row0, row0 + rows) × columns [col0, col0 + cols),
/// all inside the image, into `dst`: row i at dst + i·dst_stride_bytes, pixels packed.
/// How fill_halo gets data from any source (host memory, .npy, TIFF).
using RegionReader = std::function<void(std::uint64_t row0, std::uint64_t rows, std::uint64_t col0,
                                        std::uint64_t cols, std::byte* dst, std::uint64_t dst_stride_bytes)>;

/// Fills `dst` with the input of the output tile `tile`: (tile rows + 2·halo) ×
/// (tile cols + 2·halo) pixels, staging row i at dst + i·dst_stride_bytes, holding
/// image rows tile.row − halo + i and columns from tile.col − halo. The part inside the
/// image comes from one `read` call; the rest follows `edge` (copied from pixels of
/// that read, or zero). `dst` is host memory (pinned staging), not owned. Throws
/// UsageError for a tile outside the image or a stride below a staging row, and
/// whatever `read` throws.
void fill_halo(const ImageShape& image, const tile::TileRect& tile, std::uint32_t halo, EdgeMode edge,
               const RegionReader& read, std::byte* dst, std::uint64_t dst_stride_bytes);

/// Filters a whole host image in core with `device`'s kernels (pass a CPU device for
/// the reference the tiled executor must equal bit for bit): the image padded by the
/// halo through fill_halo, the same passes as a tile. `pixels` holds the image's rows
/// packed (rows × row_bytes()); returns the output rows packed, in `out_type`. Needs
/// device memory for the padded input, the intermediate and the output at once.
/// Throws UsageError for a bad spec, shape or type, OutOfMemory when the device cannot
/// hold them, and what the kernels throw.
[[nodiscard]] std::vector<std::byte> filter_whole_image_reference(Device& device, const FilterSpec& spec,
                                                                  const ImageShape& image,
                                                                  std::span<const std::byte> pixels,
                                                                  DType out_type);

}  // namespace outcore::ops
