#include "outcore/core/size.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>

#include "outcore/core/error.hpp"
#include "support/test_seed.hpp"

namespace outcore {
namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

TEST(ParseSize, AcceptsTheDocumentedForms) {
    EXPECT_EQ(parse_bytes("4096"), 4096U);
    EXPECT_EQ(parse_bytes("512MiB"), 512 * kMiB);
    EXPECT_EQ(parse_bytes("2GiB"), 2 * kGiB);
    EXPECT_EQ(parse_bytes("2 gib"), 2 * kGiB);
    EXPECT_EQ(parse_bytes("1.5GB"), 1'500'000'000U);
    EXPECT_EQ(parse_bytes("1.5GiB"), 3 * kGiB / 2);
    EXPECT_EQ(parse_bytes("10kB"), 10'000U);
    EXPECT_EQ(parse_bytes("16M"), 16 * kMiB);
    EXPECT_EQ(parse_bytes("7B"), 7U);
    EXPECT_EQ(parse_bytes(" 3 KiB "), 3 * kKiB);
    EXPECT_EQ(parse_bytes("0"), 0U);
    const SizeSpec pct = parse_size("75%");
    EXPECT_EQ(pct.kind, SizeSpec::Kind::Fraction);
    EXPECT_DOUBLE_EQ(pct.fraction, 0.75);
    EXPECT_EQ(pct.resolve(1000, 1), 750U);
    const SizeSpec a = parse_size("AUTO");
    EXPECT_EQ(a.kind, SizeSpec::Kind::Auto);
    EXPECT_EQ(a.resolve(1000, 123), 123U);
}

TEST(ParseSize, RejectsBadTextWithAUsageErrorThatNamesTheSetting) {
    for (const char* bad :
         {"", " ", "-1", "1e3", "12XB", "GiB", ".", "1..5G", "101%", "1.5.2", "abc", "%", "1 2"}) {
        try {
            (void)parse_size(bad, "device_budget");
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const UsageError& e) {
            EXPECT_EQ(e.component(), "device_budget") << bad;
            EXPECT_NE(std::string(e.what()).find("invalid size"), std::string::npos) << e.what();
        }
    }
    EXPECT_THROW((void)parse_bytes("50%"), UsageError);
    EXPECT_THROW((void)parse_bytes("auto"), UsageError);
}

TEST(ParseSize, BoundaryValues) {
    EXPECT_EQ(parse_bytes("1"), 1U);
    EXPECT_EQ(parse_bytes("2147483648"), 1ULL << 31);
    EXPECT_EQ(parse_bytes("4294967296"), 1ULL << 32);
    EXPECT_EQ(parse_bytes("9223372036854775808"), 1ULL << 63);
    EXPECT_EQ(parse_bytes("18446744073709551615"), kMax);
    EXPECT_THROW((void)parse_bytes("18446744073709551616"), UsageError);
    EXPECT_THROW((void)parse_bytes("16777216TiB"), UsageError);  // 2^64 exactly
    EXPECT_EQ(parse_bytes("16777215TiB"), 16777215ULL * kTiB);
    EXPECT_THROW((void)parse_bytes("18446744073709551616.0"), UsageError);
    EXPECT_THROW((void)parse_bytes("99999999999999999999999999GB"), UsageError);
    EXPECT_EQ(parse_size("100%").resolve(kMax, 0), kMax);
}

TEST(ParseSize, RoundTripsThroughToStringForRandomValues) {
    std::mt19937_64 rng(test::seed());
    for (int i = 0; i < 10000; ++i) {
        const std::uint64_t v = rng() >> (rng() % 64);
        const SizeSpec s{SizeSpec::Kind::Bytes, v, 0.0};
        EXPECT_EQ(parse_size(s.to_string()), s);
    }
    EXPECT_EQ(parse_size(parse_size("25%").to_string()).fraction, 0.25);
    EXPECT_EQ(parse_size(SizeSpec{}.to_string()).kind, SizeSpec::Kind::Auto);
}

TEST(FormatSize, ReadsLikeAPersonWouldWriteIt) {
    EXPECT_EQ(format_size(0), "0 B");
    EXPECT_EQ(format_size(512), "512 B");
    EXPECT_EQ(format_size(1023), "1023 B");
    EXPECT_EQ(format_size(kKiB), "1 KiB");
    EXPECT_EQ(format_size(3 * kGiB / 2), "1.5 GiB");
    EXPECT_EQ(format_size(16 * kGiB), "16 GiB");
    EXPECT_EQ(format_size(kMax), "16 EiB");
    EXPECT_EQ(format_size(1ULL << 63), "8 EiB");
}

TEST(CheckedArithmetic, OverflowIsAUsageErrorNeverAWrap) {
    EXPECT_EQ(checked_add(0, 0), 0U);
    EXPECT_EQ(checked_add(kMax - 1, 1), kMax);
    EXPECT_THROW((void)checked_add(kMax, 1), UsageError);
    EXPECT_THROW((void)checked_add(1ULL << 63, 1ULL << 63), UsageError);
    EXPECT_EQ(checked_mul(1ULL << 31, 1ULL << 32), 1ULL << 63);
    EXPECT_THROW((void)checked_mul(1ULL << 32, 1ULL << 32), UsageError);
    EXPECT_EQ(checked_mul(46341, 46341), 2147488281ULL);  // 46341² just past 2^31
    EXPECT_EQ(checked_mul(checked_mul(65536, 65536), 8), 1ULL << 35);
    EXPECT_THROW((void)checked_mul(kMax, 2), UsageError);
    EXPECT_EQ(checked_mul(kMax, 1), kMax);
    EXPECT_EQ(checked_mul(kMax, 0), 0U);
    EXPECT_THROW((void)checked_sub(1, 2), UsageError);
    EXPECT_EQ(checked_sub(kMax, kMax), 0U);
    EXPECT_EQ(checked_align_up(1, 256), 256U);
    EXPECT_EQ(checked_align_up(0, 256), 0U);
    EXPECT_THROW((void)checked_align_up(kMax, 256), UsageError);
    EXPECT_THROW((void)checked_align_up(5, 3), UsageError);
    EXPECT_THROW((void)checked_align_up(5, 0), UsageError);
}

TEST(CheckedArithmetic, AgreesWithWideArithmeticOnRandomOperands) {
    std::mt19937_64 rng(test::seed());
    for (int i = 0; i < 100000; ++i) {
        const std::uint64_t a = rng() >> (rng() % 64);
        const std::uint64_t b = rng() >> (rng() % 64);
        __extension__ using U128 = unsigned __int128;  // the wide reference
        const U128 sum = static_cast<U128>(a) + b;
        const U128 prod = static_cast<U128>(a) * b;
        if (sum > kMax) {
            EXPECT_THROW((void)checked_add(a, b), UsageError);
        } else {
            EXPECT_EQ(checked_add(a, b), static_cast<std::uint64_t>(sum));
        }
        if (prod > kMax) {
            EXPECT_THROW((void)checked_mul(a, b), UsageError);
        } else {
            EXPECT_EQ(checked_mul(a, b), static_cast<std::uint64_t>(prod));
        }
    }
}

}  // namespace
}  // namespace outcore
