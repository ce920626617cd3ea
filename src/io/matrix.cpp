#include "outcore/io/matrix.hpp"

#include <fmt/format.h>

#include "io/transpose.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"

namespace outcore::io {
namespace {

constexpr std::string_view kComponent = "io";

// Checks a block request and that its buffer's extent, (cols - 1) * ld + rows
// elements, is representable. Returns false for an empty block.
bool check_block(std::uint64_t matrix_rows, std::uint64_t matrix_cols, DType dtype, std::uint64_t row0,
                 std::uint64_t col0, std::uint64_t rows, std::uint64_t cols, const void* buffer,
                 std::uint64_t ld_elements) {
    const std::uint64_t row_end = checked_add(row0, rows, kComponent);
    const std::uint64_t col_end = checked_add(col0, cols, kComponent);
    if (row_end > matrix_rows || col_end > matrix_cols) {
        throw UsageError(
            kComponent, fmt::format("block rows [{}, {}) x cols [{}, {}) is outside the {} x {} matrix", row0,
                                    row_end, col0, col_end, matrix_rows, matrix_cols));
    }
    if (rows == 0 || cols == 0) return false;
    if (buffer == nullptr) throw UsageError(kComponent, "block buffer is null");
    if (ld_elements < rows) {
        throw UsageError(kComponent, fmt::format("leading dimension {} is smaller than the block's {} rows",
                                                 ld_elements, rows));
    }
    const std::uint64_t extent =
        checked_add(checked_mul(cols - 1, ld_elements, kComponent), rows, kComponent);
    (void)checked_mul(extent, dtype_bytes(dtype), kComponent);
    return true;
}

}  // namespace

std::string_view to_string(Layout layout) noexcept {
    return layout == Layout::RowMajor ? "row-major" : "col-major";
}

void MatrixSource::read(std::uint64_t row0, std::uint64_t col0, std::uint64_t rows, std::uint64_t cols,
                        std::byte* dst, std::uint64_t ld_elements) const {
    if (check_block(this->rows(), this->cols(), dtype(), row0, col0, rows, cols, dst, ld_elements)) {
        do_read(row0, col0, rows, cols, dst, ld_elements);
    }
}

void MatrixSink::write(std::uint64_t row0, std::uint64_t col0, std::uint64_t rows, std::uint64_t cols,
                       const std::byte* src, std::uint64_t ld_elements) {
    if (committed_) throw UsageError(kComponent, "write to a matrix sink after commit()");
    if (check_block(this->rows(), this->cols(), dtype(), row0, col0, rows, cols, src, ld_elements)) {
        do_write(row0, col0, rows, cols, src, ld_elements);
    }
}

void MatrixSink::commit() {
    if (committed_) throw UsageError(kComponent, "matrix sink committed twice");
    do_commit();
    committed_ = true;
}

HostMatrix::HostMatrix(void* data, std::uint64_t rows, std::uint64_t cols, std::uint64_t ld_elements,
                       Layout layout, DType dtype)
    : data_(static_cast<std::byte*>(data)),
      rows_(rows),
      cols_(cols),
      ld_(ld_elements),
      layout_(layout),
      dtype_(dtype) {
    const std::uint64_t inner = layout == Layout::RowMajor ? cols : rows;
    const std::uint64_t outer = layout == Layout::RowMajor ? rows : cols;
    if (rows == 0 || cols == 0) return;
    if (data == nullptr) {
        throw UsageError(kComponent, fmt::format("host matrix {} x {} has a null pointer", rows, cols));
    }
    if (ld_elements < inner) {
        throw UsageError(kComponent, fmt::format("host matrix {} x {} ({}): leading dimension {} is below {}",
                                                 rows, cols, to_string(layout), ld_elements, inner));
    }
    const std::uint64_t extent =
        checked_add(checked_mul(outer - 1, ld_elements, kComponent), inner, kComponent);
    (void)checked_mul(extent, dtype_bytes(dtype), kComponent);
}

HostMatrix::HostMatrix(const void* data, std::uint64_t rows, std::uint64_t cols, std::uint64_t ld_elements,
                       Layout layout, DType dtype)
    // The pointer is only ever written through after read_only_ is checked.
    : HostMatrix(const_cast<void*>(data), rows, cols, ld_elements, layout, dtype) {
    read_only_ = true;
}

void HostMatrix::do_read(std::uint64_t row0, std::uint64_t col0, std::uint64_t rows, std::uint64_t cols,
                         std::byte* dst, std::uint64_t ld_elements) const {
    const std::uint32_t w = dtype_bytes(dtype_);
    if (layout_ == Layout::ColMajor) {
        detail::copy_runs(data_ + (row0 + col0 * ld_) * w, ld_ * w, dst, ld_elements * w, rows * w, cols);
    } else {
        detail::transpose(data_ + (row0 * ld_ + col0) * w, ld_, dst, ld_elements, rows, cols, w);
    }
}

void HostMatrix::do_write(std::uint64_t row0, std::uint64_t col0, std::uint64_t rows, std::uint64_t cols,
                          const std::byte* src, std::uint64_t ld_elements) {
    if (read_only_) throw UsageError(kComponent, "write to a read-only host matrix");
    const std::uint32_t w = dtype_bytes(dtype_);
    if (layout_ == Layout::ColMajor) {
        detail::copy_runs(src, ld_elements * w, data_ + (row0 + col0 * ld_) * w, ld_ * w, rows * w, cols);
    } else {
        detail::transpose(src, ld_elements, data_ + (row0 * ld_ + col0) * w, ld_, cols, rows, w);
    }
}

std::optional<DirectMatrix> HostMatrix::direct() const {
    if (!device_readable_ || layout_ != Layout::ColMajor || data_ == nullptr) return std::nullopt;
    return DirectMatrix{.data = data_, .ld_elements = ld_};
}

std::optional<DirectMatrix> HostMatrix::direct_sink() const {
    if (read_only_ || committed()) return std::nullopt;
    return direct();
}

}  // namespace outcore::io
