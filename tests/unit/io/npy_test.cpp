#include "outcore/io/npy.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "io_test_util.hpp"
#include "outcore/core/error.hpp"
#include "support/test_seed.hpp"

namespace outcore::io {
namespace {

using test::expect_one_line_error;
using test::random_bytes;
using test::ScratchDir;

std::span<const std::byte> as_bytes(std::string_view s) {
    return std::as_bytes(std::span(s.data(), s.size()));
}

// A .npy header as NumPy would write it for `dict` (version 1.0, padded to 64).
std::string npy_v1(std::string_view dict) {
    std::string body(dict);
    const std::size_t total = (10 + body.size() + 1 + 63) / 64 * 64;
    body.append(total - 10 - body.size() - 1, ' ');
    body.push_back('\n');
    std::string out = "\x93NUMPY";
    out.push_back('\x01');
    out.push_back('\x00');
    out.push_back(static_cast<char>(body.size() & 0xff));
    out.push_back(static_cast<char>(body.size() >> 8));
    return out + body;
}

std::string npy_v2(std::string_view dict, char major = '\x02') {
    std::string body(dict);
    body.push_back('\n');
    std::string out = "\x93NUMPY";
    out.push_back(major);
    out.push_back('\x00');
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((body.size() >> (8 * i)) & 0xff));
    return out + body;
}

void write_file(const std::string& path, std::string_view bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A random R x C matrix, row-major, and the column-major block a read should produce.
struct Matrix {
    std::uint64_t rows = 0;
    std::uint64_t cols = 0;
    DType dtype = DType::F32;
    std::vector<std::byte> row_major;

    [[nodiscard]] std::uint32_t w() const { return dtype_bytes(dtype); }
    [[nodiscard]] const std::byte* at(std::uint64_t i, std::uint64_t j) const {
        return row_major.data() + (i * cols + j) * w();
    }
    [[nodiscard]] std::vector<std::byte> col_major() const {
        std::vector<std::byte> out(row_major.size());
        for (std::uint64_t j = 0; j < cols; ++j) {
            for (std::uint64_t i = 0; i < rows; ++i) {
                std::memcpy(out.data() + (i + j * rows) * w(), at(i, j), w());
            }
        }
        return out;
    }
};

Matrix random_matrix(std::mt19937_64& rng, std::uint64_t rows, std::uint64_t cols, DType dtype) {
    Matrix m{rows, cols, dtype, {}};
    m.row_major = random_bytes(rng, rows * cols * dtype_bytes(dtype));
    return m;
}

// Writes m through an NpyMatrixWriter in tiles of a random size, in random order.
void write_tiled(std::mt19937_64& rng, const Matrix& m, const std::string& path, NpyOrder order) {
    NpyMatrixWriter writer(path, m.rows, m.cols, m.dtype, false, order);
    const std::uint64_t tr = std::uniform_int_distribution<std::uint64_t>(1, m.rows)(rng);
    const std::uint64_t tc = std::uniform_int_distribution<std::uint64_t>(1, m.cols)(rng);
    std::vector<std::pair<std::uint64_t, std::uint64_t>> tiles;
    for (std::uint64_t i = 0; i < m.rows; i += tr) {
        for (std::uint64_t j = 0; j < m.cols; j += tc) tiles.emplace_back(i, j);
    }
    std::shuffle(tiles.begin(), tiles.end(), rng);
    for (const auto& [i0, j0] : tiles) {
        const std::uint64_t rows = std::min(tr, m.rows - i0);
        const std::uint64_t cols = std::min(tc, m.cols - j0);
        const std::uint64_t ld = rows + std::uniform_int_distribution<std::uint64_t>(0, 3)(rng);
        std::vector<std::byte> block(ld * cols * m.w(), std::byte{0x5a});
        for (std::uint64_t j = 0; j < cols; ++j) {
            for (std::uint64_t i = 0; i < rows; ++i) {
                std::memcpy(block.data() + (i + j * ld) * m.w(), m.at(i0 + i, j0 + j), m.w());
            }
        }
        writer.write(i0, j0, rows, cols, block.data(), ld);
    }
    writer.commit();
}

// Reads `count` random blocks with random leading dimensions and checks every element,
// and that the padding between rows and ld is untouched.
void check_random_blocks(std::mt19937_64& rng, const MatrixSource& src, const Matrix& m,
                         std::uint64_t count) {
    ASSERT_EQ(src.rows(), m.rows);
    ASSERT_EQ(src.cols(), m.cols);
    ASSERT_EQ(src.dtype(), m.dtype);
    const std::uint32_t w = m.w();
    for (std::uint64_t k = 0; k < count; ++k) {
        const std::uint64_t r0 = std::uniform_int_distribution<std::uint64_t>(0, m.rows - 1)(rng);
        const std::uint64_t c0 = std::uniform_int_distribution<std::uint64_t>(0, m.cols - 1)(rng);
        const std::uint64_t rows = std::uniform_int_distribution<std::uint64_t>(1, m.rows - r0)(rng);
        const std::uint64_t cols = std::uniform_int_distribution<std::uint64_t>(1, m.cols - c0)(rng);
        const std::uint64_t ld = rows + std::uniform_int_distribution<std::uint64_t>(0, 2)(rng);
        std::vector<std::byte> dst(ld * cols * w, std::byte{0xa5});
        src.read(r0, c0, rows, cols, dst.data(), ld);
        for (std::uint64_t j = 0; j < cols; ++j) {
            for (std::uint64_t i = 0; i < ld; ++i) {
                const std::byte* got = dst.data() + (i + j * ld) * w;
                if (i < rows) {
                    ASSERT_EQ(std::memcmp(got, m.at(r0 + i, c0 + j), w), 0)
                        << "element (" << r0 + i << ", " << c0 + j << ") of block at (" << r0 << ", " << c0
                        << ") size " << rows << " x " << cols << " ld " << ld;
                } else {
                    for (std::uint32_t b = 0; b < w; ++b) {
                        ASSERT_EQ(got[b], std::byte{0xa5}) << "padding written";
                    }
                }
            }
        }
    }
}

TEST(NpyHeader, FormatMatchesNumPyByteForByte) {
    // np.save of a (3, 4) float32 array writes exactly this 128-byte header.
    const std::string numpy = npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }");
    ASSERT_EQ(numpy.size(), 128U);
    const std::array<std::uint64_t, 2> shape = {3, 4};
    const std::vector<std::byte> ours = format_npy_header(shape, DType::F32);
    ASSERT_EQ(ours.size(), numpy.size());
    EXPECT_EQ(std::memcmp(ours.data(), numpy.data(), numpy.size()), 0);
    const std::array<std::uint64_t, 1> one = {5};
    const std::vector<std::byte> v = format_npy_header(one, DType::U8, NpyOrder::Fortran);
    const std::string expect = npy_v1("{'descr': '|u1', 'fortran_order': True, 'shape': (5,), }");
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(v.data()), v.size()), expect);
}

TEST(NpyHeader, FormatThenParseRoundTripsEveryDtypeAndRank) {
    std::mt19937_64 rng(outcore::test::seed());
    for (const DType dtype : test::npy_dtypes()) {
        for (std::size_t rank = 0; rank <= 4; ++rank) {
            std::vector<std::uint64_t> shape(rank);
            for (auto& d : shape) d = std::uniform_int_distribution<std::uint64_t>(0, 5000)(rng);
            for (const NpyOrder order : {NpyOrder::C, NpyOrder::Fortran}) {
                const std::vector<std::byte> bytes = format_npy_header(shape, dtype, order);
                EXPECT_EQ(bytes.size() % 64, 0U);
                const NpyHeader h = parse_npy_header(bytes);
                EXPECT_EQ(h.dtype, dtype);
                EXPECT_EQ(h.fortran_order, order == NpyOrder::Fortran);
                EXPECT_EQ(h.shape, shape);
                EXPECT_EQ(h.data_offset_bytes, bytes.size());
                std::uint64_t n = 1;
                for (auto d : shape) n *= d;
                EXPECT_EQ(h.element_count, n);
                EXPECT_EQ(h.data_bytes, n * dtype_bytes(dtype));
            }
        }
    }
}

TEST(NpyHeader, AcceptsWhatNumPyAndPythonAccept) {
    struct Case {
        std::string bytes;
        DType dtype;
        bool fortran;
        std::vector<std::uint64_t> shape;
    };
    const std::vector<Case> cases = {
        {npy_v1("{\"descr\": \"<f8\", \"fortran_order\": True, \"shape\": (2, 3)}"),
         DType::F64,
         true,
         {2, 3}},
        {npy_v1("{'shape': (7,), 'fortran_order': False, 'descr': '<u2'}"), DType::U16, false, {7}},
        {npy_v1("{ 'descr' : '=f4' ,\t'fortran_order' : False , 'shape' : ( 4 , 5 , ) , }"),
         DType::F32,
         false,
         {4, 5}},
        {npy_v1("{'descr': '<f2', 'fortran_order': False, 'shape': (3L, 4L), }"), DType::F16, false, {3, 4}},
        {npy_v1("{'descr': '>u1', 'fortran_order': False, 'shape': (), }"), DType::U8, false, {}},
        {npy_v1("{'descr': '<u1', 'fortran_order': False, 'shape': (0, 9), }"), DType::U8, false, {0, 9}},
        {npy_v2("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }"), DType::F32, false, {1, 2}},
        {npy_v2("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 2), }", '\x03'),
         DType::F32,
         true,
         {1, 2}},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.bytes);
        const NpyHeader h = parse_npy_header(as_bytes(c.bytes), "case.npy");
        EXPECT_EQ(h.dtype, c.dtype);
        EXPECT_EQ(h.fortran_order, c.fortran);
        EXPECT_EQ(h.shape, c.shape);
        EXPECT_EQ(h.data_offset_bytes, c.bytes.size());
    }
}

TEST(NpyHeader, RejectsMalformedHeadersWithOneLineUsageErrors) {
    const std::string good = npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }");
    struct Case {
        std::string bytes;
        std::string needle;
    };
    std::string bad_version = good;
    bad_version[6] = '\x04';
    std::string bad_minor = good;
    bad_minor[7] = '\x01';
    std::string huge_length = npy_v2("{}");
    huge_length[11] = '\x7f';
    const std::vector<Case> cases = {
        {"", "bad magic"},
        {"\x93NUMP", "bad magic"},
        {"GIF89a" + good.substr(6), "bad magic"},
        {good.substr(0, 9), "truncated"},
        {good.substr(0, 60), "truncated header (60 of 128 bytes)"},
        {bad_version, "unsupported .npy version 4.0"},
        {bad_minor, "unsupported .npy version 1.1"},
        {huge_length, "exceeds"},
        {npy_v1("['descr', '<f4']"), "not a dict"},
        {npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4)"), "expected ',' or '}'"},
        {npy_v1("{'descr': '<f4', 'fortran_order': False}"), "lacks 'shape'"},
        {npy_v1("{'fortran_order': False, 'shape': (3,)}"), "lacks 'descr'"},
        {npy_v1("{'descr': '<f4', 'shape': (3,)}"), "lacks 'fortran_order'"},
        {npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}"), "unexpected key 'x'"},
        {npy_v1("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}"),
         "duplicate key 'descr'"},
        {npy_v1("{'descr': '<f4', 'fortran_order': 0, 'shape': (3,)}"), "not True or False"},
        {npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': [3, 4]}"), "not a tuple"},
        {npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (3)}"), "trailing comma"},
        {npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (-3, 4)}"), "non-negative integers"},
        {npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (3.5, 4)}"), "expected ',' or ')'"},
        {npy_v1("{'descr': '<f4, 'fortran_order': False, 'shape': (3,)}"), "expected ',' or '}'"},
        {npy_v1("{'descr' '<f4', 'fortran_order': False, 'shape': (3,)}"), "expected ':'"},
        {npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), "),
         "expected a string for the dict key"},
        {npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} x"), "unexpected text after"},
        {npy_v1("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,)}"), "structured dtypes"},
        {npy_v1("{'descr': '<i4', 'fortran_order': False, 'shape': (3,)}"), "unsupported dtype '<i4'"},
        {npy_v1("{'descr': '<c8', 'fortran_order': False, 'shape': (3,)}"), "unsupported dtype '<c8'"},
        {npy_v1("{'descr': '|f4', 'fortran_order': False, 'shape': (3,)}"), "unsupported dtype '|f4'"},
        {npy_v1("{'descr': '>f4', 'fortran_order': False, 'shape': (3,)}"), "unsupported byte order"},
        {npy_v1("{'descr': '>f8', 'fortran_order': False, 'shape': (3,)}"), "big-endian"},
        {npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776)}"),
         "more elements than fit"},
        {npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,)}"),
         "more elements than fit"},
        {npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (1152921504606846975,)}"),
         "too large for a file"},
        {npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}"),
         "exceeds 2^64-1"},
        {npy_v1("{'descr': '\x01\xff', 'fortran_order': False, 'shape': (3,)}"),
         "unsupported dtype '\\x01\\xff'"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.needle);
        expect_one_line_error<UsageError>([&] { (void)parse_npy_header(as_bytes(c.bytes), "in\nput.npy"); },
                                          "npy", {"'in\\x0aput.npy'", c.needle});
    }
}

TEST(NpyHeader, HeadersNeverLongerThanTheLimitAreRead) {
    std::string prefix = "\x93NUMPY";
    prefix += std::string("\x02\x00", 2);
    const std::uint32_t length = static_cast<std::uint32_t>(kNpyMaxHeaderBytes) + 1;
    for (int i = 0; i < 4; ++i) prefix.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
    expect_one_line_error<UsageError>([&] { (void)npy_header_bytes(as_bytes(prefix), "x.npy"); }, "npy",
                                      {"exceeds the 1048576-byte limit"});
}

TEST(NpyMatrix, RoundTripsEveryDtypeBothOrdersOddSizes) {
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    const std::vector<std::pair<std::uint64_t, std::uint64_t>> shapes = {
        {1, 1}, {1, 7}, {7, 1}, {7, 1023}, {1023, 7}, {33, 65}, {1, 1023}};
    int n = 0;
    for (const DType dtype : test::npy_dtypes()) {
        for (const NpyOrder order : {NpyOrder::C, NpyOrder::Fortran}) {
            for (const auto& [r, c] : shapes) {
                SCOPED_TRACE(testing::Message() << to_string(dtype) << " " << r << "x" << c << " fortran "
                                                << (order == NpyOrder::Fortran));
                const Matrix m = random_matrix(rng, r, c, dtype);
                const std::string path = dir.file(fmt::format("m{}.npy", n++));
                write_tiled(rng, m, path, order);
                // The bytes on disk are the array in the declared order (what NumPy reads).
                const NpyArray loaded = load_npy(path);
                EXPECT_EQ(loaded.header.fortran_order, order == NpyOrder::Fortran);
                const std::vector<std::byte> expect = order == NpyOrder::C ? m.row_major : m.col_major();
                ASSERT_EQ(loaded.data, expect);
                const NpyMatrixReader reader(path);
                check_random_blocks(rng, reader, m, outcore::test::scaled(60));
            }
        }
    }
}

TEST(NpyMatrix, ReadsFilesSavedBySaveNpyInEitherOrder) {
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    for (const NpyOrder order : {NpyOrder::C, NpyOrder::Fortran}) {
        const Matrix m = random_matrix(rng, 57, 91, DType::F64);
        const std::array<std::uint64_t, 2> shape = {m.rows, m.cols};
        const std::string path = dir.file(order == NpyOrder::C ? "c.npy" : "f.npy");
        save_npy(path, order == NpyOrder::C ? m.row_major : m.col_major(), shape, m.dtype, false, order);
        const NpyMatrixReader reader(path);
        check_random_blocks(rng, reader, m, outcore::test::scaled(200));
    }
}

TEST(NpyMatrix, WideAndTallFilesTakeTheUncoalescedAndBatchedPaths) {
    // Rows of 80 KB with narrow blocks leave gaps beyond the coalescing threshold; a
    // 9 MB full read crosses the bounce buffer several times.
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    const std::vector<std::pair<std::uint64_t, std::uint64_t>> shapes = {{5, 20000}, {20000, 5}, {600, 2000}};
    for (const auto& [r, c] : shapes) {
        for (const NpyOrder order : {NpyOrder::C, NpyOrder::Fortran}) {
            const Matrix m = random_matrix(rng, r, c, DType::F32);
            const std::array<std::uint64_t, 2> shape = {r, c};
            const std::string path = dir.file("w.npy");
            save_npy(path, order == NpyOrder::C ? m.row_major : m.col_major(), shape, m.dtype, true, order);
            const NpyMatrixReader reader(path);
            check_random_blocks(rng, reader, m, outcore::test::scaled(10));
            std::vector<std::byte> all(r * c * 4);
            reader.read(0, 0, r, c, all.data(), r);
            EXPECT_EQ(all, m.col_major());
            // Narrow blocks, and a write of the same through the writer.
            std::vector<std::byte> narrow(r * 3 * 4);
            reader.read(0, c / 2, r, 1, narrow.data(), r);
            for (std::uint64_t i = 0; i < r; ++i) {
                ASSERT_EQ(std::memcmp(narrow.data() + i * 4, m.at(i, c / 2), 4), 0);
            }
            NpyMatrixWriter writer(dir.file("copy.npy"), r, c, DType::F32, true, order);
            writer.write(0, 0, r, c, all.data(), r);
            writer.commit();
            EXPECT_EQ(load_npy(dir.file("copy.npy")).data,
                      order == NpyOrder::C ? m.row_major : m.col_major());
        }
    }
}

TEST(NpyMatrix, ConcurrentReadsAndDisjointWritesAgree) {
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    const Matrix m = random_matrix(rng, 301, 257, DType::F32);
    const std::string in = dir.file("in.npy");
    write_tiled(rng, m, in, NpyOrder::C);
    const NpyMatrixReader reader(in);
    NpyMatrixWriter writer(dir.file("out.npy"), m.rows, m.cols, m.dtype, false);
    constexpr int kThreads = 4;
    std::vector<std::thread> threads;
    std::vector<std::uint64_t> seeds;
    for (int t = 0; t < kThreads; ++t) seeds.push_back(rng());
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            std::mt19937_64 local(seeds[static_cast<std::size_t>(t)]);
            check_random_blocks(local, reader, m, outcore::test::scaled(50));
            // Thread t copies column stripes t, t + kThreads, ... through the writer.
            for (std::uint64_t j = static_cast<std::uint64_t>(t) * 16; j < m.cols; j += kThreads * 16) {
                const std::uint64_t cols = std::min<std::uint64_t>(16, m.cols - j);
                std::vector<std::byte> block(m.rows * cols * 4);
                reader.read(0, j, m.rows, cols, block.data(), m.rows);
                writer.write(0, j, m.rows, cols, block.data(), m.rows);
            }
        });
    }
    for (auto& t : threads) t.join();
    writer.commit();
    EXPECT_EQ(load_npy(dir.file("out.npy")).data, m.row_major);
}

TEST(NpyMatrix, RejectsFilesThatAreNotTwoDimensionalOrAreTruncated) {
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    const std::vector<std::byte> data = random_bytes(rng, 24 * 4);
    for (const std::vector<std::uint64_t>& shape :
         {std::vector<std::uint64_t>{24}, std::vector<std::uint64_t>{2, 3, 4}}) {
        const std::string path = dir.file(fmt::format("r{}.npy", shape.size()));
        save_npy(path, data, shape, DType::F32, false);
        expect_one_line_error<UsageError>([&] { NpyMatrixReader r(path); }, "npy",
                                          {path, "expected a 2-D array", fmt::format("{}-D", shape.size())});
    }
    // Data shorter than the header declares: the size is checked at open, not at read.
    const std::string header = npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (100, 100), }");
    const std::string path = dir.file("short.npy");
    write_file(path, header + std::string(39996, 'x'));
    expect_one_line_error<UsageError>([&] { NpyMatrixReader r(path); }, "npy",
                                      {"short.npy", "data truncated", "40000 bytes", "39996"});
    // Longer than declared is fine (NumPy ignores trailing bytes).
    write_file(path, header + std::string(40000 + 17, 'x'));
    EXPECT_EQ(NpyMatrixReader(path).rows(), 100U);
    // Not a file at all, and a directory.
    expect_one_line_error<IoError>([&] { NpyMatrixReader r(dir.file("missing.npy")); }, "npy",
                                   {"missing.npy", "open", "No such file"});
    expect_one_line_error<UsageError>([&] { NpyMatrixReader r(dir.file("")); }, "npy", {"is a directory"});
}

TEST(NpyMatrix, BlockRequestsOutsideTheMatrixAreUsageErrors) {
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    const Matrix m = random_matrix(rng, 10, 20, DType::U16);
    write_tiled(rng, m, dir.file("a.npy"), NpyOrder::Fortran);
    const NpyMatrixReader r(dir.file("a.npy"));
    std::vector<std::byte> buf(10 * 20 * 2);
    constexpr std::uint64_t kMax = ~std::uint64_t{0};
    expect_one_line_error<UsageError>([&] { r.read(5, 0, 6, 1, buf.data(), 6); }, "io",
                                      {"outside the 10 x 20"});
    expect_one_line_error<UsageError>([&] { r.read(0, 19, 1, 2, buf.data(), 1); }, "io", {"outside"});
    expect_one_line_error<UsageError>([&] { r.read(kMax, 0, 2, 1, buf.data(), 2); }, "io", {"overflow"});
    expect_one_line_error<UsageError>([&] { r.read(0, 0, 4, 2, buf.data(), 3); }, "io",
                                      {"leading dimension 3"});
    expect_one_line_error<UsageError>([&] { r.read(0, 0, 1, 1, nullptr, 1); }, "io", {"null"});
    r.read(10, 20, 0, 0, nullptr, 0);  // an empty block at the corner is fine
    r.read(3, 3, 0, 5, nullptr, 0);
}

TEST(NpyMatrixWriter, NeverLeavesAPartialOutputUnderTheFinalName) {
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    const std::string path = dir.file("out.npy");
    {
        NpyMatrixWriter w(path, 8, 8, DType::F32, false);
        const std::vector<std::byte> block = random_bytes(rng, 4 * 8 * 4);
        w.write(0, 0, 4, 8, block.data(), 4);
        EXPECT_FALSE(std::filesystem::exists(path)) << "visible before commit";
        EXPECT_EQ(dir.entries().size(), 1U);  // just the temporary file
    }
    EXPECT_TRUE(dir.entries().empty()) << "the temporary file outlived the writer";
    {
        // An exception unwinding past a writer cleans up the same way.
        try {
            NpyMatrixWriter w(path, 8, 8, DType::F32, false);
            const std::vector<std::byte> block(4 * 4);
            w.write(7, 7, 2, 1, block.data(), 2);  // outside: throws
        } catch (const UsageError&) {}
        EXPECT_TRUE(dir.entries().empty());
    }
}

TEST(NpyMatrixWriter, ExistingOutputsNeedForce) {
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    const std::string path = dir.file("out.npy");
    write_file(path, "precious");
    expect_one_line_error<UsageError>([&] { NpyMatrixWriter w(path, 2, 2, DType::F32, false); }, "npy",
                                      {"out.npy' exists (use --force)"});
    const Matrix m = random_matrix(rng, 3, 5, DType::F64);
    {
        NpyMatrixWriter w(path, 3, 5, DType::F64, true);
        const std::vector<std::byte> col = m.col_major();
        w.write(0, 0, 3, 5, col.data(), 3);
        EXPECT_EQ(test::read_file(path), "precious") << "replaced before commit";
        w.commit();
    }
    EXPECT_EQ(load_npy(path).data, m.row_major);
    EXPECT_EQ(dir.entries().size(), 1U);
    // An output that appears between open and commit is not clobbered without force.
    const std::string late = dir.file("late.npy");
    {
        NpyMatrixWriter w(late, 1, 1, DType::U8, false);
        write_file(late, "someone else's");
        expect_one_line_error<UsageError>([&] { w.commit(); }, "npy", {"exists (use --force)"});
    }
    EXPECT_EQ(test::read_file(late), "someone else's");
    EXPECT_EQ(dir.entries().size(), 2U);
}

TEST(NpyMatrixWriter, OutputGetsTheUmaskPermissionsAndUnwrittenBlocksReadZero) {
    ScratchDir dir;
    const std::string path = dir.file("z.npy");
    const mode_t old = ::umask(027);
    {
        NpyMatrixWriter w(path, 4, 3, DType::U16, false);
        const std::array<std::uint16_t, 1> one = {0xbeef};
        w.write(2, 1, 1, 1, reinterpret_cast<const std::byte*>(one.data()), 1);
        w.commit();
    }
    ::umask(old);
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0640U);
    const NpyArray a = load_npy(path);
    std::vector<std::uint16_t> values(12);
    std::memcpy(values.data(), a.data.data(), 24);
    for (std::size_t k = 0; k < values.size(); ++k) EXPECT_EQ(values[k], k == 2 * 3 + 1 ? 0xbeef : 0) << k;
}

TEST(NpyMatrixWriter, HugeOrImpossibleShapesAreUsageErrors) {
    ScratchDir dir;
    constexpr std::uint64_t kMax = ~std::uint64_t{0};
    for (const std::uint64_t n :
         {std::uint64_t{1} << 31, std::uint64_t{1} << 32, std::uint64_t{1} << 63, kMax}) {
        expect_one_line_error<UsageError>(
            [&] { NpyMatrixWriter w(dir.file("h.npy"), n, n, DType::F32, false); }, "npy", {"too large"});
    }
    expect_one_line_error<UsageError>([&] { NpyMatrixWriter w(dir.file("h.npy"), 2, 2, DType::BF16, false); },
                                      "npy", {"bf16 cannot be stored"});
    EXPECT_TRUE(dir.entries().empty());
    expect_one_line_error<IoError>(
        [&] { NpyMatrixWriter w(dir.file("no/such/dir.npy"), 2, 2, DType::F32, false); }, "npy", {"mkstemp"});
}

TEST(NpyArrays, SaveAndLoadCheckTheirSizes) {
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    const std::vector<std::byte> data = random_bytes(rng, 2 * 3 * 5 * 8);
    const std::array<std::uint64_t, 3> shape = {2, 3, 5};
    save_npy(dir.file("a.npy"), data, shape, DType::F64, false);
    const NpyArray a = load_npy(dir.file("a.npy"));
    EXPECT_EQ(a.header.shape, std::vector<std::uint64_t>(shape.begin(), shape.end()));
    EXPECT_EQ(a.data, data);
    expect_one_line_error<UsageError>([&] { (void)load_npy(dir.file("a.npy"), 100); }, "npy",
                                      {"exceed the 100-byte"});
    expect_one_line_error<UsageError>(
        [&] { save_npy(dir.file("b.npy"), std::span(data).first(8), shape, DType::F64, false); }, "npy",
        {"8 bytes given for shape (2, 3, 5)"});
    EXPECT_FALSE(std::filesystem::exists(dir.file("b.npy")));
}

}  // namespace
}  // namespace outcore::io
