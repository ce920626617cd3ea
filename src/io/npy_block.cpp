#include "io/npy_block.hpp"

#include <algorithm>
#include <memory>

#include "io/transpose.hpp"
#include "outcore/core/size.hpp"

namespace outcore::io::detail {
namespace {

// Per-call staging for rows that need transposing or runs read together. Bounded so a
// read of any size stays within a few MiB of extra memory.
constexpr std::uint64_t kBounceBytes = 4 * kMiB;
// Runs closer than this are read with one pread, gap included: a system call costs
// about as much as copying this many bytes, and one large read suits readahead on a
// cold file better than many small ones. Writes never cover gaps (they would clobber
// neighbouring blocks written concurrently).
constexpr std::uint64_t kCoalesceGapBytes = 64 * kKiB;

// A block as it lies in the file: `count` runs of `run_bytes`, run i at
// first_offset + i * stride_bytes (columns of a Fortran file, rows of a C file).
struct Runs {
    std::uint64_t first_offset = 0;
    std::uint64_t stride_bytes = 0;
    std::uint64_t run_bytes = 0;
    std::uint64_t count = 0;
    [[nodiscard]] std::uint64_t gap_bytes() const noexcept { return stride_bytes - run_bytes; }
};

// No overflow: the header parser checked that the whole array fits below 2^63 bytes,
// and the caller checked that the block lies inside it.
Runs block_runs(const NpyLayout& l, std::uint64_t row0, std::uint64_t col0, std::uint64_t rows,
                std::uint64_t cols) {
    const std::uint64_t w = l.element_bytes;
    if (l.fortran_order) {
        return {l.data_offset_bytes + (col0 * l.rows + row0) * w, l.rows * w, rows * w, cols};
    }
    return {l.data_offset_bytes + (row0 * l.cols + col0) * w, l.cols * w, cols * w, rows};
}

// Staging of `bytes`. Buffers up to kBounceBytes are kept per thread and reused: fresh
// pages cost a fault each (about 1 ms per 4 MiB, a quarter of the time to read a 4 MiB
// tile from the page cache). Larger ones (a single run over 4 MiB) live in `owned`.
std::byte* bounce(std::uint64_t bytes, std::unique_ptr<std::byte[]>& owned) {
    if (bytes > kBounceBytes) {
        owned = std::make_unique_for_overwrite<std::byte[]>(bytes);
        return owned.get();
    }
    thread_local std::unique_ptr<std::byte[]> cached;
    if (!cached) cached = std::make_unique_for_overwrite<std::byte[]>(kBounceBytes);
    return cached.get();
}

// Runs that fit one bounce buffer of `bytes` (at least one; the buffer holds one run).
std::uint64_t runs_per_batch(const Runs& r, bool coalesce, std::uint64_t bytes) {
    const std::uint64_t per_run = coalesce ? r.stride_bytes : r.run_bytes;
    return std::clamp<std::uint64_t>((bytes - r.run_bytes) / per_run + 1, 1, r.count);
}

// Reads runs [first, first + n) into buf; returns their stride inside buf.
std::uint64_t gather(const File& file, const Runs& r, std::uint64_t first, std::uint64_t n, bool coalesce,
                     std::byte* buf) {
    if (coalesce) {
        file.read_exact(buf, (n - 1) * r.stride_bytes + r.run_bytes, r.first_offset + first * r.stride_bytes);
        return r.stride_bytes;
    }
    for (std::uint64_t k = 0; k < n; ++k) {
        file.read_exact(buf + k * r.run_bytes, r.run_bytes, r.first_offset + (first + k) * r.stride_bytes);
    }
    return r.run_bytes;
}

}  // namespace

void npy_read_block(const File& file, const NpyLayout& layout, std::uint64_t row0, std::uint64_t col0,
                    std::uint64_t rows, std::uint64_t cols, std::byte* dst, std::uint64_t ld_elements) {
    const std::uint64_t w = layout.element_bytes;
    const Runs r = block_runs(layout, row0, col0, rows, cols);
    const bool coalesce = r.gap_bytes() <= kCoalesceGapBytes;
    if (layout.fortran_order) {
        // File columns are destination columns: straight into dst where possible.
        if (r.gap_bytes() == 0 && ld_elements == rows) {
            file.read_exact(dst, r.run_bytes * r.count, r.first_offset);
            return;
        }
        if (!coalesce) {
            for (std::uint64_t j = 0; j < r.count; ++j) {
                file.read_exact(dst + j * ld_elements * w, r.run_bytes, r.first_offset + j * r.stride_bytes);
            }
            return;
        }
    }
    const std::uint64_t all_bytes =
        coalesce ? (r.count - 1) * r.stride_bytes + r.run_bytes : r.count * r.run_bytes;
    const std::uint64_t buf_bytes = std::min(std::max(kBounceBytes, r.run_bytes), all_bytes);
    std::unique_ptr<std::byte[]> owned;
    std::byte* const buf = bounce(buf_bytes, owned);
    const std::uint64_t batch = runs_per_batch(r, coalesce, buf_bytes);
    for (std::uint64_t i = 0; i < r.count; i += batch) {
        const std::uint64_t n = std::min(batch, r.count - i);
        const std::uint64_t stride = gather(file, r, i, n, coalesce, buf);
        if (layout.fortran_order) {
            copy_runs(buf, stride, dst + i * ld_elements * w, ld_elements * w, r.run_bytes, n);
        } else {
            // n file rows of `cols` elements become rows [i, i + n) of the column-major block.
            transpose(buf, stride / w, dst + i * w, ld_elements, n, cols, static_cast<std::uint32_t>(w));
        }
    }
}

void npy_write_block(const File& file, const NpyLayout& layout, std::uint64_t row0, std::uint64_t col0,
                     std::uint64_t rows, std::uint64_t cols, const std::byte* src,
                     std::uint64_t ld_elements) {
    const std::uint64_t w = layout.element_bytes;
    const Runs r = block_runs(layout, row0, col0, rows, cols);
    if (layout.fortran_order) {
        if (r.gap_bytes() == 0 && ld_elements == rows) {
            file.write_exact(src, r.run_bytes * r.count, r.first_offset);
            return;
        }
        for (std::uint64_t j = 0; j < r.count; ++j) {
            file.write_exact(src + j * ld_elements * w, r.run_bytes, r.first_offset + j * r.stride_bytes);
        }
        return;
    }
    const std::uint64_t buf_bytes = std::min(std::max(kBounceBytes, r.run_bytes), r.count * r.run_bytes);
    std::unique_ptr<std::byte[]> owned;
    std::byte* const buf = bounce(buf_bytes, owned);
    const std::uint64_t batch = runs_per_batch(r, false, buf_bytes);
    for (std::uint64_t i = 0; i < r.count; i += batch) {
        const std::uint64_t n = std::min(batch, r.count - i);
        // Block rows [i, i + n), column-major in src, become n packed file rows.
        transpose(src + i * w, ld_elements, buf, cols, cols, n, static_cast<std::uint32_t>(w));
        if (r.gap_bytes() == 0) {
            file.write_exact(buf, n * r.run_bytes, r.first_offset + i * r.stride_bytes);
        } else {
            for (std::uint64_t k = 0; k < n; ++k) {
                file.write_exact(buf + k * r.run_bytes, r.run_bytes,
                                 r.first_offset + (i + k) * r.stride_bytes);
            }
        }
    }
}

}  // namespace outcore::io::detail
