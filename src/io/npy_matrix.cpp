#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>

#include "io/npy_block.hpp"
#include "io/npy_file.hpp"
#include "outcore/core/error.hpp"
#include "outcore/io/npy.hpp"

namespace outcore::io {
namespace {

constexpr std::string_view kComponent = "npy";

detail::NpyLayout layout_of(const NpyHeader& h) {
    return {h.data_offset_bytes, h.shape.at(0), h.shape.at(1), dtype_bytes(h.dtype), h.fortran_order};
}

}  // namespace

namespace detail {

NpyHeader read_npy_header(const File& file) {
    const std::uint64_t file_bytes = file.size_bytes();
    std::array<std::byte, kNpyPrefixBytes> prefix{};
    const std::uint64_t got = file.read_some(prefix.data(), prefix.size(), 0);
    const std::uint64_t header_bytes = npy_header_bytes(std::span(prefix.data(), got), file.path());
    std::vector<std::byte> header(header_bytes);
    const std::uint64_t header_got = file.read_some(header.data(), header_bytes, 0);
    NpyHeader parsed = parse_npy_header(std::span(header.data(), header_got), file.path());
    check_npy_file_size(parsed, file_bytes, file.path());
    return parsed;
}

std::string npy_shape_text(const NpyHeader& header) {
    if (header.shape.size() == 1) return fmt::format("({},)", header.shape[0]);
    return fmt::format("({})", fmt::join(header.shape, ", "));
}

}  // namespace detail

NpyMatrixReader::NpyMatrixReader(const std::string& path)
    : file_(File::open_read(path, kComponent)), header_(detail::read_npy_header(file_)) {
    if (header_.shape.size() != 2) {
        throw UsageError(kComponent,
                         fmt::format("'{}': expected a 2-D array, got shape {} ({}-D)", printable(path),
                                     detail::npy_shape_text(header_), header_.shape.size()));
    }
    rows_ = header_.shape[0];
    cols_ = header_.shape[1];
}

void NpyMatrixReader::do_read(std::uint64_t row0, std::uint64_t col0, std::uint64_t rows, std::uint64_t cols,
                              std::byte* dst, std::uint64_t ld_elements) const {
    detail::npy_read_block(file_, layout_of(header_), row0, col0, rows, cols, dst, ld_elements);
}

NpyMatrixWriter::NpyMatrixWriter(const std::string& path, std::uint64_t rows, std::uint64_t cols, DType dtype,
                                 bool force, NpyOrder order)
    : output_(path, force, kComponent), rows_(rows), cols_(cols) {
    const std::array<std::uint64_t, 2> shape = {rows, cols};
    const std::vector<std::byte> bytes = format_npy_header(shape, dtype, order);
    header_ = parse_npy_header(bytes, path);
    // Sized up front: blocks may arrive in any order, and unwritten ones read as zero.
    output_.file().truncate(header_.data_offset_bytes + header_.data_bytes);
    output_.file().write_exact(bytes.data(), bytes.size(), 0);
}

void NpyMatrixWriter::do_write(std::uint64_t row0, std::uint64_t col0, std::uint64_t rows, std::uint64_t cols,
                               const std::byte* src, std::uint64_t ld_elements) {
    detail::npy_write_block(output_.file(), layout_of(header_), row0, col0, rows, cols, src, ld_elements);
}

void NpyMatrixWriter::do_commit() { output_.commit(); }

NpyArray load_npy(const std::string& path, std::uint64_t max_bytes) {
    const File file = File::open_read(path, kComponent);
    NpyArray array;
    array.header = detail::read_npy_header(file);
    if (array.header.data_bytes > max_bytes) {
        throw UsageError(kComponent,
                         fmt::format("'{}': {} bytes of data exceed the {}-byte limit for load_npy",
                                     printable(path), array.header.data_bytes, max_bytes));
    }
    array.data.resize(array.header.data_bytes);
    file.read_exact(array.data.data(), array.data.size(), array.header.data_offset_bytes);
    return array;
}

void save_npy(const std::string& path, std::span<const std::byte> data, std::span<const std::uint64_t> shape,
              DType dtype, bool force, NpyOrder order) {
    const std::vector<std::byte> bytes = format_npy_header(shape, dtype, order);
    const NpyHeader header = parse_npy_header(bytes, path);
    if (data.size() != header.data_bytes) {
        throw UsageError(kComponent, fmt::format("'{}': {} bytes given for shape {} of {}, which needs {}",
                                                 printable(path), data.size(), detail::npy_shape_text(header),
                                                 npy_descr(dtype), header.data_bytes));
    }
    AtomicOutput output(path, force, kComponent);
    output.file().write_exact(bytes.data(), bytes.size(), 0);
    output.file().write_exact(data.data(), data.size(), bytes.size());
    output.commit();
}

}  // namespace outcore::io
