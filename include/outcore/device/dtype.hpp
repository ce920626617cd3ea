// outcore/device/dtype.hpp — element types that tiles and kernels carry.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace outcore {

enum class DType : unsigned char { F32, F64, BF16, F16, U8, U16 };

/// Bytes per element: 4, 8, 2, 2, 1, 2.
[[nodiscard]] constexpr std::uint32_t dtype_bytes(DType t) noexcept {
    switch (t) {
        case DType::F32: return 4;
        case DType::F64: return 8;
        case DType::BF16:
        case DType::F16:
        case DType::U16: return 2;
        case DType::U8: return 1;
    }
    return 0;
}
/// bf16 or f16: the 16-bit floats, which GEMMs multiply and accumulate in f32.
[[nodiscard]] constexpr bool is_16bit_float(DType t) noexcept { return t == DType::BF16 || t == DType::F16; }
/// The element type of C in a GEMM on `t` inputs: 16-bit floats (bf16, f16) are
/// multiplied and accumulated in f32 and C is f32; otherwise C has the inputs' type.
[[nodiscard]] constexpr DType gemm_c_dtype(DType t) noexcept { return is_16bit_float(t) ? DType::F32 : t; }

/// bfloat16 bits to float (exact) and float to bfloat16 (round to nearest even; NaN
/// stays a quiet NaN, as CUDA's __float2bfloat16_rn does).
[[nodiscard]] float bf16_to_f32(std::uint16_t bits) noexcept;
[[nodiscard]] std::uint16_t f32_to_bf16(float value) noexcept;

/// IEEE binary16 bits to float (exact) and float to binary16 (round to nearest even).
[[nodiscard]] float f16_to_f32(std::uint16_t bits) noexcept;
[[nodiscard]] std::uint16_t f32_to_f16(float value) noexcept;

/// "f32", "f64", "bf16", "f16", "u8", "u16".
[[nodiscard]] std::string_view to_string(DType t) noexcept;
/// Inverse of to_string; nullopt for unknown text.
[[nodiscard]] std::optional<DType> parse_dtype(std::string_view text) noexcept;

}  // namespace outcore
