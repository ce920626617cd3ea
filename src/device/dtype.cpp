#include "outcore/device/dtype.hpp"

#include <bit>
#include <cmath>
#include <optional>

namespace outcore {

std::string_view to_string(DType t) noexcept {
    switch (t) {
        case DType::F32: return "f32";
        case DType::F64: return "f64";
        case DType::BF16: return "bf16";
        case DType::F16: return "f16";
        case DType::U8: return "u8";
        case DType::U16: return "u16";
    }
    return "unknown";
}

std::optional<DType> parse_dtype(std::string_view text) noexcept {
    for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16, DType::U8, DType::U16}) {
        if (to_string(t) == text) return t;
    }
    return std::nullopt;
}

float f16_to_f32(std::uint16_t bits) noexcept {
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000U) << 16;
    const std::uint32_t exponent = (bits >> 10) & 0x1fU;
    const std::uint32_t mantissa = bits & 0x3ffU;
    if (exponent == 0) {  // zero or subnormal: mantissa · 2^-24, exact in float
        const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
        return sign != 0 ? -magnitude : magnitude;
    }
    if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000U | (mantissa << 13));  // inf, NaN
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

float bf16_to_f32(std::uint16_t bits) noexcept {
    return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

std::uint16_t f32_to_bf16(float value) noexcept {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
    if ((bits & 0x7fffffffU) > 0x7f800000U) return static_cast<std::uint16_t>((bits >> 16) | 0x40U);  // NaN
    // Round to nearest even on the 16 bits dropped; a carry steps the exponent (to inf
    // past the largest finite value), which is right.
    return static_cast<std::uint16_t>((bits + 0x7fffU + ((bits >> 16) & 1U)) >> 16);
}

std::uint16_t f32_to_f16(float value) noexcept {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
    const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000U);
    const std::uint32_t exponent = (bits >> 23) & 0xffU;
    const std::uint32_t mantissa = bits & 0x7fffffU;
    if (exponent == 0xff) {  // inf stays inf, NaN stays a (quiet) NaN
        return static_cast<std::uint16_t>(sign | 0x7c00U | (mantissa != 0 ? 0x200U | (mantissa >> 13) : 0U));
    }
    const int e = static_cast<int>(exponent) - 127 + 15;               // the binary16 exponent
    if (e >= 0x1f) return static_cast<std::uint16_t>(sign | 0x7c00U);  // overflow: inf
    // The significand with its hidden bit, shifted so that 10 bits (or fewer, for a
    // subnormal result) stay, rounded to nearest even on the bits shifted out.
    const std::uint32_t full = exponent == 0 ? mantissa : (mantissa | 0x800000U);
    const int shift = e > 0 ? 13 : 14 - e;  // subnormal results lose 1 - e more bits
    if (shift > 24) return sign;            // below half the smallest subnormal: ±0
    const std::uint32_t kept = full >> shift;
    const std::uint32_t rest = full & ((1U << shift) - 1U);
    const std::uint32_t half = 1U << (shift - 1);
    std::uint32_t out = e > 0 ? (static_cast<std::uint32_t>(e) << 10) | (kept & 0x3ffU) : kept;
    if (rest > half || (rest == half && (kept & 1U) != 0))
        ++out;  // a carry may step the exponent: still right
    return static_cast<std::uint16_t>(sign | out);
}
}  // namespace outcore
