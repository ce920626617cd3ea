// outcore/io/tiff.hpp — TIFF images through libtiff, in row bands, in bounded memory.
//
// Reads striped and tiled TIFF and BigTIFF with 8- or 16-bit unsigned or 32-bit float
// samples, 1 to 4 interleaved channels, any compression libtiff decodes; writes tiled
// TIFF, BigTIFF when the data need it. libtiff is optional at build time: without it
// tiff_supported() is false and every constructor here throws UsageError.
//
//   if (io::tiff_supported()) {
//       io::TiffReader in("in.tif");                     // decodes only the strips it needs
//       in.read_rows(0, 64, band, in.info().row_bytes());
//       io::TiffWriter out("out.tif", in.info(), /*force=*/false);
//       out.write_rows(0, 64, band, in.info().row_bytes());  ...  out.commit();
//   }
//
// Memory: a reader holds a small cache of decoded strips or tile rows (a tile row is
// every tile across one tile height), at most max(2 of them, cache_bytes), so reading
// halo'd row bands top to bottom decodes each strip about once and never holds the
// whole image. A writer holds one tile row of output. Malformed or unsupported files
// are a one-line UsageError carrying libtiff's own message (libtiff never prints).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "outcore/core/size.hpp"
#include "outcore/io/image.hpp"

namespace outcore::io {

/// True when outcore was built with libtiff (io::TiffReader and io::TiffWriter work).
[[nodiscard]] bool tiff_supported() noexcept;

/// Tuning for TiffReader.
struct TiffReadOptions {
    /// Bytes of decoded strips / tile rows kept for reuse; at least two units are
    /// always kept, and at most 4096.
    std::uint64_t cache_bytes = 16 * kMiB;
    /// Largest single strip / tile row the reader will decode (a whole-image strip of
    /// a large compressed file is refused: re-save it tiled). libtiff's own
    /// allocations are capped at twice this plus 64 MiB.
    std::uint64_t max_unit_bytes = kGiB;
};

/// Reads a TIFF's first image. Thread-safe: read_rows calls are serialised.
class TiffReader final : public ImageSource {
public:
    /// Opens and checks `path`. IoError when it cannot be opened; UsageError when it
    /// is not a TIFF, or an unsupported one (sample format, bit depth, channel count,
    /// planar separate, subsampled YCbCr), or support was not built.
    explicit TiffReader(const std::string& path, const TiffReadOptions& options = {});
    /// Reads a TIFF held in memory; `bytes` must outlive the reader. `name` appears in
    /// messages. Throws as above.
    TiffReader(std::span<const std::byte> bytes, const std::string& name,
               const TiffReadOptions& options = {});
    ~TiffReader() override;
    TiffReader(const TiffReader&) = delete;
    TiffReader& operator=(const TiffReader&) = delete;

    [[nodiscard]] const ImageInfo& info() const noexcept override;
    /// Strips or tile rows decoded so far (a reused cached one is not counted).
    [[nodiscard]] std::uint64_t units_decoded() const noexcept;
    /// Rows per strip, or the tile height: the reader's decoding granule.
    [[nodiscard]] std::uint64_t unit_rows() const noexcept;

private:
    void do_read_rows(std::uint64_t row0, std::uint64_t rows, std::byte* dst,
                      std::uint64_t row_stride_bytes) const override;

    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// Compression of written tiles.
enum class TiffCompression : unsigned char { None, Lzw, Deflate };

/// Tuning for TiffWriter.
struct TiffWriteOptions {
    TiffCompression compression = TiffCompression::None;
};

/// Writes a tiled TIFF through a temporary file renamed by commit(). The tile size is
/// info.tile_rows × info.tile_cols (0 means 256; multiples of 16 up to 4096). BigTIFF
/// when info.bigtiff is set or the data could exceed 4 GiB. Rows must arrive top to
/// bottom, in bands of any height. Not thread-safe.
class TiffWriter final : public ImageSink {
public:
    /// UsageError for an output that exists without force, an unsupported dtype or
    /// channel count, a bad tile size, a dimension over 2^32-1, or support not built;
    /// IoError when the file cannot be created.
    TiffWriter(const std::string& path, const ImageInfo& info, bool force,
               const TiffWriteOptions& options = {});
    /// Without commit(), removes the temporary file.
    ~TiffWriter() override;
    TiffWriter(const TiffWriter&) = delete;
    TiffWriter& operator=(const TiffWriter&) = delete;

    /// The image as it will be written (tiled, tile size and bigtiff filled in).
    [[nodiscard]] const ImageInfo& info() const noexcept override;

private:
    void do_write_rows(std::uint64_t row0, std::uint64_t rows, const std::byte* src,
                       std::uint64_t row_stride_bytes) override;
    void do_commit() override;

    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace outcore::io
