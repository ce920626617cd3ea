#include "outcore/device/kernels.hpp"

#include <fmt/format.h>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"

namespace outcore {

namespace {

// Bytes an m×n column-major matrix with leading dimension ld spans: ld*(n-1) + m elements.
std::uint64_t span_bytes(std::uint64_t rows, std::uint64_t cols, std::uint64_t ld, std::uint32_t elem) {
    const std::uint64_t elems = checked_add(checked_mul(ld, cols - 1, "gemm"), rows, "gemm");
    return checked_mul(elems, elem, "gemm");
}

void check_operand(const char* name, const BufferView& v, std::uint64_t rows, std::uint64_t cols,
                   std::uint64_t ld, std::uint32_t elem) {
    if (ld < rows)
        throw UsageError("gemm", fmt::format("ld{} = {} is less than its {} rows", name, ld, rows));
    const std::uint64_t need = span_bytes(rows, cols, ld, elem);
    if (v.bytes < need) {
        throw UsageError("gemm", fmt::format("{} needs {} bytes but its buffer has {}", name, need, v.bytes));
    }
}

}  // namespace

void Kernels::gemm(Queue& queue, const GemmTileArgs& a) {
    if (!do_supports_gemm(a.type, a.compute)) {
        throw UsageError("gemm", fmt::format("this backend has no {} GEMM{}", to_string(a.type),
                                             a.compute == GemmCompute::FastTF32 ? " with tf32" : ""));
    }
    if (a.narrow_c && !supports_narrow_c(a.type)) {
        throw UsageError("gemm", fmt::format("this backend has no {} GEMM with a {} C", to_string(a.type),
                                             to_string(a.type)));
    }
    if (a.m == 0 || a.n == 0) return;
    const std::uint32_t in_bytes = dtype_bytes(a.type);
    const std::uint32_t out_bytes = dtype_bytes(gemm_tile_c_dtype(a));  // f32 for 16-bit inputs unless narrow
    if (a.k > 0) {
        check_operand("a", a.a, a.trans_a ? a.k : a.m, a.trans_a ? a.m : a.k, a.lda, in_bytes);
        check_operand("b", a.b, a.trans_b ? a.n : a.k, a.trans_b ? a.k : a.n, a.ldb, in_bytes);
    }
    check_operand("c", a.c, a.m, a.n, a.ldc, out_bytes);
    do_gemm(queue, a);
}

void Kernels::convert(Queue& queue, const ConvertArgs& a) {
    if (!supports_convert(a.from, a.to)) {
        throw UsageError("convert", fmt::format("this backend has no {} → {} conversion", to_string(a.from),
                                                to_string(a.to)));
    }
    const std::uint64_t in_bytes = checked_mul(a.count, dtype_bytes(a.from), "convert");
    const std::uint64_t out_bytes = checked_mul(a.count, dtype_bytes(a.to), "convert");
    if (a.in.bytes < in_bytes || a.out.bytes < out_bytes) {
        throw UsageError("convert",
                         fmt::format("{} elements need {} bytes in and {} out; the views have {} and {}",
                                     a.count, in_bytes, out_bytes, a.in.bytes, a.out.bytes));
    }
    if (a.count == 0) return;
    // Views of one native allocation overlap where their byte ranges in it do.
    const std::uint64_t in_at = a.in.native_offset();
    const std::uint64_t out_at = a.out.native_offset();
    if (a.in.block.device_id == a.out.block.device_id && a.in.block.native == a.out.block.native &&
        in_at < out_at + out_bytes && out_at < in_at + in_bytes)
        throw UsageError("convert", "the input and output views overlap");
    do_convert(queue, a);
}

void Kernels::do_convert(Queue& /*queue*/, const ConvertArgs& a) {
    throw UsageError(
        "convert", fmt::format("this backend has no {} → {} conversion", to_string(a.from), to_string(a.to)));
}

namespace {

std::uint32_t filter_halo_rows(FilterOp op, std::uint32_t radius) {
    return op == FilterOp::SeparableRow ? 0 : radius;
}
std::uint32_t filter_halo_cols(FilterOp op, std::uint32_t radius) {
    return op == FilterOp::SeparableColumn ? 0 : radius;
}

void check_image(const char* name, const BufferView& v, std::uint64_t rows, std::uint64_t cols,
                 std::uint64_t stride, std::uint64_t pixel_bytes) {
    const std::uint64_t row_bytes = checked_mul(cols, pixel_bytes, "filter");
    if (stride < row_bytes) {
        throw UsageError("filter", fmt::format("{} row stride {} is less than a row of {} bytes", name,
                                               stride, row_bytes));
    }
    const std::uint64_t need = checked_add(checked_mul(rows - 1, stride, "filter"), row_bytes, "filter");
    if (v.bytes < need) {
        throw UsageError("filter",
                         fmt::format("{} needs {} bytes but its buffer has {}", name, need, v.bytes));
    }
}

}  // namespace

namespace {

/// Largest Conv2D radius: 15×15 kernels, on every backend (tiled work must run on any).
constexpr std::uint32_t kMaxConvRadius = 7;

bool is_pixel_type(DType t) noexcept { return t == DType::U8 || t == DType::U16 || t == DType::F32; }

}  // namespace

void Kernels::filter(Queue& queue, const FilterTileArgs& a) {
    if (a.channels < 1 || a.channels > 4)
        throw UsageError("filter", fmt::format("{} channels (1..4)", a.channels));
    if (!is_pixel_type(a.in_type) || !is_pixel_type(a.out_type)) {
        throw UsageError("filter", fmt::format("{} → {} is not supported (u8, u16 and f32 only)",
                                               to_string(a.in_type), to_string(a.out_type)));
    }
    if (a.op == FilterOp::SeparableRow && a.out_type != DType::F32) {
        throw UsageError("filter", "the separable row pass writes f32");
    }
    if (a.op == FilterOp::SeparableColumn && a.in_type != DType::F32) {
        throw UsageError("filter", "the separable column pass reads f32");
    }
    if (a.op == FilterOp::Conv2D && a.radius > kMaxConvRadius) {
        throw UsageError("filter",
                         fmt::format("a {0}×{0} kernel is over the 15×15 limit", 2ULL * a.radius + 1));
    }
    if (a.out_rows == 0 || a.out_cols == 0) return;
    if (a.op == FilterOp::SobelMagnitude && a.radius != 1) throw UsageError("filter", "Sobel has radius 1");
    std::uint64_t taps = 0;
    if (a.op == FilterOp::Conv2D) {
        taps = checked_mul(2ULL * a.radius + 1, 2ULL * a.radius + 1, "filter");
    } else if (a.op != FilterOp::SobelMagnitude) {
        taps = 2ULL * a.radius + 1;
    }
    if (taps != 0 && (a.weights == nullptr || a.weights->size_bytes() != taps * sizeof(float))) {
        throw UsageError("filter", fmt::format("the filter needs {} f32 weights", taps));
    }
    const std::uint64_t in_rows = checked_add(a.out_rows, 2ULL * filter_halo_rows(a.op, a.radius), "filter");
    const std::uint64_t in_cols = checked_add(a.out_cols, 2ULL * filter_halo_cols(a.op, a.radius), "filter");
    check_image("input", a.in, in_rows, in_cols, a.in_row_stride,
                std::uint64_t{dtype_bytes(a.in_type)} * a.channels);
    check_image("output", a.out, a.out_rows, a.out_cols, a.out_row_stride,
                std::uint64_t{dtype_bytes(a.out_type)} * a.channels);
    do_filter(queue, a);
}

void Kernels::do_filter(Queue& /*queue*/, const FilterTileArgs& /*args*/) {
    throw UsageError("filter", "this backend has no filter kernels");
}

void Kernels::pad_edges(Queue& queue, const PadEdgesArgs& a) {
    validate_edge_padding(a.area);
    check_image("edge-fill area", a.buffer, a.area.rows, a.area.cols, a.area.row_stride, a.area.pixel_bytes);
    if (!a.area.crosses_edge()) return;
    do_pad_edges(queue, a);
}

void Kernels::do_pad_edges(Queue& /*queue*/, const PadEdgesArgs& /*args*/) {
    throw UsageError("filter", "this backend has no edge-fill kernel");
}

}  // namespace outcore
