#include "outcore/io/file.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <filesystem>
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

TEST(Printable, EscapesControlBytesAndShortensLongText) {
    EXPECT_EQ(printable("a.npy"), "a.npy");
    EXPECT_EQ(printable(std::string("x\ny\t\x7f\xff", 6)), "x\\x0ay\\x09\\x7f\\xff");
    const std::string longer(500, 'a');
    const std::string cut = printable(longer, 10);
    EXPECT_EQ(cut, "aaaaaaaaaa...");
}

TEST(File, PositionalWritesAndReadsRoundTripAndStopAtEndOfFile) {
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    AtomicOutput out(dir.file("f.bin"), false, "test");
    const std::vector<std::byte> data = random_bytes(rng, 100000);
    // Written back to front in uneven pieces: positions, not a cursor, decide.
    for (std::size_t end = data.size(); end > 0;) {
        const std::size_t n = std::min<std::size_t>(end, 1 + rng() % 7000);
        out.file().write_exact(data.data() + end - n, n, end - n);
        end -= n;
    }
    EXPECT_EQ(out.file().size_bytes(), data.size());
    std::vector<std::byte> back(data.size() + 50);
    EXPECT_EQ(out.file().read_some(back.data(), back.size(), 0), data.size());  // short at end of file
    EXPECT_TRUE(std::equal(data.begin(), data.end(), back.begin()));
    EXPECT_EQ(out.file().read_some(back.data(), 10, data.size() + 5), 0U);
    expect_one_line_error<IoError>([&] { out.file().read_exact(back.data(), 20, data.size() - 10); }, "test",
                                   {"unexpected end of file at offset 100000 (wanted 10 bytes)", "pread"});
    expect_one_line_error<UsageError>([&] { out.file().read_exact(back.data(), 2, ~std::uint64_t{0} - 1); },
                                      "test", {"exceeds the largest file offset"});
    expect_one_line_error<UsageError>([&] { out.file().write_exact(back.data(), 2, std::uint64_t{1} << 63); },
                                      "test", {"largest file offset"});
    out.file().truncate(10);
    EXPECT_EQ(out.file().size_bytes(), 10U);
}

TEST(File, ReadsOfAFileTruncatedUnderneathFailInsteadOfReturningGarbage) {
    std::mt19937_64 rng(outcore::test::seed());
    ScratchDir dir;
    const std::string path = dir.file("m.npy");
    const std::array<std::uint64_t, 2> shape = {64, 64};
    save_npy(path, random_bytes(rng, 64 * 64 * 4), shape, DType::F32, false);
    const NpyMatrixReader reader(path);
    ASSERT_EQ(::truncate(path.c_str(), 1000), 0);
    std::vector<std::byte> tile(64 * 64 * 4);
    const std::string what = expect_one_line_error<IoError>(
        [&] { reader.read(0, 0, 64, 64, tile.data(), 64); }, "npy", {"m.npy", "unexpected end of file"});
    EXPECT_FALSE(what.empty());
}

TEST(AtomicOutput, CommitPublishesOnceAndMovesKeepOwnership) {
    ScratchDir dir;
    const std::string path = dir.file("o.bin");
    AtomicOutput a(path, false, "test");
    const std::string temp = a.temp_path();
    EXPECT_TRUE(std::filesystem::exists(temp));
    EXPECT_NE(temp.find("/.o.bin.tmp."), std::string::npos) << temp;
    AtomicOutput b(std::move(a));  // the moved-from output must not remove b's file
    const std::array<std::byte, 3> bytes = {std::byte{1}, std::byte{2}, std::byte{3}};
    b.file().write_exact(bytes.data(), bytes.size(), 0);
    b.commit();
    EXPECT_TRUE(b.committed());
    EXPECT_FALSE(std::filesystem::exists(temp));
    EXPECT_EQ(std::filesystem::file_size(path), 3U);
    expect_one_line_error<UsageError>([&] { b.commit(); }, "test", {"committed twice"});
    expect_one_line_error<UsageError>([&] { AtomicOutput c("", false, "test"); }, "test", {"empty"});
    expect_one_line_error<UsageError>([&] { AtomicOutput c(path, false, "test"); }, "test",
                                      {"exists (use --force)"});
    {
        AtomicOutput forced(path, true, "test");
        forced.commit();
    }
    EXPECT_EQ(std::filesystem::file_size(path), 0U);
    EXPECT_EQ(dir.entries().size(), 1U);
}

}  // namespace
}  // namespace outcore::io
