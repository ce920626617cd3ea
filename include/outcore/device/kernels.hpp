// outcore/device/kernels.hpp — the few compute kernels the ops need, per backend.
//
//   GemmTileArgs g{.m = 512, .n = 512, .k = 512, .a = a_slot, .lda = 512, ...};
//   device.kernels().gemm(compute_queue, g);     // enqueued, asynchronous
//
// Matrices are column-major as in BLAS: element (i, j) of A sits at a[i + j*lda].
// A row-major caller computes Cᵀ = Bᵀ·Aᵀ by swapping operands. Each backend
// implements these with its native library (OpenBLAS, cuBLAS, a compute shader).
#pragma once

#include <cstdint>

#include "outcore/device/block.hpp"
#include "outcore/device/dtype.hpp"
#include "outcore/device/edge.hpp"
#include "outcore/device/kernel_params.hpp"

namespace outcore {

class Queue;

/// How a GEMM may compute: exact in its type, or faster with reduced-precision
/// products (tf32 for f32 inputs) where the backend has them.
enum class GemmCompute : unsigned char { Exact, FastTF32 };

/// C[m×n] = alpha · op(A)[m×k] · op(B)[k×n] + beta · C, all in `type` (bf16 inputs
/// accumulate and store C in f32, or with narrow_c in bf16). Leading dimensions are in
/// elements.
struct GemmTileArgs {
    DType type = DType::F32;
    GemmCompute compute = GemmCompute::Exact;
    bool trans_a = false;
    bool trans_b = false;
    std::uint64_t m = 0, n = 0, k = 0;
    BufferView a{};
    std::uint64_t lda = 0;
    BufferView b{};
    std::uint64_t ldb = 0;
    BufferView c{};
    std::uint64_t ldc = 0;
    double alpha = 1.0;
    double beta = 0.0;
    /// 16-bit float inputs (bf16, f16) only: C holds the inputs' type, not f32. The
    /// sums are f32 as always and rounded once, to nearest even, when stored; β·C reads
    /// the 16-bit C widened. Where Kernels::supports_narrow_c says so.
    bool narrow_c = false;
};

/// The element type of a GEMM tile's C: gemm_c_dtype(type), or the 16-bit input type
/// with narrow_c.
[[nodiscard]] constexpr DType gemm_tile_c_dtype(const GemmTileArgs& a) noexcept {
    return a.narrow_c && is_16bit_float(a.type) ? a.type : gemm_c_dtype(a.type);
}

/// out[i] = in[i] in another float type, i < count, both views packed: f32 to bf16 or
/// f16 rounds every number to nearest even as f32_to_bf16 and f32_to_f16 do, and a NaN
/// stays a NaN (its sign and payload may differ: CUDA writes the canonical one); bf16 or
/// f16 to f32 is exact. A GEMM's f32 sums become a 16-bit C this way where they are
/// accumulated over several calls (a chunked A panel's first tiles, ops/gemm.cpp).
struct ConvertArgs {
    DType from = DType::F32;
    DType to = DType::BF16;
    std::uint64_t count = 0;
    BufferView in{};
    BufferView out{};  ///< must not overlap `in`
};

/// Which filter a FilterTileArgs runs.
enum class FilterOp : unsigned char {
    SeparableRow,     ///< horizontal 1-D pass: out(r, c) = Σ_t w[t]·in(r, c + t), f32 out
    SeparableColumn,  ///< vertical 1-D pass over f32 input: out(r, c) = Σ_t w[t]·in(r + t, c)
    Conv2D,           ///< full 2-D kernel of (2·radius+1)², weights row-major
    SobelMagnitude,   ///< sqrt(gx² + gy²) with the 3×3 Sobel kernels (radius 1)
};

/// One filter tile as a "valid" correlation: the input tile already carries its halo
/// (the executor fills halo pixels outside the image per the edge mode), so the
/// output is smaller than the input by the radius on each filtered side. Pixels are
/// interleaved channels, rows `row_stride` bytes apart. Input and output types may
/// differ (u8/u16/f32 in; the separable row pass writes f32; the final pass writes
/// the image type, rounded to nearest and clamped for integers). Every output pixel
/// is computed with the same arithmetic wherever the tile lies, so tiled results equal
/// whole-image results bit for bit.
struct FilterTileArgs {
    FilterOp op = FilterOp::Conv2D;
    std::uint32_t channels = 1;
    std::uint32_t radius = 0;
    DType in_type = DType::F32;
    DType out_type = DType::F32;
    std::uint64_t out_rows = 0, out_cols = 0;  ///< output tile size in pixels
    BufferView in{};                           ///< input tile with halo
    std::uint64_t in_row_stride = 0;           ///< bytes between input rows
    BufferView out{};
    std::uint64_t out_row_stride = 0;  ///< bytes between output rows
    /// f32 taps (2r+1, or (2r+1)² for Conv2D), inline or in a buffer (KernelParams);
    /// must stay alive until the queue has run the tile.
    const KernelParams* weights = nullptr;
};

/// Fills the pixels of `area` outside the image from the pixels inside it, per its
/// edge mode (a filter tile's halo at the image's edge, filled where the tile lies:
/// the inside part is uploaded straight from the image, the rest made here).
struct PadEdgesArgs {
    EdgePadding area{};
    BufferView buffer{};  ///< the area's pixel (0, 0) at the view's start
};

/// UsageError unless `area` is well formed: pixel size 1..16, a stride of at least a
/// row, an overlap with the image, and every outside pixel's source inside it.
void validate_edge_padding(const EdgePadding& area);
/// pad_edges on host memory: `base` holds the area. Validates first. The CPU backend's
/// kernel and the host-side halo fill of the tiled filter (ops::fill_halo) are this.
void pad_edges_host(std::byte* base, const EdgePadding& area);

class Kernels {
public:
    Kernels() = default;
    Kernels(const Kernels&) = delete;
    Kernels& operator=(const Kernels&) = delete;
    virtual ~Kernels() = default;

    /// Enqueues one GEMM tile on `queue`. Throws UsageError for inconsistent shapes,
    /// leading dimensions or views too small, and for a type or compute mode this
    /// backend lacks (supports_gemm says which).
    void gemm(Queue& queue, const GemmTileArgs& args);
    /// True when gemm accepts this type and compute mode.
    [[nodiscard]] bool supports_gemm(DType type, GemmCompute compute) const noexcept {
        return do_supports_gemm(type, compute);
    }
    /// True when gemm accepts GemmTileArgs::narrow_c for 16-bit inputs of `type`.
    [[nodiscard]] bool supports_narrow_c(DType type) const noexcept {
        return is_16bit_float(type) && do_supports_narrow_c(type);
    }

    /// Enqueues one conversion (ConvertArgs) on `queue`. Throws UsageError for a pair of
    /// types that is not f32 ↔ bf16/f16, views too small or overlapping, and a backend
    /// without it (supports_convert says which).
    void convert(Queue& queue, const ConvertArgs& args);
    /// True when convert accepts this pair of types.
    [[nodiscard]] bool supports_convert(DType from, DType to) const noexcept {
        return is_float_conversion(from, to) && do_supports_convert(from, to);
    }
    /// f32 to a 16-bit float or back: the conversions ConvertArgs describes.
    [[nodiscard]] static constexpr bool is_float_conversion(DType from, DType to) noexcept {
        return (from == DType::F32 && is_16bit_float(to)) || (is_16bit_float(from) && to == DType::F32);
    }

    /// Enqueues one filter tile on `queue`. Throws UsageError for sizes that do not
    /// fit the views or an unsupported type.
    void filter(Queue& queue, const FilterTileArgs& args);
    /// Enqueues an edge fill (PadEdgesArgs) on `queue`; nothing when the area lies
    /// inside the image. Throws UsageError for a malformed area (validate_edge_padding)
    /// or a view too small for it.
    void pad_edges(Queue& queue, const PadEdgesArgs& args);

private:
    virtual void do_gemm(Queue& queue, const GemmTileArgs& args) = 0;
    /// Optional; the default has none.
    [[nodiscard]] virtual bool do_supports_narrow_c(DType /*type*/) const noexcept { return false; }
    /// Optional; the default has none (do_convert throws UsageError).
    [[nodiscard]] virtual bool do_supports_convert(DType /*from*/, DType /*to*/) const noexcept {
        return false;
    }
    virtual void do_convert(Queue& queue, const ConvertArgs& args);
    /// Optional; the default throws UsageError ("this backend has no filter kernels").
    virtual void do_filter(Queue& queue, const FilterTileArgs& args);
    /// Optional; the default throws UsageError ("this backend has no edge-fill kernel").
    virtual void do_pad_edges(Queue& queue, const PadEdgesArgs& args);
    virtual bool do_supports_gemm(DType type, GemmCompute compute) const noexcept = 0;
};

}  // namespace outcore
