#include "outcore/io/image.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <memory>
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
using test::ScratchDir;

ImageInfo make_info(std::uint64_t rows, std::uint64_t cols, std::uint32_t channels, DType dtype) {
    ImageInfo info;
    info.rows = rows;
    info.cols = cols;
    info.channels = channels;
    info.dtype = dtype;
    return info;
}

// Reads random halo'd bands into a padded buffer and compares with `pixels`.
void check_bands(std::mt19937_64& rng, const ImageSource& src, const std::vector<std::byte>& pixels) {
    const ImageInfo& info = src.info();
    const std::uint64_t row_bytes = info.row_bytes();
    for (int k = 0; k < 30; ++k) {
        const std::uint64_t r0 = std::uniform_int_distribution<std::uint64_t>(0, info.rows - 1)(rng);
        const std::uint64_t n = std::uniform_int_distribution<std::uint64_t>(1, info.rows - r0)(rng);
        const std::uint64_t stride = row_bytes + std::uniform_int_distribution<std::uint64_t>(0, 9)(rng);
        std::vector<std::byte> buf(n * stride, std::byte{0xa5});
        src.read_rows(r0, n, buf.data(), stride);
        for (std::uint64_t r = 0; r < n; ++r) {
            ASSERT_EQ(std::memcmp(buf.data() + r * stride, pixels.data() + (r0 + r) * row_bytes, row_bytes),
                      0)
                << "row " << r0 + r;
            for (std::uint64_t b = row_bytes; b < stride; ++b) {
                ASSERT_EQ(buf[r * stride + b], std::byte{0xa5});
            }
        }
    }
}

TEST(ImageInfo, SizesAreCheckedProducts) {
    const ImageInfo info = make_info(3, 5, 3, DType::U16);
    EXPECT_EQ(info.pixel_bytes(), 6U);
    EXPECT_EQ(info.row_bytes(), 30U);
    EXPECT_EQ(info.bytes(), 90U);
    expect_one_line_error<UsageError>(
        [] { (void)make_info(1, ~std::uint64_t{0}, 4, DType::F32).row_bytes(); }, "image", {"overflow"});
    expect_one_line_error<UsageError>(
        [] { (void)make_info(std::uint64_t{1} << 40, 1u << 30, 1, DType::F32).bytes(); }, "image",
        {"overflow"});
}

TEST(HostImage, BandsRoundTripWithAnyStride) {
    std::mt19937_64 rng(outcore::test::seed());
    for (const DType dtype : {DType::U8, DType::U16, DType::F32, DType::F64}) {
        for (std::uint32_t channels = 1; channels <= 4; ++channels) {
            const ImageInfo info = make_info(37, 23, channels, dtype);
            const std::uint64_t stride = info.row_bytes() + 5;
            std::vector<std::byte> storage = random_bytes(rng, info.rows * stride);
            std::vector<std::byte> pixels(info.bytes());
            for (std::uint64_t r = 0; r < info.rows; ++r) {
                std::memcpy(pixels.data() + r * info.row_bytes(), storage.data() + r * stride,
                            info.row_bytes());
            }
            const HostImage ro(static_cast<const void*>(storage.data()), info, stride);
            check_bands(rng, ro, pixels);
            // Writing bands into a second image reproduces the first.
            std::vector<std::byte> copy(info.bytes(), std::byte{0});
            HostImage out(copy.data(), info, info.row_bytes());
            for (std::uint64_t r = 0; r < info.rows; r += 10) {
                const std::uint64_t n = std::min<std::uint64_t>(10, info.rows - r);
                out.write_rows(r, n, storage.data() + r * stride, stride);
            }
            EXPECT_EQ(copy, pixels);
            HostImage ro_sink(static_cast<const void*>(storage.data()), info, stride);
            expect_one_line_error<UsageError>(
                [&] { ro_sink.write_rows(0, 1, copy.data(), info.row_bytes()); }, "io", {"read-only"});
        }
    }
}

TEST(HostImage, RejectsBadShapesAndBands) {
    std::vector<std::byte> buf(1024);
    expect_one_line_error<UsageError>([&] { HostImage h(buf.data(), make_info(2, 2, 5, DType::U8), 10); },
                                      "io", {"5 channels"});
    expect_one_line_error<UsageError>([&] { HostImage h(buf.data(), make_info(2, 4, 1, DType::F32), 15); },
                                      "io", {"stride 15 bytes is below the row size 16"});
    expect_one_line_error<UsageError>(
        [&] { HostImage h(static_cast<void*>(nullptr), make_info(2, 2, 1, DType::U8), 2); }, "io",
        {"null pointer"});
    expect_one_line_error<UsageError>(
        [&] { HostImage h(buf.data(), make_info(~std::uint64_t{0}, 2, 1, DType::U8), 2); }, "io",
        {"overflow"});
    const HostImage h(buf.data(), make_info(8, 4, 1, DType::F32), 16);
    expect_one_line_error<UsageError>([&] { h.read_rows(5, 4, buf.data(), 16); }, "io",
                                      {"rows [5, 9) are outside"});
    expect_one_line_error<UsageError>([&] { h.read_rows(~std::uint64_t{0}, 2, buf.data(), 16); }, "io",
                                      {"overflow"});
    expect_one_line_error<UsageError>([&] { h.read_rows(0, 2, buf.data(), 8); }, "io",
                                      {"below the row size"});
    expect_one_line_error<UsageError>([&] { h.read_rows(0, 1, nullptr, 16); }, "io", {"null"});
    h.read_rows(8, 0, nullptr, 0);  // empty band
}

TEST(NpyImage, RoundTripsOneToFourChannelsAndReadsFortranMatrices) {
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    for (const DType dtype : {DType::U8, DType::U16, DType::F32}) {
        for (std::uint32_t channels = 1; channels <= 4; ++channels) {
            const ImageInfo info = make_info(41, 29, channels, dtype);
            const std::vector<std::byte> pixels = random_bytes(rng, info.bytes());
            const std::string path = dir.file("i.npy");
            {
                const std::unique_ptr<ImageSink> out = create_image(path, info, true);
                // Bands in reverse order: .npy sinks take any order.
                for (std::uint64_t r = info.rows; r > 0;) {
                    const std::uint64_t n = std::min<std::uint64_t>(r, 7);
                    r -= n;
                    out->write_rows(r, n, pixels.data() + r * info.row_bytes(), info.row_bytes());
                }
                out->commit();
            }
            const NpyArray a = load_npy(path);
            EXPECT_EQ(a.header.shape.size(), channels == 1 ? 2U : 3U);
            EXPECT_EQ(a.data, pixels);
            const std::unique_ptr<ImageSource> in = open_image(path);
            EXPECT_EQ(in->info().channels, channels);
            EXPECT_EQ(in->info().dtype, dtype);
            check_bands(rng, *in, pixels);
        }
    }
    // A 2-D Fortran-order array is an image too; bands are transposed out of it.
    const std::uint64_t rows = 300;
    const std::uint64_t cols = 7000;  // a band of rows is 28 KB per row: several bounce batches
    const std::vector<std::byte> pixels = random_bytes(rng, rows * cols * 4);
    std::vector<std::byte> col_major(pixels.size());
    for (std::uint64_t i = 0; i < rows; ++i) {
        for (std::uint64_t j = 0; j < cols; ++j) {
            std::memcpy(&col_major[(i + j * rows) * 4], &pixels[(i * cols + j) * 4], 4);
        }
    }
    const std::array<std::uint64_t, 2> shape = {rows, cols};
    save_npy(dir.file("f.npy"), col_major, shape, DType::F32, false, NpyOrder::Fortran);
    const NpyImageReader f(dir.file("f.npy"));
    check_bands(rng, f, pixels);
}

TEST(NpyImage, RejectsArraysThatAreNotImages) {
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    const auto save = [&](const std::string& name, std::vector<std::uint64_t> shape, NpyOrder order) {
        std::uint64_t n = 1;
        for (auto d : shape) n *= d;
        save_npy(dir.file(name), random_bytes(rng, n), shape, DType::U8, false, order);
        return dir.file(name);
    };
    const std::string one_d = save("a.npy", {12}, NpyOrder::C);
    const std::string five = save("b.npy", {2, 2, 5}, NpyOrder::C);
    const std::string four_d = save("c.npy", {2, 2, 1, 1}, NpyOrder::C);
    const std::string fortran3 = save("d.npy", {2, 2, 3}, NpyOrder::Fortran);
    expect_one_line_error<UsageError>([&] { NpyImageReader r(one_d); }, "npy", {"a.npy", "got shape (12,)"});
    expect_one_line_error<UsageError>([&] { NpyImageReader r(five); }, "npy",
                                      {"1 to 4 channels", "(2, 2, 5)"});
    expect_one_line_error<UsageError>([&] { NpyImageReader r(four_d); }, "npy", {"(2, 2, 1, 1)"});
    expect_one_line_error<UsageError>([&] { NpyImageReader r(fortran3); }, "npy", {"C order"});
    expect_one_line_error<UsageError>([&] { (void)open_image(dir.file("x.png")); }, "io",
                                      {"unknown image format (use .tif, .tiff or .npy)"});
    expect_one_line_error<UsageError>(
        [&] { (void)create_image(dir.file("x"), make_info(1, 1, 1, DType::U8), false); }, "io",
        {"unknown image format"});
    expect_one_line_error<UsageError>(
        [&] { NpyImageWriter w(dir.file("e.npy"), make_info(1, 1, 5, DType::U8), false); }, "npy",
        {"5 channels"});
    expect_one_line_error<UsageError>(
        [&] { NpyImageWriter w(dir.file("e.npy"), make_info(1, 1, 1, DType::BF16), false); }, "npy",
        {"bf16"});
    expect_one_line_error<UsageError>([&] { NpyImageWriter w(one_d, make_info(1, 1, 1, DType::U8), false); },
                                      "npy", {"exists (use --force)"});
    EXPECT_EQ(dir.entries().size(), 4U);
}

}  // namespace
}  // namespace outcore::io
