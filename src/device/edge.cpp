// edge.cpp — filling the pixels of a tile's area that lie outside the image
// (validate_edge_padding, pad_edges_host; see outcore/device/kernels.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/kernels.hpp"

namespace outcore {

namespace {

constexpr const char* kComponent = "filter";
constexpr std::uint32_t kMaxPixelBytes = 16;

/// The part [lo, hi) of [begin, begin + count) inside [0, size), in image coordinates.
struct Span1D {
    std::int64_t lo = 0, hi = 0;
};

Span1D inside_span(std::int64_t begin, std::uint64_t count, std::uint64_t size) {
    const std::int64_t end = begin + static_cast<std::int64_t>(count);
    return {.lo = std::max<std::int64_t>(begin, 0), .hi = std::min(end, static_cast<std::int64_t>(size))};
}

/// Every outside position of one axis reads zero or a position inside `span`.
void check_axis(const char* axis, std::int64_t begin, std::uint64_t count, std::uint64_t size, EdgeMode edge,
                Span1D span) {
    for (std::uint64_t i = 0; i < count; ++i) {
        const std::int64_t x = begin + static_cast<std::int64_t>(i);
        if (x >= span.lo && x < span.hi) {
            i = static_cast<std::uint64_t>(span.hi - begin) - 1;  // skip the inside run
            continue;
        }
        const std::int64_t s = edge_source_index(x, static_cast<std::int64_t>(size), edge);
        if (s >= 0 && (s < span.lo || s >= span.hi)) {
            throw UsageError(kComponent,
                             fmt::format("edge fill: {} {} reads {} {}, outside the area's part of the image "
                                         "[{}, {})",
                                         axis, x, axis, s, span.lo, span.hi));
        }
    }
}

}  // namespace

void validate_edge_padding(const EdgePadding& a) {
    if (a.pixel_bytes == 0 || a.pixel_bytes > kMaxPixelBytes) {
        throw UsageError(kComponent,
                         fmt::format("edge fill: {}-byte pixels (1..{})", a.pixel_bytes, kMaxPixelBytes));
    }
    if (a.rows == 0 || a.cols == 0 || a.image_rows == 0 || a.image_cols == 0) {
        throw UsageError(kComponent, fmt::format("edge fill: an empty area ({}x{}) or image ({}x{})", a.rows,
                                                 a.cols, a.image_rows, a.image_cols));
    }
    constexpr auto kMax = static_cast<std::uint64_t>(INT64_MAX / 4);
    if (a.rows > kMax || a.cols > kMax || a.image_rows > kMax || a.image_cols > kMax ||
        a.top < -static_cast<std::int64_t>(kMax) || a.top > static_cast<std::int64_t>(kMax) ||
        a.left < -static_cast<std::int64_t>(kMax) || a.left > static_cast<std::int64_t>(kMax)) {
        throw UsageError(kComponent, "edge fill: coordinates out of range");
    }
    const std::uint64_t row_bytes = checked_mul(a.cols, a.pixel_bytes, kComponent);
    if (a.row_stride < row_bytes) {
        throw UsageError(kComponent, fmt::format("edge fill: a row stride of {} bytes is below a row of {}",
                                                 a.row_stride, row_bytes));
    }
    const Span1D rows = inside_span(a.top, a.rows, a.image_rows);
    const Span1D cols = inside_span(a.left, a.cols, a.image_cols);
    if (rows.lo >= rows.hi || cols.lo >= cols.hi) {
        throw UsageError(kComponent,
                         fmt::format("edge fill: the {}x{} area at ({}, {}) does not overlap the {}x{} image",
                                     a.rows, a.cols, a.top, a.left, a.image_rows, a.image_cols));
    }
    check_axis("row", a.top, a.rows, a.image_rows, a.edge, rows);
    check_axis("column", a.left, a.cols, a.image_cols, a.edge, cols);
}

void pad_edges_host(std::byte* base, const EdgePadding& a) {
    validate_edge_padding(a);
    if (!a.crosses_edge()) return;
    const std::uint64_t pixel = a.pixel_bytes;
    const Span1D rows = inside_span(a.top, a.rows, a.image_rows);
    const Span1D cols = inside_span(a.left, a.cols, a.image_cols);
    auto row_at = [&](std::int64_t image_row) {
        return base + static_cast<std::uint64_t>(image_row - a.top) * a.row_stride;
    };
    // Columns outside the image, in the rows inside it: from the same row.
    if (cols.lo > a.left || cols.hi < a.left + static_cast<std::int64_t>(a.cols)) {
        for (std::int64_t y = rows.lo; y < rows.hi; ++y) {
            std::byte* row = row_at(y);
            for (std::uint64_t k = 0; k < a.cols; ++k) {
                const std::int64_t x = a.left + static_cast<std::int64_t>(k);
                if (x >= cols.lo && x < cols.hi) {
                    k = static_cast<std::uint64_t>(cols.hi - a.left) - 1;  // skip the inside run
                    continue;
                }
                const std::int64_t s = edge_source_index(x, static_cast<std::int64_t>(a.image_cols), a.edge);
                std::byte* to = row + k * pixel;
                if (s >= 0) {
                    std::memcpy(to, row + static_cast<std::uint64_t>(s - a.left) * pixel, pixel);
                } else {
                    std::memset(to, 0, pixel);
                }
            }
        }
    }
    // Rows outside the image: whole rows, copied from rows completed above.
    const std::uint64_t row_bytes = a.cols * pixel;
    for (std::uint64_t i = 0; i < a.rows; ++i) {
        const std::int64_t y = a.top + static_cast<std::int64_t>(i);
        if (y >= rows.lo && y < rows.hi) continue;
        std::byte* to = base + i * a.row_stride;
        const std::int64_t s = edge_source_index(y, static_cast<std::int64_t>(a.image_rows), a.edge);
        if (s >= 0) {
            std::memcpy(to, row_at(s), row_bytes);
        } else {
            std::memset(to, 0, row_bytes);
        }
    }
}

}  // namespace outcore
