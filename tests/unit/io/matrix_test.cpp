#include "outcore/io/matrix.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "io_test_util.hpp"
#include "outcore/core/error.hpp"
#include "outcore/io/npy.hpp"
#include "support/test_seed.hpp"

namespace outcore::io {
namespace {

using test::expect_one_line_error;
using test::random_bytes;

constexpr std::uint64_t kMax = ~std::uint64_t{0};

// Offset in elements of (i, j) in a host matrix.
std::uint64_t index_of(Layout layout, std::uint64_t ld, std::uint64_t i, std::uint64_t j) {
    return layout == Layout::RowMajor ? i * ld + j : i + j * ld;
}

struct Shape {
    std::uint64_t rows;
    std::uint64_t cols;
};

TEST(HostMatrix, RandomBlocksMatchElementByElementForEveryLayoutAndDtype) {
    std::mt19937_64 rng(outcore::test::seed());
    const std::vector<Shape> shapes = {{1, 1},    {1, 1023}, {1023, 1}, {7, 1023},
                                       {1023, 7}, {33, 65},  {97, 64}};
    for (const DType dtype : test::npy_dtypes()) {
        const std::uint32_t w = dtype_bytes(dtype);
        for (const Layout layout : {Layout::RowMajor, Layout::ColMajor}) {
            for (const Shape s : shapes) {
                SCOPED_TRACE(testing::Message() << to_string(dtype) << " " << to_string(layout) << " "
                                                << s.rows << "x" << s.cols);
                const std::uint64_t inner = layout == Layout::RowMajor ? s.cols : s.rows;
                const std::uint64_t outer = layout == Layout::RowMajor ? s.rows : s.cols;
                const std::uint64_t ld = inner + std::uniform_int_distribution<std::uint64_t>(0, 5)(rng);
                const std::vector<std::byte> data = random_bytes(rng, outer * ld * w);
                const HostMatrix m(data.data(), s.rows, s.cols, ld, layout, dtype);
                for (std::uint64_t k = 0; k < outcore::test::scaled(50); ++k) {
                    const std::uint64_t r0 = std::uniform_int_distribution<std::uint64_t>(0, s.rows - 1)(rng);
                    const std::uint64_t c0 = std::uniform_int_distribution<std::uint64_t>(0, s.cols - 1)(rng);
                    const std::uint64_t rows =
                        std::uniform_int_distribution<std::uint64_t>(1, s.rows - r0)(rng);
                    const std::uint64_t cols =
                        std::uniform_int_distribution<std::uint64_t>(1, s.cols - c0)(rng);
                    const std::uint64_t bld = rows + std::uniform_int_distribution<std::uint64_t>(0, 3)(rng);
                    std::vector<std::byte> dst(bld * cols * w, std::byte{0xa5});
                    m.read(r0, c0, rows, cols, dst.data(), bld);
                    for (std::uint64_t j = 0; j < cols; ++j) {
                        for (std::uint64_t i = 0; i < bld; ++i) {
                            const std::byte* got = dst.data() + (i + j * bld) * w;
                            if (i < rows) {
                                const std::byte* want =
                                    data.data() + index_of(layout, ld, r0 + i, c0 + j) * w;
                                ASSERT_EQ(std::memcmp(got, want, w), 0)
                                    << "(" << r0 + i << ", " << c0 + j << ")";
                            } else {
                                ASSERT_EQ(got[0], std::byte{0xa5}) << "padding written";
                            }
                        }
                    }
                }
            }
        }
    }
}

TEST(HostMatrix, WritesLandOnlyInTheirBlock) {
    std::mt19937_64 rng(outcore::test::seed());
    for (const DType dtype : test::npy_dtypes()) {
        const std::uint32_t w = dtype_bytes(dtype);
        for (const Layout layout : {Layout::RowMajor, Layout::ColMajor}) {
            const std::uint64_t rows = 45;
            const std::uint64_t cols = 71;
            const std::uint64_t ld = (layout == Layout::RowMajor ? cols : rows) + 3;
            std::vector<std::byte> data =
                random_bytes(rng, (layout == Layout::RowMajor ? rows : cols) * ld * w);
            std::vector<std::byte> expect = data;
            HostMatrix m(data.data(), rows, cols, ld, layout, dtype);
            for (std::uint64_t k = 0; k < outcore::test::scaled(40); ++k) {
                const std::uint64_t r0 = std::uniform_int_distribution<std::uint64_t>(0, rows - 1)(rng);
                const std::uint64_t c0 = std::uniform_int_distribution<std::uint64_t>(0, cols - 1)(rng);
                const std::uint64_t br = std::uniform_int_distribution<std::uint64_t>(1, rows - r0)(rng);
                const std::uint64_t bc = std::uniform_int_distribution<std::uint64_t>(1, cols - c0)(rng);
                const std::uint64_t bld = br + std::uniform_int_distribution<std::uint64_t>(0, 2)(rng);
                const std::vector<std::byte> block = random_bytes(rng, bld * bc * w);
                m.write(r0, c0, br, bc, block.data(), bld);
                for (std::uint64_t j = 0; j < bc; ++j) {
                    for (std::uint64_t i = 0; i < br; ++i) {
                        std::memcpy(expect.data() + index_of(layout, ld, r0 + i, c0 + j) * w,
                                    block.data() + (i + j * bld) * w, w);
                    }
                }
                ASSERT_EQ(data, expect) << "after block " << k;
            }
        }
    }
}

TEST(HostMatrix, CopiesThroughTilesBetweenLayoutsAndFiles) {
    // What the pipeline does: a row-major host source, tiled through a column-major
    // staging buffer into a .npy sink, read back tile by tile into a column-major host sink.
    std::mt19937_64 rng(outcore::test::seed());
    test::ScratchDir dir;
    const std::uint64_t rows = 300;
    const std::uint64_t cols = 217;
    const std::vector<std::byte> a = random_bytes(rng, rows * cols * 4);
    const HostMatrix src(a.data(), rows, cols, cols, Layout::RowMajor, DType::F32);
    const std::uint64_t t = 64;
    std::vector<std::byte> staging(t * t * 4);
    {
        NpyMatrixWriter out(dir.file("a.npy"), rows, cols, DType::F32, false, NpyOrder::Fortran);
        for (std::uint64_t i = 0; i < rows; i += t) {
            for (std::uint64_t j = 0; j < cols; j += t) {
                const std::uint64_t br = std::min(t, rows - i);
                const std::uint64_t bc = std::min(t, cols - j);
                src.read(i, j, br, bc, staging.data(), t);
                out.write(i, j, br, bc, staging.data(), t);
            }
        }
        out.commit();
    }
    const NpyMatrixReader in(dir.file("a.npy"));
    std::vector<std::byte> b(rows * cols * 4, std::byte{0});
    HostMatrix dst(b.data(), rows, cols, rows, Layout::ColMajor, DType::F32);
    for (std::uint64_t j = 0; j < cols; j += t) {
        for (std::uint64_t i = 0; i < rows; i += t) {
            const std::uint64_t br = std::min(t, rows - i);
            const std::uint64_t bc = std::min(t, cols - j);
            in.read(i, j, br, bc, staging.data(), br);
            dst.write(i, j, br, bc, staging.data(), br);
        }
    }
    for (std::uint64_t i = 0; i < rows; ++i) {
        for (std::uint64_t j = 0; j < cols; ++j) {
            ASSERT_EQ(std::memcmp(b.data() + (i + j * rows) * 4, a.data() + (i * cols + j) * 4, 4), 0);
        }
    }
    dst.commit();
    EXPECT_TRUE(dst.committed());
    expect_one_line_error<UsageError>([&] { dst.write(0, 0, 1, 1, staging.data(), 1); }, "io",
                                      {"after commit"});
    expect_one_line_error<UsageError>([&] { dst.commit(); }, "io", {"committed twice"});
}

TEST(HostMatrix, RejectsBadShapesPointersAndBlocks) {
    std::vector<std::byte> buf(64);
    const void* cdata = buf.data();
    expect_one_line_error<UsageError>(
        [&] { HostMatrix m(static_cast<void*>(nullptr), 2, 2, 2, Layout::RowMajor, DType::F32); }, "io",
        {"null pointer"});
    expect_one_line_error<UsageError>(
        [&] { HostMatrix m(buf.data(), 2, 3, 2, Layout::RowMajor, DType::F32); }, "io",
        {"leading dimension 2 is below 3"});
    expect_one_line_error<UsageError>(
        [&] { HostMatrix m(buf.data(), 3, 2, 2, Layout::ColMajor, DType::F32); }, "io",
        {"leading dimension 2 is below 3"});
    const HostMatrix empty(static_cast<const void*>(nullptr), 0, 5, 0, Layout::RowMajor,
                           DType::F32);  // empty shapes need no storage
    EXPECT_EQ(empty.rows(), 0U);
    HostMatrix ro(cdata, 4, 4, 4, Layout::RowMajor, DType::F32);
    expect_one_line_error<UsageError>([&] { ro.write(0, 0, 1, 1, buf.data(), 1); }, "io", {"read-only"});
    // The sizes every size-taking API is tried at: a UsageError or a valid object,
    // never an overflow.
    for (const std::uint64_t n :
         {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{1} << 31, std::uint64_t{1} << 32,
          std::uint64_t{46341} * 46341, std::uint64_t{65536} * 65536 * 8, std::uint64_t{1} << 63, kMax}) {
        for (const Layout layout : {Layout::RowMajor, Layout::ColMajor}) {
            try {
                const HostMatrix m(buf.data(), n, n, n, layout, DType::F64);
                EXPECT_LE(n, 1U) << "an n x n matrix of 2^64+ bytes was accepted, n = " << n;
            } catch (const UsageError& e) {
                EXPECT_NE(std::string(e.what()).find("overflow"), std::string::npos) << e.what();
            }
        }
    }
    const HostMatrix m(buf.data(), 2, 4, 4, Layout::RowMajor, DType::F64);
    std::vector<std::byte> dst(64);
    expect_one_line_error<UsageError>([&] { m.read(1, 0, 2, 1, dst.data(), 2); }, "io",
                                      {"outside the 2 x 4 matrix"});
    expect_one_line_error<UsageError>([&] { m.read(0, kMax, 1, 1, dst.data(), 1); }, "io", {"overflow"});
    expect_one_line_error<UsageError>([&] { m.read(0, 0, 1, 3, dst.data(), kMax); }, "io", {"overflow"});
    expect_one_line_error<UsageError>([&] { m.read(0, 0, 2, 1, dst.data(), 1); }, "io",
                                      {"leading dimension 1"});
}

}  // namespace
}  // namespace outcore::io
