// outcore/io/image.hpp — images for the filter pipeline: row bands in, row bands out.
//
// An image is rows × cols pixels of `channels` interleaved samples of one dtype. The
// filter pipeline reads halo'd row bands from an ImageSource and writes result bands,
// top to bottom, to an ImageSink.
//
//   auto in = io::open_image("in.tif");                  // .tif/.tiff (libtiff) or .npy
//   io::ImageInfo info = in->info();
//   std::vector<std::byte> band(64 * info.row_bytes());
//   in->read_rows(128, 64, band.data(), info.row_bytes());
//
//   auto out = io::create_image("out.tif", info, /*force=*/false);
//   out->write_rows(0, 64, band.data(), info.row_bytes());  ...  out->commit();
//
// Implementations: HostImage (here), NpyImageReader / NpyImageWriter (here: a 2-D
// array is one channel, 3-D (rows, cols, 1..4) is interleaved channels), TiffReader /
// TiffWriter (tiff.hpp).
//
// Thread safety: read_rows may be called from several threads (file readers
// serialise or use pread internally); write_rows calls must not overlap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "outcore/device/dtype.hpp"
#include "outcore/io/file.hpp"
#include "outcore/io/npy.hpp"

namespace outcore::io {

/// Shape and storage of an image.
struct ImageInfo {
    std::uint64_t rows = 0;      ///< height in pixels
    std::uint64_t cols = 0;      ///< width in pixels
    std::uint32_t channels = 1;  ///< interleaved samples per pixel, 1..4
    DType dtype = DType::F32;    ///< u8, u16 or f32 for TIFF; any for memory and .npy
    // How a file stores it (TIFF); informational for other sources.
    bool tiled = false;
    std::uint32_t tile_rows = 0;       ///< tile height when tiled
    std::uint32_t tile_cols = 0;       ///< tile width when tiled
    std::uint32_t rows_per_strip = 0;  ///< when striped
    bool bigtiff = false;              ///< 64-bit offsets (TIFF over 4 GiB)

    /// channels * dtype_bytes.
    [[nodiscard]] std::uint64_t pixel_bytes() const noexcept;
    /// cols * pixel_bytes; UsageError on overflow.
    [[nodiscard]] std::uint64_t row_bytes() const;
    /// rows * row_bytes; UsageError on overflow.
    [[nodiscard]] std::uint64_t bytes() const;
};

/// Image rows in host memory a device can address directly (pinned memory on a
/// discrete GPU): row r at data + r · row_stride_bytes. A source's is only read.
struct DirectImage {
    std::byte* data = nullptr;
    std::uint64_t row_stride_bytes = 0;
};

/// Reads row bands of an image.
class ImageSource {
public:
    virtual ~ImageSource() = default;
    [[nodiscard]] virtual const ImageInfo& info() const noexcept = 0;

    /// Copies rows [row0, row0 + rows), full width, into dst; row r lands at
    /// dst + (r - row0) * row_stride_bytes. UsageError for rows outside the image, a
    /// stride below row_bytes() or a null dst; IoError / UsageError from the file.
    void read_rows(std::uint64_t row0, std::uint64_t rows, std::byte* dst,
                   std::uint64_t row_stride_bytes) const;
    /// Copies the columns [col0, col0 + cols) of rows [row0, row0 + rows) into dst;
    /// row r lands at dst + (r - row0) * row_stride_bytes. UsageError for a region
    /// outside the image or a stride below cols pixels. By default it reads whole rows
    /// into a temporary band; in-memory sources copy the region directly.
    void read_region(std::uint64_t row0, std::uint64_t rows, std::uint64_t col0, std::uint64_t cols,
                     std::byte* dst, std::uint64_t row_stride_bytes) const;

    /// The image as host memory the device can read directly, if it is that (optional;
    /// default: none, and tiles go through read_region() and staging). Tiled filters
    /// then upload each tile's pixels straight from it and fill halos on the device.
    [[nodiscard]] virtual std::optional<DirectImage> direct_source() const { return std::nullopt; }

protected:
    ImageSource() = default;
    ImageSource(const ImageSource&) = default;
    ImageSource& operator=(const ImageSource&) = default;

private:
    /// Called by read_rows() with a checked, non-empty band.
    virtual void do_read_rows(std::uint64_t row0, std::uint64_t rows, std::byte* dst,
                              std::uint64_t row_stride_bytes) const = 0;
    /// Called by read_region() with a checked, non-empty region that is not whole rows.
    /// Default: do_read_rows into a temporary band, then copy the columns.
    virtual void do_read_region(std::uint64_t row0, std::uint64_t rows, std::uint64_t col0,
                                std::uint64_t cols, std::byte* dst, std::uint64_t row_stride_bytes) const;
};

/// Takes row bands of an image; commit() publishes it.
class ImageSink {
public:
    virtual ~ImageSink() = default;
    [[nodiscard]] virtual const ImageInfo& info() const noexcept = 0;

    /// Stores rows [row0, row0 + rows) from src (row stride row_stride_bytes). Write
    /// bands top to bottom: TiffWriter requires it (UsageError otherwise), the others
    /// accept any order. UsageError for rows outside the image, a short stride, a null
    /// src or a write after commit(); IoError from the file.
    void write_rows(std::uint64_t row0, std::uint64_t rows, const std::byte* src,
                    std::uint64_t row_stride_bytes);

    /// Publishes the image (file sinks rename their temporary file into place).
    /// UsageError when called twice or, for TiffWriter, before every row was written.
    void commit();
    [[nodiscard]] bool committed() const noexcept { return committed_; }

    /// The image as device-writable host memory, if it is that (optional; default:
    /// none, and bands go through write_rows()). A direct sink takes tiles in any order.
    [[nodiscard]] virtual std::optional<DirectImage> direct_sink() const { return std::nullopt; }

protected:
    ImageSink() = default;
    ImageSink(const ImageSink&) = default;
    ImageSink& operator=(const ImageSink&) = default;

private:
    virtual void do_write_rows(std::uint64_t row0, std::uint64_t rows, const std::byte* src,
                               std::uint64_t row_stride_bytes) = 0;
    /// Default: nothing to publish.
    virtual void do_commit() {}

    bool committed_ = false;
};

/// An image in host memory the caller owns and keeps alive; rows row_stride_bytes apart.
class HostImage final : public ImageSource, public ImageSink {
public:
    /// UsageError for channels outside 1..4, a null pointer with a non-empty shape, a
    /// stride below the row size or a size that overflows.
    HostImage(void* data, const ImageInfo& info, std::uint64_t row_stride_bytes);
    /// Read-only: write_rows throws UsageError.
    HostImage(const void* data, const ImageInfo& info, std::uint64_t row_stride_bytes);

    [[nodiscard]] const ImageInfo& info() const noexcept override { return info_; }
    [[nodiscard]] std::uint64_t row_stride_bytes() const noexcept { return stride_; }

    /// Declares that the device can address this memory directly (pinned host memory
    /// of that device): tiled filters then upload input tiles straight from it and
    /// download output tiles straight into it.
    void set_device_readable(bool readable) noexcept { device_readable_ = readable; }
    [[nodiscard]] std::optional<DirectImage> direct_source() const override;
    [[nodiscard]] std::optional<DirectImage> direct_sink() const override;

private:
    void do_read_rows(std::uint64_t row0, std::uint64_t rows, std::byte* dst,
                      std::uint64_t row_stride_bytes) const override;
    void do_read_region(std::uint64_t row0, std::uint64_t rows, std::uint64_t col0, std::uint64_t cols,
                        std::byte* dst, std::uint64_t row_stride_bytes) const override;
    void do_write_rows(std::uint64_t row0, std::uint64_t rows, const std::byte* src,
                       std::uint64_t row_stride_bytes) override;

    std::byte* data_ = nullptr;
    ImageInfo info_;
    std::uint64_t stride_ = 0;
    bool read_only_ = false;
    bool device_readable_ = false;
};

/// Reads an image stored as .npy: (rows, cols) is one channel, (rows, cols, c) with c
/// in 1..4 is c interleaved channels. C order; a 2-D Fortran-order array also works
/// (transposed band by band). pread only: safe from several threads.
class NpyImageReader final : public ImageSource {
public:
    /// UsageError for another rank, a channel count over 4, a 3-D Fortran-order array
    /// or a bad header; IoError when the file cannot be read.
    explicit NpyImageReader(const std::string& path);
    [[nodiscard]] const ImageInfo& info() const noexcept override { return info_; }
    [[nodiscard]] const NpyHeader& header() const noexcept { return header_; }

private:
    void do_read_rows(std::uint64_t row0, std::uint64_t rows, std::byte* dst,
                      std::uint64_t row_stride_bytes) const override;

    File file_;
    NpyHeader header_;
    ImageInfo info_;
};

/// Writes an image as a C-order .npy ((rows, cols) for one channel, else (rows, cols,
/// channels)) through a temporary file renamed by commit(). Rows in any order.
class NpyImageWriter final : public ImageSink {
public:
    /// UsageError for an output that exists without force, channels outside 1..4, or
    /// bf16; IoError when the file cannot be created.
    NpyImageWriter(const std::string& path, const ImageInfo& info, bool force);
    [[nodiscard]] const ImageInfo& info() const noexcept override { return info_; }

private:
    void do_write_rows(std::uint64_t row0, std::uint64_t rows, const std::byte* src,
                       std::uint64_t row_stride_bytes) override;
    void do_commit() override;

    AtomicOutput output_;
    ImageInfo info_;
    std::uint64_t data_offset_bytes_ = 0;
};

/// Opens an image by extension: .npy, or .tif/.tiff (UsageError when TIFF support was
/// not built). UsageError for another extension.
[[nodiscard]] std::unique_ptr<ImageSource> open_image(const std::string& path);

/// Creates an image sink by extension (.npy, .tif/.tiff; TIFF output is tiled).
[[nodiscard]] std::unique_ptr<ImageSink> create_image(const std::string& path, const ImageInfo& info,
                                                      bool force);

}  // namespace outcore::io
