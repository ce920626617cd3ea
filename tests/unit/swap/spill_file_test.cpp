// SpillFile: round trips of random sizes with O_DIRECT on and off (on the real disk
// and on /dev/shm), free and reuse, statistics, the size limit, reservation with
// fallocate, the unnamed 0600 file, directory errors, and four threads writing and
// reading at once (SpillFileThreads).
#include "outcore/swap/spill_file.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "support/test_seed.hpp"
#include "unit/swap/spill_test_support.hpp"

namespace outcore::swap {
namespace {

using spill_test::random_bytes;
using spill_test::TempDir;

struct AlignedFree {
    void operator()(std::byte* p) const noexcept { std::free(p); }
};
using AlignedBytes = std::unique_ptr<std::byte[], AlignedFree>;

AlignedBytes aligned_bytes(std::size_t n) {
    void* p =
        std::aligned_alloc(kSpillAlignment, (n + kSpillAlignment - 1) / kSpillAlignment * kSpillAlignment);
    if (p == nullptr) throw std::bad_alloc();
    return AlignedBytes(static_cast<std::byte*>(p));
}

std::uint64_t random_size(std::mt19937_64& rng, std::uint64_t max_bytes) {
    // Half the sizes near the ends (1 B, whole pages, the full slot), half anywhere.
    switch (std::uniform_int_distribution<int>(0, 7)(rng)) {
        case 0: return 1;
        case 1: return max_bytes;
        case 2: return std::min<std::uint64_t>(max_bytes, kSpillAlignment);
        case 3: return std::min<std::uint64_t>(max_bytes, 3 * kSpillAlignment);
        default: return std::uniform_int_distribution<std::uint64_t>(1, max_bytes)(rng);
    }
}

TEST(SpillChecksum, IsXxh3Of64Bits) {
    // The XXH3-64 test vector of the empty input (seed 0).
    EXPECT_EQ(checksum({}), 0x2D06800538D394C2ULL);
    std::mt19937_64 rng(test::seed());
    std::vector<std::byte> data = random_bytes(rng, 5000);
    const std::uint64_t before = checksum(data);
    data[std::uniform_int_distribution<std::size_t>(0, data.size() - 1)(rng)] ^= std::byte{4};
    EXPECT_NE(checksum(data), before);
}

// Round trips through slots of a page-multiple and of an odd size, with data from
// unaligned spans (bounce buffers) and from aligned ones (straight to the kernel).
TEST(SpillFile, RoundTripsRandomSizesWithAndWithoutODirect) {
    std::mt19937_64 rng(test::seed());
    for (const auto& base : spill_test::test_bases()) {
        for (const bool direct : {true, false}) {
            for (const std::uint64_t slot_bytes : {64 * kKiB, std::uint64_t{40000}}) {
                SCOPED_TRACE(::testing::Message() << base << (direct ? " O_DIRECT" : " buffered") << ", slot "
                                                  << slot_bytes << " B");
                TempDir dir(base);
                SpillFile spill({.dir = dir.path(), .slot_bytes = slot_bytes, .direct = direct});
                EXPECT_EQ(spill.direct(), direct && spill_test::filesystem_allows_direct(dir.path()));
                EXPECT_EQ((::fcntl(spill.fd(), F_GETFL) & O_DIRECT) != 0, spill.direct());
                EXPECT_EQ(spill.stride_bytes() % kSpillAlignment, 0U);
                EXPECT_GE(spill.stride_bytes(), slot_bytes);

                std::map<std::uint64_t, std::pair<SpillSlot, std::vector<std::byte>>> live;
                std::uint64_t written_bytes = 0;
                std::uint64_t writes = 0;
                std::uint64_t reads = 0;
                const int steps = static_cast<int>(test::scaled(300));
                for (int step = 0; step < steps; ++step) {
                    const int op = std::uniform_int_distribution<int>(0, 9)(rng);
                    if (op < 5 || live.empty()) {
                        const std::uint64_t n = random_size(rng, slot_bytes);
                        std::vector<std::byte> data = random_bytes(rng, n);
                        SpillSlot s;
                        if (op == 0) {
                            AlignedBytes a = aligned_bytes(n);
                            std::memcpy(a.get(), data.data(), n);
                            s = spill.write({a.get(), n});
                        } else {
                            s = spill.write(data);
                        }
                        ASSERT_TRUE(s.valid());
                        EXPECT_EQ(s.bytes, n);
                        EXPECT_EQ(s.checksum, checksum(data));
                        EXPECT_EQ(spill.offset_of(s), s.index * spill.stride_bytes());
                        ASSERT_FALSE(live.contains(s.index)) << "slot " << s.index << " handed out twice";
                        live[s.index] = {s, std::move(data)};
                        written_bytes += n;
                        ++writes;
                    } else if (op < 8) {
                        auto it = std::next(live.begin(), std::uniform_int_distribution<std::size_t>(
                                                              0, live.size() - 1)(rng));
                        const auto& [s, data] = it->second;
                        if (op == 5) {
                            AlignedBytes a = aligned_bytes(s.bytes);
                            spill.read(s, {a.get(), s.bytes});
                            ASSERT_EQ(std::memcmp(a.get(), data.data(), s.bytes), 0) << "slot " << s.index;
                        } else {
                            std::vector<std::byte> back(s.bytes + 1, std::byte{0xee});
                            // Unaligned on purpose: one byte in.
                            spill.read(s, {back.data() + 1, s.bytes});
                            ASSERT_TRUE(std::equal(data.begin(), data.end(), back.begin() + 1))
                                << "slot " << s.index;
                        }
                        ++reads;
                    } else {
                        auto it = std::next(live.begin(), std::uniform_int_distribution<std::size_t>(
                                                              0, live.size() - 1)(rng));
                        spill.free(it->second.first);
                        live.erase(it);
                    }
                    ASSERT_EQ(spill.stats().slots_used, live.size());
                }
                // Everything still alive reads back, then the statistics balance.
                for (const auto& [index, entry] : live) {
                    std::vector<std::byte> back(entry.first.bytes);
                    spill.read(entry.first, back);
                    ASSERT_EQ(back, entry.second) << "slot " << index;
                    ++reads;
                }
                const SpillStats st = spill.stats();
                EXPECT_EQ(st.slots_used, live.size());
                EXPECT_GE(st.slots_peak, live.size());
                EXPECT_EQ(st.bytes_written, written_bytes);
                EXPECT_EQ(st.write_count, writes);
                EXPECT_EQ(st.read_count, reads);
                EXPECT_EQ(st.checksum_failures, 0U);
                EXPECT_EQ(st.retries, 0U);
                // Freed slots are reused: the file never outgrows the peak (plus one reservation).
                EXPECT_LE(st.file_bytes,
                          (st.slots_peak + spill.options().reserve_slots) * spill.stride_bytes());
                struct stat fs {};
                ASSERT_EQ(::fstat(spill.fd(), &fs), 0);
                EXPECT_EQ(static_cast<std::uint64_t>(fs.st_size), st.file_bytes);
                EXPECT_TRUE(dir.entries().empty());
            }
        }
    }
}

TEST(SpillFile, FreedSlotsAreReusedAndStaleHandlesRefused) {
    std::mt19937_64 rng(test::seed());
    TempDir dir;
    SpillFile spill({.dir = dir.path(), .slot_bytes = 16 * kKiB});
    const std::vector<std::byte> a = random_bytes(rng, 1000);
    const std::vector<std::byte> b = random_bytes(rng, 2000);
    const std::vector<std::byte> c = random_bytes(rng, 3000);
    const SpillSlot sa = spill.write(a);
    const SpillSlot sb = spill.write(b);
    EXPECT_NE(sa.index, sb.index);
    spill.free(sa);
    EXPECT_EQ(spill.stats().slots_used, 1U);
    spill.free(sa);  // a second free is ignored
    EXPECT_EQ(spill.stats().slots_used, 1U);
    std::vector<std::byte> out(sa.bytes);
    EXPECT_THROW(spill.read(sa, out), UsageError) << "a freed slot was readable";

    const SpillSlot sc = spill.write(c);
    EXPECT_EQ(sc.index, sa.index) << "the freed slot was not reused";
    // The old handle names the same index but other bytes: refused, not misread.
    EXPECT_THROW(spill.read(sa, out), UsageError);
    spill.free(sa);  // a stale free must not release the new owner's slot
    EXPECT_EQ(spill.stats().slots_used, 2U);
    std::vector<std::byte> back(c.size());
    spill.read(sc, back);
    EXPECT_EQ(back, c);

    // Wrong sizes and foreign handles are usage errors; the output is zeroed.
    std::vector<std::byte> wrong(c.size() + 1, std::byte{0x77});
    EXPECT_THROW(spill.read(sc, wrong), UsageError);
    EXPECT_TRUE(std::all_of(wrong.begin(), wrong.end(), [](std::byte x) { return x == std::byte{0}; }));
    EXPECT_THROW(spill.read(SpillSlot{}, out), UsageError);
    EXPECT_THROW(spill.read({.index = 99, .bytes = 1, .checksum = 0}, out), UsageError);
    spill.free(SpillSlot{});
    const std::vector<std::byte> too_big(16 * kKiB + 1);
    EXPECT_THROW((void)spill.write(too_big), UsageError);
    EXPECT_EQ(spill.stats().slots_used, 2U);

    // An empty write takes a slot and reads back empty.
    const SpillSlot empty = spill.write({});
    EXPECT_TRUE(empty.valid());
    spill.read(empty, {});
    spill.free(empty);
    spill.free(sb);
    spill.free(sc);
    EXPECT_EQ(spill.stats().slots_used, 0U);
    EXPECT_EQ(spill.stats().slots_peak, 3U);
}

TEST(SpillFile, SizeLimitIsOutOfMemoryOnDiskAndChangesNothing) {
    std::mt19937_64 rng(test::seed());
    TempDir dir;
    constexpr std::uint64_t kSlot = 8 * kKiB;
    SpillFile spill(
        {.dir = dir.path(), .slot_bytes = kSlot, .limit_bytes = 3 * kSlot + 100, .reserve_slots = 8});
    std::vector<std::pair<SpillSlot, std::vector<std::byte>>> held;
    for (int i = 0; i < 3; ++i) {
        std::vector<std::byte> d = random_bytes(rng, kSlot);
        held.emplace_back(spill.write(d), d);
    }
    const std::vector<std::byte> more = random_bytes(rng, 10);
    try {
        (void)spill.write(more);
        ADD_FAILURE() << "a write past the limit succeeded";
    } catch (const OutOfMemory& e) {
        EXPECT_EQ(e.tier(), Tier::Disk);
        EXPECT_EQ(e.requested_bytes(), more.size());
        EXPECT_EQ(e.budget_bytes(), 3 * kSlot + 100);
        EXPECT_EQ(e.in_use_bytes(), 3 * kSlot);
    }
    EXPECT_EQ(spill.stats().slots_used, 3U);
    EXPECT_LE(spill.stats().file_bytes, 3 * kSlot) << "the reservation went past the limit";
    for (const auto& [s, d] : held) {
        std::vector<std::byte> back(s.bytes);
        spill.read(s, back);
        EXPECT_EQ(back, d);
    }
    spill.free(held[1].first);
    const SpillSlot again = spill.write(more);
    EXPECT_EQ(again.index, held[1].first.index);
}

TEST(SpillFile, ReservesAheadWithFallocateAndWorksWithout) {
    std::mt19937_64 rng(test::seed());
    TempDir dir;
    FaultyFileIo io(posix_file_io());
    constexpr std::uint64_t kSlot = 16 * kKiB;
    {
        SpillFile spill({.dir = dir.path(), .slot_bytes = kSlot, .reserve_slots = 4, .io = &io});
        io.arm({.op = FileOp::Allocate, .nth = 99});  // counts calls only
        for (int i = 0; i < 4; ++i) (void)spill.write(random_bytes(rng, 100));
        EXPECT_EQ(io.calls(FileOp::Allocate), 1U) << "four slots should need one reservation";
        struct stat st {};
        ASSERT_EQ(::fstat(spill.fd(), &st), 0);
        EXPECT_EQ(static_cast<std::uint64_t>(st.st_size), 4 * kSlot);
        EXPECT_EQ(spill.stats().file_bytes, 4 * kSlot);
        (void)spill.write(random_bytes(rng, 100));
        EXPECT_EQ(io.calls(FileOp::Allocate), 2U);
    }
    {
        // A filesystem without fallocate: asked once, then writes simply extend the file.
        SpillFile spill({.dir = dir.path(), .slot_bytes = kSlot, .reserve_slots = 2, .io = &io});
        io.arm({.op = FileOp::Allocate, .nth = 1, .error = EOPNOTSUPP, .persistent = true});
        std::vector<std::pair<SpillSlot, std::vector<std::byte>>> held;
        for (int i = 0; i < 5; ++i) {
            std::vector<std::byte> d = random_bytes(rng, kSlot);
            held.emplace_back(spill.write(d), d);
        }
        EXPECT_EQ(io.calls(FileOp::Allocate), 1U);
        for (const auto& [s, d] : held) {
            std::vector<std::byte> back(s.bytes);
            spill.read(s, back);
            EXPECT_EQ(back, d);
        }
        EXPECT_EQ(spill.stats().file_bytes, 5 * spill.stride_bytes());
    }
}

TEST(SpillFile, FallsBackToBufferedIoWhenODirectIsRefused) {
    std::mt19937_64 rng(test::seed());
    for (const auto& base : spill_test::test_bases()) {
        SCOPED_TRACE(base.string());
        TempDir dir(base);
        FaultyFileIo io(posix_file_io());
        // What tmpfs before Linux 6.6 answers to O_DIRECT.
        io.arm({.op = FileOp::Open, .nth = 1, .error = EINVAL});
        SpillFile spill({.dir = dir.path(), .slot_bytes = 16 * kKiB, .direct = true, .io = &io});
        EXPECT_FALSE(spill.direct());
        EXPECT_EQ(io.calls(FileOp::Open), 2U);
        EXPECT_EQ(::fcntl(spill.fd(), F_GETFL) & O_DIRECT, 0);
        const std::vector<std::byte> d = random_bytes(rng, 12345);
        const SpillSlot s = spill.write(d);
        std::vector<std::byte> back(d.size());
        spill.read(s, back);
        EXPECT_EQ(back, d);
    }
}

TEST(SpillFile, FileIsUnnamedAndPrivate) {
    std::mt19937_64 rng(test::seed());
    for (const bool use_o_tmpfile : {true, false}) {
        for (const auto& base : spill_test::test_bases()) {
            SCOPED_TRACE(::testing::Message() << base << (use_o_tmpfile ? " O_TMPFILE" : " mkstemp"));
            TempDir dir(base);
            PosixFileIo io({.use_o_tmpfile = use_o_tmpfile});
            SpillFile spill({.dir = dir.path(), .slot_bytes = 16 * kKiB, .io = &io});
            (void)spill.write(random_bytes(rng, 16 * kKiB));
            struct stat st {};
            ASSERT_EQ(::fstat(spill.fd(), &st), 0);
            EXPECT_EQ(st.st_nlink, 0U);
            EXPECT_EQ(st.st_mode & 07777, 0600U);
            EXPECT_TRUE(dir.entries().empty());
            EXPECT_NE(::fcntl(spill.fd(), F_GETFD) & FD_CLOEXEC, 0);
        }
    }
}

TEST(SpillFile, UnusableDirectoriesAreIoErrors) {
    TempDir dir;
    const auto expect_io = [](const std::filesystem::path& p, int err) {
        try {
            SpillFile spill({.dir = p, .slot_bytes = 4096});
            ADD_FAILURE() << "opened a spill file in " << p;
        } catch (const IoError& e) {
            EXPECT_EQ(e.errno_value(), err) << e.what();
            EXPECT_EQ(e.path(), p.string());
            EXPECT_EQ(e.component(), "spill");
        }
    };
    expect_io(dir.path() / "missing", ENOENT);
    expect_io("", ENOENT);
    const auto file = dir.path() / "plain-file";
    std::ofstream(file) << "x";
    expect_io(file, ENOTDIR);

    // A failing open reports errno, the directory and the operation.
    FaultyFileIo io(posix_file_io());
    io.arm({.op = FileOp::Open, .nth = 1, .error = EMFILE, .persistent = true});
    try {
        SpillFile spill({.dir = dir.path(), .slot_bytes = 4096, .io = &io});
        ADD_FAILURE() << "open failure not reported";
    } catch (const IoError& e) {
        EXPECT_EQ(e.errno_value(), EMFILE);
        EXPECT_EQ(e.operation(), "open");
        EXPECT_EQ(e.path(), dir.path().string());
    }
    EXPECT_THROW(SpillFile({.dir = dir.path(), .slot_bytes = 0}), UsageError);
    EXPECT_THROW(SpillFile({.dir = dir.path(), .slot_bytes = kSpillMaxSlotBytes + 1}), UsageError);
    EXPECT_THROW(SpillFile({.dir = dir.path(), .slot_bytes = UINT64_MAX}), UsageError);
}

// 0500: readable, not writable. Root ignores permission bits, so as root the check
// runs in a child that has dropped to an unprivileged user (skipped where it cannot).
TEST(SpillFile, ReadOnlyDirectoryIsIoError) {
    TempDir dir;
    const auto ro = dir.path() / "read-only";
    ASSERT_EQ(::mkdir(ro.c_str(), 0500), 0);
    ASSERT_EQ(::chmod(ro.c_str(), 0500), 0);
    const auto open_in_ro = [&ro]() -> int {  // 0 = IoError EACCES, 1 = anything else
        try {
            SpillFile spill({.dir = ro, .slot_bytes = 4096});
        } catch (const IoError& e) {
            return e.errno_value() == EACCES && e.path() == ro.string() ? 0 : 1;
        } catch (...) {
            return 1;
        }
        return 1;
    };
    if (::geteuid() != 0) {
        EXPECT_EQ(open_in_ro(), 0);
        return;
    }
    // The unprivileged child must reach the directory.
    ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
    ASSERT_EQ(::chmod(ro.c_str(), 0555), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        constexpr uid_t kNobody = 65534;
        if (::setresgid(kNobody, kNobody, kNobody) != 0 || ::setresuid(kNobody, kNobody, kNobody) != 0)
            _exit(2);
        _exit(open_in_ro());
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 2) GTEST_SKIP() << "running as root and cannot drop privileges";
    EXPECT_EQ(WEXITSTATUS(status), 0) << "a read-only directory was accepted (or the wrong error came back)";
}

// Four threads write, read and free their own slots and read a shared set at once;
// every byte comes back and the statistics add up.
TEST(SpillFileThreads, ConcurrentWritersAndReaders) {
    const std::uint64_t seed = test::seed();
    for (const bool direct : {true, false}) {
        SCOPED_TRACE(direct ? "O_DIRECT" : "buffered");
        TempDir dir;
        constexpr std::uint64_t kSlot = 32 * kKiB;
        SpillFile spill({.dir = dir.path(), .slot_bytes = kSlot, .direct = direct, .reserve_slots = 2});
        std::mt19937_64 rng(seed);
        std::vector<std::pair<SpillSlot, std::vector<std::byte>>> shared;
        for (int i = 0; i < 8; ++i) {
            std::vector<std::byte> d = random_bytes(rng, random_size(rng, kSlot));
            shared.emplace_back(spill.write(d), std::move(d));
        }
        constexpr int kThreads = 4;
        const int steps = static_cast<int>(test::scaled(400));
        std::vector<std::uint64_t> live_count(kThreads), written(kThreads), writes(kThreads), reads(kThreads);
        std::vector<std::string> failures(kThreads);
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([&, t] {
                std::mt19937_64 r(seed + 1 + static_cast<std::uint64_t>(t));
                std::vector<std::pair<SpillSlot, std::vector<std::byte>>> mine;
                try {
                    for (int step = 0; step < steps && failures[t].empty(); ++step) {
                        const int op = std::uniform_int_distribution<int>(0, 9)(r);
                        if (op < 4 || mine.empty()) {
                            std::vector<std::byte> d = random_bytes(r, random_size(r, kSlot));
                            written[t] += d.size();
                            ++writes[t];
                            mine.emplace_back(spill.write(d), std::move(d));
                        } else if (op < 8) {
                            const bool own = op < 6;
                            const auto& [s, d] = own ? mine[r() % mine.size()] : shared[r() % shared.size()];
                            std::vector<std::byte> back(s.bytes);
                            spill.read(s, back);
                            ++reads[t];
                            if (back != d)
                                failures[t] = "slot " + std::to_string(s.index) + " read back wrong";
                        } else {
                            const std::size_t i = r() % mine.size();
                            spill.free(mine[i].first);
                            mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(i));
                        }
                    }
                } catch (const std::exception& e) {
                    failures[t] = e.what();
                }
                live_count[t] = mine.size();
            });
        }
        for (auto& th : threads) th.join();
        std::uint64_t live = shared.size(), bytes = 0, write_count = shared.size(), read_count = 0;
        for (const auto& [s, d] : shared) bytes += d.size();
        for (int t = 0; t < kThreads; ++t) {
            EXPECT_EQ(failures[t], "") << "thread " << t;
            live += live_count[t];
            bytes += written[t];
            write_count += writes[t];
            read_count += reads[t];
        }
        const SpillStats st = spill.stats();
        EXPECT_EQ(st.slots_used, live);
        EXPECT_EQ(st.bytes_written, bytes);
        EXPECT_EQ(st.write_count, write_count);
        EXPECT_EQ(st.read_count, read_count);
        EXPECT_EQ(st.checksum_failures, 0U);
        EXPECT_LE(st.slots_peak, shared.size() + static_cast<std::uint64_t>(kThreads * steps));
    }
}

// Holds each read and write until `want` transfers are inside the FileIo at once (or
// 5 s pass), and records the most that were: were a lock held across the system
// call, only one could ever get in.
class RendezvousFileIo final : public FileIo {
public:
    explicit RendezvousFileIo(FileIo& inner) : inner_(inner) {}
    /// From now on each transfer waits until `want` are inside at once.
    void expect(int want) {
        std::lock_guard lock(mutex_);
        want_ = want;
        most_ = inside_;
    }
    int open_tmpfile(const std::string& dir, bool direct) override {
        return inner_.open_tmpfile(dir, direct);
    }
    ssize_t pread(int fd, void* buf, std::size_t bytes, std::uint64_t offset) override {
        meet();
        const ssize_t n = inner_.pread(fd, buf, bytes, offset);
        leave();
        return n;
    }
    ssize_t pwrite(int fd, const void* buf, std::size_t bytes, std::uint64_t offset) override {
        meet();
        const ssize_t n = inner_.pwrite(fd, buf, bytes, offset);
        leave();
        return n;
    }
    int fallocate(int fd, std::uint64_t offset, std::uint64_t bytes) override {
        return inner_.fallocate(fd, offset, bytes);
    }
    int ftruncate(int fd, std::uint64_t bytes) override { return inner_.ftruncate(fd, bytes); }
    int fdatasync(int fd) override { return inner_.fdatasync(fd); }
    int close(int fd) override { return inner_.close(fd); }
    [[nodiscard]] int most_in_flight() const {
        std::lock_guard lock(mutex_);
        return most_;
    }

private:
    void meet() {
        std::unique_lock lock(mutex_);
        most_ = std::max(most_, ++inside_);
        cv_.notify_all();
        cv_.wait_for(lock, std::chrono::seconds(5), [&] { return most_ >= want_; });
    }
    void leave() {
        std::lock_guard lock(mutex_);
        --inside_;
    }

    FileIo& inner_;
    int want_ = 1;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    int inside_ = 0;
    int most_ = 0;
};

TEST(SpillFileThreads, ReadsAndWritesOfDifferentSlotsAreInFlightTogether) {
    std::mt19937_64 rng(test::seed());
    TempDir dir;
    RendezvousFileIo io(posix_file_io());
    SpillFile spill({.dir = dir.path(), .slot_bytes = 16 * kKiB, .reserve_slots = 8, .io = &io});
    // Set up outside the rendezvous: one slot to read while two others are written.
    const std::vector<std::byte> a = random_bytes(rng, 16 * kKiB);
    const std::vector<std::byte> b = random_bytes(rng, 5000);
    const std::vector<std::byte> c = random_bytes(rng, 7000);
    const SpillSlot sa = spill.write(a);
    io.expect(3);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::byte> back(a.size());
    SpillSlot sb, sc;
    std::thread reader([&] { spill.read(sa, back); });
    std::thread writer1([&] { sb = spill.write(b); });
    std::thread writer2([&] { sc = spill.write(c); });
    reader.join();
    writer1.join();
    writer2.join();
    EXPECT_EQ(io.most_in_flight(), 3);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4))
        << "the transfers waited for each other";
    EXPECT_EQ(back, a);
    std::vector<std::byte> back_b(b.size()), back_c(c.size());
    spill.read(sb, back_b);
    spill.read(sc, back_c);
    EXPECT_EQ(back_b, b);
    EXPECT_EQ(back_c, c);
}

}  // namespace
}  // namespace outcore::swap
