// BlockCache: freed blocks served again to requests of the same size, kind and
// alignment; never more free memory kept than the limit, none kept across a new size.
#include "outcore/alloc/block_cache.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "malloc_upstream.hpp"
#include "outcore/alloc/budget.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"

namespace outcore::alloc {
namespace {

using alloc_test::MallocUpstream;

TEST(BlockCache, ServesTheSameSizeAgainWithoutAskingUpstream) {
    MallocUpstream up;
    BlockCache cache(up);
    std::uintptr_t first = 0;
    {
        Block b = cache.allocate({.bytes = 3 * kMiB, .kind = MemoryKind::Device, .tag = "t"});
        first = b.raw().native;
    }
    EXPECT_EQ(up.blocks_live(), 1U);  // kept, not freed
    EXPECT_EQ(cache.statistics().free_bytes, 3 * kMiB);
    for (int i = 0; i < 3; ++i) {
        Block b = cache.allocate({.bytes = 3 * kMiB, .kind = MemoryKind::Device, .tag = "t"});
        EXPECT_EQ(b.raw().native, first);
        EXPECT_EQ(cache.statistics().free_bytes, 0U);
    }
    EXPECT_EQ(up.allocate_calls(), 1U);
    EXPECT_EQ(cache.statistics().hits, 3U);
    EXPECT_EQ(cache.statistics().misses, 1U);
    cache.clear();
    EXPECT_EQ(up.blocks_live(), 0U);
}

TEST(BlockCache, ANewSizeFreesTheCachedBlocksFirst) {
    MallocUpstream up;
    BlockCache cache(up);
    { Block a = cache.allocate({.bytes = 4 * kMiB, .kind = MemoryKind::Device}); }
    Block b = cache.allocate({.bytes = 2 * kMiB, .kind = MemoryKind::Device});
    // The 4 MiB block went before the new one was made.
    EXPECT_EQ(up.bytes_live(), 2 * kMiB);
    EXPECT_EQ(cache.statistics().free_bytes, 0U);
    EXPECT_EQ(cache.statistics().freed_blocks, 1U);
}

TEST(BlockCache, OtherKindsPassStraightThrough) {
    MallocUpstream up;
    BlockCache cache(up, MemoryKind::Device);
    { Block p = cache.allocate({.bytes = 1 * kMiB, .kind = MemoryKind::HostPinned}); }
    EXPECT_EQ(up.blocks_live(), 0U);
    { Block p = cache.allocate({.bytes = 1 * kMiB, .kind = MemoryKind::HostPinned}); }
    EXPECT_EQ(up.allocate_calls(), 2U);
    EXPECT_EQ(cache.statistics().hits + cache.statistics().misses, 0U);
}

TEST(BlockCache, AnUpstreamThatWouldRefuseWhileTheCacheHoardsDoesNot) {
    MallocUpstream up({.limit_bytes = 6 * kMiB});
    BlockCache cache(up);
    { Block a = cache.allocate({.bytes = 4 * kMiB, .kind = MemoryKind::Device}); }
    // 4 MiB cached + 5 MiB new would pass the limit: the cached block goes first.
    Block b = cache.allocate({.bytes = 5 * kMiB, .kind = MemoryKind::Device});
    EXPECT_EQ(up.bytes_live(), 5 * kMiB);
}

TEST(BlockCache, KindAndAlignmentMustMatch) {
    MallocUpstream up;
    BlockCache cache(up);
    { Block a = cache.allocate({.bytes = 1 * kMiB, .kind = MemoryKind::Device}); }
    {
        // Natural alignment cached; 64 KiB asked: not served from the cache.
        Block b = cache.allocate({.bytes = 1 * kMiB, .kind = MemoryKind::Device, .alignment = 64 * kKiB});
        EXPECT_EQ(b.raw().native % (64 * kKiB), 0U);
        EXPECT_EQ(cache.statistics().hits, 0U);
    }
    {
        // Made for 64 KiB: serves a 4 KiB request.
        Block c = cache.allocate({.bytes = 1 * kMiB, .kind = MemoryKind::Device, .alignment = 4 * kKiB});
        EXPECT_EQ(cache.statistics().hits, 1U);
    }
}

TEST(BlockCache, KeepsAtMostTheLimitFreeingTheOldest) {
    MallocUpstream up;
    BlockCache cache(up, MemoryKind::HostPinned, 5 * kMiB);
    std::vector<Block> held;
    for (std::uint64_t mib : {1, 2, 3}) {
        held.push_back(cache.allocate({.bytes = mib * kMiB, .kind = MemoryKind::HostPinned}));
    }
    held.clear();  // given back 1, 2, 3 MiB in that order: the 1 MiB one is dropped
    EXPECT_EQ(cache.statistics().free_bytes, 5 * kMiB);
    EXPECT_EQ(up.bytes_live(), 5 * kMiB);
    { Block big = cache.allocate({.bytes = 6 * kMiB, .kind = MemoryKind::HostPinned}); }  // over the limit
    EXPECT_EQ(up.bytes_live(), 0U);  // the new size dropped the others; itself freed, not kept
}

TEST(BlockCache, DestructionGivesEverythingBack) {
    MallocUpstream up;
    {
        BlockCache cache(up);
        std::vector<Block> held;
        for (int i = 0; i < 4; ++i)
            held.push_back(cache.allocate({.bytes = kMiB, .kind = MemoryKind::Device}));
    }
    EXPECT_EQ(up.blocks_live(), 0U);
}

TEST(BlockCache, ABudgetAboveItStillCountsEveryByte) {
    MallocUpstream up;
    BlockCache cache(up);
    Budget budget(cache, {.limit_bytes = 3 * kMiB, .kind = MemoryKind::Device});
    { Block a = budget.allocate({.bytes = 2 * kMiB, .kind = MemoryKind::Device}); }
    Block a = budget.allocate({.bytes = 2 * kMiB, .kind = MemoryKind::Device});  // a hit
    EXPECT_EQ(budget.bytes_used(), 2 * kMiB);
    EXPECT_THROW((void)budget.allocate({.bytes = 2 * kMiB, .kind = MemoryKind::Device}), OutOfMemory);
}

TEST(BlockCache, ConcurrentUsersNeverShareABlock) {
    MallocUpstream up;
    BlockCache cache(up, MemoryKind::HostPinned);
    std::vector<std::thread> threads;
    std::atomic<bool> overlap{false};
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 200; ++i) {
                Block b = cache.allocate({.bytes = 4096, .kind = MemoryKind::HostPinned});
                std::byte* p = b.host();
                for (int j = 0; j < 64; ++j) p[j] = std::byte(t);
                for (int j = 0; j < 64; ++j) overlap = overlap || p[j] != std::byte(t);
            }
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_FALSE(overlap.load());
    EXPECT_LE(up.blocks_live(), 8U);
}

}  // namespace
}  // namespace outcore::alloc
