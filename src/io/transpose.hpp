// src/io/transpose.hpp — block copies between row- and column-major layouts (private).
#pragma once

#include <cstddef>
#include <cstdint>

namespace outcore::io::detail {

/// dst[b * dst_ld + a] = src[a * src_ld + b] for a < a_count, b < b_count, element
/// by element of `element_bytes` (1, 2, 4 or 8); strides in elements. Row-major to
/// column-major is a = row, b = col; the reverse swaps them. Cache-blocked. Pointers
/// need no alignment. The ranges must not overlap.
void transpose(const std::byte* src, std::uint64_t src_ld, std::byte* dst, std::uint64_t dst_ld,
               std::uint64_t a_count, std::uint64_t b_count, std::uint32_t element_bytes) noexcept;

/// Copies `count` runs of `run_bytes`, run i from src + i * src_stride_bytes to
/// dst + i * dst_stride_bytes (one memcpy when both are packed).
void copy_runs(const std::byte* src, std::uint64_t src_stride_bytes, std::byte* dst,
               std::uint64_t dst_stride_bytes, std::uint64_t run_bytes, std::uint64_t count) noexcept;

}  // namespace outcore::io::detail
