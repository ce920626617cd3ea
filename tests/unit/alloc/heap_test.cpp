// Heap: placement inside native blocks, growth rules (block, dedicated, limit,
// within_budget, never_grow, reserve, trim), errors, a random stress with
// validate() after every step, and four threads on one heap (HeapThreads).
#include "outcore/alloc/heap.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <ostream>
#include <random>
#include <thread>
#include <vector>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/registry.hpp"
#include "support/test_seed.hpp"
#include "unit/alloc/malloc_upstream.hpp"

namespace outcore::alloc {
namespace {

using alloc_test::MallocUpstream;

constexpr std::uint64_t kAlign = 256;

std::uint64_t log_uniform_bytes(std::mt19937_64& rng, std::uint64_t max_bytes) {
    std::uniform_real_distribution<double> exponent(0.0, std::log2(static_cast<double>(max_bytes)));
    return std::clamp<std::uint64_t>(static_cast<std::uint64_t>(std::exp2(exponent(rng))), 1, max_bytes);
}

std::uint64_t random_alignment(std::mt19937_64& rng, unsigned max_log2) {
    return std::uint64_t{1} << std::uniform_int_distribution<unsigned>(0, max_log2)(rng);
}

// Fails the test if `b` overlaps any block in `live` of the same native handle.
void expect_disjoint(const std::vector<RawBlock>& live, const RawBlock& b) {
    for (const RawBlock& other : live) {
        if (other.native != b.native) continue;
        const bool disjoint = b.offset + b.bytes <= other.offset || other.offset + other.bytes <= b.offset;
        ASSERT_TRUE(disjoint) << "[" << b.offset << ", +" << b.bytes << ") overlaps [" << other.offset
                              << ", +" << other.bytes << ")";
    }
}

// Writes `stamp` into the first 8 and the last 8 bytes of `b`; a block under 16 B
// gets as much of it as fits at its start only (so the two copies never overlap).
void stamp_ends(const RawBlock& b, std::uint64_t stamp) {
    const std::size_t n = std::min<std::size_t>(sizeof stamp, b.bytes);
    std::memcpy(b.host, &stamp, n);
    if (b.bytes >= 2 * sizeof stamp) std::memcpy(b.host + b.bytes - sizeof stamp, &stamp, sizeof stamp);
}

bool ends_carry(const RawBlock& b, std::uint64_t stamp) {
    const std::size_t n = std::min<std::size_t>(sizeof stamp, b.bytes);
    if (std::memcmp(b.host, &stamp, n) != 0) return false;
    return b.bytes < 2 * sizeof stamp ||
           std::memcmp(b.host + b.bytes - sizeof stamp, &stamp, sizeof stamp) == 0;
}

TEST(Heap, SubAllocatesAlignedDisjointRangesOfOneNativeBlock) {
    std::mt19937_64 rng(test::seed());
    MallocUpstream upstream;
    Heap heap(upstream, kAlign, {.kind = MemoryKind::HostPinned, .block_bytes = 64 * kMiB});
    std::vector<RawBlock> live;
    for (int i = 0; i < 100; ++i) {
        const std::uint64_t bytes = log_uniform_bytes(rng, 256 * kKiB);
        const RawBlock b = heap.allocate_raw({.bytes = bytes, .kind = MemoryKind::HostPinned, .tag = "t"});
        EXPECT_EQ(b.bytes, bytes);
        EXPECT_EQ(b.kind, MemoryKind::HostPinned);
        EXPECT_EQ(b.offset % kAlign, 0U);
        EXPECT_EQ(b.device_id, upstream.device_id());
        // The host address is the parent's plus the offset (parent offset is 0 here).
        EXPECT_EQ(b.host, reinterpret_cast<std::byte*>(b.native) + b.offset);
        expect_disjoint(live, b);
        live.push_back(b);
    }
    EXPECT_EQ(upstream.allocate_calls(), 1U) << "small requests should share one native block";
    for (const RawBlock& b : live) EXPECT_EQ(b.native, live.front().native);
    heap.validate();
    for (const RawBlock& b : live) heap.deallocate_raw(b);
    const HeapStatistics st = heap.statistics();
    EXPECT_EQ(st.allocation_count, 0U);
    EXPECT_EQ(st.bytes_used, 0U);
    EXPECT_EQ(st.block_count, 1U);
    EXPECT_EQ(st.largest_free_bytes, 64 * kMiB) << "free everything should leave one free range";
    EXPECT_EQ(st.fragmentation, 0.0);
}

TEST(Heap, DeviceMemoryHasNoHostPointerAndBlocksFreeThemselves) {
    MallocUpstream upstream;
    Heap heap(upstream, kAlign, {.block_bytes = 16 * kMiB});
    {
        Block b = heap.allocate({.bytes = kMiB, .kind = MemoryKind::Device, .tag = "t"});
        EXPECT_EQ(b.host(), nullptr);
        EXPECT_EQ(heap.statistics().allocation_count, 1U);
    }
    EXPECT_EQ(heap.statistics().allocation_count, 0U);
    heap.validate();
}

TEST(Heap, PlacementsRespectRequestAlignmentUpTo64KiB) {
    std::mt19937_64 rng(test::seed());
    MallocUpstream upstream;
    Heap heap(upstream, kAlign, {.block_bytes = 32 * kMiB});
    std::vector<RawBlock> live;
    for (int i = 0; i < 300; ++i) {
        const std::uint64_t alignment = random_alignment(rng, 16);
        const RawBlock b = heap.allocate_raw({.bytes = log_uniform_bytes(rng, kMiB), .alignment = alignment});
        ASSERT_EQ(b.offset % std::max(alignment, kAlign), 0U) << "alignment " << alignment;
        ASSERT_EQ(b.native % 64, 0U);
        expect_disjoint(live, b);
        live.push_back(b);
        heap.validate();
    }
    for (const RawBlock& b : live) heap.deallocate_raw(b);
    heap.validate();
}

TEST(Heap, RequestForAnotherKindIsUsageError) {
    MallocUpstream upstream;
    Heap heap(upstream, kAlign, {.kind = MemoryKind::Device});
    EXPECT_THROW((void)heap.allocate({.bytes = 64, .kind = MemoryKind::HostPinned}), UsageError);
    EXPECT_EQ(upstream.allocate_calls(), 0U);
}

TEST(Heap, SizeZeroAndBadAlignmentAreUsageErrors) {
    MallocUpstream upstream;
    Heap heap(upstream, kAlign);
    EXPECT_THROW((void)heap.allocate({.bytes = 0}), UsageError);
    EXPECT_THROW((void)heap.allocate({.bytes = 64, .alignment = 3}), UsageError);
    EXPECT_THROW((void)heap.allocate({.bytes = 64, .alignment = 4097}), UsageError);
    EXPECT_THROW(heap.reserve(0), UsageError);
    EXPECT_THROW(Heap(upstream, 100), UsageError);
    EXPECT_THROW(Heap(upstream, kAlign, {.block_bytes = 0}), UsageError);
    EXPECT_EQ(upstream.allocate_calls(), 0U);
}

TEST(Heap, OnePebibyteRequestIsOutOfMemoryNotAnAbort) {
    MallocUpstream upstream;
    Heap heap(upstream, kAlign, {.block_bytes = 16 * kMiB});
    const Block keep = heap.allocate({.bytes = kMiB});
    const std::uint64_t pebibyte = std::uint64_t{1} << 50;
    try {
        (void)heap.allocate({.bytes = pebibyte});
        FAIL() << "1 PiB was granted";
    } catch (const OutOfMemory& e) {
        EXPECT_EQ(e.requested_bytes(), pebibyte);
        EXPECT_EQ(e.tier(), Tier::Device);
        EXPECT_EQ(e.in_use_bytes(), kMiB);
        EXPECT_EQ(e.largest_free_bytes(), 15 * kMiB);
        EXPECT_EQ(e.component(), "heap");
    }
    for (const std::uint64_t bytes : {std::uint64_t{1} << 62, std::uint64_t{1} << 63, UINT64_MAX - 5}) {
        EXPECT_THROW((void)heap.allocate({.bytes = bytes}), OutOfMemory) << bytes;
    }
    heap.validate();
    EXPECT_EQ(heap.statistics().block_count, 1U) << "a failed growth left a block behind";
    EXPECT_NO_THROW((void)heap.allocate({.bytes = kMiB}));
}

TEST(Heap, WithinBudgetRefusesGrowthPastTheLimitWithItsNumbers) {
    MallocUpstream upstream;
    const std::uint64_t limit = 40 * kMiB;
    Heap heap(upstream, kAlign, {.block_bytes = 16 * kMiB, .limit_bytes = limit, .within_budget = true});
    std::vector<Block> live;
    // 16 + 16 + 8 (the last block shrinks to fit under the limit).
    for (int i = 0; i < 10; ++i) live.push_back(heap.allocate({.bytes = 4 * kMiB}));
    HeapStatistics st = heap.statistics();
    EXPECT_EQ(st.bytes_reserved, limit);
    EXPECT_EQ(st.block_count, 3U);
    live.pop_back();  // a 4 MiB hole
    try {
        (void)heap.allocate({.bytes = 5 * kMiB});
        FAIL() << "grew past a within_budget limit";
    } catch (const OutOfMemory& e) {
        st = heap.statistics();
        EXPECT_EQ(e.requested_bytes(), 5 * kMiB);
        EXPECT_EQ(e.tier(), Tier::Device);
        EXPECT_EQ(e.budget_bytes(), limit);
        EXPECT_EQ(e.in_use_bytes(), st.bytes_used);
        EXPECT_EQ(e.largest_free_bytes(), st.largest_free_bytes);
        EXPECT_EQ(e.largest_free_bytes(), 4 * kMiB);
    }
    EXPECT_NO_THROW(live.push_back(heap.allocate({.bytes = 4 * kMiB}))) << "the hole should still be usable";
    EXPECT_LE(heap.statistics().bytes_reserved, limit);
    heap.validate();
}

TEST(Heap, AdvisoryLimitShrinksGrowthThenGrowsPastIt) {
    MallocUpstream upstream;
    Heap heap(upstream, kAlign, {.block_bytes = 16 * kMiB, .limit_bytes = 24 * kMiB});
    std::vector<Block> live;
    live.push_back(heap.allocate({.bytes = 16 * kMiB}));
    live.push_back(heap.allocate({.bytes = 2 * kMiB}));
    EXPECT_EQ(heap.statistics().bytes_reserved, 24 * kMiB)
        << "the second block should shrink to the headroom";
    live.push_back(heap.allocate({.bytes = 10 * kMiB}));  // no headroom left: grows anyway
    EXPECT_EQ(heap.statistics().bytes_reserved, 34 * kMiB);
    heap.validate();
}

TEST(Heap, NeverGrowUsesOnlyReservedBlocks) {
    MallocUpstream upstream;
    Heap heap(upstream, kAlign, {.block_bytes = 16 * kMiB, .never_grow = true});
    EXPECT_THROW((void)heap.allocate({.bytes = 1}), OutOfMemory);
    EXPECT_EQ(upstream.allocate_calls(), 0U);
    heap.reserve(10 * kMiB + 1);
    EXPECT_EQ(heap.statistics().bytes_reserved, 10 * kMiB + kAlign);
    Block a = heap.allocate({.bytes = 6 * kMiB});
    try {
        (void)heap.allocate({.bytes = 6 * kMiB});
        FAIL() << "never_grow heap grew";
    } catch (const OutOfMemory& e) {
        EXPECT_EQ(e.requested_bytes(), 6 * kMiB);
        EXPECT_EQ(e.budget_bytes(), 10 * kMiB + kAlign);
        EXPECT_EQ(e.in_use_bytes(), 6 * kMiB);
        EXPECT_EQ(e.largest_free_bytes(), 4 * kMiB + kAlign);
    }
    EXPECT_EQ(upstream.allocate_calls(), 1U);
    Block b = heap.allocate({.bytes = 4 * kMiB + kAlign});
    EXPECT_EQ(heap.statistics().bytes_free, 0U);
    heap.validate();
}

TEST(Heap, LargeRequestGetsADedicatedBlockReleasedWhenFreed) {
    MallocUpstream upstream;
    Heap heap(upstream, kAlign, {.block_bytes = 8 * kMiB});
    Block small = heap.allocate({.bytes = kMiB});
    {
        Block big = heap.allocate({.bytes = 20 * kMiB + 1, .alignment = 4096});
        EXPECT_EQ(big.raw().offset % 4096, 0U);
        const HeapStatistics st = heap.statistics();
        EXPECT_EQ(st.block_count, 2U);
        EXPECT_EQ(st.bytes_reserved, 8 * kMiB + 20 * kMiB + kAlign)
            << "a dedicated block is the request's size";
        // A small request must not land in the dedicated block.
        Block other = heap.allocate({.bytes = kMiB});
        EXPECT_EQ(other.raw().native, small.raw().native);
        heap.validate();
    }
    EXPECT_EQ(heap.statistics().block_count, 1U);
    EXPECT_EQ(upstream.blocks_live(), 1U);
    heap.validate();
}

TEST(Heap, TrimReleasesOnlyEmptyBlocks) {
    MallocUpstream upstream;
    Heap heap(upstream, kAlign, {.block_bytes = 4 * kMiB});
    std::vector<Block> blocks;
    for (int i = 0; i < 4; ++i) blocks.push_back(heap.allocate({.bytes = 3 * kMiB}));
    EXPECT_EQ(heap.statistics().block_count, 4U);
    blocks.erase(blocks.begin() + 1, blocks.begin() + 3);
    EXPECT_EQ(heap.trim(), 8 * kMiB);
    EXPECT_EQ(heap.statistics().block_count, 2U);
    EXPECT_EQ(upstream.blocks_live(), 2U);
    heap.validate();
    blocks.clear();
    EXPECT_EQ(heap.trim(), 8 * kMiB);
    EXPECT_EQ(upstream.bytes_live(), 0U);
    EXPECT_EQ(heap.statistics().bytes_reserved_peak, 16 * kMiB);
    // A trimmed heap grows again, reusing its slots.
    Block again = heap.allocate({.bytes = kMiB});
    heap.validate();
}

TEST(Heap, UpstreamOutOfMemoryPropagatesWithTheHeapsNumbers) {
    MallocUpstream upstream({.limit_bytes = 20 * kMiB});
    Heap heap(upstream, kAlign, {.block_bytes = 8 * kMiB});
    std::vector<Block> live;
    live.push_back(heap.allocate({.bytes = 7 * kMiB}));
    live.push_back(heap.allocate({.bytes = 7 * kMiB}));
    try {
        (void)heap.allocate({.bytes = 7 * kMiB});
        FAIL() << "upstream limit ignored";
    } catch (const OutOfMemory& e) {
        EXPECT_EQ(e.requested_bytes(), 7 * kMiB);
        EXPECT_EQ(e.in_use_bytes(), 14 * kMiB);
        EXPECT_EQ(e.largest_free_bytes(), kMiB);
        EXPECT_EQ(e.budget_bytes(), 20 * kMiB) << "the upstream's budget is kept";
        EXPECT_NE(std::string(e.what()).find("test limit reached"), std::string::npos) << e.what();
    }
    upstream.set_failing(true);
    EXPECT_THROW((void)heap.allocate({.bytes = 7 * kMiB}), OutOfMemory);
    upstream.set_failing(false);
    heap.validate();
    EXPECT_EQ(heap.statistics().block_count, 2U);
}

TEST(Heap, ForeignAndDoubleFreesAreCountedAndChangeNothing) {
    MallocUpstream upstream;
    Heap heap(upstream, kAlign, {.block_bytes = 4 * kMiB});
    Block a = heap.allocate({.bytes = kMiB});
    const RawBlock raw = heap.allocate_raw({.bytes = kMiB});
    heap.deallocate_raw(raw);
    heap.deallocate_raw(raw);  // double free
    RawBlock foreign = raw;
    foreign.cookie = 999;
    heap.deallocate_raw(foreign);
    foreign = a.raw();
    foreign.native += 4096;
    heap.deallocate_raw(foreign);
    const HeapStatistics st = heap.statistics();
    EXPECT_EQ(st.invalid_free_count, 3U);
    EXPECT_EQ(st.allocation_count, 1U);
    heap.validate();
}

TEST(Heap, OverARealDeviceUsesItsAlignment) {
    std::unique_ptr<Device> device;
    try {
        device = open_device("cpu");
    } catch (const Error& e) {
        GTEST_SKIP() << "no CPU backend: " << e.what();
    }
    Heap heap(*device, {.kind = MemoryKind::HostPinned, .block_bytes = 4 * kMiB});
    EXPECT_EQ(heap.alignment_bytes(), device->info().min_offset_alignment);
    Block a = heap.allocate({.bytes = 3, .kind = MemoryKind::HostPinned});
    Block b = heap.allocate({.bytes = 3, .kind = MemoryKind::HostPinned});
    EXPECT_EQ(b.raw().offset - a.raw().offset, heap.alignment_bytes());
    EXPECT_EQ(b.raw().device_id, device->id());
    std::memset(a.host(), 0xAB, 3);
    heap.validate();
}

// Random allocate/free with validate() after every step. Sizes log-uniform 1 B ..
// 64 MiB, alignments 1 .. 4096, a hard limit so OutOfMemory happens, and HostPinned
// memory so each allocation's first and last bytes carry a stamp that must survive:
// a real overlap would overwrite it. The second configuration's blocks are smaller
// than the largest requests, so dedicated blocks come and go as well.
struct HeapStressConfig {
    std::uint64_t alignment_bytes;
    std::uint64_t block_bytes;
    std::uint64_t limit_bytes;
};

std::ostream& operator<<(std::ostream& os, const HeapStressConfig& c) {
    return os << "alignment " << c.alignment_bytes << " B, blocks " << c.block_bytes << " B, limit "
              << c.limit_bytes << " B";
}

class HeapStress : public ::testing::TestWithParam<HeapStressConfig> {};

TEST_P(HeapStress, RandomOperationsKeepEveryInvariant) {
    const HeapStressConfig cfg = GetParam();
    std::mt19937_64 rng(test::seed());
    MallocUpstream upstream;
    const std::uint64_t limit = cfg.limit_bytes;
    Heap heap(upstream, cfg.alignment_bytes,
              {.kind = MemoryKind::HostPinned,
               .block_bytes = cfg.block_bytes,
               .limit_bytes = limit,
               .within_budget = true});
    std::vector<RawBlock> live;
    std::vector<std::uint64_t> stamps;
    std::uint64_t live_bytes = 0;
    std::uint64_t out_of_memory = 0;
    std::uint64_t next_stamp = 1;
    double allocate_probability = 0.3;
    const std::uint64_t steps = test::scaled(100'000);
    for (std::uint64_t step = 0; step < steps; ++step) {
        if (step % 1000 == 0) allocate_probability = 1.0 - allocate_probability;
        if (step % 9973 == 0) (void)heap.trim();
        if (live.empty() || std::bernoulli_distribution(allocate_probability)(rng)) {
            const std::uint64_t bytes = log_uniform_bytes(rng, 64 * kMiB);
            const std::uint64_t alignment = random_alignment(rng, 12);
            try {
                const RawBlock b = heap.allocate_raw(
                    {.bytes = bytes, .kind = MemoryKind::HostPinned, .alignment = alignment});
                ASSERT_EQ(b.offset % std::max(alignment, cfg.alignment_bytes), 0U);
                ASSERT_EQ(b.bytes, bytes);
                ASSERT_EQ(b.host, reinterpret_cast<std::byte*>(b.native) + b.offset);
                expect_disjoint(live, b);
                if (HasFatalFailure()) return;
                const std::uint64_t stamp = next_stamp++;
                stamp_ends(b, stamp);
                live.push_back(b);
                stamps.push_back(stamp);
                live_bytes += bytes;
            } catch (const OutOfMemory& e) {
                ++out_of_memory;
                const HeapStatistics st = heap.statistics();
                ASSERT_EQ(e.requested_bytes(), bytes);
                ASSERT_EQ(e.budget_bytes(), limit);
                ASSERT_EQ(e.in_use_bytes(), st.bytes_used);
                ASSERT_EQ(e.largest_free_bytes(), st.largest_free_bytes);
                ASSERT_GT(align_up(bytes, cfg.alignment_bytes) + st.bytes_reserved, limit)
                    << "refused although under the limit";
            }
        } else {
            const std::size_t i = std::uniform_int_distribution<std::size_t>(0, live.size() - 1)(rng);
            ASSERT_TRUE(ends_carry(live[i], stamps[i]))
                << "step " << step << ": another allocation wrote here";
            heap.deallocate_raw(live[i]);
            live_bytes -= live[i].bytes;
            live[i] = live.back();
            stamps[i] = stamps.back();
            live.pop_back();
            stamps.pop_back();
        }
        ASSERT_NO_THROW(heap.validate()) << "step " << step;
        const HeapStatistics st = heap.statistics();
        ASSERT_EQ(st.allocation_count, live.size());
        ASSERT_GE(st.bytes_used, live_bytes);
        ASSERT_LE(st.bytes_reserved, limit);
    }
    EXPECT_GT(out_of_memory, 0U) << "the stress never reached the limit";
    for (const RawBlock& b : live) heap.deallocate_raw(b);
    heap.validate();
    const HeapStatistics st = heap.statistics();
    EXPECT_EQ(st.bytes_used, 0U);
    EXPECT_EQ(st.free_range_count, st.block_count) << "every block should be one free range again";
    heap.trim();
    EXPECT_EQ(upstream.bytes_live(), 0U);
}

INSTANTIATE_TEST_SUITE_P(Configs, HeapStress,
                         ::testing::Values(HeapStressConfig{256, 128 * kMiB, 512 * kMiB},
                                           HeapStressConfig{64, 48 * kMiB, 384 * kMiB}),
                         [](const auto& param_info) {
                             return "blocks" + std::to_string(param_info.param.block_bytes / kMiB) + "MiB";
                         });

// Four threads allocate, stamp, check and free on one heap. Run under the tsan
// preset with --gtest_filter=*Threads*.
TEST(HeapThreads, FourThreadsAllocateAndFreeOnOneHeap) {
    const std::uint64_t seed = test::seed();
    MallocUpstream upstream;
    Heap heap(upstream, kAlign, {.kind = MemoryKind::HostPinned, .block_bytes = 16 * kMiB});
    const std::uint64_t steps = test::scaled(20'000);
    std::vector<std::thread> threads;
    std::atomic<std::uint64_t> corrupted{0};
    for (std::uint64_t t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            std::mt19937_64 rng(seed + t);
            std::vector<RawBlock> mine;
            for (std::uint64_t step = 0; step < steps; ++step) {
                if (mine.empty() || (mine.size() < 64 && std::bernoulli_distribution(0.55)(rng))) {
                    const std::uint64_t bytes = log_uniform_bytes(rng, 2 * kMiB);
                    const RawBlock b = heap.allocate_raw({.bytes = bytes,
                                                          .kind = MemoryKind::HostPinned,
                                                          .alignment = random_alignment(rng, 12)});
                    std::memset(b.host, static_cast<int>(t + 1), std::min<std::uint64_t>(bytes, 256));
                    mine.push_back(b);
                } else {
                    const std::size_t i = std::uniform_int_distribution<std::size_t>(0, mine.size() - 1)(rng);
                    const RawBlock b = mine[i];
                    for (std::uint64_t k = 0; k < std::min<std::uint64_t>(b.bytes, 256); ++k) {
                        if (b.host[k] != static_cast<std::byte>(t + 1)) corrupted.fetch_add(1);
                    }
                    heap.deallocate_raw(b);
                    mine[i] = mine.back();
                    mine.pop_back();
                }
            }
            for (const RawBlock& b : mine) heap.deallocate_raw(b);
        });
    }
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(corrupted.load(), 0U) << "two threads were given overlapping memory";
    heap.validate();
    const HeapStatistics st = heap.statistics();
    EXPECT_EQ(st.allocation_count, 0U);
    EXPECT_EQ(st.bytes_used, 0U);
    EXPECT_EQ(st.invalid_free_count, 0U);
}

}  // namespace
}  // namespace outcore::alloc
