// outcore/io/npy.hpp — NumPy .npy files as matrix sources and sinks, tile by tile.
//
// The header (format versions 1.0, 2.0 and 3.0) is parsed and checked up front; data
// are then read with pread one block at a time, so a file larger than RAM is the
// normal case. Outputs go to a temporary file renamed into place by commit().
//
//   io::NpyMatrixReader a("A.npy");                         // 2-D, '<f4' '<f8' '<f2' '<u2' '|u1'
//   a.read(0, 0, 256, 256, staging, 256);                   // column-major tile, C or Fortran file
//
//   io::NpyMatrixWriter c("C.npy", m, n, DType::F32, /*force=*/false);
//   c.write(i, j, tile_m, tile_n, bytes, ld);  ...  c.commit();
//
//   io::save_npy("small.npy", bytes, shape, DType::F64, /*force=*/true);   // tests, demos
//   io::NpyArray back = io::load_npy("small.npy");
//
// Errors are one line: UsageError "[npy] 'A.npy': unsupported dtype '<i4' (...)" for a
// bad file, IoError for a failed system call. Thread safety: as matrix.hpp says.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "outcore/core/size.hpp"
#include "outcore/device/dtype.hpp"
#include "outcore/io/file.hpp"
#include "outcore/io/matrix.hpp"

namespace outcore::io {

/// Headers longer than this are rejected (NumPy itself refuses more than 10 000 bytes
/// by default); it bounds what a reader allocates for a hostile file.
inline constexpr std::uint64_t kNpyMaxHeaderBytes = kMiB;
/// The fixed prefix: magic (6), version (2), header length (2 or 4).
inline constexpr std::uint64_t kNpyPrefixBytes = 12;

/// What a .npy header says.
struct NpyHeader {
    std::uint8_t major_version = 1;  ///< 1, 2 or 3
    std::uint8_t minor_version = 0;
    DType dtype = DType::F32;
    bool fortran_order = false;           ///< column-major data
    std::vector<std::uint64_t> shape;     ///< () for a scalar
    std::uint64_t data_offset_bytes = 0;  ///< where the data begin (a multiple of 16 when written by NumPy)
    std::uint64_t element_count = 0;      ///< product of shape (1 for a scalar)
    std::uint64_t data_bytes = 0;         ///< element_count * dtype_bytes(dtype)
};

/// Order of a written file's data: C (row-major, NumPy's default) or Fortran.
enum class NpyOrder : unsigned char { C, Fortran };

/// Parses a header from the first bytes of a file (at least data_offset_bytes of them
/// for success). Pure; never reads past `bytes`. UsageError naming `name` and the
/// problem: truncated, bad magic or version, malformed dict, missing or extra keys,
/// unsupported dtype or byte order, a shape whose element count or byte size
/// overflows, or data that would end beyond the largest file offset.
[[nodiscard]] NpyHeader parse_npy_header(std::span<const std::byte> bytes,
                                         std::string_view name = "<memory>");

/// Bytes of header parse_npy_header needs: kNpyPrefixBytes plus the declared length,
/// from the first kNpyPrefixBytes bytes. UsageError for a bad prefix or a header over
/// kNpyMaxHeaderBytes.
[[nodiscard]] std::uint64_t npy_header_bytes(std::span<const std::byte> prefix,
                                             std::string_view name = "<memory>");

/// UsageError "'name': data truncated ..." when a file of `file_bytes` is shorter than
/// the header declares. Longer files are fine (NumPy ignores trailing bytes).
void check_npy_file_size(const NpyHeader& header, std::uint64_t file_bytes, std::string_view name);

/// A complete header for `shape` (version 1.0, or 2.0 when it would not fit), padded
/// so the data start on a 64-byte boundary. UsageError for a dtype .npy cannot carry
/// (bf16) or a shape that overflows.
[[nodiscard]] std::vector<std::byte> format_npy_header(std::span<const std::uint64_t> shape, DType dtype,
                                                       NpyOrder order = NpyOrder::C);

/// The .npy descr of a dtype ("<f4", "|u1"); UsageError for bf16.
[[nodiscard]] std::string_view npy_descr(DType dtype);

/// Reads blocks of a 2-D .npy file (C or Fortran order) without loading it.
class NpyMatrixReader final : public MatrixSource {
public:
    /// Opens and checks `path`. IoError if it cannot be opened or read; UsageError if
    /// the header is bad, the array is not 2-D, or the file is shorter than declared.
    explicit NpyMatrixReader(const std::string& path);

    [[nodiscard]] std::uint64_t rows() const noexcept override { return rows_; }
    [[nodiscard]] std::uint64_t cols() const noexcept override { return cols_; }
    [[nodiscard]] DType dtype() const noexcept override { return header_.dtype; }
    [[nodiscard]] const NpyHeader& header() const noexcept { return header_; }
    [[nodiscard]] const std::string& path() const noexcept { return file_.path(); }
    [[nodiscard]] bool row_major() const noexcept override { return !header_.fortran_order; }

private:
    void do_read(std::uint64_t row0, std::uint64_t col0, std::uint64_t rows, std::uint64_t cols,
                 std::byte* dst, std::uint64_t ld_elements) const override;

    File file_;
    NpyHeader header_;
    std::uint64_t rows_ = 0;
    std::uint64_t cols_ = 0;
};

/// Writes a 2-D .npy file block by block into a temporary file; commit() renames it to
/// `path`. Blocks never written read back as zero (the file is sized up front,
/// sparse where the filesystem allows).
class NpyMatrixWriter final : public MatrixSink {
public:
    /// Creates the temporary file and writes the header. UsageError "'path' exists
    /// (use --force)" without force, for bf16 or a shape that overflows; IoError when
    /// the directory is not writable or the disk refuses the size.
    NpyMatrixWriter(const std::string& path, std::uint64_t rows, std::uint64_t cols, DType dtype, bool force,
                    NpyOrder order = NpyOrder::C);
    /// Without commit(), removes the temporary file: `path` never appears half-written.
    ~NpyMatrixWriter() override = default;

    [[nodiscard]] std::uint64_t rows() const noexcept override { return rows_; }
    [[nodiscard]] std::uint64_t cols() const noexcept override { return cols_; }
    [[nodiscard]] DType dtype() const noexcept override { return header_.dtype; }
    [[nodiscard]] const NpyHeader& header() const noexcept { return header_; }
    [[nodiscard]] const std::string& path() const noexcept { return output_.final_path(); }

private:
    void do_write(std::uint64_t row0, std::uint64_t col0, std::uint64_t rows, std::uint64_t cols,
                  const std::byte* src, std::uint64_t ld_elements) override;
    void do_commit() override;

    AtomicOutput output_;
    NpyHeader header_;
    std::uint64_t rows_ = 0;
    std::uint64_t cols_ = 0;
};

/// A whole array in memory, data in the file's order (header.fortran_order).
struct NpyArray {
    NpyHeader header;
    std::vector<std::byte> data;
};

/// Reads a whole .npy file of any rank (small arrays: tests, demos). UsageError when
/// its data exceed `max_bytes`, plus everything NpyMatrixReader throws.
[[nodiscard]] NpyArray load_npy(const std::string& path, std::uint64_t max_bytes = kGiB);

/// Writes `data` (element_count * dtype_bytes bytes, in `order`) as a .npy of `shape`,
/// through a temporary file. UsageError when the sizes disagree or the output exists
/// without force; IoError on failure.
void save_npy(const std::string& path, std::span<const std::byte> data, std::span<const std::uint64_t> shape,
              DType dtype, bool force, NpyOrder order = NpyOrder::C);

}  // namespace outcore::io
