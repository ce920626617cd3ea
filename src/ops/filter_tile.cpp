// filter_tile.cpp — edges and halos, one tile as kernel launches, and the in-core
// reference built from the same pieces.
#include "filter_tile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/device.hpp"
#include "outcore/device/kernels.hpp"
#include "outcore/device/queue.hpp"

namespace outcore::ops {

namespace {

constexpr const char* kComponent = "filter";

void check_out_type(DType out_type) {
    if (out_type != DType::U8 && out_type != DType::U16 && out_type != DType::F32) {
        throw UsageError(kComponent, fmt::format("{} output: u8, u16 and f32 are supported",
                                                 outcore::to_string(out_type)));
    }
}

}  // namespace

std::optional<std::uint64_t> edge_source(std::int64_t index, std::uint64_t size, EdgeMode edge) noexcept {
    const auto n = static_cast<std::int64_t>(size);
    if (index >= 0 && index < n) return static_cast<std::uint64_t>(index);
    switch (edge) {
        case EdgeMode::Clamp: return index < 0 ? 0 : size - 1;
        case EdgeMode::Mirror: {
            if (n <= 1) return 0;
            // Reflect-101 is periodic with period 2(n − 1): fold into one period, then
            // reflect the second half back.
            const std::int64_t period = 2 * (n - 1);
            std::int64_t m = index % period;
            if (m < 0) m += period;
            if (m >= n) m = period - m;
            return static_cast<std::uint64_t>(m);
        }
        case EdgeMode::Zero: return std::nullopt;
    }
    return std::nullopt;
}

void fill_halo(const ImageShape& image, const tile::TileRect& tile, std::uint32_t halo, EdgeMode edge,
               const RegionReader& read, std::byte* dst, std::uint64_t dst_stride_bytes) {
    image.validate();
    const std::uint64_t rows = image.extent.rows;
    const std::uint64_t cols = image.extent.cols;
    if (tile.size.rows == 0 || tile.size.cols == 0 || tile.row >= rows || tile.col >= cols ||
        tile.size.rows > rows - tile.row || tile.size.cols > cols - tile.col) {
        throw UsageError(kComponent,
                         fmt::format("tile {}x{} at ({}, {}) is not inside the {}x{} image", tile.size.rows,
                                     tile.size.cols, tile.row, tile.col, rows, cols));
    }
    const std::uint64_t pixel = image.pixel_bytes();
    const std::uint64_t staging_rows = tile.size.rows + 2ULL * halo;
    const std::uint64_t staging_cols = tile.size.cols + 2ULL * halo;
    const std::uint64_t staging_row_bytes = checked_mul(staging_cols, pixel, kComponent);
    if (dst_stride_bytes < staging_row_bytes) {
        throw UsageError(kComponent, fmt::format("staging stride {} is below a staging row of {} bytes",
                                                 dst_stride_bytes, staging_row_bytes));
    }
    // Image coordinates of staging (0, 0); validate() keeps these signed values exact.
    const std::int64_t top = static_cast<std::int64_t>(tile.row) - halo;
    const std::int64_t left = static_cast<std::int64_t>(tile.col) - halo;
    const std::uint64_t row_lo = tile.row >= halo ? tile.row - halo : 0;
    const std::uint64_t row_hi = std::min(rows, tile.row + tile.size.rows + halo);
    const std::uint64_t col_lo = tile.col >= halo ? tile.col - halo : 0;
    const std::uint64_t col_hi = std::min(cols, tile.col + tile.size.cols + halo);
    auto staging_row = [&](std::uint64_t image_row) {
        return dst +
               (static_cast<std::int64_t>(image_row) - top) * static_cast<std::int64_t>(dst_stride_bytes);
    };
    const std::uint64_t inside_offset =
        static_cast<std::uint64_t>(static_cast<std::int64_t>(col_lo) - left) * pixel;
    read(row_lo, row_hi - row_lo, col_lo, col_hi - col_lo, staging_row(row_lo) + inside_offset,
         dst_stride_bytes);

    // Every pixel an edge maps to lies in the part just read: a staging position
    // outside the image on one side maps no further than its mirror image, which the
    // tile (≥ 1 pixel) and the halo on the other side cover. Checked anyway: a miss
    // would read bytes nobody wrote.
    auto source = [edge](std::int64_t index, std::uint64_t size, std::uint64_t lo, std::uint64_t hi) {
        const std::optional<std::uint64_t> s = edge_source(index, size, edge);
        if (s && (*s < lo || *s >= hi))
            throw InternalError(kComponent, "an edge pixel maps outside the read region");
        return s;
    };
    // Columns outside the image, in every row that was read.
    if (left < 0 || col_hi < static_cast<std::uint64_t>(left) + staging_cols) {
        for (std::uint64_t r = row_lo; r < row_hi; ++r) {
            std::byte* row = staging_row(r);
            for (std::uint64_t k = 0; k < staging_cols; ++k) {
                const std::int64_t x = left + static_cast<std::int64_t>(k);
                if (x >= static_cast<std::int64_t>(col_lo) && x < static_cast<std::int64_t>(col_hi)) {
                    k = col_hi - static_cast<std::uint64_t>(left) - 1;  // skip the inside run
                    continue;
                }
                const std::optional<std::uint64_t> s = source(x, cols, col_lo, col_hi);
                std::byte* to = row + k * pixel;
                if (s) {
                    std::memcpy(
                        to, row + static_cast<std::uint64_t>(static_cast<std::int64_t>(*s) - left) * pixel,
                        pixel);
                } else {
                    std::memset(to, 0, pixel);
                }
            }
        }
    }
    // Rows outside the image: whole staging rows, copied from complete inside rows.
    for (std::uint64_t i = 0; i < staging_rows; ++i) {
        const std::int64_t y = top + static_cast<std::int64_t>(i);
        if (y >= static_cast<std::int64_t>(row_lo) && y < static_cast<std::int64_t>(row_hi)) continue;
        std::byte* to = dst + i * dst_stride_bytes;
        const std::optional<std::uint64_t> s = source(y, rows, row_lo, row_hi);
        if (s) {
            std::memcpy(to, staging_row(*s), staging_row_bytes);
        } else {
            std::memset(to, 0, staging_row_bytes);
        }
    }
}

namespace detail {

std::uint64_t intermediate_row_bytes(std::uint32_t channels, std::uint64_t out_cols) {
    return checked_mul(checked_mul(out_cols, channels, kComponent), sizeof(float), kComponent);
}

std::uint64_t intermediate_bytes(const FilterSpec& spec, std::uint32_t channels, tile::Extent out) {
    if (!spec.separable()) return 0;
    const std::uint64_t rows = checked_add(out.rows, 2ULL * spec.halo(), kComponent);
    return checked_mul(rows, intermediate_row_bytes(channels, out.cols), kComponent);
}

KernelParams make_weights(Device& device, Queue& queue, const FilterSpec& spec) {
    if (spec.kernel.empty()) return {};
    return KernelParams::make(device, queue, std::as_bytes(std::span(spec.kernel)));
}

void enqueue_filter_tile(Kernels& kernels, Queue& queue, const FilterSpec& spec, const KernelParams& weights,
                         const ImageShape& image, DType out_type, tile::Extent out,
                         const FilterTileViews& views) {
    const std::uint32_t halo = spec.halo();
    if (spec.separable()) {
        kernels.filter(queue, FilterTileArgs{.op = FilterOp::SeparableRow,
                                             .channels = image.channels,
                                             .radius = halo,
                                             .in_type = image.type,
                                             .out_type = DType::F32,
                                             .out_rows = out.rows + 2ULL * halo,
                                             .out_cols = out.cols,
                                             .in = views.in,
                                             .in_row_stride = views.in_stride,
                                             .out = views.intermediate,
                                             .out_row_stride = views.intermediate_stride,
                                             .weights = &weights});
        kernels.filter(queue, FilterTileArgs{.op = FilterOp::SeparableColumn,
                                             .channels = image.channels,
                                             .radius = halo,
                                             .in_type = DType::F32,
                                             .out_type = out_type,
                                             .out_rows = out.rows,
                                             .out_cols = out.cols,
                                             .in = views.intermediate,
                                             .in_row_stride = views.intermediate_stride,
                                             .out = views.out,
                                             .out_row_stride = views.out_stride,
                                             .weights = &weights});
        return;
    }
    const bool sobel = spec.kind == FilterKind::Sobel;
    kernels.filter(queue, FilterTileArgs{.op = sobel ? FilterOp::SobelMagnitude : FilterOp::Conv2D,
                                         .channels = image.channels,
                                         .radius = halo,
                                         .in_type = image.type,
                                         .out_type = out_type,
                                         .out_rows = out.rows,
                                         .out_cols = out.cols,
                                         .in = views.in,
                                         .in_row_stride = views.in_stride,
                                         .out = views.out,
                                         .out_row_stride = views.out_stride,
                                         .weights = sobel ? nullptr : &weights});
}

}  // namespace detail

std::vector<std::byte> filter_whole_image_reference(Device& device, const FilterSpec& spec,
                                                    const ImageShape& image,
                                                    std::span<const std::byte> pixels, DType out_type) {
    spec.validate();
    image.validate();
    check_out_type(out_type);
    const std::uint64_t row_bytes = image.row_bytes();
    const std::uint64_t image_bytes = checked_mul(image.extent.rows, row_bytes, kComponent);
    if (pixels.size() != image_bytes) {
        throw UsageError(kComponent,
                         fmt::format("a {}x{} image needs {} bytes of pixels, not {}", image.extent.rows,
                                     image.extent.cols, image_bytes, pixels.size()));
    }
    const std::uint32_t halo = spec.halo();
    const tile::Extent padded{.rows = checked_add(image.extent.rows, 2ULL * halo, kComponent),
                              .cols = checked_add(image.extent.cols, 2ULL * halo, kComponent)};
    const std::uint64_t padded_row_bytes = checked_mul(padded.cols, image.pixel_bytes(), kComponent);
    const std::uint64_t out_row_bytes = checked_mul(
        checked_mul(image.extent.cols, image.channels, kComponent), dtype_bytes(out_type), kComponent);

    std::vector<std::byte> staging(
        static_cast<std::size_t>(checked_mul(padded.rows, padded_row_bytes, kComponent)));
    fill_halo(
        image, tile::TileRect{.row = 0, .col = 0, .size = image.extent}, halo, spec.edge,
        [&](std::uint64_t row0, std::uint64_t rows, std::uint64_t col0, std::uint64_t cols, std::byte* dst,
            std::uint64_t stride) {
            for (std::uint64_t r = 0; r < rows; ++r) {
                std::memcpy(dst + r * stride,
                            pixels.data() + (row0 + r) * row_bytes + col0 * image.pixel_bytes(),
                            static_cast<std::size_t>(cols * image.pixel_bytes()));
            }
        },
        staging.data(), padded_row_bytes);

    std::vector<std::byte> result(
        static_cast<std::size_t>(checked_mul(image.extent.rows, out_row_bytes, kComponent)));
    Block in =
        device.allocate({.bytes = staging.size(), .kind = MemoryKind::Device, .tag = "filter.reference"});
    const std::uint64_t mid_bytes = detail::intermediate_bytes(spec, image.channels, image.extent);
    Block mid;
    if (mid_bytes != 0) {
        mid = device.allocate({.bytes = mid_bytes, .kind = MemoryKind::Device, .tag = "filter.reference"});
    }
    Block out =
        device.allocate({.bytes = result.size(), .kind = MemoryKind::Device, .tag = "filter.reference"});
    KernelParams weights;
    // Declared after everything its work touches: destroying a queue drains it, so
    // an exception below never leaves queued work pointing at freed memory.
    const std::unique_ptr<Queue> queue = device.create_queue(QueueRole::General);
    weights = detail::make_weights(device, *queue, spec);
    queue->upload(staging.data(), BufferView(in));
    detail::enqueue_filter_tile(device.kernels(), *queue, spec, weights, image, out_type, image.extent,
                                detail::FilterTileViews{.in = BufferView(in),
                                                        .in_stride = padded_row_bytes,
                                                        .intermediate = mid ? BufferView(mid) : BufferView{},
                                                        .intermediate_stride = detail::intermediate_row_bytes(
                                                            image.channels, image.extent.cols),
                                                        .out = BufferView(out),
                                                        .out_stride = out_row_bytes});
    queue->download(BufferView(out), result.data());
    queue->synchronize();
    return result;
}

}  // namespace outcore::ops
