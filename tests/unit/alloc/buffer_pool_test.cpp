// BufferPool: aligned disjoint slots, O(1) reuse, growth by chunks up to max_slots,
// errors, RAII of PooledBuffer, and four threads sharing one pool (BufferPoolThreads).
#include "outcore/alloc/buffer_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "support/test_seed.hpp"
#include "unit/alloc/malloc_upstream.hpp"

namespace outcore::alloc {
namespace {

using alloc_test::MallocUpstream;

constexpr std::uint64_t kAlign = 256;

TEST(BufferPool, SlotsAreAlignedDisjointAndOfTheRequestedSize) {
    std::mt19937_64 rng(test::seed());
    const std::uint64_t slot_bytes = std::uniform_int_distribution<std::uint64_t>(1, 100'000)(rng);
    const std::uint64_t per_chunk = std::uniform_int_distribution<std::uint64_t>(1, 9)(rng);
    MallocUpstream upstream;
    BufferPool pool(upstream, kAlign,
                    {.slot_bytes = slot_bytes, .kind = MemoryKind::HostPinned, .slots_per_chunk = per_chunk});
    EXPECT_EQ(pool.slot_stride_bytes(), align_up(slot_bytes, kAlign));
    std::vector<PooledBuffer> held;
    std::set<std::pair<std::uintptr_t, std::uint64_t>> seen;
    for (int i = 0; i < 40; ++i) {
        held.push_back(pool.acquire());
        const RawBlock& b = held.back().raw();
        EXPECT_EQ(b.bytes, slot_bytes);
        EXPECT_EQ(b.kind, MemoryKind::HostPinned);
        EXPECT_EQ(b.offset % kAlign, 0U);
        EXPECT_EQ(b.device_id, upstream.device_id());
        EXPECT_EQ(b.host, reinterpret_cast<std::byte*>(b.native) + b.offset);
        EXPECT_EQ(held.back().view().bytes, slot_bytes);
        // Same chunk + stride-aligned distinct offsets = disjoint slots.
        EXPECT_TRUE(seen.emplace(b.native, b.offset).second) << "slot handed out twice";
        std::memset(b.host, i, slot_bytes);
    }
    for (int i = 0; i < 40; ++i) {
        const auto* p = held[static_cast<std::size_t>(i)].host();
        EXPECT_EQ(p[0], static_cast<std::byte>(i));
        EXPECT_EQ(p[slot_bytes - 1], static_cast<std::byte>(i)) << "slots overlap";
    }
    const BufferPoolStatistics st = pool.statistics();
    EXPECT_EQ(st.slots_in_use, 40U);
    EXPECT_EQ(st.chunk_count, (40 + per_chunk - 1) / per_chunk);
    EXPECT_EQ(st.slots_total, st.chunk_count * per_chunk);
    EXPECT_EQ(upstream.blocks_live(), st.chunk_count);
}

TEST(BufferPool, ReleasedSlotIsReusedWithoutUpstreamCalls) {
    MallocUpstream upstream;
    BufferPool pool(upstream, kAlign, {.slot_bytes = 4096, .slots_per_chunk = 4});
    PooledBuffer a = pool.acquire();
    PooledBuffer b = pool.acquire();
    const std::uint64_t b_slot = b.slot_index();
    const std::uint64_t b_offset = b.raw().offset;
    b.reset();
    EXPECT_FALSE(b);
    EXPECT_EQ(pool.statistics().slots_in_use, 1U);
    for (int i = 0; i < 1000; ++i) {
        PooledBuffer c = pool.acquire();
        EXPECT_EQ(c.slot_index(), b_slot) << "the most recently freed slot comes back first";
        EXPECT_EQ(c.raw().offset, b_offset);
    }
    EXPECT_EQ(upstream.allocate_calls(), 1U);
    EXPECT_EQ(pool.statistics().slots_peak, 2U);
}

TEST(BufferPool, GrowsByChunksUpToMaxSlotsThenRefuses) {
    MallocUpstream upstream;
    BufferPool pool(upstream, kAlign,
                    {.slot_bytes = 1000, .kind = MemoryKind::Device, .slots_per_chunk = 4, .max_slots = 10});
    std::vector<PooledBuffer> held;
    for (int i = 0; i < 10; ++i) held.push_back(pool.acquire());
    BufferPoolStatistics st = pool.statistics();
    EXPECT_EQ(st.slots_total, 10U) << "the last chunk is cut to max_slots";
    EXPECT_EQ(st.chunk_count, 3U);
    EXPECT_EQ(st.bytes_reserved, 10 * 1024U);
    EXPECT_FALSE(pool.try_acquire().has_value());
    try {
        (void)pool.acquire();
        FAIL() << "acquired past max_slots";
    } catch (const OutOfMemory& e) {
        EXPECT_EQ(e.requested_bytes(), 1000U);
        EXPECT_EQ(e.tier(), Tier::Device);
        EXPECT_EQ(e.budget_bytes(), 10 * 1024U);
        EXPECT_EQ(e.in_use_bytes(), 10 * 1024U);
        EXPECT_EQ(e.largest_free_bytes(), 0U);
    }
    held.pop_back();
    const std::optional<PooledBuffer> again = pool.try_acquire();
    ASSERT_TRUE(again.has_value());
    EXPECT_TRUE(*again);
    st = pool.statistics();
    EXPECT_EQ(st.slots_in_use, 10U);
    EXPECT_EQ(st.slots_peak, 10U);
}

TEST(BufferPool, UpstreamOutOfMemoryLeavesThePoolUsable) {
    MallocUpstream upstream({.limit_bytes = 8 * 1024});
    BufferPool pool(upstream, kAlign, {.slot_bytes = 1024, .slots_per_chunk = 4});
    std::vector<PooledBuffer> held;
    for (int i = 0; i < 8; ++i) held.push_back(pool.acquire());
    EXPECT_THROW((void)pool.acquire(), OutOfMemory);
    EXPECT_FALSE(pool.try_acquire().has_value());
    BufferPoolStatistics st = pool.statistics();
    EXPECT_EQ(st.slots_total, 8U);
    EXPECT_EQ(st.slots_in_use, 8U);
    held.clear();
    EXPECT_EQ(pool.statistics().slots_in_use, 0U);
    EXPECT_NO_THROW(held.push_back(pool.acquire()));
}

TEST(BufferPool, InitialSlotsAndReserve) {
    MallocUpstream upstream;
    BufferPool pool(upstream, kAlign,
                    {.slot_bytes = 64, .slots_per_chunk = 3, .max_slots = 20, .initial_slots = 5});
    EXPECT_EQ(pool.statistics().slots_total, 6U);
    pool.reserve(13);
    EXPECT_EQ(pool.statistics().slots_total, 15U);
    pool.reserve(2);
    EXPECT_EQ(pool.statistics().slots_total, 15U);
    EXPECT_THROW(pool.reserve(21), UsageError);
    EXPECT_EQ(pool.statistics().slots_in_use, 0U);
}

TEST(BufferPool, FailedInitialReserveLeaksNothing) {
    MallocUpstream upstream({.limit_bytes = 3 * 4096});
    EXPECT_THROW(BufferPool(upstream, kAlign, {.slot_bytes = 4096, .slots_per_chunk = 2, .initial_slots = 6}),
                 OutOfMemory);
    EXPECT_EQ(upstream.bytes_live(), 0U);
}

TEST(BufferPool, BadOptionsAreUsageErrors) {
    MallocUpstream upstream;
    EXPECT_THROW(BufferPool(upstream, kAlign, {.slot_bytes = 0}), UsageError);
    EXPECT_THROW(BufferPool(upstream, 3, {.slot_bytes = 64}), UsageError);
    EXPECT_THROW(BufferPool(upstream, kAlign, {.slot_bytes = 64, .slots_per_chunk = 0}), UsageError);
    EXPECT_THROW(BufferPool(upstream, kAlign, {.slot_bytes = 64, .max_slots = 0}), UsageError);
    EXPECT_THROW(BufferPool(upstream, kAlign, {.slot_bytes = 64, .max_slots = 2, .initial_slots = 3}),
                 UsageError);
    EXPECT_THROW(BufferPool(upstream, kAlign, {.slot_bytes = UINT64_MAX}), UsageError);
    EXPECT_THROW(BufferPool(upstream, kAlign, {.slot_bytes = std::uint64_t{1} << 62, .slots_per_chunk = 8}),
                 UsageError);
    EXPECT_EQ(upstream.allocate_calls(), 0U);
}

TEST(BufferPool, PooledBufferMovesOwnership) {
    MallocUpstream upstream;
    BufferPool pool(upstream, kAlign, {.slot_bytes = 128});
    PooledBuffer a = pool.acquire();
    const std::uint64_t slot = a.slot_index();
    PooledBuffer b = std::move(a);
    EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): checking the moved-from state
    EXPECT_TRUE(b);
    EXPECT_EQ(b.slot_index(), slot);
    EXPECT_EQ(pool.statistics().slots_in_use, 1U);
    PooledBuffer c = pool.acquire();
    c = std::move(b);  // c's old slot goes back
    EXPECT_EQ(pool.statistics().slots_in_use, 1U);
    EXPECT_EQ(c.slot_index(), slot);
    c = PooledBuffer();
    EXPECT_EQ(pool.statistics().slots_in_use, 0U);
}

// Four threads acquire, fill with their id, check and release. Run under the tsan
// preset with --gtest_filter=*Threads*.
TEST(BufferPoolThreads, FourThreadsNeverShareASlot) {
    const std::uint64_t seed = test::seed();
    MallocUpstream upstream;
    const std::uint64_t slot_bytes = 512;
    BufferPool pool(
        upstream, kAlign,
        {.slot_bytes = slot_bytes, .kind = MemoryKind::HostPinned, .slots_per_chunk = 4, .max_slots = 24});
    std::atomic<std::uint64_t> corrupted{0};
    std::vector<std::thread> threads;
    const std::uint64_t steps = test::scaled(20'000);
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            std::mt19937_64 rng(seed + static_cast<std::uint64_t>(t));
            std::vector<PooledBuffer> mine;
            for (std::uint64_t step = 0; step < steps; ++step) {
                if (mine.size() < 5 && std::bernoulli_distribution(0.6)(rng)) {
                    std::optional<PooledBuffer> b = pool.try_acquire();
                    if (!b) continue;  // all 24 slots held by the others right now
                    std::memset(b->host(), t + 1, slot_bytes);
                    mine.push_back(std::move(*b));
                } else if (!mine.empty()) {
                    const std::size_t i = std::uniform_int_distribution<std::size_t>(0, mine.size() - 1)(rng);
                    for (std::uint64_t k = 0; k < slot_bytes; k += 64) {
                        if (mine[i].host()[k] != static_cast<std::byte>(t + 1)) corrupted.fetch_add(1);
                    }
                    mine[i] = std::move(mine.back());
                    mine.pop_back();
                }
            }
        });
    }
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(corrupted.load(), 0U);
    const BufferPoolStatistics st = pool.statistics();
    EXPECT_EQ(st.slots_in_use, 0U);
    EXPECT_LE(st.slots_peak, 20U);
    EXPECT_LE(st.slots_total, 24U);
}

}  // namespace
}  // namespace outcore::alloc
