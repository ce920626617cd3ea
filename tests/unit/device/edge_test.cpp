// Tests of the edge fill on host memory (outcore/device/edge.hpp, pad_edges_host): the
// result equals a per-pixel reference built from edge_source_index on both axes, the
// inside and the bytes between rows are untouched, and malformed areas are refused.
#include "outcore/device/edge.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "outcore/core/error.hpp"
#include "outcore/device/kernels.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::EdgeMode;
using outcore::EdgePadding;

static_assert(outcore::edge_source_index(-2, 5, EdgeMode::Mirror) == 2);
static_assert(outcore::edge_source_index(6, 5, EdgeMode::Clamp) == 4);
static_assert(outcore::edge_source_index(-1, 5, EdgeMode::Zero) == -1);
static_assert(outcore::edge_source_index(3, 5, EdgeMode::Zero) == 3);

/// The area as the reference fills it: every outside pixel copies the inside pixel its
/// row and column map to, or is zero.
std::vector<std::byte> reference_fill(const std::vector<std::byte>& initial, const EdgePadding& a) {
    std::vector<std::byte> out = initial;
    const auto rows = static_cast<std::int64_t>(a.image_rows);
    const auto cols = static_cast<std::int64_t>(a.image_cols);
    for (std::uint64_t i = 0; i < a.rows; ++i) {
        for (std::uint64_t k = 0; k < a.cols; ++k) {
            const std::int64_t y = a.top + static_cast<std::int64_t>(i);
            const std::int64_t x = a.left + static_cast<std::int64_t>(k);
            if (y >= 0 && y < rows && x >= 0 && x < cols) continue;
            const std::int64_t sy = outcore::edge_source_index(y, rows, a.edge);
            const std::int64_t sx = outcore::edge_source_index(x, cols, a.edge);
            std::byte* to = out.data() + i * a.row_stride + k * a.pixel_bytes;
            if (sy < 0 || sx < 0) {
                std::memset(to, 0, a.pixel_bytes);
            } else {
                std::memcpy(to,
                            initial.data() + static_cast<std::uint64_t>(sy - a.top) * a.row_stride +
                                static_cast<std::uint64_t>(sx - a.left) * a.pixel_bytes,
                            a.pixel_bytes);
            }
        }
    }
    return out;
}

TEST(EdgeFill, HostFillEqualsThePerPixelReference) {
    std::mt19937_64 rng(outcore::test::seed());
    int crossing = 0;
    for (std::uint64_t t = 0; t < outcore::test::scaled(2000); ++t) {
        EdgePadding a;
        a.edge = static_cast<EdgeMode>(rng() % 3);
        a.pixel_bytes = static_cast<std::uint32_t>(1 + rng() % 16);
        a.image_rows = 1 + rng() % 30;
        a.image_cols = 1 + rng() % 30;
        const std::uint64_t halo = rng() % 8;
        const std::uint64_t r0 = rng() % a.image_rows;
        const std::uint64_t c0 = rng() % a.image_cols;
        a.rows = 1 + rng() % (a.image_rows - r0) + 2 * halo;
        a.cols = 1 + rng() % (a.image_cols - c0) + 2 * halo;
        a.top = static_cast<std::int64_t>(r0) - static_cast<std::int64_t>(halo);
        a.left = static_cast<std::int64_t>(c0) - static_cast<std::int64_t>(halo);
        a.row_stride = a.cols * a.pixel_bytes + rng() % 7;
        std::vector<std::byte> initial(a.rows * a.row_stride);
        for (auto& b : initial) b = static_cast<std::byte>(rng() & 0xFF);
        std::vector<std::byte> got = initial;
        outcore::pad_edges_host(got.data(), a);
        ASSERT_EQ(got, reference_fill(initial, a))
            << "area " << a.rows << "x" << a.cols << " at (" << a.top << ", " << a.left << ") of "
            << a.image_rows << "x" << a.image_cols << ", edge " << static_cast<int>(a.edge);
        crossing += a.crosses_edge() ? 1 : 0;
    }
    EXPECT_GT(crossing, 0);
}

TEST(EdgeFill, MalformedAreasAreUsageErrors) {
    const EdgePadding good{.pixel_bytes = 4,
                           .rows = 3,
                           .cols = 3,
                           .top = -1,
                           .left = -1,
                           .image_rows = 5,
                           .image_cols = 5,
                           .row_stride = 12};
    EXPECT_NO_THROW(outcore::validate_edge_padding(good));
    EdgePadding bad = good;
    bad.pixel_bytes = 0;
    EXPECT_THROW(outcore::validate_edge_padding(bad), outcore::UsageError);
    bad = good;
    bad.row_stride = 11;
    EXPECT_THROW(outcore::validate_edge_padding(bad), outcore::UsageError);
    bad = good;
    bad.top = 5;  // below the image
    EXPECT_THROW(outcore::validate_edge_padding(bad), outcore::UsageError);
    bad = good;
    bad.rows = 0;
    EXPECT_THROW(outcore::validate_edge_padding(bad), outcore::UsageError);
    // A halo wider than the tile on one side: clamping row -3 reads row 0, which the
    // area holds; mirroring it reads row 3, which it does not.
    bad = {.edge = EdgeMode::Mirror,
           .pixel_bytes = 1,
           .rows = 4,
           .cols = 1,
           .top = -3,
           .image_rows = 5,
           .image_cols = 1,
           .row_stride = 1};
    EXPECT_THROW(outcore::validate_edge_padding(bad), outcore::UsageError);
    bad.edge = EdgeMode::Clamp;
    EXPECT_NO_THROW(outcore::validate_edge_padding(bad));
}

}  // namespace
