#include "outcore/io/image.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string_view>
#include <vector>

#include "io/transpose.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/io/tiff.hpp"

namespace outcore::io {
namespace {

constexpr std::string_view kComponent = "io";

// Returns false for an empty band.
bool check_band(const ImageInfo& info, std::uint64_t row0, std::uint64_t rows, const void* buffer,
                std::uint64_t row_stride_bytes) {
    const std::uint64_t end = checked_add(row0, rows, kComponent);
    if (end > info.rows) {
        throw UsageError(kComponent,
                         fmt::format("rows [{}, {}) are outside the image's {} rows", row0, end, info.rows));
    }
    if (rows == 0 || info.cols == 0) return false;
    if (buffer == nullptr) throw UsageError(kComponent, "row band buffer is null");
    const std::uint64_t row_bytes = info.row_bytes();
    if (row_stride_bytes < row_bytes) {
        throw UsageError(kComponent, fmt::format("row stride {} bytes is below the row size {} bytes",
                                                 row_stride_bytes, row_bytes));
    }
    (void)checked_add(checked_mul(rows - 1, row_stride_bytes, kComponent), row_bytes, kComponent);
    return true;
}

std::string lower_extension(const std::string& path) {
    const std::size_t dot = path.find_last_of('.');
    const std::size_t slash = path.find_last_of('/');
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return {};
    std::string ext = path.substr(dot + 1);
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    return ext;
}

[[noreturn]] void unknown_extension(const std::string& path) {
    throw UsageError(kComponent,
                     fmt::format("'{}': unknown image format (use .tif, .tiff or .npy)", printable(path)));
}

}  // namespace

std::uint64_t ImageInfo::pixel_bytes() const noexcept {
    return static_cast<std::uint64_t>(channels) * dtype_bytes(dtype);
}

std::uint64_t ImageInfo::row_bytes() const { return checked_mul(cols, pixel_bytes(), "image"); }

std::uint64_t ImageInfo::bytes() const { return checked_mul(rows, row_bytes(), "image"); }

void ImageSource::read_rows(std::uint64_t row0, std::uint64_t rows, std::byte* dst,
                            std::uint64_t row_stride_bytes) const {
    if (check_band(info(), row0, rows, dst, row_stride_bytes)) {
        do_read_rows(row0, rows, dst, row_stride_bytes);
    }
}

void ImageSource::read_region(std::uint64_t row0, std::uint64_t rows, std::uint64_t col0, std::uint64_t cols,
                              std::byte* dst, std::uint64_t row_stride_bytes) const {
    const ImageInfo& in = info();
    const std::uint64_t col_end = checked_add(col0, cols, kComponent);
    if (col_end > in.cols) {
        throw UsageError(kComponent, fmt::format("columns [{}, {}) are outside the image's {} columns", col0,
                                                 col_end, in.cols));
    }
    if (col0 == 0 && cols == in.cols) {
        read_rows(row0, rows, dst, row_stride_bytes);
        return;
    }
    // The region's own shape: an image of `cols` columns, for the band checks.
    ImageInfo region = in;
    region.cols = cols;
    region.rows = in.rows;
    if (cols == 0 || !check_band(region, row0, rows, dst, row_stride_bytes)) return;
    do_read_region(row0, rows, col0, cols, dst, row_stride_bytes);
}

void ImageSource::do_read_region(std::uint64_t row0, std::uint64_t rows, std::uint64_t col0,
                                 std::uint64_t cols, std::byte* dst, std::uint64_t row_stride_bytes) const {
    const std::uint64_t row_bytes = info().row_bytes();
    const std::uint64_t pixel = info().pixel_bytes();
    std::vector<std::byte> band(static_cast<std::size_t>(checked_mul(rows, row_bytes, kComponent)));
    do_read_rows(row0, rows, band.data(), row_bytes);
    detail::copy_runs(band.data() + col0 * pixel, row_bytes, dst, row_stride_bytes, cols * pixel, rows);
}

void ImageSink::write_rows(std::uint64_t row0, std::uint64_t rows, const std::byte* src,
                           std::uint64_t row_stride_bytes) {
    if (committed_) throw UsageError(kComponent, "write to an image sink after commit()");
    if (check_band(info(), row0, rows, src, row_stride_bytes)) {
        do_write_rows(row0, rows, src, row_stride_bytes);
    }
}

void ImageSink::commit() {
    if (committed_) throw UsageError(kComponent, "image sink committed twice");
    do_commit();
    committed_ = true;
}

HostImage::HostImage(void* data, const ImageInfo& info, std::uint64_t row_stride_bytes)
    : data_(static_cast<std::byte*>(data)), info_(info), stride_(row_stride_bytes) {
    if (info.channels < 1 || info.channels > 4) {
        throw UsageError(kComponent, fmt::format("host image has {} channels (1 to 4)", info.channels));
    }
    const std::uint64_t row_bytes = info.row_bytes();
    if (info.rows == 0 || info.cols == 0) return;
    if (data == nullptr) throw UsageError(kComponent, "host image has a null pointer");
    if (row_stride_bytes < row_bytes) {
        throw UsageError(kComponent,
                         fmt::format("host image row stride {} bytes is below the row size {} bytes",
                                     row_stride_bytes, row_bytes));
    }
    (void)checked_add(checked_mul(info.rows - 1, row_stride_bytes, kComponent), row_bytes, kComponent);
}

HostImage::HostImage(const void* data, const ImageInfo& info, std::uint64_t row_stride_bytes)
    // Only written through after read_only_ is checked.
    : HostImage(const_cast<void*>(data), info, row_stride_bytes) {
    read_only_ = true;
}

void HostImage::do_read_rows(std::uint64_t row0, std::uint64_t rows, std::byte* dst,
                             std::uint64_t row_stride_bytes) const {
    detail::copy_runs(data_ + row0 * stride_, stride_, dst, row_stride_bytes, info_.row_bytes(), rows);
}

void HostImage::do_read_region(std::uint64_t row0, std::uint64_t rows, std::uint64_t col0, std::uint64_t cols,
                               std::byte* dst, std::uint64_t row_stride_bytes) const {
    const std::uint64_t pixel = info_.pixel_bytes();
    detail::copy_runs(data_ + row0 * stride_ + col0 * pixel, stride_, dst, row_stride_bytes, cols * pixel,
                      rows);
}

void HostImage::do_write_rows(std::uint64_t row0, std::uint64_t rows, const std::byte* src,
                              std::uint64_t row_stride_bytes) {
    if (read_only_) throw UsageError(kComponent, "write to a read-only host image");
    detail::copy_runs(src, row_stride_bytes, data_ + row0 * stride_, stride_, info_.row_bytes(), rows);
}

std::unique_ptr<ImageSource> open_image(const std::string& path) {
    const std::string ext = lower_extension(path);
    if (ext == "npy") return std::make_unique<NpyImageReader>(path);
    if (ext == "tif" || ext == "tiff") return std::make_unique<TiffReader>(path);
    unknown_extension(path);
}

std::unique_ptr<ImageSink> create_image(const std::string& path, const ImageInfo& info, bool force) {
    const std::string ext = lower_extension(path);
    if (ext == "npy") return std::make_unique<NpyImageWriter>(path, info, force);
    if (ext == "tif" || ext == "tiff") return std::make_unique<TiffWriter>(path, info, force);
    unknown_extension(path);
}

std::optional<DirectImage> HostImage::direct_source() const {
    if (!device_readable_ || data_ == nullptr) return std::nullopt;
    return DirectImage{.data = data_, .row_stride_bytes = stride_};
}

std::optional<DirectImage> HostImage::direct_sink() const {
    if (!device_readable_ || read_only_ || committed() || data_ == nullptr) return std::nullopt;
    return DirectImage{.data = data_, .row_stride_bytes = stride_};
}

}  // namespace outcore::io
