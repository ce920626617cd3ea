// Tests of the backend-neutral filter description: the factories' taps (Gaussian
// sums to 1 within float rounding), validation, kernel files, names, edge modes and
// halo filling on tiny images checked against hand-computed values, and the in-core
// reference on images small enough to work out by hand.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "filter_test_support.hpp"
#include "outcore/core/error.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::DType;
using outcore::IoError;
using outcore::UsageError;
using outcore::ops::EdgeMode;
using outcore::ops::FilterKind;
using outcore::ops::FilterSpec;
using outcore::ops::ImageShape;
namespace ft = outcore::filter_test;
namespace ops = outcore::ops;

TEST(FilterSpec, GaussianTapsAreSymmetricPeakedAndSumToOneWithinFloatRounding) {
    std::mt19937_64 rng(outcore::test::seed());
    std::uniform_real_distribution<double> sigma_of(0.05, 40.0);
    for (std::uint64_t i = 0; i < outcore::test::scaled(300); ++i) {
        const double sigma = i == 0 ? 8.0 : sigma_of(rng);
        const FilterSpec g = FilterSpec::gaussian(sigma);
        ASSERT_EQ(g.radius, static_cast<std::uint32_t>(std::ceil(3 * sigma))) << sigma;
        ASSERT_EQ(g.kernel.size(), 2 * std::size_t{g.radius} + 1);
        EXPECT_EQ(g.halo(), g.radius);
        EXPECT_TRUE(g.separable());
        double sum = 0;  // exact: float taps summed in double lose nothing at these sizes
        for (std::size_t t = 0; t < g.kernel.size(); ++t) {
            sum += g.kernel[t];
            EXPECT_EQ(g.kernel[t], g.kernel[g.kernel.size() - 1 - t]) << "asymmetric at " << t;
            if (t > 0 && t <= g.radius) {
                EXPECT_LE(g.kernel[t - 1], g.kernel[t]);
            }
        }
        // Documented bound: each tap within 2^-24 of its value (relative), so the
        // sum is within 2^-24 of 1 (plus the double normalization's own error).
        EXPECT_LE(std::fabs(sum - 1.0), std::ldexp(1.0, -24) + 1e-14) << "sigma " << sigma;
    }
    EXPECT_EQ(FilterSpec::gaussian(8.0).radius, 24U);
}

TEST(FilterSpec, FactoriesRefuseBadParameters) {
    for (double bad : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity(), 1e6}) {
        EXPECT_THROW((void)FilterSpec::gaussian(bad), UsageError) << bad;
    }
    EXPECT_THROW((void)FilterSpec::box(ops::kMaxSeparableRadius + 1), UsageError);
    EXPECT_THROW((void)FilterSpec::conv(std::vector<float>(16, 1.0F), 4), UsageError);    // even
    EXPECT_THROW((void)FilterSpec::conv(std::vector<float>(289, 1.0F), 17), UsageError);  // too large
    EXPECT_THROW((void)FilterSpec::conv(std::vector<float>(8, 1.0F), 3), UsageError);     // count
    EXPECT_THROW((void)FilterSpec::conv({1.0F, std::nanf(""), 1.0F, 1, 1, 1, 1, 1, 1}, 3), UsageError);
    const FilterSpec c = FilterSpec::conv(std::vector<float>(225, 0.5F), 15, EdgeMode::Zero);
    EXPECT_EQ(c.radius, 7U);
    EXPECT_EQ(c.edge, EdgeMode::Zero);
    EXPECT_FALSE(c.separable());

    const FilterSpec b = FilterSpec::box(3);
    EXPECT_EQ(b.kernel, std::vector<float>(7, static_cast<float>(1.0 / 7.0)));
    EXPECT_EQ(FilterSpec::box(0).kernel, std::vector<float>{1.0F});
    const FilterSpec s = FilterSpec::sobel(EdgeMode::Mirror);
    EXPECT_EQ(s.halo(), 1U);
    EXPECT_TRUE(s.kernel.empty());

    FilterSpec hand = FilterSpec::box(2);
    hand.kernel.pop_back();
    EXPECT_THROW(hand.validate(), UsageError);
    hand = FilterSpec::sobel();
    hand.radius = 2;
    EXPECT_THROW(hand.validate(), UsageError);
}

TEST(FilterSpec, NamesRoundTrip) {
    for (FilterKind k : {FilterKind::Gaussian, FilterKind::Box, FilterKind::Sobel, FilterKind::Conv}) {
        EXPECT_EQ(ops::parse_filter_kind(ops::to_string(k)), k);
    }
    for (EdgeMode e : ft::kEdgeModes) EXPECT_EQ(ops::parse_edge_mode(ops::to_string(e)), e);
    EXPECT_FALSE(ops::parse_edge_mode("reflect").has_value());
    EXPECT_FALSE(ops::parse_filter_kind("Gaussian").has_value());
}

class KernelFile : public ::testing::Test {
protected:
    void SetUp() override {
        char pattern[] = "/tmp/outcore_kernel_XXXXXX";
        const int fd = ::mkstemp(pattern);
        ASSERT_GE(fd, 0);
        ::close(fd);
        path_ = pattern;
    }
    void TearDown() override { std::remove(path_.c_str()); }
    void write(const std::string& text) { std::ofstream(path_, std::ios::binary) << text; }
    /// Loads expecting a UsageError and returns its message.
    std::string refused(const std::string& text) {
        write(text);
        try {
            (void)ops::load_kernel_file(path_);
        } catch (const UsageError& e) {
            return e.what();
        }
        ADD_FAILURE() << "accepted: " << text.substr(0, 60);
        return {};
    }
    std::string path_;
};

TEST_F(KernelFile, ReadsSquaresWithCommentsAndSigns) {
    write("# a sharpen kernel\n 0 -1 0\n-1 +5 -1   # centre\n\t0 -1 0e0\n");
    const FilterSpec s = ops::load_kernel_file(path_, EdgeMode::Mirror);
    EXPECT_EQ(s.kind, FilterKind::Conv);
    EXPECT_EQ(s.radius, 1U);
    EXPECT_EQ(s.edge, EdgeMode::Mirror);
    EXPECT_EQ(s.kernel, (std::vector<float>{0, -1, 0, -1, 5, -1, 0, -1, 0}));
    write("2.5");
    EXPECT_EQ(ops::load_kernel_file(path_).kernel, std::vector<float>{2.5F});
    std::string big;
    for (int i = 0; i < 225; ++i) big += std::to_string(i) + (i % 15 == 14 ? "\n" : " ");
    write(big);
    EXPECT_EQ(ops::load_kernel_file(path_).radius, 7U);
}

TEST_F(KernelFile, RefusesMalformedFilesWithOneLineErrors) {
    const std::string bad[] = {"",
                               "# only a comment\n",
                               "1 2 3 4 5 6 7 8",
                               "1 2 3 4",
                               "1 2 3\n4 x 6\n7 8 9\n",
                               "1 2 3 4 nan 6 7 8 9",
                               "1 2 3 4 1e39 6 7 8 9",
                               "1 2 3 4 5,0 6 7 8 9",
                               "1 2 3 4 \x01\xff 6 7 8 9",
                               std::string(70 * 1024, ' ')};
    for (const std::string& text : bad) {
        const std::string message = refused(text);
        EXPECT_EQ(message.find('\n'), std::string::npos) << message;
        EXPECT_NE(message.find("[filter]"), std::string::npos) << message;
    }
    std::string count;
    for (int i = 0; i < 289; ++i) count += "1 ";
    EXPECT_NE(refused(count).find("289 numbers"), std::string::npos);
    EXPECT_NE(refused("1 2 3\n4 x 6\n").find("line 2"), std::string::npos);
    EXPECT_THROW((void)ops::load_kernel_file(path_ + ".missing"), IoError);
}

TEST(FilterEdges, EdgeSourceMatchesHandComputedIndices) {
    // Image of 4 pixels a b c d at 0..3; indices −6..9.
    const std::vector<std::uint64_t> clamp = {0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 3, 3, 3, 3, 3, 3};
    const std::vector<std::uint64_t> mirror = {0, 1, 2, 3, 2, 1, 0, 1, 2, 3, 2, 1, 0, 1, 2, 3};
    for (std::int64_t i = -6; i <= 9; ++i) {
        const auto at = static_cast<std::size_t>(i + 6);
        EXPECT_EQ(ops::edge_source(i, 4, EdgeMode::Clamp), clamp[at]) << i;
        EXPECT_EQ(ops::edge_source(i, 4, EdgeMode::Mirror), mirror[at]) << i;
        const bool inside = i >= 0 && i < 4;
        EXPECT_EQ(ops::edge_source(i, 4, EdgeMode::Zero).has_value(), inside) << i;
    }
    for (std::int64_t i = -9; i <= 9; ++i) {  // a 1-pixel dimension
        EXPECT_EQ(ops::edge_source(i, 1, EdgeMode::Clamp), 0U);
        EXPECT_EQ(ops::edge_source(i, 1, EdgeMode::Mirror), 0U);
        EXPECT_EQ(ops::edge_source(i, 1, EdgeMode::Zero).has_value(), i == 0);
    }
    // Two pixels: mirror alternates a b a b.
    for (std::int64_t i = -5; i <= 5; ++i) {
        EXPECT_EQ(ops::edge_source(i, 2, EdgeMode::Mirror), static_cast<std::uint64_t>(((i % 2) + 2) % 2))
            << i;
    }
}

/// The whole image as one tile with `halo`, as f32 values per staging pixel (1 channel).
std::vector<double> padded(const std::vector<float>& image, std::uint64_t rows, std::uint64_t cols,
                           std::uint32_t halo, EdgeMode edge) {
    const ImageShape shape{.extent = {.rows = rows, .cols = cols}, .channels = 1, .type = DType::F32};
    const std::uint64_t pc = cols + 2 * halo;
    std::vector<std::byte> staging((rows + 2 * halo) * pc * 4, std::byte{0xCD});
    ops::fill_halo(
        shape, {.row = 0, .col = 0, .size = shape.extent}, halo, edge,
        [&](std::uint64_t r0, std::uint64_t n, std::uint64_t c0, std::uint64_t m, std::byte* dst,
            std::uint64_t stride) {
            for (std::uint64_t r = 0; r < n; ++r)
                std::memcpy(dst + r * stride, &image[(r0 + r) * cols + c0], m * 4);
        },
        staging.data(), pc * 4);
    std::vector<double> out(staging.size() / 4);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = ft::load(staging.data(), DType::F32, i);
    return out;
}

TEST(FilterEdges, FillHaloOnTinyImagesMatchesHandComputedValues) {
    // 1×1 image [7], halo 2: every staging pixel is 7 (clamp, mirror) or 0 but the centre.
    for (EdgeMode e : {EdgeMode::Clamp, EdgeMode::Mirror}) {
        EXPECT_EQ(padded({7}, 1, 1, 2, e), std::vector<double>(25, 7.0)) << ops::to_string(e);
    }
    std::vector<double> zero(25, 0.0);
    zero[12] = 7;
    EXPECT_EQ(padded({7}, 1, 1, 2, EdgeMode::Zero), zero);

    // 1×3 image [1 2 3], halo 2: 5 rows of 7.
    const std::vector<double> clamp_row = {1, 1, 1, 2, 3, 3, 3};
    const std::vector<double> mirror_row = {3, 2, 1, 2, 3, 2, 1};
    const std::vector<double> zero_row = {0, 0, 1, 2, 3, 0, 0};
    auto repeat = [](const std::vector<double>& row, int times) {
        std::vector<double> out;
        for (int i = 0; i < times; ++i) out.insert(out.end(), row.begin(), row.end());
        return out;
    };
    EXPECT_EQ(padded({1, 2, 3}, 1, 3, 2, EdgeMode::Clamp), repeat(clamp_row, 5));
    EXPECT_EQ(padded({1, 2, 3}, 1, 3, 2, EdgeMode::Mirror), repeat(mirror_row, 5));
    std::vector<double> zeros = repeat(std::vector<double>(7, 0.0), 2);
    std::vector<double> zero_full = zeros;
    zero_full.insert(zero_full.end(), zero_row.begin(), zero_row.end());
    zero_full.insert(zero_full.end(), zeros.begin(), zeros.end());
    EXPECT_EQ(padded({1, 2, 3}, 1, 3, 2, EdgeMode::Zero), zero_full);

    // 3×1 image [1; 2; 3], halo 1: 5 rows of 3.
    EXPECT_EQ(padded({1, 2, 3}, 3, 1, 1, EdgeMode::Clamp),
              (std::vector<double>{1, 1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3, 3}));
    EXPECT_EQ(padded({1, 2, 3}, 3, 1, 1, EdgeMode::Mirror),
              (std::vector<double>{2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 2, 2, 2}));
    EXPECT_EQ(padded({1, 2, 3}, 3, 1, 1, EdgeMode::Zero),
              (std::vector<double>{0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 3, 0, 0, 0, 0}));
    // 2×2 mirror, halo 3 (wider than the image): period 2 in both directions.
    const std::vector<double> m = padded({1, 2, 3, 4}, 2, 2, 3, EdgeMode::Mirror);
    for (std::int64_t y = -3; y < 5; ++y) {
        for (std::int64_t x = -3; x < 5; ++x) {
            const double want = 1 + 2 * (((y % 2) + 2) % 2) + (((x % 2) + 2) % 2);
            EXPECT_EQ(m[static_cast<std::size_t>((y + 3) * 8 + (x + 3))], want) << y << "," << x;
        }
    }
}

TEST(FilterEdges, FillHaloRefusesBadTilesAndStrides) {
    const ImageShape shape{.extent = {.rows = 4, .cols = 4}, .channels = 1, .type = DType::U8};
    std::vector<std::byte> staging(100);
    auto reader = [](std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t, std::byte*, std::uint64_t) {
    };
    EXPECT_THROW(ops::fill_halo(shape, {.row = 3, .col = 0, .size = {2, 1}}, 1, EdgeMode::Clamp, reader,
                                staging.data(), 10),
                 UsageError);
    EXPECT_THROW(ops::fill_halo(shape, {.row = 0, .col = 0, .size = {0, 1}}, 1, EdgeMode::Clamp, reader,
                                staging.data(), 10),
                 UsageError);
    EXPECT_THROW(ops::fill_halo(shape, {.row = 0, .col = 0, .size = {2, 2}}, 1, EdgeMode::Clamp, reader,
                                staging.data(), 3),
                 UsageError);
    ImageShape bad = shape;
    bad.channels = 5;
    EXPECT_THROW(ops::fill_halo(bad, {.row = 0, .col = 0, .size = {1, 1}}, 1, EdgeMode::Clamp, reader,
                                staging.data(), 30),
                 UsageError);
    bad = shape;
    bad.type = DType::F64;
    EXPECT_THROW(bad.validate(), UsageError);
}

TEST(FilterReference, TinyImagesMatchHandComputedValues) {
    auto dev = ft::cpu_device();
    const float v = 13.25F;
    const auto one_pixel = std::as_bytes(std::span(&v, 1));
    const ImageShape px{.extent = {.rows = 1, .cols = 1}, .channels = 1, .type = DType::F32};
    auto f32_at = [](const std::vector<std::byte>& out, std::size_t i) {
        return static_cast<float>(ft::load(out.data(), DType::F32, i));
    };
    // Box radius 1 on a 1×1 image. Zero: only the centre tap sees the pixel, so the
    // row pass gives (0·w + w·v) + 0·w = w·v and the column pass w·(w·v).
    const FilterSpec box = FilterSpec::box(1, EdgeMode::Zero);
    const float w = box.kernel[0];
    EXPECT_EQ(f32_at(ops::filter_whole_image_reference(*dev, box, px, one_pixel, DType::F32), 0),
              w * (w * v));
    // Clamp: all 3 taps see v: ((w·v + w·v) + w·v), twice.
    const float row = ((w * v) + (w * v)) + (w * v);
    const float both = ((w * row) + (w * row)) + (w * row);
    EXPECT_EQ(
        f32_at(ops::filter_whole_image_reference(*dev, FilterSpec::box(1), px, one_pixel, DType::F32), 0),
        both);

    // Sobel on a 1×3 row [a b c] with zero edges: at the middle, gx = 2(c − a), gy = 0.
    const std::vector<float> abc = {1.0F, 100.0F, 7.5F};
    const ImageShape line{.extent = {.rows = 1, .cols = 3}, .channels = 1, .type = DType::F32};
    const std::vector<std::byte> s = ops::filter_whole_image_reference(
        *dev, FilterSpec::sobel(EdgeMode::Zero), line, std::as_bytes(std::span(abc)), DType::F32);
    EXPECT_EQ(f32_at(s, 1), 2.0F * (7.5F - 1.0F));
    EXPECT_EQ(f32_at(s, 0), 2.0F * 100.0F);  // left: b − 0 twice
    // Mirror: the rows above and below reflect onto the row itself, so at b all three
    // rows give c − a: gx = 4(c − a) = 26; at a (and c) both neighbours are b: 0.
    const std::vector<std::byte> m = ops::filter_whole_image_reference(
        *dev, FilterSpec::sobel(EdgeMode::Mirror), line, std::as_bytes(std::span(abc)), DType::U8);
    EXPECT_EQ(ft::load(m.data(), DType::U8, 0), 0.0);
    EXPECT_EQ(ft::load(m.data(), DType::U8, 1), 26.0);
    EXPECT_EQ(ft::load(m.data(), DType::U8, 2), 0.0);

    // A constant image stays constant under a normalized Conv kernel with clamp edges
    // in exact arithmetic; integer output absorbs the float error.
    const std::vector<std::uint8_t> flat(5 * 4 * 3, 200);
    const ImageShape rgb{.extent = {.rows = 5, .cols = 4}, .channels = 3, .type = DType::U8};
    const std::vector<std::byte> c =
        ops::filter_whole_image_reference(*dev, FilterSpec::conv(std::vector<float>(25, 0.04F), 5), rgb,
                                          std::as_bytes(std::span(flat)), DType::U8);
    for (std::size_t i = 0; i < flat.size(); ++i) EXPECT_EQ(ft::load(c.data(), DType::U8, i), 200.0) << i;

    EXPECT_THROW((void)ops::filter_whole_image_reference(*dev, FilterSpec::sobel(), line,
                                                         std::as_bytes(std::span(abc)).first(8), DType::F32),
                 UsageError);
    EXPECT_THROW((void)ops::filter_whole_image_reference(*dev, FilterSpec::sobel(), line,
                                                         std::as_bytes(std::span(abc)), DType::F64),
                 UsageError);
}

}  // namespace
