#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "io/npy_block.hpp"
#include "io/npy_file.hpp"
#include "io/transpose.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/io/image.hpp"

namespace outcore::io {
namespace {

constexpr std::string_view kComponent = "npy";
// Staging for strided or transposed bands, as in npy_block.cpp.
constexpr std::uint64_t kBounceBytes = 4 * kMiB;

ImageInfo image_info_of(const NpyHeader& header, const std::string& path) {
    const std::size_t rank = header.shape.size();
    const bool channel_ok = rank == 3 && header.shape[2] >= 1 && header.shape[2] <= 4;
    if (rank != 2 && !channel_ok) {
        throw UsageError(kComponent,
                         fmt::format("'{}': expected an image of shape (rows, cols) or (rows, cols, "
                                     "channels) with 1 to 4 channels, got shape {}",
                                     printable(path), detail::npy_shape_text(header)));
    }
    if (rank == 3 && header.fortran_order) {
        throw UsageError(
            kComponent,
            fmt::format("'{}': a 3-D image must be in C order (np.ascontiguousarray)", printable(path)));
    }
    ImageInfo info;
    info.rows = header.shape[0];
    info.cols = header.shape[1];
    info.channels = rank == 3 ? static_cast<std::uint32_t>(header.shape[2]) : 1;
    info.dtype = header.dtype;
    return info;
}

}  // namespace

NpyImageReader::NpyImageReader(const std::string& path)
    : file_(File::open_read(path, kComponent)),
      header_(detail::read_npy_header(file_)),
      info_(image_info_of(header_, path)) {}

void NpyImageReader::do_read_rows(std::uint64_t row0, std::uint64_t rows, std::byte* dst,
                                  std::uint64_t row_stride_bytes) const {
    const std::uint64_t row_bytes = info_.row_bytes();
    const std::uint64_t w = dtype_bytes(info_.dtype);
    if (!header_.fortran_order) {
        const std::uint64_t offset = header_.data_offset_bytes + row0 * row_bytes;
        if (row_stride_bytes == row_bytes) {
            file_.read_exact(dst, rows * row_bytes, offset);
            return;
        }
        const std::uint64_t batch = std::clamp<std::uint64_t>(kBounceBytes / row_bytes, 1, rows);
        const auto buf = std::make_unique_for_overwrite<std::byte[]>(batch * row_bytes);
        for (std::uint64_t r = 0; r < rows; r += batch) {
            const std::uint64_t n = std::min(batch, rows - r);
            file_.read_exact(buf.get(), n * row_bytes, offset + r * row_bytes);
            detail::copy_runs(buf.get(), row_bytes, dst + r * row_stride_bytes, row_stride_bytes, row_bytes,
                              n);
        }
        return;
    }
    // A Fortran-order 2-D array stores columns: a band is a column-major block,
    // transposed here into rows, a bounded chunk at a time.
    const detail::NpyLayout layout{header_.data_offset_bytes, info_.rows, info_.cols,
                                   static_cast<std::uint32_t>(w), true};
    const std::uint64_t batch = std::clamp<std::uint64_t>(kBounceBytes / row_bytes, 1, rows);
    const auto block = std::make_unique_for_overwrite<std::byte[]>(2 * batch * row_bytes);
    std::byte* packed = block.get() + batch * row_bytes;
    for (std::uint64_t r = 0; r < rows; r += batch) {
        const std::uint64_t n = std::min(batch, rows - r);
        detail::npy_read_block(file_, layout, row0 + r, 0, n, info_.cols, block.get(), n);
        detail::transpose(block.get(), n, packed, info_.cols, info_.cols, n, static_cast<std::uint32_t>(w));
        detail::copy_runs(packed, row_bytes, dst + r * row_stride_bytes, row_stride_bytes, row_bytes, n);
    }
}

NpyImageWriter::NpyImageWriter(const std::string& path, const ImageInfo& info, bool force)
    : output_(path, force, kComponent), info_(info) {
    if (info.channels < 1 || info.channels > 4) {
        throw UsageError(kComponent,
                         fmt::format("'{}': {} channels (1 to 4)", printable(path), info.channels));
    }
    std::vector<std::uint64_t> shape = {info.rows, info.cols};
    if (info.channels > 1) shape.push_back(info.channels);
    const std::vector<std::byte> bytes = format_npy_header(shape, info.dtype, NpyOrder::C);
    const NpyHeader header = parse_npy_header(bytes, path);
    data_offset_bytes_ = header.data_offset_bytes;
    info_.tiled = false;
    info_.tile_rows = info_.tile_cols = info_.rows_per_strip = 0;
    info_.bigtiff = false;
    output_.file().truncate(header.data_offset_bytes + header.data_bytes);
    output_.file().write_exact(bytes.data(), bytes.size(), 0);
}

void NpyImageWriter::do_write_rows(std::uint64_t row0, std::uint64_t rows, const std::byte* src,
                                   std::uint64_t row_stride_bytes) {
    const std::uint64_t row_bytes = info_.row_bytes();
    const std::uint64_t offset = data_offset_bytes_ + row0 * row_bytes;
    if (row_stride_bytes == row_bytes) {
        output_.file().write_exact(src, rows * row_bytes, offset);
        return;
    }
    for (std::uint64_t r = 0; r < rows; ++r) {
        output_.file().write_exact(src + r * row_stride_bytes, row_bytes, offset + r * row_bytes);
    }
}

void NpyImageWriter::do_commit() { output_.commit(); }

}  // namespace outcore::io
