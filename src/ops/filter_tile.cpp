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
    const std::int64_t s = edge_source_index(index, static_cast<std::int64_t>(size), edge);
    if (s < 0) return std::nullopt;
    return static_cast<std::uint64_t>(s);
}

void fill_halo(const ImageShape& image, const tile::TileRect& tile, std::uint32_t halo, EdgeMode edge,
               const RegionReader& read, std::byte* dst, std::uint64_t dst_stride_bytes) {
    const detail::HaloRegion r = detail::halo_region(image, tile, halo, edge, dst_stride_bytes);
    read(r.row_lo, r.row_hi - r.row_lo, r.col_lo, r.col_hi - r.col_lo, dst + r.inside_offset,
         dst_stride_bytes);
    pad_edges_host(dst, r.area);
}

namespace detail {

HaloRegion halo_region(const ImageShape& image, const tile::TileRect& tile, std::uint32_t halo, EdgeMode edge,
                       std::uint64_t stride_bytes) {
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
    const std::uint64_t area_cols = checked_add(tile.size.cols, 2ULL * halo, kComponent);
    const std::uint64_t area_row_bytes = checked_mul(area_cols, pixel, kComponent);
    if (stride_bytes < area_row_bytes) {
        throw UsageError(kComponent, fmt::format("staging stride {} is below a staging row of {} bytes",
                                                 stride_bytes, area_row_bytes));
    }
    HaloRegion r;
    r.area = EdgePadding{.edge = edge,
                         .pixel_bytes = static_cast<std::uint32_t>(pixel),
                         .rows = checked_add(tile.size.rows, 2ULL * halo, kComponent),
                         .cols = area_cols,
                         // validate() keeps these signed values exact.
                         .top = static_cast<std::int64_t>(tile.row) - halo,
                         .left = static_cast<std::int64_t>(tile.col) - halo,
                         .image_rows = rows,
                         .image_cols = cols,
                         .row_stride = stride_bytes};
    r.row_lo = tile.row >= halo ? tile.row - halo : 0;
    r.row_hi = std::min(rows, tile.row + tile.size.rows + halo);
    r.col_lo = tile.col >= halo ? tile.col - halo : 0;
    r.col_hi = std::min(cols, tile.col + tile.size.cols + halo);
    r.inside_offset =
        static_cast<std::uint64_t>(static_cast<std::int64_t>(r.row_lo) - r.area.top) * stride_bytes +
        static_cast<std::uint64_t>(static_cast<std::int64_t>(r.col_lo) - r.area.left) * pixel;
    return r;
}

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
