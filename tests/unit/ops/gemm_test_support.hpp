// gemm_test_support.hpp — shared pieces of the GEMM tests: a matrix of any element
// type and layout with a padded leading dimension, its values kept exactly, a float64
// reference for α·op(A)·op(B) + β·C0, the relative error against it and the bound a
// correct kernel meets.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "outcore/backends/cpu.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/device.hpp"
#include "outcore/device/dtype.hpp"
#include "outcore/io/matrix.hpp"
#include "outcore/ops/gemm.hpp"

namespace outcore::gemm_test {

/// The CPU device the GEMM tests run on (2 GiB).
inline std::unique_ptr<Device> make_device() {
    return cpu::make_cpu_device({.total_memory_bytes = 2 * kGiB});
}

/// After a run: no device or pinned memory is still allocated.
inline void expect_nothing_held(const Device& device) {
    EXPECT_EQ(device.allocated_bytes(MemoryKind::Device), 0U);
    EXPECT_EQ(device.allocated_bytes(MemoryKind::HostPinned), 0U);
}

using io::HostMatrix;
using io::Layout;
using ops::GemmOptions;

inline std::uint16_t to_bf16(float f) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &f, sizeof bits);
    return static_cast<std::uint16_t>(bits >> 16);  // truncation: the value is then exact in bf16
}
inline double from_bf16(std::uint16_t h) {
    const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
    float f = 0;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

/// A logical rows × cols matrix of one element type, stored column- or row-major,
/// with its values kept in double for the reference.
struct Matrix {
    std::uint64_t rows = 0, cols = 0;
    DType type = DType::F32;
    Layout layout = Layout::ColMajor;
    std::vector<std::byte> storage;
    std::uint64_t ld = 0;
    static constexpr std::uint64_t kDefaultPad = UINT64_MAX;

    /// `pad`: elements between the end of a column (row) and the next; by default
    /// r·c mod 3, so ld != rows is exercised too.
    Matrix(std::uint64_t r, std::uint64_t c, DType t, Layout l, std::uint64_t pad = kDefaultPad)
        : rows(r), cols(c), type(t), layout(l) {
        ld = (l == Layout::ColMajor ? r : c) + (pad == kDefaultPad ? r * c % 3 : pad);
        const std::uint64_t outer = l == Layout::ColMajor ? c : r;
        storage.resize(
            static_cast<std::size_t>(std::max<std::uint64_t>(outer * ld, 1) * outcore::dtype_bytes(t)));
    }
    [[nodiscard]] std::size_t index(std::uint64_t i, std::uint64_t j) const {
        return static_cast<std::size_t>(layout == Layout::ColMajor ? i + j * ld : i * ld + j);
    }
    void set(std::uint64_t i, std::uint64_t j, double v) {
        std::byte* p = storage.data() + index(i, j) * outcore::dtype_bytes(type);
        if (type == DType::F32) {
            const auto f = static_cast<float>(v);
            std::memcpy(p, &f, sizeof f);
        } else if (type == DType::F64) {
            std::memcpy(p, &v, sizeof v);
        } else {
            const std::uint16_t h = type == DType::F16 ? outcore::f32_to_f16(static_cast<float>(v))
                                                       : to_bf16(static_cast<float>(v));
            std::memcpy(p, &h, sizeof h);
        }
    }
    [[nodiscard]] double get(std::uint64_t i, std::uint64_t j) const {
        const std::byte* p = storage.data() + index(i, j) * outcore::dtype_bytes(type);
        if (type == DType::F32) {
            float f = 0;
            std::memcpy(&f, p, sizeof f);
            return f;
        }
        if (type == DType::F64) {
            double d = 0;
            std::memcpy(&d, p, sizeof d);
            return d;
        }
        std::uint16_t h = 0;
        std::memcpy(&h, p, sizeof h);
        return type == DType::F16 ? outcore::f16_to_f32(h) : from_bf16(h);
    }
    void randomize(std::mt19937_64& rng) {
        std::uniform_real_distribution<double> u(-1.0, 1.0);
        for (std::uint64_t j = 0; j < cols; ++j) {
            for (std::uint64_t i = 0; i < rows; ++i) set(i, j, u(rng));
        }
    }
    void poison() {
        for (std::uint64_t j = 0; j < cols; ++j) {
            for (std::uint64_t i = 0; i < rows; ++i) set(i, j, std::numeric_limits<double>::quiet_NaN());
        }
    }
    [[nodiscard]] HostMatrix host() { return HostMatrix(storage.data(), rows, cols, ld, layout, type); }
};

/// α·op(A)·op(B) + β·C0 in float64, column-major m × n.
/// With `magnitudes`, the same sums of absolute values (|α|·|A|·|B| + |β|·|C0|): the
/// scale roundoff is relative to where the terms cancel.
inline std::vector<double> reference(const Matrix& a, const Matrix& b, const Matrix* c0, const GemmOptions& o,
                                     bool magnitudes = false) {
    auto mag = [magnitudes](double v) { return magnitudes ? std::fabs(v) : v; };
    const std::uint64_t m = o.trans_a ? a.cols : a.rows;
    const std::uint64_t k = o.trans_a ? a.rows : a.cols;
    const std::uint64_t n = o.trans_b ? b.rows : b.cols;
    std::vector<double> opa(static_cast<std::size_t>(m * k));
    std::vector<double> opb(static_cast<std::size_t>(k * n));
    for (std::uint64_t p = 0; p < k; ++p) {
        for (std::uint64_t i = 0; i < m; ++i) opa[i + p * m] = mag(o.trans_a ? a.get(p, i) : a.get(i, p));
        for (std::uint64_t j = 0; j < n; ++j) opb[p + j * k] = mag(o.trans_b ? b.get(j, p) : b.get(p, j));
    }
    std::vector<double> out(static_cast<std::size_t>(m * n), 0.0);
    for (std::uint64_t j = 0; j < n; ++j) {
        double* col = out.data() + j * m;
        for (std::uint64_t p = 0; p < k; ++p) {
            const double bv = opb[p + j * k];
            const double* acol = opa.data() + p * m;
            for (std::uint64_t i = 0; i < m; ++i) col[i] += acol[i] * bv;
        }
        for (std::uint64_t i = 0; i < m; ++i) {
            col[i] = mag(o.alpha) * col[i] + (c0 != nullptr ? mag(o.beta) * mag(c0->get(i, j)) : 0.0);
        }
    }
    return out;
}

/// ‖out − ref‖_F / ‖scale‖_F (scale: reference(..., true)), +inf for a non-finite
/// element: roundoff measured against the terms' magnitudes, so a result that cancels
/// (1×1×1 with β: a·b ≈ −β·c0) is not held to a bound relative to a tiny result.
inline double scaled_error(const Matrix& c, const std::vector<double>& ref,
                           const std::vector<double>& scale) {
    double diff = 0;
    double norm = 0;
    for (std::uint64_t j = 0; j < c.cols; ++j) {
        for (std::uint64_t i = 0; i < c.rows; ++i) {
            const double v = c.get(i, j);
            if (!std::isfinite(v)) return std::numeric_limits<double>::infinity();
            diff += (v - ref[i + j * c.rows]) * (v - ref[i + j * c.rows]);
            norm += scale[i + j * c.rows] * scale[i + j * c.rows];
        }
    }
    return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

/// ‖out − ref‖_F / ‖ref‖_F, or +inf if any element is not finite (NaN never passes).
inline double relative_error(const Matrix& c, const std::vector<double>& ref) {
    return scaled_error(c, ref, ref);
}

/// The bound a correct kernel meets: a few units of roundoff growing like √k.
inline double error_bound(DType type, GemmCompute compute, std::uint64_t k) {
    const double sk = std::sqrt(static_cast<double>(k));
    if (compute == GemmCompute::FastTF32) return 1e-3 * sk;  // 10-bit mantissa products
    if (type == DType::F64) return 1e-14 * (1.0 + sk);
    return 1e-6 * (1.0 + sk);  // f32, bf16, f16 (16-bit inputs are exact; products accumulate in f32)
}

}  // namespace outcore::gemm_test
