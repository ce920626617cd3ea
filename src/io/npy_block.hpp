// src/io/npy_block.hpp — 2-D block transfers between a .npy file and column-major
// memory (private; shared by the matrix reader/writer and the image reader).
#pragma once

#include <cstddef>
#include <cstdint>

#include "outcore/io/file.hpp"

namespace outcore::io::detail {

/// Where a 2-D array's data live in its file.
struct NpyLayout {
    std::uint64_t data_offset_bytes = 0;
    std::uint64_t rows = 0;
    std::uint64_t cols = 0;
    std::uint32_t element_bytes = 0;
    bool fortran_order = false;
};

/// Reads the (checked, non-empty) block into column-major dst with leading dimension
/// ld_elements. Safe to call concurrently (pread only; staging is per thread).
void npy_read_block(const File& file, const NpyLayout& layout, std::uint64_t row0, std::uint64_t col0,
                    std::uint64_t rows, std::uint64_t cols, std::byte* dst, std::uint64_t ld_elements);

/// Writes the (checked, non-empty) block from column-major src. Safe to call
/// concurrently for disjoint blocks (pwrite only, never read-modify-write).
void npy_write_block(const File& file, const NpyLayout& layout, std::uint64_t row0, std::uint64_t col0,
                     std::uint64_t rows, std::uint64_t cols, const std::byte* src, std::uint64_t ld_elements);

}  // namespace outcore::io::detail
