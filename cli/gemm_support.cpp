// cli/gemm_support.cpp — random operands, bf16 conversion and the float64 check of
// `outcore gemm` (see gemm_support.hpp).
#include "gemm_support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "outcore/core/error.hpp"

namespace outcore::cli {
namespace {

constexpr std::uint64_t kBlockSide = 64;
constexpr std::uint64_t kSampledBlocks = 8;
constexpr std::uint64_t kFullCheckMacs = std::uint64_t{1} << 28;
constexpr std::uint64_t kChunkK = 512;  // k range read per step: bounds the host memory of a check

/// splitmix64's finaliser: a bijection that scrambles every input bit.
constexpr std::uint64_t mix(std::uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

double element(const std::byte* p, DType type, std::uint64_t index) noexcept {
    switch (type) {
        case DType::F64: {
            double v = 0;
            std::memcpy(&v, p + index * 8, 8);
            return v;
        }
        case DType::BF16: {
            std::uint16_t h = 0;
            std::memcpy(&h, p + index * 2, 2);
            return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
        }
        case DType::F16: {
            std::uint16_t h = 0;
            std::memcpy(&h, p + index * 2, 2);
            return f16_to_f32(h);
        }
        default: {
            float v = 0;
            std::memcpy(&v, p + index * 4, 4);
            return v;
        }
    }
}

/// Reads op(X)[o0 : o0+on, k0 : k0+kn] (for A: rows of op(A); for B: columns of op(B))
/// as out[o·kn + kk] in double. `k_rows`: the stored matrix has k along its rows.
void read_panel(const io::MatrixSource& x, bool k_rows, std::uint64_t o0, std::uint64_t on, std::uint64_t k0,
                std::uint64_t kn, std::vector<std::byte>& raw, std::vector<double>& out) {
    const DType type = x.dtype();
    raw.resize(static_cast<std::size_t>(on * kn * dtype_bytes(type)));
    out.resize(static_cast<std::size_t>(on * kn));
    if (k_rows) {
        x.read(k0, o0, kn, on, raw.data(), kn);  // (kk, o) at kk + o·kn: already o-major
        for (std::uint64_t i = 0; i < on * kn; ++i) out[i] = element(raw.data(), type, i);
    } else {
        x.read(o0, k0, on, kn, raw.data(), on);  // (o, kk) at o + kk·on
        for (std::uint64_t o = 0; o < on; ++o) {
            for (std::uint64_t kk = 0; kk < kn; ++kk)
                out[o * kn + kk] = element(raw.data(), type, o + kk * on);
        }
    }
}

struct Block {
    std::uint64_t i0, bm, j0, bn;
};

std::vector<Block> pick_blocks(const GemmCheckInputs& in, bool& full) {
    std::vector<Block> blocks;
    const double macs = static_cast<double>(in.m) * static_cast<double>(in.n) * static_cast<double>(in.k);
    full = macs <= static_cast<double>(kFullCheckMacs);
    if (full) {
        for (std::uint64_t i = 0; i < in.m; i += kBlockSide) {
            for (std::uint64_t j = 0; j < in.n; j += kBlockSide) {
                blocks.push_back({i, std::min(kBlockSide, in.m - i), j, std::min(kBlockSide, in.n - j)});
            }
        }
        return blocks;
    }
    const std::uint64_t bm = std::min(kBlockSide, in.m);
    const std::uint64_t bn = std::min(kBlockSide, in.n);
    std::mt19937_64 rng(mix(in.seed + kStreamSample * kGolden));
    std::uniform_int_distribution<std::uint64_t> row(0, in.m - bm);
    std::uniform_int_distribution<std::uint64_t> col(0, in.n - bn);
    for (std::uint64_t s = 0; s < kSampledBlocks; ++s) blocks.push_back({row(rng), bm, col(rng), bn});
    blocks.push_back({in.m - bm, bm, in.n - bn, bn});  // holds the tail tiles of every tiling
    return blocks;
}

}  // namespace

void ShapeMatrix::do_read(std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t, std::byte*,
                          std::uint64_t) const {
    throw InternalError("gemm", "a shape-only matrix was read");
}

void ShapeMatrix::do_write(std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t, const std::byte*,
                           std::uint64_t) {
    throw InternalError("gemm", "a shape-only matrix was written");
}

Bf16FromF32::Bf16FromF32(const io::MatrixSource& source) : source_(&source) {
    if (source.dtype() != DType::F32) {
        throw UsageError("gemm", fmt::format("bf16 operands are converted from f32 files, not {}",
                                             to_string(source.dtype())));
    }
}

void Bf16FromF32::do_read(std::uint64_t row0, std::uint64_t col0, std::uint64_t rows, std::uint64_t cols,
                          std::byte* dst, std::uint64_t ld_elements) const {
    std::vector<float> block(static_cast<std::size_t>(rows * cols));
    source_->read(row0, col0, rows, cols, reinterpret_cast<std::byte*>(block.data()), rows);
    for (std::uint64_t j = 0; j < cols; ++j) {
        for (std::uint64_t i = 0; i < rows; ++i) {
            const std::uint16_t h = f32_to_bf16(block[i + j * rows]);
            std::memcpy(dst + (i + j * ld_elements) * 2, &h, 2);
        }
    }
}

void fill_random(std::byte* dst, std::uint64_t rows, std::uint64_t cols, DType type, std::uint64_t seed,
                 std::uint64_t stream) {
    const std::uint64_t base = mix(seed ^ mix(stream * kGolden));
    const std::uint64_t count = rows * cols;
    auto fill = [=](std::uint64_t first, std::uint64_t last) {
        for (std::uint64_t i = first; i < last; ++i) {
            // 53 random bits → [0, 1) → [−1, 1).
            const double u = static_cast<double>(mix(base + (i + 1) * kGolden) >> 11) * 0x1.0p-53;
            const double v = 2.0 * u - 1.0;
            switch (type) {
                case DType::F64: std::memcpy(dst + i * 8, &v, 8); break;
                case DType::BF16:
                case DType::F16: {
                    const auto f = static_cast<float>(v);
                    const std::uint16_t h = type == DType::BF16 ? f32_to_bf16(f) : f32_to_f16(f);
                    std::memcpy(dst + i * 2, &h, 2);
                    break;
                }
                default: {
                    const auto f = static_cast<float>(v);
                    std::memcpy(dst + i * 4, &f, 4);
                    break;
                }
            }
        }
    };
    const std::uint64_t threads = std::clamp<std::uint64_t>(std::thread::hardware_concurrency(), 1,
                                                            std::max<std::uint64_t>(1, count >> 20));
    std::vector<std::jthread> workers;
    const std::uint64_t per = count / threads;
    for (std::uint64_t t = 1; t < threads; ++t) {
        workers.emplace_back(fill, t * per, t + 1 == threads ? count : (t + 1) * per);
    }
    fill(0, threads == 1 ? count : per);
}

double gemm_error_bound(DType type, GemmCompute compute, std::uint64_t k) noexcept {
    double base = 1e-5;
    if (type == DType::F64) base = 1e-12;
    if (type == DType::BF16) base = 1e-2;
    if (type == DType::F16) base = 1e-3;
    if (type == DType::F32 && compute == GemmCompute::FastTF32) base = 2e-3;
    return base * std::max(1.0, std::sqrt(static_cast<double>(k) / 4096.0));
}

GemmCheck verify_gemm(const GemmCheckInputs& in) {
    GemmCheck check;
    check.bound_error = gemm_error_bound(in.type, in.compute, in.k);
    const std::vector<Block> blocks = pick_blocks(in, check.full);
    check.block_count = blocks.size();

    std::vector<std::byte> raw;
    std::vector<double> a_panel;
    std::vector<double> b_panel;
    std::vector<double> ref;
    std::vector<std::byte> out_raw;
    double diff_sq = 0;
    double ref_sq = 0;
    for (const Block& blk : blocks) {
        ref.assign(static_cast<std::size_t>(blk.bm * blk.bn), 0.0);
        for (std::uint64_t k0 = 0; k0 < in.k; k0 += kChunkK) {
            const std::uint64_t kn = std::min(kChunkK, in.k - k0);
            read_panel(*in.a, in.trans_a, blk.i0, blk.bm, k0, kn, raw, a_panel);
            read_panel(*in.b, !in.trans_b, blk.j0, blk.bn, k0, kn, raw, b_panel);
            for (std::uint64_t i = 0; i < blk.bm; ++i) {
                const double* ai = a_panel.data() + i * kn;
                for (std::uint64_t j = 0; j < blk.bn; ++j) {
                    const double* bj = b_panel.data() + j * kn;
                    double sum = 0;
                    for (std::uint64_t kk = 0; kk < kn; ++kk) sum += ai[kk] * bj[kk];
                    ref[i * blk.bn + j] += sum;
                }
            }
        }
        std::vector<double> c0;
        if (in.beta != 0.0) {
            // (i, j) of C at i·bn + j, like ref: C's panel along "rows" i with j as k.
            read_panel(*in.c_in, false, blk.i0, blk.bm, blk.j0, blk.bn, raw, c0);
        }
        const DType out_type = in.c_out->dtype();
        out_raw.resize(static_cast<std::size_t>(blk.bm * blk.bn * dtype_bytes(out_type)));
        in.c_out->read(blk.i0, blk.j0, blk.bm, blk.bn, out_raw.data(), blk.bm);
        for (std::uint64_t i = 0; i < blk.bm; ++i) {
            for (std::uint64_t j = 0; j < blk.bn; ++j) {
                double r = in.alpha * ref[i * blk.bn + j];
                if (in.beta != 0.0) r += in.beta * c0[i * blk.bn + j];
                const double o = element(out_raw.data(), out_type, i + j * blk.bm);
                if (!std::isfinite(o) && std::isfinite(r)) {
                    ++check.non_finite_count;
                    continue;
                }
                diff_sq += (o - r) * (o - r);
                ref_sq += r * r;
            }
        }
        check.element_count += blk.bm * blk.bn;
    }
    // An all-zero reference (α = 0, β = 0) leaves the absolute error as the measure.
    check.relative_error = ref_sq > 0 ? std::sqrt(diff_sq / ref_sq) : std::sqrt(diff_sq);
    check.passed = check.non_finite_count == 0 && std::isfinite(check.relative_error) &&
                   check.relative_error <= check.bound_error;
    return check;
}

}  // namespace outcore::cli
