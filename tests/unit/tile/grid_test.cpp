// TileGrid: coverage, tail policies, indexing and overflow, on random grids.
#include "outcore/tile/grid.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "outcore/core/error.hpp"
#include "support/test_seed.hpp"

namespace outcore::tile {
namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

std::uint64_t log_uniform(std::mt19937_64& rng, double hi) {
    std::uniform_real_distribution<double> d(0.0, std::log(hi));
    return std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::exp(d(rng))));
}

TEST(TileGrid, HeaderExample) {
    const TileGrid g({.rows = 1000, .cols = 700}, {.rows = 256, .cols = 256}, TailPolicy::Shrink);
    EXPECT_EQ(g.tile_rows(), 4U);
    EXPECT_EQ(g.tile_cols(), 3U);
    EXPECT_EQ(g.count(), 12U);
    EXPECT_EQ(g.tile(11), (TileRect{768, 512, {232, 188}}));
}

TEST(TileGrid, ShiftInwardsMovesTheEdgeTileBack) {
    const TileGrid g({.rows = 1000, .cols = 700}, {.rows = 256, .cols = 256}, TailPolicy::ShiftInwards);
    EXPECT_EQ(g.count(), 12U);
    EXPECT_EQ(g.tile(11), (TileRect{1000 - 256, 700 - 256, {256, 256}}));
    // Smaller than one tile: nothing to shift, it degrades to Shrink.
    const TileGrid small({.rows = 10, .cols = 300}, {.rows = 256, .cols = 256}, TailPolicy::ShiftInwards);
    EXPECT_EQ(small.tile(0, 0), (TileRect{0, 0, {10, 256}}));
    EXPECT_EQ(small.tile(0, 1), (TileRect{0, 44, {10, 256}}));
}

TEST(TileGrid, RejectsZeroTilesAndOutOfRangeIndices) {
    EXPECT_THROW(TileGrid({10, 10}, {0, 4}), UsageError);
    EXPECT_THROW(TileGrid({10, 10}, {4, 0}), UsageError);
    const TileGrid g({10, 10}, {4, 4});
    EXPECT_THROW((void)g.tile(9), UsageError);
    EXPECT_THROW((void)g.tile(3, 0), UsageError);
    EXPECT_THROW((void)g.tile(0, 3), UsageError);
    EXPECT_NO_THROW((void)g.tile(8));
    const TileGrid empty({0, 10}, {4, 4});
    EXPECT_EQ(empty.count(), 0U);
    EXPECT_THROW((void)empty.tile(0), UsageError);
}

TEST(TileGrid, OverflowIsAUsageErrorNeverAWrap) {
    EXPECT_THROW(TileGrid({kMax, kMax}, {1, 1}), UsageError);  // count wraps
    EXPECT_THROW((void)(Extent{std::uint64_t{1} << 32, std::uint64_t{1} << 32}.elements()), UsageError);
    EXPECT_EQ((Extent{std::uint64_t{1} << 31, std::uint64_t{1} << 32}.elements()), std::uint64_t{1} << 63);
    // Huge extents with tiles that keep the count small are fine, and the last tile ends at the edge.
    const TileGrid g({kMax, kMax}, {std::uint64_t{1} << 62, std::uint64_t{1} << 62}, TailPolicy::Shrink);
    EXPECT_EQ(g.count(), 16U);
    const TileRect last = g.tile(15);
    EXPECT_EQ(last.row + last.size.rows, kMax);
    const TileGrid s({kMax, 7}, {std::uint64_t{1} << 62, 3}, TailPolicy::ShiftInwards);
    EXPECT_EQ(s.tile(s.count() - 1),
              (TileRect{kMax - (std::uint64_t{1} << 62), 4, {std::uint64_t{1} << 62, 3}}));
}

TEST(TileGrid, ToString) {
    EXPECT_EQ(to_string(TailPolicy::Shrink), "shrink");
    EXPECT_EQ(to_string(TailPolicy::ShiftInwards), "shift-inwards");
}

// Small grids, checked element by element: Shrink covers every element exactly once;
// ShiftInwards covers every element at least once with full-size tiles only.
TEST(TileGrid, RandomSmallGridsCoverEveryElement) {
    std::mt19937_64 rng(test::seed());
    const std::uint64_t trials = test::scaled(1000);
    for (std::uint64_t trial = 0; trial < trials; ++trial) {
        const Extent e{log_uniform(rng, 300), log_uniform(rng, 300)};
        const TileShape s{log_uniform(rng, 400), log_uniform(rng, 400)};
        for (const TailPolicy tail : {TailPolicy::Shrink, TailPolicy::ShiftInwards}) {
            SCOPED_TRACE(testing::Message() << e.rows << "x" << e.cols << " by " << s.rows << "x" << s.cols
                                            << " " << to_string(tail));
            const TileGrid g(e, s, tail);
            ASSERT_EQ(g.count(), ((e.rows + s.rows - 1) / s.rows) * ((e.cols + s.cols - 1) / s.cols));
            std::vector<unsigned> hits(e.rows * e.cols, 0);
            for (std::uint64_t i = 0; i < g.count(); ++i) {
                const TileRect t = g.tile(i);
                ASSERT_EQ(t, g.tile(i / g.tile_cols(), i % g.tile_cols()));
                ASSERT_GE(t.size.rows, 1U);
                ASSERT_GE(t.size.cols, 1U);
                ASSERT_LE(t.row + t.size.rows, e.rows);
                ASSERT_LE(t.col + t.size.cols, e.cols);
                if (tail == TailPolicy::ShiftInwards) {
                    ASSERT_EQ(t.size, (Extent{std::min(s.rows, e.rows), std::min(s.cols, e.cols)}));
                } else {
                    ASSERT_LE(t.size.rows, s.rows);
                    ASSERT_LE(t.size.cols, s.cols);
                }
                for (std::uint64_t r = t.row; r < t.row + t.size.rows; ++r) {
                    for (std::uint64_t c = t.col; c < t.col + t.size.cols; ++c) ++hits[r * e.cols + c];
                }
            }
            for (const unsigned h : hits) {
                if (tail == TailPolicy::Shrink) {
                    ASSERT_EQ(h, 1U);
                } else {
                    ASSERT_GE(h, 1U);
                }
            }
        }
    }
}

// Large grids, checked per axis (a grid is the product of its row and column cuts):
// consecutive Shrink tiles abut and end at the edge; ShiftInwards tiles are full and
// never leave a gap.
TEST(TileGrid, RandomLargeGridsPartitionEachAxis) {
    std::mt19937_64 rng(test::seed());
    const std::uint64_t trials = test::scaled(1000);
    for (std::uint64_t trial = 0; trial < trials; ++trial) {
        const Extent e{log_uniform(rng, 1e12), log_uniform(rng, 1e12)};
        // Tiles no smaller than extent/2000 keep the walk short.
        const TileShape s{std::max<std::uint64_t>(log_uniform(rng, 1e12), e.rows / 2000 + 1),
                          std::max<std::uint64_t>(log_uniform(rng, 1e12), e.cols / 2000 + 1)};
        for (const TailPolicy tail : {TailPolicy::Shrink, TailPolicy::ShiftInwards}) {
            const TileGrid g(e, s, tail);
            std::uint64_t covered = 0;  // rows [0, covered) are covered so far
            for (std::uint64_t i = 0; i < g.tile_rows(); ++i) {
                const TileRect t = g.tile(i, g.tile_cols() - 1);
                ASSERT_LE(t.row, covered);
                if (tail == TailPolicy::Shrink) {
                    ASSERT_EQ(t.row, covered);
                }
                if (tail == TailPolicy::ShiftInwards) {
                    ASSERT_EQ(t.size.rows, std::min(s.rows, e.rows));
                }
                ASSERT_GT(t.row + t.size.rows, covered);
                covered = t.row + t.size.rows;
            }
            ASSERT_EQ(covered, e.rows);
            covered = 0;
            for (std::uint64_t j = 0; j < g.tile_cols(); ++j) {
                const TileRect t = g.tile(g.tile_rows() - 1, j);
                ASSERT_LE(t.col, covered);
                if (tail == TailPolicy::Shrink) {
                    ASSERT_EQ(t.col, covered);
                }
                if (tail == TailPolicy::ShiftInwards) {
                    ASSERT_EQ(t.size.cols, std::min(s.cols, e.cols));
                }
                ASSERT_GT(t.col + t.size.cols, covered);
                covered = t.col + t.size.cols;
            }
            ASSERT_EQ(covered, e.cols);
        }
    }
}

}  // namespace
}  // namespace outcore::tile
