// cli/gemm_support.hpp — the pieces of `outcore gemm` around ops::gemm: seeded random
// operands in host memory, a shape-only matrix for planning before anything is
// allocated, bf16 operands converted from float32 .npy files tile by tile, and the
// float64 reference check.
//
//   ShapeMatrix shape_a(m, k, DType::F32);                         // plan first ...
//   fill_random(buffer.get(), rows, cols, DType::F32, seed, kStreamA);   // ... then generate
//   GemmCheck check = verify_gemm({.a = &a, .b = &b, .c = &c_out, ...});
//   check.relative_error <= check.bound_error
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "outcore/device/dtype.hpp"
#include "outcore/device/kernels.hpp"
#include "outcore/io/matrix.hpp"

namespace outcore::cli {

/// A rows × cols matrix with no data: plans are made on shapes before the operands
/// are generated or the output is created. read() and write() throw InternalError.
class ShapeMatrix final : public io::MatrixSource, public io::MatrixSink {
public:
    ShapeMatrix(std::uint64_t rows, std::uint64_t cols, DType dtype)
        : rows_(rows), cols_(cols), dtype_(dtype) {}
    [[nodiscard]] std::uint64_t rows() const noexcept override { return rows_; }
    [[nodiscard]] std::uint64_t cols() const noexcept override { return cols_; }
    [[nodiscard]] DType dtype() const noexcept override { return dtype_; }

private:
    void do_read(std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t, std::byte*,
                 std::uint64_t) const override;
    void do_write(std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t, const std::byte*,
                  std::uint64_t) override;

    std::uint64_t rows_, cols_;
    DType dtype_;
};

/// A float32 source seen as bf16 (round to nearest even), converted block by block:
/// `outcore gemm --dtype bf16` on float32 .npy files (.npy has no bf16). `source`
/// must be F32 and outlive this object. Thread-safe as the source is.
class Bf16FromF32 final : public io::MatrixSource {
public:
    explicit Bf16FromF32(const io::MatrixSource& source);
    [[nodiscard]] std::uint64_t rows() const noexcept override { return source_->rows(); }
    [[nodiscard]] std::uint64_t cols() const noexcept override { return source_->cols(); }
    [[nodiscard]] DType dtype() const noexcept override { return DType::BF16; }
    [[nodiscard]] bool row_major() const noexcept override { return source_->row_major(); }

private:
    void do_read(std::uint64_t row0, std::uint64_t col0, std::uint64_t rows, std::uint64_t cols,
                 std::byte* dst, std::uint64_t ld_elements) const override;

    const io::MatrixSource* source_;
};

/// Random streams of one run: each operand draws from its own stream of the seed.
inline constexpr std::uint64_t kStreamA = 1;
inline constexpr std::uint64_t kStreamB = 2;
inline constexpr std::uint64_t kStreamC = 3;
inline constexpr std::uint64_t kStreamSample = 4;

/// Fills `dst` with a row-major rows × cols matrix of `type` (F32, F64, BF16 or F16) whose
/// element (i, j) is uniform in [−1, 1) and depends only on (seed, stream, i·cols + j),
/// so any thread count gives the same matrix. Uses every core.
void fill_random(std::byte* dst, std::uint64_t rows, std::uint64_t cols, DType type, std::uint64_t seed,
                 std::uint64_t stream);

/// What verify_gemm compares: the operands as the GEMM read them, its output, and
/// the scalars. c_in is read when beta ≠ 0.
struct GemmCheckInputs {
    const io::MatrixSource* a = nullptr;
    const io::MatrixSource* b = nullptr;
    const io::MatrixSource* c_in = nullptr;
    const io::MatrixSource* c_out = nullptr;
    bool trans_a = false;
    bool trans_b = false;
    double alpha = 1.0;
    double beta = 0.0;
    DType type = DType::F32;
    GemmCompute compute = GemmCompute::Exact;
    std::uint64_t m = 0, n = 0, k = 0;
    std::uint64_t seed = 0;  ///< picks the sampled blocks
};

struct GemmCheck {
    bool full = false;              ///< every element of C was checked
    std::uint64_t block_count = 0;  ///< blocks of up to 64 × 64 checked
    std::uint64_t element_count = 0;
    double relative_error = 0;           ///< ‖out − ref‖ / ‖ref‖ over the checked elements
    double bound_error = 0;              ///< the largest relative error that passes
    std::uint64_t non_finite_count = 0;  ///< NaN or ±inf outputs where the reference is finite
    bool passed = false;
};

/// The error a dtype may show against a float64 reference: f64 1e-12, f32 1e-5,
/// tf32 2e-3, bf16 1e-2 (relative, Frobenius), each × max(1, √(k/4096)) since
/// rounding errors of a k-term sum grow like √k.
[[nodiscard]] double gemm_error_bound(DType type, GemmCompute compute, std::uint64_t k) noexcept;

/// Recomputes C in float64 from the inputs and compares: every element when
/// m·n·k ≤ 2^28, else 8 random 64 × 64 blocks and the bottom-right one (the tails).
/// Reads through the sources (files are re-read). Throws what the sources throw.
[[nodiscard]] GemmCheck verify_gemm(const GemmCheckInputs& in);

}  // namespace outcore::cli
