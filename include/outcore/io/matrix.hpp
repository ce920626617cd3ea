// outcore/io/matrix.hpp — where the matrices of tiled work come from and where they go.
//
// A MatrixSource hands out sub-blocks of a logical rows × cols matrix in column-major
// order (outcore's kernels are column-major BLAS), straight into the caller's buffer,
// typically a pinned staging slot; a MatrixSink takes such blocks back.
//
//   std::vector<float> a(m * k);                                    // row-major, lda = k
//   io::HostMatrix src(a.data(), m, k, k, io::Layout::RowMajor, DType::F32);
//   std::vector<float> tile(64 * 32);
//   src.read(128, 0, 64, 32, reinterpret_cast<std::byte*>(tile.data()), 64);  // ld = 64
//
//   io::NpyMatrixReader b("B.npy");                                 // larger than RAM is fine
//   io::NpyMatrixWriter c("C.npy", m, n, DType::F32, /*force=*/false);
//   c.write(i, j, tile_m, tile_n, bytes, ld);  ...  c.commit();     // renamed into place here
//
// Implementations: HostMatrix (here), NpyMatrixReader / NpyMatrixWriter (npy.hpp).
// Arrays held in the tiered swap store become one more MatrixSource / MatrixSink: the
// tile pipeline sees only these two interfaces.
//
// Thread safety: read() of any regions, and write() of disjoint regions, may run
// concurrently from several threads on one object (file-backed ones use pread/pwrite,
// which are positional). commit() must not overlap a write().
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "outcore/device/dtype.hpp"

namespace outcore::io {

/// How a host matrix is stored: RowMajor has element (i, j) at i * ld + j,
/// ColMajor at i + j * ld (ld in elements).
enum class Layout : unsigned char { RowMajor, ColMajor };

/// "row-major" or "col-major".
[[nodiscard]] std::string_view to_string(Layout layout) noexcept;

/// A column-major matrix in host memory the device can copy to and from without
/// staging (pinned memory on a discrete GPU): element (i, j) at
/// data + (i + j · ld_elements) · dtype_bytes. Tiled operations then move
/// sub-matrices with one 2-D copy each (Queue::upload_2d), no packing on the host.
struct DirectMatrix {
    std::byte* data = nullptr;
    std::uint64_t ld_elements = 0;
};

/// Reads sub-blocks of a rows × cols matrix of dtype() elements.
class MatrixSource {
public:
    virtual ~MatrixSource() = default;

    [[nodiscard]] virtual std::uint64_t rows() const noexcept = 0;
    [[nodiscard]] virtual std::uint64_t cols() const noexcept = 0;
    [[nodiscard]] virtual DType dtype() const noexcept = 0;

    /// Copies the block [row0, row0 + rows) × [col0, col0 + cols) into `dst` in
    /// column-major order: block element (i, j) lands at dst + (i + j * ld_elements)
    /// * dtype_bytes. Bytes of dst between rows and ld_elements are left untouched.
    /// An empty block does nothing. UsageError for a block outside the matrix,
    /// ld_elements < rows or a null dst; IoError / UsageError from the backing file.
    void read(std::uint64_t row0, std::uint64_t col0, std::uint64_t rows, std::uint64_t cols, std::byte* dst,
              std::uint64_t ld_elements) const;

    /// The matrix as device-readable column-major memory, if it is that (optional;
    /// default: none, and tiles are packed through read()).
    [[nodiscard]] virtual std::optional<DirectMatrix> direct() const { return std::nullopt; }

    /// Whether the matrix keeps its rows contiguous where it is stored (row-major memory, a
    /// C-order file), so that a block of whole rows reads in long runs; default: its columns.
    /// Readers cutting a block in parts cut it along this (ops::gemm's packed fills).
    [[nodiscard]] virtual bool row_major() const noexcept { return false; }

protected:
    MatrixSource() = default;
    MatrixSource(const MatrixSource&) = default;
    MatrixSource& operator=(const MatrixSource&) = default;

private:
    /// Called by read() with a checked, non-empty block.
    virtual void do_read(std::uint64_t row0, std::uint64_t col0, std::uint64_t rows, std::uint64_t cols,
                         std::byte* dst, std::uint64_t ld_elements) const = 0;
};

/// Takes sub-blocks of a rows × cols matrix of dtype() elements; commit() publishes.
class MatrixSink {
public:
    virtual ~MatrixSink() = default;

    [[nodiscard]] virtual std::uint64_t rows() const noexcept = 0;
    [[nodiscard]] virtual std::uint64_t cols() const noexcept = 0;
    [[nodiscard]] virtual DType dtype() const noexcept = 0;

    /// Stores the block [row0, row0 + rows) × [col0, col0 + cols) from `src`, laid
    /// out column-major with leading dimension ld_elements (as read() writes it).
    /// UsageError for a block outside the matrix, ld_elements < rows, a null src or a
    /// write after commit(); IoError from the backing file.
    void write(std::uint64_t row0, std::uint64_t col0, std::uint64_t rows, std::uint64_t cols,
               const std::byte* src, std::uint64_t ld_elements);

    /// Makes everything written durable and visible (a file sink renames its
    /// temporary file into place). Blocks never written read back as zero.
    /// UsageError when called twice; IoError on failure.
    void commit();
    [[nodiscard]] bool committed() const noexcept { return committed_; }

    /// The matrix as device-writable column-major memory, if it is that (optional;
    /// default: none, and tiles go through write()).
    [[nodiscard]] virtual std::optional<DirectMatrix> direct_sink() const { return std::nullopt; }

protected:
    MatrixSink() = default;
    MatrixSink(const MatrixSink&) = default;
    MatrixSink& operator=(const MatrixSink&) = default;

private:
    /// Called by write() with a checked, non-empty block.
    virtual void do_write(std::uint64_t row0, std::uint64_t col0, std::uint64_t rows, std::uint64_t cols,
                          const std::byte* src, std::uint64_t ld_elements) = 0;
    /// Default: nothing to publish.
    virtual void do_commit() {}

    bool committed_ = false;
};

/// A matrix in host memory that the caller owns and keeps alive. Row-major blocks are
/// transposed cache-blocked; column-major ones are copied column by column.
class HostMatrix final : public MatrixSource, public MatrixSink {
public:
    /// A writable matrix at `data`. ld_elements: distance between rows (RowMajor) or
    /// columns (ColMajor), at least cols (RowMajor) or rows (ColMajor). UsageError for
    /// a null pointer with a non-empty shape, a short ld or a size that overflows.
    HostMatrix(void* data, std::uint64_t rows, std::uint64_t cols, std::uint64_t ld_elements, Layout layout,
               DType dtype);
    /// A read-only matrix: write() throws UsageError.
    HostMatrix(const void* data, std::uint64_t rows, std::uint64_t cols, std::uint64_t ld_elements,
               Layout layout, DType dtype);

    [[nodiscard]] std::uint64_t rows() const noexcept override { return rows_; }
    [[nodiscard]] std::uint64_t cols() const noexcept override { return cols_; }
    [[nodiscard]] DType dtype() const noexcept override { return dtype_; }
    [[nodiscard]] Layout layout() const noexcept { return layout_; }
    [[nodiscard]] std::uint64_t ld_elements() const noexcept { return ld_; }
    [[nodiscard]] bool row_major() const noexcept override { return layout_ == Layout::RowMajor; }

    /// Declares that the device can address this memory directly: it is pinned host
    /// memory of that device (MemoryKind::HostPinned, or registered with it). Only a
    /// column-major matrix is offered as a DirectMatrix; row-major ones stay packed.
    void set_device_readable(bool readable) noexcept { device_readable_ = readable; }
    [[nodiscard]] std::optional<DirectMatrix> direct() const override;
    [[nodiscard]] std::optional<DirectMatrix> direct_sink() const override;

private:
    void do_read(std::uint64_t row0, std::uint64_t col0, std::uint64_t rows, std::uint64_t cols,
                 std::byte* dst, std::uint64_t ld_elements) const override;
    void do_write(std::uint64_t row0, std::uint64_t col0, std::uint64_t rows, std::uint64_t cols,
                  const std::byte* src, std::uint64_t ld_elements) override;

    std::byte* data_ = nullptr;
    std::uint64_t rows_ = 0;
    std::uint64_t cols_ = 0;
    std::uint64_t ld_ = 0;
    Layout layout_ = Layout::RowMajor;
    DType dtype_ = DType::F32;
    bool read_only_ = false;
    bool device_readable_ = false;
};

}  // namespace outcore::io
