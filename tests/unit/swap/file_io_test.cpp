// FileIo: the real system calls (unnamed 0600 files through O_TMPFILE and through
// mkstemp + unlink, −errno returns) and FaultyFileIo's injection rules (nth call,
// once or persistent, errno or short transfer, call counts).
#include "outcore/swap/file_io.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "support/test_seed.hpp"
#include "unit/swap/spill_test_support.hpp"

namespace outcore::swap {
namespace {

using spill_test::TempDir;

void expect_unnamed_private(int fd) {
    struct stat st {};
    ASSERT_EQ(::fstat(fd, &st), 0) << std::strerror(errno);
    EXPECT_EQ(st.st_nlink, 0U) << "the spill file has a name on disk";
    EXPECT_EQ(st.st_mode & 07777, 0600U);
    EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST(PosixFileIo, OpensAnUnnamedPrivateFileThroughEitherPath) {
    std::mt19937_64 rng(test::seed());
    for (const auto& [use_o_tmpfile, mask] : {std::pair{true, 0}, {true, 0277}, {false, 0}, {false, 0277}}) {
        SCOPED_TRACE(::testing::Message() << (use_o_tmpfile ? "O_TMPFILE" : "mkstemp + unlink") << ", umask 0"
                                          << std::oct << mask);
        // Neither a permissive nor a restrictive umask may change the mode.
        TempDir dir;
        const mode_t old_mask = ::umask(static_cast<mode_t>(mask));
        PosixFileIo io({.use_o_tmpfile = use_o_tmpfile});
        const int fd = io.open_tmpfile(dir.path().string(), false);
        ::umask(old_mask);
        ASSERT_GE(fd, 0) << std::strerror(-fd);
        expect_unnamed_private(fd);
        EXPECT_TRUE(dir.entries().empty());
        EXPECT_NE(::fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);

        const std::vector<std::byte> data = spill_test::random_bytes(rng, 10000);
        EXPECT_EQ(io.pwrite(fd, data.data(), data.size(), 123), static_cast<ssize_t>(data.size()));
        std::vector<std::byte> back(data.size());
        EXPECT_EQ(io.pread(fd, back.data(), back.size(), 123), static_cast<ssize_t>(back.size()));
        EXPECT_EQ(back, data);
        // Reading at the end of the file returns 0.
        EXPECT_EQ(io.pread(fd, back.data(), back.size(), 123 + data.size()), 0);
        EXPECT_EQ(io.fallocate(fd, 0, 1 << 16), 0);
        EXPECT_EQ(io.ftruncate(fd, 4096), 0);
        EXPECT_EQ(io.fdatasync(fd), 0);
        EXPECT_EQ(io.close(fd), 0);
        EXPECT_EQ(::fcntl(fd, F_GETFD), -1) << "the descriptor stays open";
    }
}

TEST(PosixFileIo, OpensWithODirectWhereTheFilesystemAllows) {
    for (const auto& base : spill_test::test_bases()) {
        SCOPED_TRACE(base.string());
        TempDir dir(base);
        for (bool use_o_tmpfile : {true, false}) {
            PosixFileIo io({.use_o_tmpfile = use_o_tmpfile});
            const int fd = io.open_tmpfile(dir.path().string(), true);
            if (spill_test::filesystem_allows_direct(dir.path())) {
                ASSERT_GE(fd, 0) << std::strerror(-fd);
                EXPECT_NE(::fcntl(fd, F_GETFL) & O_DIRECT, 0);
                expect_unnamed_private(fd);
                EXPECT_EQ(io.close(fd), 0);
            } else {
                EXPECT_EQ(fd, -EINVAL);
            }
            EXPECT_TRUE(dir.entries().empty());
        }
    }
}

TEST(PosixFileIo, ReturnsMinusErrnoAndNeverThrows) {
    PosixFileIo io;
    EXPECT_EQ(io.open_tmpfile("/nonexistent/outcore-spill", false), -ENOENT);
    PosixFileIo mkstemp_io({.use_o_tmpfile = false});
    EXPECT_EQ(mkstemp_io.open_tmpfile("/nonexistent/outcore-spill", false), -ENOENT);
    std::byte b{};
    EXPECT_EQ(io.pread(-1, &b, 1, 0), -EBADF);
    EXPECT_EQ(io.pwrite(-1, &b, 1, 0), -EBADF);
    EXPECT_EQ(io.fallocate(-1, 0, 1), -EBADF);
    EXPECT_EQ(io.ftruncate(-1, 0), -EBADF);
    EXPECT_EQ(io.fdatasync(-1), -EBADF);
    EXPECT_EQ(io.close(-1), -EBADF);
    EXPECT_EQ(&posix_file_io(), &posix_file_io());
}

TEST(FileOp, NamesTheSystemCall) {
    EXPECT_EQ(to_string(FileOp::Open), "open");
    EXPECT_EQ(to_string(FileOp::Read), "pread");
    EXPECT_EQ(to_string(FileOp::Write), "pwrite");
    EXPECT_EQ(to_string(FileOp::Allocate), "fallocate");
    EXPECT_EQ(to_string(FileOp::Truncate), "ftruncate");
    EXPECT_EQ(to_string(FileOp::Sync), "fdatasync");
    EXPECT_EQ(to_string(FileOp::Close), "close");
}

class FaultyFileIoTest : public ::testing::Test {
protected:
    void SetUp() override {
        fd_ = posix_.open_tmpfile(dir_.path().string(), false);
        ASSERT_GE(fd_, 0);
        data_.assign(8192, std::byte{0x5a});
        ASSERT_EQ(posix_.pwrite(fd_, data_.data(), data_.size(), 0), static_cast<ssize_t>(data_.size()));
    }
    void TearDown() override {
        if (fd_ >= 0) posix_.close(fd_);
    }

    TempDir dir_;
    PosixFileIo posix_;
    FaultyFileIo faulty_{posix_};
    int fd_ = -1;
    std::vector<std::byte> data_;
};

TEST_F(FaultyFileIoTest, FailsOnlyTheNthCallOnce) {
    faulty_.arm({.op = FileOp::Write, .nth = 3, .error = EIO});
    for (int i = 1; i <= 6; ++i) {
        const ssize_t n = faulty_.pwrite(fd_, data_.data(), 100, 0);
        EXPECT_EQ(n, i == 3 ? -EIO : 100) << "call " << i;
    }
    EXPECT_EQ(faulty_.calls(FileOp::Write), 6U);
    EXPECT_EQ(faulty_.calls(FileOp::Read), 0U);
    EXPECT_EQ(faulty_.injected(), 1U);
    // Other ops are untouched.
    std::byte b{};
    EXPECT_EQ(faulty_.pread(fd_, &b, 1, 0), 1);
}

TEST_F(FaultyFileIoTest, PersistentFailsEveryCallFromTheNthOn) {
    faulty_.arm({.op = FileOp::Allocate, .nth = 2, .error = ENOSPC, .persistent = true});
    EXPECT_EQ(faulty_.fallocate(fd_, 0, 4096), 0);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(faulty_.fallocate(fd_, 0, 4096), -ENOSPC);
    EXPECT_EQ(faulty_.injected(), 5U);
    faulty_.disarm();
    EXPECT_EQ(faulty_.fallocate(fd_, 0, 4096), 0);
    EXPECT_EQ(faulty_.calls(FileOp::Allocate), 7U) << "disarm keeps counting";
    faulty_.arm({.op = FileOp::Allocate, .nth = 1, .error = EIO});
    EXPECT_EQ(faulty_.calls(FileOp::Allocate), 0U) << "arm restarts the counts";
    EXPECT_EQ(faulty_.injected(), 0U);
}

TEST_F(FaultyFileIoTest, ShortTransfersMoveOnlyThatManyBytes) {
    faulty_.arm({.op = FileOp::Read, .nth = 1, .short_bytes = 1000});
    std::vector<std::byte> back(data_.size(), std::byte{0});
    EXPECT_EQ(faulty_.pread(fd_, back.data(), back.size(), 0), 1000);
    EXPECT_EQ(back[999], std::byte{0x5a});
    EXPECT_EQ(back[1000], std::byte{0}) << "the short read touched bytes past its count";
    EXPECT_EQ(faulty_.pread(fd_, back.data(), back.size(), 0), static_cast<ssize_t>(back.size()));

    const std::vector<std::byte> ones(4096, std::byte{1});
    faulty_.arm({.op = FileOp::Write, .nth = 1, .short_bytes = 10, .persistent = true});
    EXPECT_EQ(faulty_.pwrite(fd_, ones.data(), ones.size(), 0), 10);
    EXPECT_EQ(faulty_.pwrite(fd_, ones.data(), 5, 0), 5) << "a request below short_bytes is whole";
    faulty_.disarm();
    std::byte b{};
    EXPECT_EQ(faulty_.pread(fd_, &b, 1, 10), 1);
    EXPECT_EQ(b, std::byte{0x5a}) << "the short write wrote past its count";
    // short_bytes 0 on a read is the end of the file.
    faulty_.arm({.op = FileOp::Read, .nth = 1});
    EXPECT_EQ(faulty_.pread(fd_, back.data(), back.size(), 0), 0);
    // An errno-less fault on an op without a transfer injects nothing.
    faulty_.arm({.op = FileOp::Allocate, .nth = 1});
    EXPECT_EQ(faulty_.fallocate(fd_, 0, 4096), 0);
    EXPECT_EQ(faulty_.injected(), 0U);
}

TEST_F(FaultyFileIoTest, FailedCloseStillReleasesTheDescriptor) {
    const int fd = faulty_.open_tmpfile(dir_.path().string(), false);
    ASSERT_GE(fd, 0);
    faulty_.arm({.op = FileOp::Close, .nth = 1, .error = EIO});
    EXPECT_EQ(faulty_.close(fd), -EIO);
    EXPECT_EQ(::fcntl(fd, F_GETFD), -1) << "the descriptor leaked";
    faulty_.arm({.op = FileOp::Open, .nth = 1, .error = EMFILE});
    EXPECT_EQ(faulty_.open_tmpfile(dir_.path().string(), false), -EMFILE);
    faulty_.arm({.op = FileOp::Truncate, .nth = 1, .error = EIO});
    EXPECT_EQ(faulty_.ftruncate(fd_, 0), -EIO);
    faulty_.arm({.op = FileOp::Sync, .nth = 1, .error = EIO});
    EXPECT_EQ(faulty_.fdatasync(fd_), -EIO);
}

}  // namespace
}  // namespace outcore::swap
