#include "outcore/io/tiff.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "io_test_util.hpp"
#include "outcore/core/error.hpp"
#include "support/test_seed.hpp"

#if OUTCORE_TEST_WITH_LIBTIFF
#include <tiffio.h>
#endif

namespace outcore::io {
namespace {

using test::expect_one_line_error;
using test::random_bytes;
using test::ScratchDir;

#define OUTCORE_SKIP_WITHOUT_TIFF() \
    if (!tiff_supported()) GTEST_SKIP() << "TIFF support was not built (no libtiff)"

ImageInfo make_info(std::uint64_t rows, std::uint64_t cols, std::uint32_t channels, DType dtype) {
    ImageInfo info;
    info.rows = rows;
    info.cols = cols;
    info.channels = channels;
    info.dtype = dtype;
    return info;
}

// Writes `pixels` through a TiffWriter in bands of random heights.
void write_in_bands(std::mt19937_64& rng, TiffWriter& w, const std::vector<std::byte>& pixels) {
    const ImageInfo& info = w.info();
    const std::uint64_t row_bytes = info.row_bytes();
    for (std::uint64_t r = 0; r < info.rows;) {
        const std::uint64_t n =
            std::min(info.rows - r, std::uniform_int_distribution<std::uint64_t>(1, 40)(rng));
        w.write_rows(r, n, pixels.data() + r * row_bytes, row_bytes);
        r += n;
    }
    w.commit();
}

// Reads the whole image, then halo'd bands of a random height, and compares with `pixels`.
void check_reads(std::mt19937_64& rng, const ImageSource& src, const std::vector<std::byte>& pixels) {
    const ImageInfo& info = src.info();
    const std::uint64_t row_bytes = info.row_bytes();
    ASSERT_EQ(pixels.size(), info.rows * row_bytes);
    std::vector<std::byte> whole(pixels.size(), std::byte{0xa5});
    src.read_rows(0, info.rows, whole.data(), row_bytes);
    ASSERT_EQ(whole, pixels);
    const std::uint64_t band = std::uniform_int_distribution<std::uint64_t>(1, 50)(rng);
    const std::uint64_t halo = std::uniform_int_distribution<std::uint64_t>(0, 8)(rng);
    const std::uint64_t stride = row_bytes + 3;  // a padded destination
    std::vector<std::byte> buf((band + 2 * halo) * stride);
    for (std::uint64_t b0 = 0; b0 < info.rows; b0 += band) {
        const std::uint64_t lo = b0 >= halo ? b0 - halo : 0;
        const std::uint64_t hi = std::min(info.rows, b0 + band + halo);
        src.read_rows(lo, hi - lo, buf.data(), stride);
        for (std::uint64_t r = lo; r < hi; ++r) {
            ASSERT_EQ(std::memcmp(buf.data() + (r - lo) * stride, pixels.data() + r * row_bytes, row_bytes),
                      0)
                << "row " << r << " of band [" << lo << ", " << hi << ")";
        }
    }
}

TEST(Tiff, SupportMatchesTheBuild) {
#if OUTCORE_TEST_WITH_LIBTIFF
    EXPECT_TRUE(tiff_supported());
#else
    EXPECT_FALSE(tiff_supported());
    expect_one_line_error<UsageError>([] { TiffReader r("x.tif"); }, "tiff", {"TIFF support was not built"});
    expect_one_line_error<UsageError>([] { TiffWriter w("x.tif", make_info(1, 1, 1, DType::U8), true); },
                                      "tiff", {"libtiff was not found at build time"});
#endif
}

TEST(TiffWriter, RoundTripsEveryDtypeChannelCountAndCompression) {
    OUTCORE_SKIP_WITHOUT_TIFF();
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    const std::vector<std::pair<std::uint64_t, std::uint64_t>> sizes = {
        {1, 1}, {7, 300}, {300, 7}, {97, 130}};
    int n = 0;
    for (const DType dtype : {DType::U8, DType::U16, DType::F32}) {
        for (std::uint32_t channels = 1; channels <= 4; ++channels) {
            for (const TiffCompression c :
                 {TiffCompression::None, TiffCompression::Lzw, TiffCompression::Deflate}) {
                const auto [rows, cols] = sizes[static_cast<std::size_t>(n++) % sizes.size()];
                SCOPED_TRACE(testing::Message() << to_string(dtype) << " x" << channels << " compression "
                                                << static_cast<int>(c) << " " << rows << "x" << cols);
                ImageInfo info = make_info(rows, cols, channels, dtype);
                info.tile_rows = n % 2 == 0 ? 16 : 0;  // 0: the default 256
                info.tile_cols = 32;
                const std::vector<std::byte> pixels = random_bytes(rng, info.bytes());
                const std::string path = dir.file("img.tif");
                TiffWriteOptions options;
                options.compression = c;
                TiffWriter w(path, info, true, options);
                EXPECT_TRUE(w.info().tiled);
                EXPECT_EQ(w.info().tile_rows, n % 2 == 0 ? 16U : 256U);
                EXPECT_FALSE(w.info().bigtiff);
                write_in_bands(rng, w, pixels);
                const TiffReader r(path);
                EXPECT_EQ(r.info().rows, rows);
                EXPECT_EQ(r.info().cols, cols);
                EXPECT_EQ(r.info().channels, channels);
                EXPECT_EQ(r.info().dtype, dtype);
                EXPECT_TRUE(r.info().tiled);
                EXPECT_EQ(r.info().tile_cols, 32U);
                check_reads(rng, r, pixels);
            }
        }
    }
}

TEST(TiffWriter, WritesBigTiffWhenAskedAndReadsItBack) {
    OUTCORE_SKIP_WITHOUT_TIFF();
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    ImageInfo info = make_info(77, 53, 3, DType::U16);
    info.bigtiff = true;
    const std::vector<std::byte> pixels = random_bytes(rng, info.bytes());
    TiffWriter w(dir.file("big.tif"), info, false);
    EXPECT_TRUE(w.info().bigtiff);
    write_in_bands(rng, w, pixels);
    std::ifstream in(dir.file("big.tif"), std::ios::binary);
    char magic[4] = {};
    in.read(magic, 4);
    EXPECT_EQ(std::string(magic, 4), std::string("II\x2b\x00", 4)) << "not a BigTIFF header";
    const TiffReader r(dir.file("big.tif"));
    EXPECT_TRUE(r.info().bigtiff);
    check_reads(rng, r, pixels);
    // A classic TIFF stays classic, and one whose data could pass 4 GiB does not.
    ImageInfo small = make_info(10, 10, 1, DType::U8);
    EXPECT_FALSE(TiffWriter(dir.file("s.tif"), small, false).info().bigtiff);
    ImageInfo huge = make_info(70000, 70000, 1, DType::U8);
    EXPECT_TRUE(TiffWriter(dir.file("h.tif"), huge, false).info().bigtiff);
}

TEST(TiffWriter, RejectsOutOfOrderRowsEarlyCommitsAndBadRequests) {
    OUTCORE_SKIP_WITHOUT_TIFF();
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    const std::string path = dir.file("o.tif");
    const ImageInfo info = make_info(40, 20, 1, DType::F32);
    const std::vector<std::byte> pixels = random_bytes(rng, info.bytes());
    {
        TiffWriter w(path, info, false);
        w.write_rows(0, 10, pixels.data(), info.row_bytes());
        expect_one_line_error<UsageError>([&] { w.write_rows(20, 5, pixels.data(), info.row_bytes()); },
                                          "tiff", {"top to bottom: expected row 10, got 20"});
        expect_one_line_error<UsageError>([&] { w.commit(); }, "tiff",
                                          {"before every row was written (10 of 40)"});
    }
    EXPECT_TRUE(dir.entries().empty()) << "a writer destroyed without commit left a file";
    std::ofstream(path) << "precious";
    expect_one_line_error<UsageError>([&] { TiffWriter w(path, info, false); }, "tiff",
                                      {"o.tif' exists (use --force)"});
    const auto bad = [&](ImageInfo i, std::string_view needle) {
        expect_one_line_error<UsageError>([&] { TiffWriter w(dir.file("b.tif"), i, false); }, "tiff",
                                          {needle});
    };
    bad(make_info(4, 4, 1, DType::F64), "f64 samples");
    bad(make_info(4, 4, 5, DType::U8), "5 channels");
    bad(make_info(4, 4, 0, DType::U8), "0 channels");
    bad(make_info(0, 4, 1, DType::U8), "empty image");
    bad(make_info(std::uint64_t{1} << 32, 4, 1, DType::U8), "2^32-1");
    bad(make_info(4, ~std::uint64_t{0}, 1, DType::U8), "2^32-1");
    ImageInfo odd_tile = make_info(4, 4, 1, DType::U8);
    odd_tile.tile_rows = 17;
    bad(odd_tile, "multiples of 16");
    EXPECT_FALSE(std::filesystem::exists(dir.file("b.tif")));
    EXPECT_EQ(dir.entries().size(), 1U);
}

TEST(TiffReader, RejectsFilesThatAreNotTiffsWithoutPrinting) {
    OUTCORE_SKIP_WITHOUT_TIFF();
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    testing::internal::CaptureStderr();
    expect_one_line_error<IoError>([&] { TiffReader r(dir.file("missing.tif")); }, "tiff",
                                   {"missing.tif", "open"});
    const std::vector<std::byte> noise = random_bytes(rng, 1000);
    expect_one_line_error<UsageError>([&] { TiffReader r(noise, "noise.tif"); }, "tiff",
                                      {"'noise.tif': not a readable TIFF"});
    const std::string empty;
    expect_one_line_error<UsageError>([&] { TiffReader r(std::as_bytes(std::span(empty)), "empty.tif"); },
                                      "tiff", {"not a readable TIFF"});
    // A valid file cut short fails on open or on the first read of missing data, with
    // libtiff's reason, never with wrong pixels.
    ImageInfo info = make_info(64, 64, 1, DType::U8);
    info.tile_rows = info.tile_cols = 16;
    const std::vector<std::byte> pixels = random_bytes(rng, info.bytes());
    {
        TiffWriter w(dir.file("t.tif"), info, false);
        w.write_rows(0, 64, pixels.data(), 64);
        w.commit();
    }
    const std::string chars = test::read_file(dir.file("t.tif"));
    for (const std::size_t keep : {std::size_t{8}, chars.size() / 2, chars.size() - 5}) {
        const std::span<const std::byte> cut = std::as_bytes(std::span(chars.data(), keep));
        try {
            const TiffReader r(cut, "cut.tif");
            std::vector<std::byte> all(info.bytes());
            r.read_rows(0, 64, all.data(), 64);
            ADD_FAILURE() << "a file cut to " << keep << " of " << chars.size()
                          << " bytes read without error";
        } catch (const UsageError& e) {
            EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
            EXPECT_NE(std::string(e.what()).find("'cut.tif'"), std::string::npos) << e.what();
        }
    }
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "") << "libtiff printed instead of reporting";
}

TEST(TiffReader, ReadsBandsDecodingEachTileRowOnce) {
    OUTCORE_SKIP_WITHOUT_TIFF();
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    ImageInfo info = make_info(200, 90, 2, DType::U16);
    info.tile_rows = info.tile_cols = 16;
    const std::vector<std::byte> pixels = random_bytes(rng, info.bytes());
    {
        TiffWriter w(dir.file("t.tif"), info, false);
        write_in_bands(rng, w, pixels);
    }
    TiffReadOptions tight;
    tight.cache_bytes = 0;  // the minimum: two tile rows
    const TiffReader r(dir.file("t.tif"), tight);
    ASSERT_EQ(r.unit_rows(), 16U);
    // Bands of 24 rows with a halo of 8 (2 * halo <= 16): every tile row is decoded once.
    const std::uint64_t row_bytes = info.row_bytes();
    std::vector<std::byte> buf(40 * row_bytes);
    for (std::uint64_t b0 = 0; b0 < info.rows; b0 += 24) {
        const std::uint64_t lo = b0 >= 8 ? b0 - 8 : 0;
        const std::uint64_t hi = std::min<std::uint64_t>(info.rows, b0 + 32);
        r.read_rows(lo, hi - lo, buf.data(), row_bytes);
        ASSERT_EQ(std::memcmp(buf.data(), pixels.data() + lo * row_bytes, (hi - lo) * row_bytes), 0);
    }
    EXPECT_EQ(r.units_decoded(), (info.rows + 15) / 16);
}

TEST(TiffReader, ConcurrentBandReadsAgree) {
    OUTCORE_SKIP_WITHOUT_TIFF();
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    ImageInfo info = make_info(300, 41, 1, DType::F32);
    info.tile_rows = info.tile_cols = 32;
    const std::vector<std::byte> pixels = random_bytes(rng, info.bytes());
    {
        TiffWriter w(dir.file("c.tif"), info, false, {TiffCompression::Deflate});
        write_in_bands(rng, w, pixels);
    }
    const TiffReader r(dir.file("c.tif"));
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, seed = rng()] {
            std::mt19937_64 local(seed);
            for (int k = 0; k < 30; ++k) {
                const std::uint64_t r0 =
                    std::uniform_int_distribution<std::uint64_t>(0, info.rows - 1)(local);
                const std::uint64_t n =
                    std::uniform_int_distribution<std::uint64_t>(1, info.rows - r0)(local);
                std::vector<std::byte> band(n * info.row_bytes());
                r.read_rows(r0, n, band.data(), info.row_bytes());
                ASSERT_EQ(std::memcmp(band.data(), pixels.data() + r0 * info.row_bytes(), band.size()), 0);
            }
        });
    }
    for (auto& t : threads) t.join();
}

TEST(TiffImages, OpenAndCreateByExtension) {
    OUTCORE_SKIP_WITHOUT_TIFF();
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    const ImageInfo info = make_info(33, 17, 4, DType::U8);
    const std::vector<std::byte> pixels = random_bytes(rng, info.bytes());
    {
        const std::unique_ptr<ImageSink> out = create_image(dir.file("x.TIFF"), info, false);
        out->write_rows(0, info.rows, pixels.data(), info.row_bytes());
        out->commit();
    }
    const std::unique_ptr<ImageSource> in = open_image(dir.file("x.TIFF"));
    check_reads(rng, *in, pixels);
}

#if OUTCORE_TEST_WITH_LIBTIFF

// A TIFF written by libtiff itself: striped or tiled, any sample layout.
struct LibtiffSpec {
    std::uint32_t width = 0;
    std::uint32_t height = 0;
    std::uint16_t spp = 1;
    std::uint16_t bits = 8;
    std::uint16_t format = SAMPLEFORMAT_UINT;
    std::uint16_t compression = COMPRESSION_NONE;
    std::uint16_t planar = PLANARCONFIG_CONTIG;
    bool tiled = false;
    std::uint32_t rows_per_strip = 1;
    std::uint32_t tile_side = 16;
    bool big = false;
};

// Writes `pixels` (rows of width * spp samples, interleaved) as `spec` says.
void write_with_libtiff(const std::string& path, const LibtiffSpec& s, const std::vector<std::byte>& pixels) {
    TIFF* t = TIFFOpen(path.c_str(), s.big ? "w8" : "w");
    ASSERT_NE(t, nullptr);
    TIFFSetField(t, TIFFTAG_IMAGEWIDTH, s.width);
    TIFFSetField(t, TIFFTAG_IMAGELENGTH, s.height);
    TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, s.spp);
    TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, s.bits);
    TIFFSetField(t, TIFFTAG_SAMPLEFORMAT, s.format);
    TIFFSetField(t, TIFFTAG_COMPRESSION, s.compression);
    TIFFSetField(t, TIFFTAG_PLANARCONFIG, s.planar);
    TIFFSetField(t, TIFFTAG_PHOTOMETRIC, s.spp >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK);
    if (s.spp == 2 || s.spp == 4) {
        const std::uint16_t extra = EXTRASAMPLE_UNASSALPHA;
        TIFFSetField(t, TIFFTAG_EXTRASAMPLES, 1, &extra);
    }
    const std::uint64_t row_bytes = (std::uint64_t{s.width} * s.spp * s.bits + 7) / 8;
    if (s.tiled) {
        TIFFSetField(t, TIFFTAG_TILEWIDTH, s.tile_side);
        TIFFSetField(t, TIFFTAG_TILELENGTH, s.tile_side);
        const std::uint64_t px = std::uint64_t{s.spp} * s.bits / 8;
        std::vector<std::byte> tile(std::uint64_t{s.tile_side} * s.tile_side * px);
        for (std::uint32_t y = 0; y < s.height; y += s.tile_side) {
            for (std::uint32_t x = 0; x < s.width; x += s.tile_side) {
                std::fill(tile.begin(), tile.end(), std::byte{0});
                for (std::uint32_t r = 0; r < s.tile_side && y + r < s.height; ++r) {
                    const std::uint32_t cols = std::min(s.tile_side, s.width - x);
                    std::memcpy(tile.data() + r * s.tile_side * px,
                                pixels.data() + (y + r) * row_bytes + x * px, cols * px);
                }
                ASSERT_GE(TIFFWriteEncodedTile(t, TIFFComputeTile(t, x, y, 0, 0), tile.data(),
                                               static_cast<tmsize_t>(tile.size())),
                          0);
            }
        }
    } else {
        TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, s.rows_per_strip);
        const std::uint32_t planes = s.planar == PLANARCONFIG_SEPARATE ? s.spp : 1;
        const std::uint64_t plane_row = s.planar == PLANARCONFIG_SEPARATE ? row_bytes / s.spp : row_bytes;
        std::uint32_t strip = 0;
        for (std::uint32_t p = 0; p < planes; ++p) {
            for (std::uint32_t y = 0; y < s.height; y += s.rows_per_strip) {
                const std::uint32_t rows = std::min(s.rows_per_strip, s.height - y);
                ASSERT_GE(
                    TIFFWriteEncodedStrip(t, strip++, const_cast<std::byte*>(pixels.data() + y * plane_row),
                                          static_cast<tmsize_t>(rows * plane_row)),
                    0);
            }
        }
    }
    TIFFClose(t);
}

TEST(TiffReader, ReadsStripedAndTiledFilesWrittenByLibtiff) {
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    struct Sample {
        DType dtype;
        std::uint16_t bits;
        std::uint16_t format;
    };
    const std::vector<Sample> samples = {{DType::U8, 8, SAMPLEFORMAT_UINT},
                                         {DType::U16, 16, SAMPLEFORMAT_UINT},
                                         {DType::F32, 32, SAMPLEFORMAT_IEEEFP}};
    const std::vector<std::uint16_t> compressions = {COMPRESSION_NONE, COMPRESSION_LZW,
                                                     COMPRESSION_ADOBE_DEFLATE, COMPRESSION_PACKBITS};
    int n = 0;
    for (const Sample& sample : samples) {
        for (std::uint16_t spp = 1; spp <= 4; ++spp) {
            for (const bool tiled : {false, true}) {
                LibtiffSpec s;
                s.width = 1 + static_cast<std::uint32_t>(rng() % 120);
                s.height = 1 + static_cast<std::uint32_t>(rng() % 150);
                s.spp = spp;
                s.bits = sample.bits;
                s.format = sample.format;
                s.tiled = tiled;
                s.compression = compressions[static_cast<std::size_t>(n) % compressions.size()];
                s.rows_per_strip =
                    std::vector<std::uint32_t>{1, 5, 16, s.height}[static_cast<std::size_t>(n) % 4];
                s.tile_side = n % 2 == 0 ? 16 : 48;
                s.big = n % 3 == 0;
                ++n;
                SCOPED_TRACE(testing::Message()
                             << to_string(sample.dtype) << " x" << spp << (tiled ? " tiled" : " striped")
                             << " " << s.width << "x" << s.height << " compression " << s.compression
                             << " rps " << s.rows_per_strip << " big " << s.big);
                const ImageInfo expect = make_info(s.height, s.width, spp, sample.dtype);
                const std::vector<std::byte> pixels = random_bytes(rng, expect.bytes());
                const std::string path = dir.file(fmt::format("l{}.tif", n));
                write_with_libtiff(path, s, pixels);
                const TiffReader r(path);
                EXPECT_EQ(r.info().dtype, sample.dtype);
                EXPECT_EQ(r.info().channels, spp);
                EXPECT_EQ(r.info().tiled, tiled);
                EXPECT_EQ(r.info().bigtiff, s.big);
                if (!tiled) {
                    // libtiff may present an uncompressed single strip as smaller ones.
                    EXPECT_LE(r.info().rows_per_strip, s.rows_per_strip);
                }
                check_reads(rng, r, pixels);
            }
        }
    }
}

TEST(TiffReader, StripedReadsDecodeEachStripAboutOnce) {
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    LibtiffSpec s;
    s.width = 70;
    s.height = 301;
    s.rows_per_strip = 10;
    s.compression = COMPRESSION_LZW;
    const std::vector<std::byte> pixels = random_bytes(rng, 70 * 301);
    write_with_libtiff(dir.file("s.tif"), s, pixels);
    TiffReadOptions tight;
    tight.cache_bytes = 0;
    const TiffReader r(dir.file("s.tif"), tight);
    std::vector<std::byte> band(100 * 70);
    for (std::uint64_t b0 = 0; b0 < 301; b0 += 33) {
        const std::uint64_t lo = b0 >= 5 ? b0 - 5 : 0;
        const std::uint64_t hi = std::min<std::uint64_t>(301, b0 + 38);
        r.read_rows(lo, hi - lo, band.data(), 70);
        ASSERT_EQ(std::memcmp(band.data(), pixels.data() + lo * 70, (hi - lo) * 70), 0);
    }
    EXPECT_EQ(r.units_decoded(), 31U);
}

TEST(TiffReader, RejectsUnsupportedLayoutsWithOneLineErrors) {
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    struct Case {
        LibtiffSpec spec;
        std::string needle;
    };
    LibtiffSpec base;
    base.width = 20;
    base.height = 10;
    base.rows_per_strip = 4;
    std::vector<Case> cases;
    {
        LibtiffSpec s = base;
        s.bits = 16;
        s.format = SAMPLEFORMAT_INT;
        cases.push_back({s, "16-bit signed integer samples"});
    }
    {
        LibtiffSpec s = base;
        s.bits = 64;
        s.format = SAMPLEFORMAT_IEEEFP;
        cases.push_back({s, "64-bit float samples"});
    }
    {
        LibtiffSpec s = base;
        s.bits = 1;
        cases.push_back({s, "1-bit unsigned integer samples"});
    }
    {
        LibtiffSpec s = base;
        s.spp = 5;
        cases.push_back({s, "5 samples per pixel"});
    }
    {
        LibtiffSpec s = base;
        s.spp = 3;
        s.planar = PLANARCONFIG_SEPARATE;
        cases.push_back({s, "separate planes"});
    }
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const LibtiffSpec& c = cases[i].spec;
        const std::uint64_t bytes = (std::uint64_t{c.width} * c.spp * c.bits + 7) / 8 * c.height;
        write_with_libtiff(dir.file(fmt::format("u{}.tif", i)), c, random_bytes(rng, bytes));
    }
    LibtiffSpec s = base;
    s.rows_per_strip = 10;
    write_with_libtiff(dir.file("big-strip.tif"), s, random_bytes(rng, 200));
    // Only outcore's reads are watched: libtiff's own writer above may warn.
    testing::internal::CaptureStderr();
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const std::string path = dir.file(fmt::format("u{}.tif", i));
        expect_one_line_error<UsageError>([&] { TiffReader r(path); }, "tiff",
                                          {"unsupported TIFF", cases[i].needle});
    }
    // A strip larger than the reader's limit is refused up front, not allocated.
    TiffReadOptions limit;
    limit.max_unit_bytes = 100;
    expect_one_line_error<UsageError>([&] { TiffReader r(dir.file("big-strip.tif"), limit); }, "tiff",
                                      {"exceeds the reader's 100-byte limit"});
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

#endif  // OUTCORE_TEST_WITH_LIBTIFF

}  // namespace
}  // namespace outcore::io
