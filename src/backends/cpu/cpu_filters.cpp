// cpu_filters.cpp — the CPU backend's filter kernels (CpuKernels::do_filter).
//
// Every op is a "valid" correlation over f32 values: inputs are widened to f32 row by
// row, taps are accumulated in f32, and integer outputs are clamped and rounded at
// the end. The arithmetic each output pixel sees is fixed, wherever its tile lies:
//
//   SeparableRow     acc = w[0]·x[c];  acc = acc + w[t]·x[c + t]         for t = 1 .. 2r
//   SeparableColumn  acc = w[0]·x[r];  acc = acc + w[t]·x[r + t]         for t = 1 .. 2r
//   Conv2D           acc = w[0]·x(0,0); acc = acc + w[i]·x(dy,dx)  with i = dy·(2r+1)+dx,
//                    dy outer and dx inner, in row-major order of the kernel
//   SobelMagnitude   gx = ((a2 − a0) + 2·(b2 − b0)) + (c2 − c0)
//                    gy = ((c0 + 2·c1) + c2) − ((a0 + 2·a1) + a2)
//                    out = sqrt(gx·gx + gy·gy)
//                    (a, b, c the rows above, at and below; 0, 1, 2 the columns
//                    left, at and right: unnormalized Sobel kernels, correlation)
//
// Integer outputs (u8, u16): v is clamped to [0, max] (NaN becomes 0) and rounded to
// nearest, ties to even, by adding and subtracting 2^23 (exact for 0 ≤ v ≤ 2^23 in
// the default rounding mode); the same in every path, vector or scalar.
//
// Why tiled equals whole-image bit for bit: the loops run along a row (the output
// columns, channels interleaved), so each pixel's sum is formed by the sequence above
// no matter how rows are split over threads or columns over blocks; no sum runs
// across pixels, and this file is compiled with -ffp-contract=off (no FMA fusing in
// one path but not another) and without -ffast-math (no reassociation). The
// vectorized and scalar remainders of a loop compute the same IEEE operations.
// Performance: -O3 on this file (also in Debug builds), column blocks sized for L1,
// output rows split over the shared ThreadPool, and on x86-64 an AVX2 clone of each
// loop picked at load time (target_clones, enabled from CMake).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "cpu_kernels.hpp"
#include "cpu_queue.hpp"
#include "device/thread_pool.hpp"
#include "outcore/core/error.hpp"
#include "outcore/device/device.hpp"

// Set by src/backends/cpu/CMakeLists.txt on x86-64 only.
#if defined(OUTCORE_CPU_TARGET_CLONES)
#define OUTCORE_VECTOR_LOOP __attribute__((target_clones("avx2", "default")))
#else
#define OUTCORE_VECTOR_LOOP
#endif

namespace outcore::cpu {

namespace {

constexpr const char* kComponent = "cpu";
/// Floats per column block: the accumulator block and the rows it reads stay in L1.
constexpr std::size_t kBlockFloats = 1024;
/// Multiply-adds a parallel chunk should at least hold to be worth a handover.
constexpr std::uint64_t kMinChunkMacs = 1U << 16;
/// 2^23: adding and subtracting it rounds a float in [0, 2^23] to an integer, ties to even.
constexpr float kRoundBias = 8388608.0F;

// --- the vector loops: contiguous, unaliased, one IEEE sequence per element ---------

OUTCORE_VECTOR_LOOP void mul_into(float* __restrict acc, const float* __restrict x, float w, std::size_t n) {
    for (std::size_t j = 0; j < n; ++j) acc[j] = w * x[j];
}

OUTCORE_VECTOR_LOOP void mul_add_into(float* __restrict acc, const float* __restrict x, float w,
                                      std::size_t n) {
    for (std::size_t j = 0; j < n; ++j) acc[j] = acc[j] + w * x[j];
}

/// a, b, c: the rows above, at and below, each starting at the left neighbour;
/// `step` is the distance between horizontal neighbours (the channel count).
OUTCORE_VECTOR_LOOP void sobel_into(const float* __restrict a, const float* __restrict b,
                                    const float* __restrict c, std::size_t step, float* __restrict out,
                                    std::size_t n) {
    const std::size_t s2 = 2 * step;
    for (std::size_t j = 0; j < n; ++j) {
        const float gx = ((a[j + s2] - a[j]) + 2.0F * (b[j + s2] - b[j])) + (c[j + s2] - c[j]);
        const float gy =
            ((c[j] + 2.0F * c[j + step]) + c[j + s2]) - ((a[j] + 2.0F * a[j + step]) + a[j + s2]);
        out[j] = std::sqrt(gx * gx + gy * gy);
    }
}

OUTCORE_VECTOR_LOOP void widen_u8(const std::uint8_t* __restrict src, float* __restrict dst, std::size_t n) {
    for (std::size_t j = 0; j < n; ++j) dst[j] = static_cast<float>(src[j]);
}

OUTCORE_VECTOR_LOOP void widen_u16(const std::uint16_t* __restrict src, float* __restrict dst,
                                   std::size_t n) {
    for (std::size_t j = 0; j < n; ++j) dst[j] = static_cast<float>(src[j]);
}

/// Clamps to [0, hi] (NaN → 0: both comparisons are false for NaN) and rounds to
/// nearest even. Written as selects so the loops that use it vectorize.
inline float round_clamped(float v, float hi) {
    float c = v > 0.0F ? v : 0.0F;
    c = c < hi ? c : hi;
    return (c + kRoundBias) - kRoundBias;
}

OUTCORE_VECTOR_LOOP void narrow_u8(const float* __restrict src, std::uint8_t* __restrict dst, std::size_t n) {
    for (std::size_t j = 0; j < n; ++j)
        dst[j] = static_cast<std::uint8_t>(static_cast<std::int32_t>(round_clamped(src[j], 255.0F)));
}

OUTCORE_VECTOR_LOOP void narrow_u16(const float* __restrict src, std::uint16_t* __restrict dst,
                                    std::size_t n) {
    for (std::size_t j = 0; j < n; ++j) {
        dst[j] = static_cast<std::uint16_t>(static_cast<std::int32_t>(round_clamped(src[j], 65535.0F)));
    }
}

// --- one tile, resolved to addresses ---------------------------------------------

/// A filter tile as the worker runs it. Addresses are resolved at submission; the
/// weights are read on the worker (a weights buffer is filled by earlier queue work).
struct FilterJob {
    FilterOp op = FilterOp::Conv2D;
    std::size_t channels = 1;
    std::size_t radius = 0;
    DType in_type = DType::F32;
    DType out_type = DType::F32;
    std::uint64_t out_rows = 0;
    std::size_t out_elems = 0;  ///< floats per output row: out_cols × channels
    std::size_t in_elems = 0;   ///< floats per input row, halo included
    const std::byte* in = nullptr;
    std::uint64_t in_stride = 0;
    std::byte* out = nullptr;
    std::uint64_t out_stride = 0;
    std::vector<float> weights;

    [[nodiscard]] const std::byte* in_row(std::uint64_t y) const noexcept { return in + y * in_stride; }
    [[nodiscard]] std::byte* out_row(std::uint64_t y) const noexcept { return out + y * out_stride; }
};

/// Input rows as f32: f32 input is read in place; u8/u16 rows are widened into a
/// ring of `window` rows, so each row is widened once per chunk while the rows of a
/// vertical window are used together.
class RowWindow {
public:
    RowWindow(const FilterJob& job, std::size_t window)
        : job_(&job),
          window_(window),
          ring_(job.in_type == DType::F32 ? 0 : window * job.in_elems),
          held_(job.in_type == DType::F32 ? 0 : window, UINT64_MAX) {}

    [[nodiscard]] const float* row(std::uint64_t y) {
        const std::byte* src = job_->in_row(y);
        if (job_->in_type == DType::F32) return reinterpret_cast<const float*>(src);
        const std::size_t slot = static_cast<std::size_t>(y % window_);
        float* dst = ring_.data() + slot * job_->in_elems;
        if (held_[slot] != y) {
            if (job_->in_type == DType::U8) {
                widen_u8(reinterpret_cast<const std::uint8_t*>(src), dst, job_->in_elems);
            } else {
                widen_u16(reinterpret_cast<const std::uint16_t*>(src), dst, job_->in_elems);
            }
            held_[slot] = y;
        }
        return dst;
    }

private:
    const FilterJob* job_;
    std::size_t window_;
    std::vector<float> ring_;
    std::vector<std::uint64_t> held_;
};

/// Where a block of output floats is accumulated: in the output row itself for f32,
/// else in scratch that store_block then narrows.
float* accumulator(const FilterJob& job, std::uint64_t y, std::size_t j0, std::vector<float>& scratch) {
    if (job.out_type == DType::F32) return reinterpret_cast<float*>(job.out_row(y)) + j0;
    return scratch.data();
}

void store_block(const FilterJob& job, std::uint64_t y, std::size_t j0, const float* acc, std::size_t n) {
    switch (job.out_type) {
        case DType::U8: narrow_u8(acc, reinterpret_cast<std::uint8_t*>(job.out_row(y)) + j0, n); break;
        case DType::U16: narrow_u16(acc, reinterpret_cast<std::uint16_t*>(job.out_row(y)) + j0, n); break;
        default: break;  // f32 was accumulated in place
    }
}

void run_rows(const FilterJob& job, std::uint64_t begin, std::uint64_t end) {
    const std::size_t taps_1d = 2 * job.radius + 1;
    const std::size_t c = job.channels;
    const float* w = job.weights.data();
    std::vector<float> scratch(kBlockFloats);
    switch (job.op) {
        case FilterOp::SeparableRow: {
            RowWindow window(job, 1);
            for (std::uint64_t y = begin; y < end; ++y) {
                const float* x = window.row(y);
                float* o = reinterpret_cast<float*>(job.out_row(y));  // SeparableRow writes f32
                for (std::size_t j0 = 0; j0 < job.out_elems; j0 += kBlockFloats) {
                    const std::size_t n = std::min(kBlockFloats, job.out_elems - j0);
                    mul_into(o + j0, x + j0, w[0], n);
                    for (std::size_t t = 1; t < taps_1d; ++t) mul_add_into(o + j0, x + j0 + t * c, w[t], n);
                }
            }
            break;
        }
        case FilterOp::SeparableColumn: {
            // f32 input (checked): rows are read in place.
            for (std::uint64_t y = begin; y < end; ++y) {
                for (std::size_t j0 = 0; j0 < job.out_elems; j0 += kBlockFloats) {
                    const std::size_t n = std::min(kBlockFloats, job.out_elems - j0);
                    float* acc = accumulator(job, y, j0, scratch);
                    mul_into(acc, reinterpret_cast<const float*>(job.in_row(y)) + j0, w[0], n);
                    for (std::size_t t = 1; t < taps_1d; ++t) {
                        mul_add_into(acc, reinterpret_cast<const float*>(job.in_row(y + t)) + j0, w[t], n);
                    }
                    store_block(job, y, j0, acc, n);
                }
            }
            break;
        }
        case FilterOp::Conv2D: {
            RowWindow window(job, taps_1d);
            std::vector<const float*> rows(taps_1d);
            for (std::uint64_t y = begin; y < end; ++y) {
                for (std::size_t dy = 0; dy < taps_1d; ++dy) rows[dy] = window.row(y + dy);
                for (std::size_t j0 = 0; j0 < job.out_elems; j0 += kBlockFloats) {
                    const std::size_t n = std::min(kBlockFloats, job.out_elems - j0);
                    float* acc = accumulator(job, y, j0, scratch);
                    mul_into(acc, rows[0] + j0, w[0], n);
                    for (std::size_t dy = 0; dy < taps_1d; ++dy) {
                        for (std::size_t dx = dy == 0 ? 1 : 0; dx < taps_1d; ++dx) {
                            mul_add_into(acc, rows[dy] + j0 + dx * c, w[dy * taps_1d + dx], n);
                        }
                    }
                    store_block(job, y, j0, acc, n);
                }
            }
            break;
        }
        case FilterOp::SobelMagnitude: {
            RowWindow window(job, 3);
            for (std::uint64_t y = begin; y < end; ++y) {
                const float* a = window.row(y);
                const float* b = window.row(y + 1);
                const float* d = window.row(y + 2);
                for (std::size_t j0 = 0; j0 < job.out_elems; j0 += kBlockFloats) {
                    const std::size_t n = std::min(kBlockFloats, job.out_elems - j0);
                    float* acc = accumulator(job, y, j0, scratch);
                    sobel_into(a + j0, b + j0, d + j0, c, acc, n);
                    store_block(job, y, j0, acc, n);
                }
            }
            break;
        }
    }
}

void run_job(const FilterJob& job) {
    std::uint64_t macs_per_row = job.out_elems;
    switch (job.op) {
        case FilterOp::Conv2D: macs_per_row *= (2 * job.radius + 1) * (2 * job.radius + 1); break;
        case FilterOp::SobelMagnitude: macs_per_row *= 12; break;
        default: macs_per_row *= 2 * job.radius + 1; break;
    }
    const std::uint64_t grain =
        std::max<std::uint64_t>(1, kMinChunkMacs / std::max<std::uint64_t>(macs_per_row, 1));
    detail::ThreadPool::shared().parallel_for(
        job.out_rows, grain, [&job](std::uint64_t begin, std::uint64_t end) { run_rows(job, begin, end); });
}

void check_alignment(const char* name, const std::byte* address, std::uint64_t stride, DType type) {
    const std::uint64_t elem = dtype_bytes(type);
    if (reinterpret_cast<std::uintptr_t>(address) % elem != 0 || stride % elem != 0) {
        throw UsageError(kComponent,
                         fmt::format("filter: the {} address and row stride must be multiples of its "
                                     "{}-byte elements",
                                     name, elem));
    }
}

}  // namespace

void CpuKernels::do_filter(Queue& queue, const FilterTileArgs& args) {
    auto* cpu_queue = dynamic_cast<CpuQueue*>(&queue);
    if (cpu_queue == nullptr || &queue.device() != device_) {
        throw UsageError(kComponent, "filter: the queue belongs to another device");
    }
    if (args.in.block.device_id != device_->id() || args.out.block.device_id != device_->id()) {
        throw UsageError(kComponent, "filter: a tile belongs to another device");
    }
    // Types, passes and the 15×15 limit: checked by Kernels::filter for every backend.
    if (args.out_rows == 0 || args.out_cols == 0) return;

    FilterJob job;
    job.op = args.op;
    job.channels = args.channels;
    job.radius = args.radius;
    job.in_type = args.in_type;
    job.out_type = args.out_type;
    job.out_rows = args.out_rows;
    job.out_elems = static_cast<std::size_t>(args.out_cols * args.channels);
    const std::uint64_t halo_cols = args.op == FilterOp::SeparableColumn ? 0 : args.radius;
    job.in_elems = static_cast<std::size_t>((args.out_cols + 2 * halo_cols) * args.channels);
    job.in = address_of(args.in);
    job.in_stride = args.in_row_stride;
    job.out = address_of(args.out);
    job.out_stride = args.out_row_stride;
    check_alignment("input", job.in, job.in_stride, job.in_type);
    check_alignment("output", job.out, job.out_stride, job.out_type);
    // Kernels::filter checked each view against its rows; the two must not overlap,
    // or a row written early would be read later as input.
    const std::uint64_t in_rows =
        args.out_rows + 2ULL * (args.op == FilterOp::SeparableRow ? 0 : args.radius);
    const std::uint64_t in_span =
        args.in_row_stride * (in_rows - 1) + job.in_elems * dtype_bytes(args.in_type);
    const std::uint64_t out_span =
        args.out_row_stride * (args.out_rows - 1) + job.out_elems * dtype_bytes(args.out_type);
    const auto in_begin = reinterpret_cast<std::uintptr_t>(job.in);
    const auto out_begin = reinterpret_cast<std::uintptr_t>(job.out);
    if (in_begin < out_begin + out_span && out_begin < in_begin + in_span) {
        throw UsageError(kComponent, "filter: the input and output tiles overlap");
    }

    const std::byte* weight_buffer = nullptr;
    if (args.weights != nullptr) {
        if (args.weights->is_inline()) {
            const std::span<const std::byte> bytes = args.weights->inline_bytes();
            job.weights.resize(bytes.size() / sizeof(float));
            std::memcpy(job.weights.data(), bytes.data(), job.weights.size() * sizeof(float));
        } else {
            const BufferView buffer = args.weights->buffer();
            if (buffer.block.device_id != device_->id()) {
                throw UsageError(kComponent, "filter: the weights buffer belongs to another device");
            }
            weight_buffer = address_of(buffer);
            job.weights.resize(args.weights->size_bytes() / sizeof(float));
        }
    }
    cpu_queue->enqueue([job = std::move(job), weight_buffer]() mutable {
        // A weights buffer is valid only once earlier queue work (its upload) has run.
        if (weight_buffer != nullptr)
            std::memcpy(job.weights.data(), weight_buffer, job.weights.size() * sizeof(float));
        run_job(job);
    });
}

void CpuKernels::do_pad_edges(Queue& queue, const PadEdgesArgs& args) {
    auto* cpu_queue = dynamic_cast<CpuQueue*>(&queue);
    if (cpu_queue == nullptr || &queue.device() != device_) {
        throw UsageError(kComponent, "edge fill: the queue belongs to another device");
    }
    if (args.buffer.block.device_id != device_->id()) {
        throw UsageError(kComponent, "edge fill: the area belongs to another device");
    }
    cpu_queue->enqueue([base = address_of(args.buffer), area = args.area] { pad_edges_host(base, area); });
}

}  // namespace outcore::cpu
