// Element types: names, the binary16 conversions the 16-bit GEMMs use, checked against
// the compiler's own _Float16 on every f16 pattern and on random floats, and bfloat16's
// on every pattern, its ties and its neighbours.
#include "outcore/device/dtype.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "support/test_seed.hpp"

namespace {

using outcore::DType;

TEST(DType, NamesRoundTrip) {
    for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16, DType::U8, DType::U16}) {
        EXPECT_EQ(outcore::parse_dtype(outcore::to_string(t)), t);
    }
    EXPECT_FALSE(outcore::parse_dtype("f8").has_value());
    EXPECT_EQ(outcore::gemm_c_dtype(DType::F16), DType::F32);
    EXPECT_EQ(outcore::gemm_c_dtype(DType::BF16), DType::F32);
    EXPECT_EQ(outcore::gemm_c_dtype(DType::F64), DType::F64);
}

TEST(DType, HalfWidensExactlyForEveryPattern) {
    for (std::uint32_t h = 0; h < 0x10000; ++h) {
        const float want = static_cast<float>(std::bit_cast<_Float16>(static_cast<std::uint16_t>(h)));
        const float got = outcore::f16_to_f32(static_cast<std::uint16_t>(h));
        if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(got)) << h;
        } else {
            ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want)) << h;
        }
    }
}

TEST(DType, HalfRoundsToNearestEven) {
    std::mt19937_64 rng(outcore::test::seed());
    auto check = [](float v) {
        if (std::isnan(v)) {  // any NaN pattern will do, as long as it stays NaN
            const std::uint16_t h = outcore::f32_to_f16(v);
            ASSERT_TRUE((h & 0x7c00U) == 0x7c00U && (h & 0x3ffU) != 0) << v;
            return;
        }
        const auto want = std::bit_cast<std::uint16_t>(static_cast<_Float16>(v));
        ASSERT_EQ(outcore::f32_to_f16(v), want) << v;
    };
    // Every f16 value, the midpoints between neighbours (ties) and one float either side.
    for (std::uint32_t h = 0; h < 0x7c00; ++h) {
        const float a = outcore::f16_to_f32(static_cast<std::uint16_t>(h));
        const float b = outcore::f16_to_f32(static_cast<std::uint16_t>(h + 1));
        const float mid = (a + b) / 2;  // exact: one more bit than f16 has
        for (float v : {a, mid, std::nextafter(mid, 0.0F), std::nextafter(mid, 1e9F)}) {
            check(v);
            check(-v);
        }
    }
    for (int i = 0; i < 1000000; ++i) check(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
}

// bfloat16 (a narrow GEMM C): widening is exact, and rounding to nearest even sends every
// value to the nearer neighbour, ties to the one with an even last bit, values past the
// largest to inf, and NaN to a NaN.
TEST(DType, BfloatRoundsToNearestEven) {
    for (std::uint32_t h = 0; h < 0x7f7f; ++h) {  // each finite value and the next finite one
        const auto lo = static_cast<std::uint16_t>(h);
        const auto hi = static_cast<std::uint16_t>(h + 1);
        const float a = outcore::bf16_to_f32(lo);
        const float b = outcore::bf16_to_f32(hi);
        ASSERT_EQ(std::bit_cast<std::uint32_t>(a), h << 16);
        const float mid = a + (b - a) / 2;  // exact (f32 has 16 more bits), and no overflow
        const std::uint16_t even = (h & 1U) == 0 ? lo : hi;
        for (const float sign : {1.0F, -1.0F}) {
            const auto s = static_cast<std::uint16_t>(sign < 0 ? 0x8000U : 0U);
            ASSERT_EQ(outcore::f32_to_bf16(sign * a), lo | s) << h;
            ASSERT_EQ(outcore::f32_to_bf16(sign * mid), even | s) << h;
            ASSERT_EQ(outcore::f32_to_bf16(sign * std::nextafter(mid, 0.0F)), lo | s) << h;
            ASSERT_EQ(outcore::f32_to_bf16(sign * std::nextafter(mid, INFINITY)), hi | s) << h;
        }
    }
    EXPECT_EQ(outcore::f32_to_bf16(INFINITY), 0x7f80U);
    EXPECT_EQ(outcore::f32_to_bf16(-INFINITY), 0xff80U);
    // The largest finite bf16 (0x7f7f, odd) and past it: the tie with 2^128 rounds to inf.
    EXPECT_EQ(outcore::f32_to_bf16(std::bit_cast<float>(0x7f7f7fffU)), 0x7f7fU);
    EXPECT_EQ(outcore::f32_to_bf16(std::bit_cast<float>(0x7f7f8000U)), 0x7f80U);
    EXPECT_EQ(outcore::f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80U);
    for (const float nan : {std::numeric_limits<float>::quiet_NaN(), std::bit_cast<float>(0x7f800001U),
                            std::bit_cast<float>(0xff800001U)}) {
        EXPECT_TRUE(std::isnan(outcore::bf16_to_f32(outcore::f32_to_bf16(nan))));
    }
}

}  // namespace
