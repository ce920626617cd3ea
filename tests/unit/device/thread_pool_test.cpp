// Tests of the ThreadPool (the CPU backend's kernels, Vulkan's host packing): every
// index runs exactly once whatever the count, grain and pool size; callers on several threads at once (one
// gets the pool, the others run serially) all complete; a throwing chunk's exception reaches the caller and
// the pool stays usable.
#include "device/thread_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "support/test_seed.hpp"

namespace {

using outcore::detail::ThreadPool;

/// Runs parallel_for and checks that each index in [0, count) was visited once.
void expect_each_index_once(ThreadPool& pool, std::uint64_t count, std::uint64_t grain) {
    std::vector<std::atomic<int>> hits(count);
    pool.parallel_for(count, grain, [&](std::uint64_t begin, std::uint64_t end) {
        ASSERT_LE(begin, end);
        ASSERT_LE(end, count);
        for (std::uint64_t i = begin; i < end; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
    });
    for (std::uint64_t i = 0; i < count; ++i)
        ASSERT_EQ(hits[i].load(), 1) << "index " << i << " of " << count;
}

TEST(ThreadPoolTest, EveryIndexRunsExactlyOnce) {
    std::mt19937_64 rng(outcore::test::seed());
    for (unsigned threads : {0U, 1U, 2U, 3U, 8U}) {
        ThreadPool pool(threads);
        EXPECT_EQ(pool.threads(), threads > 1 ? threads : 1U);
        for (std::uint64_t i = 0; i < outcore::test::scaled(60); ++i) {
            expect_each_index_once(pool, rng() % 300, rng() % 20);
        }
        expect_each_index_once(pool, 0, 1);
        expect_each_index_once(pool, 1, 0);
    }
    expect_each_index_once(ThreadPool::shared(), 1000, 1);
}

TEST(ThreadPoolTest, ConcurrentCallersAllComplete) {
    ThreadPool pool(3);
    std::vector<std::thread> callers;
    std::atomic<std::uint64_t> total{0};
    for (int t = 0; t < 4; ++t) {
        callers.emplace_back([&] {
            for (std::uint64_t rep = 0; rep < outcore::test::scaled(50); ++rep) {
                pool.parallel_for(64, 1, [&](std::uint64_t b, std::uint64_t e) { total.fetch_add(e - b); });
            }
        });
    }
    for (std::thread& t : callers) t.join();
    EXPECT_EQ(total.load(), 4 * outcore::test::scaled(50) * 64);
}

TEST(ThreadPoolTest, AChunkExceptionReachesTheCallerAndThePoolSurvives) {
    ThreadPool pool(4);
    std::atomic<std::uint64_t> ran{0};
    EXPECT_THROW(pool.parallel_for(100, 1,
                                   [&](std::uint64_t b, std::uint64_t e) {
                                       ran.fetch_add(e - b);
                                       if (b == 0) throw std::runtime_error("chunk failed");
                                   }),
                 std::runtime_error);
    EXPECT_EQ(ran.load(), 100U);  // the other chunks still ran
    expect_each_index_once(pool, 500, 3);
}

}  // namespace
