// A process killed with SIGKILL while writing its spill file leaves nothing behind
// (QUALITY.md, "Kills"): a forked child writes slots in a fresh directory and says so
// through a pipe; the parent checks the directory has no entry even while the child
// writes, kills it, reaps it and checks again. Both ways of making the file unnamed
// (O_TMPFILE, mkstemp + unlink) are covered.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <vector>

#include "outcore/core/size.hpp"
#include "outcore/swap/spill_file.hpp"
#include "support/test_seed.hpp"
#include "unit/swap/spill_test_support.hpp"

namespace outcore::swap {
namespace {

using spill_test::TempDir;

// The child: writes and frees slots until killed; never returns into gtest. Exits
// on its own (status 4) after a minute in case the parent is gone.
[[noreturn]] void write_until_killed(const std::filesystem::path& dir, bool use_o_tmpfile, int ready_fd,
                                     std::uint64_t seed) {
    try {
        PosixFileIo io({.use_o_tmpfile = use_o_tmpfile});
        SpillFile spill({.dir = dir, .slot_bytes = 64 * kKiB, .io = &io});
        std::mt19937_64 rng(seed);
        std::vector<SpillSlot> slots;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
        for (std::uint64_t n = 0; std::chrono::steady_clock::now() < deadline; ++n) {
            slots.push_back(spill.write(spill_test::random_bytes(rng, 64 * kKiB)));
            if (slots.size() > 32) {
                spill.free(slots.front());
                slots.erase(slots.begin());
            }
            if (n == 8) {
                const char ok = 'w';
                if (::write(ready_fd, &ok, 1) != 1) _exit(3);
            }
        }
        _exit(4);
    } catch (...) {
        _exit(5);
    }
}

TEST(SpillKill, SigkillLeavesNoFileBehind) {
    const std::uint64_t seed = test::seed();
    for (const bool use_o_tmpfile : {true, false}) {
        for (const auto& base : spill_test::test_bases()) {
            SCOPED_TRACE(::testing::Message()
                         << base << (use_o_tmpfile ? ", O_TMPFILE" : ", mkstemp + unlink"));
            TempDir dir(base);
            int pipe_fds[2];
            ASSERT_EQ(::pipe(pipe_fds), 0);
            const pid_t pid = ::fork();
            ASSERT_GE(pid, 0);
            if (pid == 0) {
                ::close(pipe_fds[0]);
                write_until_killed(dir.path(), use_o_tmpfile, pipe_fds[1], seed);
            }
            ::close(pipe_fds[1]);
            pollfd ready{.fd = pipe_fds[0], .events = POLLIN, .revents = 0};
            const int polled = ::poll(&ready, 1, 30000);
            char message = 0;
            const bool wrote = polled == 1 && ::read(pipe_fds[0], &message, 1) == 1 && message == 'w';
            ::close(pipe_fds[0]);
            // Mid-run, the child's file already has no name.
            const std::vector<std::string> during = dir.entries();
            ::kill(pid, SIGKILL);
            int status = 0;
            ASSERT_EQ(::waitpid(pid, &status, 0), pid);
            ASSERT_TRUE(wrote) << "the child did not start writing (exit status " << status << ")";
            ASSERT_TRUE(WIFSIGNALED(status)) << "the child ended on its own, status " << status;
            EXPECT_EQ(WTERMSIG(status), SIGKILL);
            EXPECT_TRUE(during.empty()) << "while writing: " << during.front();
            const std::vector<std::string> after = dir.entries();
            EXPECT_TRUE(after.empty()) << "left behind: " << after.front();
        }
    }
}

}  // namespace
}  // namespace outcore::swap
