// Tests of PendingHostWrites (what a Vulkan short-run upload checks before it packs
// host bytes): a noted range is pending, and overlaps exactly the ranges that share a
// byte with it, until its last token goes; tokens may outlive the registry; notes and
// checks from several threads at once.
#include "device/host_writes.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

namespace {

using outcore::detail::PendingHostWrites;

TEST(PendingHostWritesTest, ARangeOverlapsWhatSharesAByteUntilItsTokenGoes) {
    std::array<std::byte, 4096> memory{};
    std::byte* p = memory.data();
    PendingHostWrites writes;
    EXPECT_FALSE(writes.overlaps(p, memory.size()));
    auto token = writes.note(p + 1000, 100);  // [1000, 1100)
    ASSERT_TRUE(token) << "a null token reads as 'nothing to keep' to a queue";
    EXPECT_EQ(writes.pending(), 1U);
    EXPECT_TRUE(writes.overlaps(p + 1000, 1));
    EXPECT_TRUE(writes.overlaps(p + 1099, 1));
    EXPECT_TRUE(writes.overlaps(p, 1001));
    EXPECT_TRUE(writes.overlaps(p + 1050, 2000));
    EXPECT_FALSE(writes.overlaps(p, 1000)) << "ends where the write begins";
    EXPECT_FALSE(writes.overlaps(p + 1100, 100)) << "begins where the write ends";
    EXPECT_FALSE(writes.overlaps(p + 1000, 0)) << "an empty range overlaps nothing";

    auto copy = token;  // a batch keeps a copy; the command's own copy goes first
    token.reset();
    EXPECT_TRUE(writes.overlaps(p + 1000, 100));
    copy.reset();
    EXPECT_FALSE(writes.overlaps(p + 1000, 100));
    EXPECT_EQ(writes.pending(), 0U);
}

TEST(PendingHostWritesTest, SeveralWritesAreTrackedApartAndTokensMayOutliveTheRegistry) {
    std::array<std::byte, 4096> memory{};
    std::byte* p = memory.data();
    std::shared_ptr<void> late;
    {
        PendingHostWrites writes;
        auto a = writes.note(p, 100);
        auto b = writes.note(p, 100);  // the same range twice: pending until both go
        auto c = writes.note(p + 2000, 10);
        a.reset();
        EXPECT_TRUE(writes.overlaps(p, 100));
        b.reset();
        EXPECT_FALSE(writes.overlaps(p, 100));
        EXPECT_TRUE(writes.overlaps(p + 2005, 1));
        late = std::move(c);
    }
    late.reset();  // the registry is gone; releasing its token must be safe
}

TEST(PendingHostWritesTest, ThreadsNoteAndCheckAtOnce) {
    PendingHostWrites writes;
    std::vector<std::byte> memory(64 * 1024);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            std::byte* mine = memory.data() + t * 16 * 1024;
            for (int i = 0; i < 2000; ++i) {
                auto token = writes.note(mine + i % 1000, 16);
                EXPECT_TRUE(writes.overlaps(mine + i % 1000 + 15, 1));
            }
        });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(writes.pending(), 0U);
}

}  // namespace
