// Tests of monitor::Scope and autorelease (outcore/monitor/scope.hpp): a scope per loop
// iteration keeps device memory flat, one scope around the loop grows it linearly and
// frees it all at its end; nesting and destruction order; no scope is a UsageError;
// scopes are per thread.
#include "outcore/monitor/scope.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "outcore/backends/cpu.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::Block;
using outcore::MemoryKind;
using outcore::UsageError;
using outcore::monitor::autorelease;
using outcore::monitor::Scope;

std::unique_ptr<outcore::Device> make_device() {
    return outcore::cpu::make_cpu_device({.total_memory_bytes = 512 * outcore::kMiB});
}

// What one loop iteration allocates: a few Device blocks of sizes drawn once per test.
std::vector<std::uint64_t> draw_iteration(std::mt19937_64& rng) {
    std::vector<std::uint64_t> sizes(std::uniform_int_distribution<std::size_t>(1, 5)(rng));
    for (auto& s : sizes) s = std::uniform_int_distribution<std::uint64_t>(1, 256 * outcore::kKiB)(rng);
    return sizes;
}

std::uint64_t sum(const std::vector<std::uint64_t>& sizes) {
    std::uint64_t total = 0;
    for (const std::uint64_t s : sizes) total += s;
    return total;
}

// One iteration's work: every block autoreleased, plus a non-Block owning handle.
void run_iteration(outcore::Device& device, const std::vector<std::uint64_t>& sizes) {
    for (const std::uint64_t bytes : sizes) {
        Block& b =
            autorelease(device.allocate({.bytes = bytes, .kind = MemoryKind::Device, .tag = "scope.test"}));
        ASSERT_EQ(b.bytes(), bytes);
    }
    auto& scratch = autorelease(std::make_unique<std::vector<int>>(16, 7));
    ASSERT_EQ(scratch->size(), 16U);
}

TEST(Scope, AScopePerIterationKeepsDeviceMemoryFlat) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    const std::vector<std::uint64_t> sizes = draw_iteration(rng);
    const std::uint64_t per_iteration = sum(sizes);
    const std::uint64_t n = outcore::test::scaled(200);

    std::uint64_t most = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
        Scope scope;
        run_iteration(*device, sizes);
        EXPECT_EQ(scope.held_count(), sizes.size() + 1);
        most = std::max(most, device->allocated_bytes());
    }
    EXPECT_EQ(most, per_iteration);
    EXPECT_EQ(device->peak_bytes(MemoryKind::Device), per_iteration);
    EXPECT_EQ(device->allocated_bytes(), 0U);
    EXPECT_EQ(Scope::current(), nullptr);
}

TEST(Scope, OneScopeAroundTheLoopGrowsLinearlyUntilItEnds) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    const std::vector<std::uint64_t> sizes = draw_iteration(rng);
    const std::uint64_t per_iteration = sum(sizes);
    const std::uint64_t n = outcore::test::scaled(200);
    {
        Scope outer;
        for (std::uint64_t i = 0; i < n; ++i) {
            run_iteration(*device, sizes);
            ASSERT_EQ(device->allocated_bytes(), (i + 1) * per_iteration) << "iteration " << i;
        }
        EXPECT_EQ(device->allocated_bytes(), n * per_iteration);
        EXPECT_EQ(outer.held_count(), n * (sizes.size() + 1));
    }
    EXPECT_EQ(device->allocated_bytes(), 0U);
}

// Appends its id to a log when destroyed (a moved-from one does not).
class Recorder {
public:
    Recorder(int id, std::vector<int>& log) : id_(id), log_(&log) {}
    Recorder(Recorder&& other) noexcept : id_(other.id_), log_(std::exchange(other.log_, nullptr)) {}
    Recorder& operator=(Recorder&&) = delete;
    ~Recorder() {
        if (log_ != nullptr) log_->push_back(id_);
    }
    [[nodiscard]] int id() const { return id_; }

private:
    int id_;
    std::vector<int>* log_;
};

TEST(Scope, NestsAndDestroysNewestFirst) {
    std::vector<int> log;
    EXPECT_EQ(Scope::current(), nullptr);
    {
        Scope outer;
        EXPECT_EQ(Scope::current(), &outer);
        EXPECT_EQ(outer.parent(), nullptr);
        EXPECT_EQ(autorelease(Recorder(1, log)).id(), 1);
        (void)autorelease(Recorder(2, log));
        {
            Scope inner;
            EXPECT_EQ(Scope::current(), &inner);
            EXPECT_EQ(inner.parent(), &outer);
            (void)autorelease(Recorder(3, log));
            (void)autorelease(Recorder(4, log));
            EXPECT_EQ(inner.held_count(), 2U);
            EXPECT_EQ(outer.held_count(), 2U);
        }
        EXPECT_EQ(log, (std::vector<int>{4, 3}));
        EXPECT_EQ(Scope::current(), &outer);
        (void)autorelease(Recorder(5, log));
        EXPECT_EQ(outer.held_count(), 3U);
    }
    EXPECT_EQ(log, (std::vector<int>{4, 3, 5, 2, 1}));
    EXPECT_EQ(Scope::current(), nullptr);
}

// Autoreleases a Recorder from its destructor.
struct Chain {
    std::vector<int>* log;
    Chain(Chain&& other) noexcept : log(std::exchange(other.log, nullptr)) {}
    explicit Chain(std::vector<int>& l) : log(&l) {}
    Chain& operator=(Chain&&) = delete;
    ~Chain() {
        if (log != nullptr) (void)autorelease(Recorder(99, *log));
    }
};

TEST(Scope, WhatADestructorAutoreleasesIsDestroyedBeforeTheScopeCloses) {
    std::vector<int> log;
    {
        Scope scope;
        (void)autorelease(Recorder(1, log));
        (void)autorelease(Chain(log));
    }
    EXPECT_EQ(log, (std::vector<int>{99, 1}));
}

TEST(Scope, AutoreleaseWithoutAScopeThrowsAndTheCallerKeepsTheObject) {
    auto device = make_device();
    Block b = device->allocate({.bytes = 4096, .tag = "kept"});
    EXPECT_THROW((void)autorelease(std::move(b)), UsageError);
    EXPECT_TRUE(b);  // NOLINT(bugprone-use-after-move): not moved from on a throw
    EXPECT_EQ(b.bytes(), 4096U);
    EXPECT_EQ(device->allocated_bytes(), 4096U);
    {
        Scope scope;
        (void)autorelease(std::move(b));
    }
    EXPECT_EQ(device->allocated_bytes(), 0U);
    // Closed again: throws again.
    EXPECT_THROW((void)autorelease(std::make_unique<int>(1)), UsageError);
}

TEST(ScopeDeathTest, EndingAScopeThatIsNotTheInnermostTerminates) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(
        {
            std::optional<Scope> outer;
            outer.emplace();
            Scope inner;
            outer.reset();  // while inner is open
        },
        "not the innermost open scope");
}

TEST(ScopeThreads, EachThreadHasItsOwnStackOfScopes) {
    const std::uint64_t base_seed = outcore::test::seed();
    auto device = make_device();
    constexpr int kThreads = 4;
    const std::uint64_t rounds = outcore::test::scaled(50);
    std::barrier all_open(kThreads);
    std::barrier all_checked(kThreads);
    std::vector<std::thread> threads;
    std::vector<std::string> failures(kThreads);
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            std::mt19937_64 rng(base_seed + static_cast<std::uint64_t>(t));
            for (std::uint64_t r = 0; r < rounds; ++r) {
                if (Scope::current() != nullptr) failures[t] = "a scope was open before this thread made one";
                try {
                    (void)autorelease(std::make_unique<int>(t));
                    failures[t] = "autorelease without a scope did not throw";
                } catch (const UsageError&) {}
                const std::size_t blocks = std::uniform_int_distribution<std::size_t>(1, 8)(rng);
                Scope scope;
                for (std::size_t i = 0; i < blocks; ++i) {
                    (void)autorelease(device->allocate({.bytes = 1024, .tag = "thread"}));
                }
                all_open.arrive_and_wait();  // every thread's scope is open and filled now
                if (Scope::current() != &scope) failures[t] = "innermost scope is another thread's";
                if (scope.held_count() != blocks) failures[t] = "another thread's object landed here";
                all_checked.arrive_and_wait();
            }
        });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
    EXPECT_EQ(device->allocated_bytes(), 0U);
}

}  // namespace
