// The allocator adaptors (Budget, Statistics, Tracking, OnOutOfMemory), alone and
// stacked, over a malloc-backed test upstream.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "outcore/alloc/budget.hpp"
#include "outcore/alloc/on_out_of_memory.hpp"
#include "outcore/alloc/statistics.hpp"
#include "outcore/alloc/tracking.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/core/size.hpp"
#include "support/test_seed.hpp"

namespace outcore::alloc {
namespace {

// Host memory from aligned_alloc, with a capacity, injectable failures and optional
// rounding of sizes (as a device allocator rounding to its granularity would).
class MallocUpstream final : public Allocator {
public:
    explicit MallocUpstream(std::uint64_t capacity_bytes = ~std::uint64_t{0}, std::uint64_t round_bytes = 1)
        : capacity_bytes_(capacity_bytes), round_bytes_(round_bytes) {}
    ~MallocUpstream() override { EXPECT_EQ(live_count_, 0U) << "test upstream destroyed with live blocks"; }

    /// The next `n` requests throw OutOfMemory.
    void fail_next(std::uint64_t n) {
        std::lock_guard lock(mutex_);
        fail_next_ = n;
    }
    std::uint64_t live_bytes() const {
        std::lock_guard lock(mutex_);
        return live_bytes_;
    }
    std::uint64_t live_count() const {
        std::lock_guard lock(mutex_);
        return live_count_;
    }
    std::uint64_t peak_live_bytes() const {
        std::lock_guard lock(mutex_);
        return peak_live_bytes_;
    }
    std::uint64_t calls() const {
        std::lock_guard lock(mutex_);
        return calls_;
    }

private:
    RawBlock do_allocate(const AllocationRequest& request) override {
        const std::uint64_t bytes = align_up(request.bytes, round_bytes_);
        {
            std::lock_guard lock(mutex_);
            ++calls_;
            if (fail_next_ > 0 || bytes > capacity_bytes_ - live_bytes_) {
                const bool injected = fail_next_ > 0;
                if (injected) --fail_next_;
                throw OutOfMemory("test-upstream", injected ? "injected failure" : "capacity exceeded",
                                  {.requested_bytes = request.bytes,
                                   .tier = tier_of(request.kind),
                                   .budget_bytes = capacity_bytes_,
                                   .in_use_bytes = live_bytes_,
                                   .largest_free_bytes = capacity_bytes_ - live_bytes_});
            }
            live_bytes_ += bytes;
            live_count_ += 1;
            peak_live_bytes_ = std::max(peak_live_bytes_, live_bytes_);
        }
        const std::uint64_t alignment = std::max<std::uint64_t>(request.alignment, 16);
        void* p = std::aligned_alloc(alignment, align_up(bytes, alignment));
        if (p == nullptr) std::abort();  // the test sizes are tiny
        RawBlock raw;
        raw.kind = request.kind;
        raw.bytes = bytes;
        raw.native = reinterpret_cast<std::uintptr_t>(p);
        raw.host = static_cast<std::byte*>(p);
        return raw;
    }
    void do_deallocate(const RawBlock& block) noexcept override {
        std::free(block.host);
        std::lock_guard lock(mutex_);
        live_bytes_ -= block.bytes;
        live_count_ -= 1;
    }

    const std::uint64_t capacity_bytes_;
    const std::uint64_t round_bytes_;
    mutable std::mutex mutex_;
    std::uint64_t fail_next_ = 0;
    std::uint64_t live_bytes_ = 0;
    std::uint64_t live_count_ = 0;
    std::uint64_t peak_live_bytes_ = 0;
    std::uint64_t calls_ = 0;
};

constexpr MemoryKind kKinds[] = {MemoryKind::Device, MemoryKind::HostPinned, MemoryKind::HostCached};
constexpr std::string_view kTags[] = {"", "gemm.a", "gemm.b", "swap.unit", "tile"};

// ----- Budget -------------------------------------------------------------------------

TEST(Budget, ExceedingTheLimitThrowsOutOfMemoryWithItsFactsAndChangesNothing) {
    MallocUpstream upstream;
    Budget budget(upstream, {.limit_bytes = 1000});
    Block held = budget.allocate({.bytes = 600, .kind = MemoryKind::Device, .tag = "held"});
    const std::uint64_t calls_before = upstream.calls();
    try {
        (void)budget.allocate({.bytes = 500, .kind = MemoryKind::Device});
        FAIL() << "no OutOfMemory";
    } catch (const OutOfMemory& e) {
        EXPECT_EQ(e.component(), "budget");
        EXPECT_EQ(e.requested_bytes(), 500U);
        EXPECT_EQ(e.tier(), Tier::Device);
        EXPECT_EQ(e.budget_bytes(), 1000U);
        EXPECT_EQ(e.in_use_bytes(), 600U);
        EXPECT_NE(std::string(e.what()).find("budget exceeded"), std::string::npos) << e.what();
    }
    EXPECT_EQ(budget.bytes_used(), 600U);
    EXPECT_EQ(upstream.calls(), calls_before) << "upstream must not be asked for what the budget refuses";
    EXPECT_EQ(upstream.live_count(), 1U);
    // Exactly up to the limit is allowed.
    Block rest = budget.allocate({.bytes = 400});
    EXPECT_EQ(budget.bytes_used(), 1000U);
    EXPECT_THROW((void)budget.allocate({.bytes = 1}), OutOfMemory);
    held.reset();
    rest.reset();
    EXPECT_EQ(budget.bytes_used(), 0U);
}

TEST(Budget, TierOfTheErrorFollowsTheKind) {
    MallocUpstream upstream;
    Budget budget(upstream, {.limit_bytes = 10});
    try {
        (void)budget.allocate({.bytes = 11, .kind = MemoryKind::HostPinned});
        FAIL();
    } catch (const OutOfMemory& e) {
        EXPECT_EQ(e.tier(), tier_of(MemoryKind::HostPinned));
        EXPECT_EQ(e.in_use_bytes(), 0U);
    }
}

TEST(Budget, UpstreamFailureRollsBackTheReservation) {
    MallocUpstream upstream;
    Budget budget(upstream, {.limit_bytes = 1000});
    Block held = budget.allocate({.bytes = 100});
    upstream.fail_next(1);
    try {
        (void)budget.allocate({.bytes = 200});
        FAIL();
    } catch (const OutOfMemory& e) {
        EXPECT_EQ(e.component(), "test-upstream") << "upstream's own error passes through unchanged";
    }
    EXPECT_EQ(budget.bytes_used(), 100U);
    // The rolled-back bytes are usable again: 900 more still fit.
    Block rest = budget.allocate({.bytes = 900});
    EXPECT_EQ(budget.bytes_used(), 1000U);
}

TEST(Budget, OnlyTheChosenKindCounts) {
    MallocUpstream upstream;
    Budget budget(upstream, {.limit_bytes = 100, .kind = MemoryKind::Device});
    EXPECT_TRUE(budget.counts(MemoryKind::Device));
    EXPECT_FALSE(budget.counts(MemoryKind::HostPinned));
    Block host = budget.allocate({.bytes = 5000, .kind = MemoryKind::HostPinned});
    EXPECT_EQ(budget.bytes_used(), 0U);
    Block dev = budget.allocate({.bytes = 100, .kind = MemoryKind::Device});
    EXPECT_EQ(budget.bytes_used(), 100U);
    EXPECT_THROW((void)budget.allocate({.bytes = 1, .kind = MemoryKind::Device}), OutOfMemory);
    host.reset();
    EXPECT_EQ(budget.bytes_used(), 100U);
    dev.reset();
    EXPECT_EQ(budget.bytes_used(), 0U);
}

TEST(Budget, CountsWhatUpstreamRoundedUpTo) {
    MallocUpstream upstream(~std::uint64_t{0}, 256);
    Budget budget(upstream, {.limit_bytes = 1000});
    Block a = budget.allocate({.bytes = 100});
    EXPECT_EQ(a.bytes(), 256U);
    EXPECT_EQ(budget.bytes_used(), 256U);
    // 600 fits the limit as asked but not as rounded (768): refused, nothing leaks.
    EXPECT_THROW((void)budget.allocate({.bytes = 600}), OutOfMemory);
    EXPECT_EQ(budget.bytes_used(), 256U);
    EXPECT_EQ(upstream.live_count(), 1U);
    a.reset();
    EXPECT_EQ(budget.bytes_used(), 0U);
}

TEST(Budget, LoweringTheLimitBelowUsageFailsLaterRequestsUntilUsageDrops) {
    MallocUpstream upstream;
    Budget budget(upstream, {.limit_bytes = 1000});
    Block a = budget.allocate({.bytes = 600});
    budget.set_limit(400);
    EXPECT_EQ(budget.limit_bytes(), 400U);
    EXPECT_TRUE(a);  // what was handed out stays valid
    try {
        (void)budget.allocate({.bytes = 1});
        FAIL();
    } catch (const OutOfMemory& e) {
        EXPECT_EQ(e.in_use_bytes(), 600U);
        EXPECT_EQ(e.budget_bytes(), 400U);
    }
    a.reset();
    Block b = budget.allocate({.bytes = 400});
    EXPECT_EQ(budget.bytes_used(), 400U);
}

TEST(Budget, WatermarkFiresOncePerCrossing) {
    MallocUpstream upstream;
    std::vector<BudgetWatermark> fired;
    Budget budget(upstream, {.limit_bytes = 1000,
                             .watermark_bytes = 500,
                             .on_watermark = [&](const BudgetWatermark& w) { fired.push_back(w); }});
    Block a = budget.allocate({.bytes = 300});
    EXPECT_TRUE(fired.empty());
    Block b = budget.allocate({.bytes = 200});  // exactly at the watermark counts
    ASSERT_EQ(fired.size(), 1U);
    EXPECT_EQ(fired[0].used_bytes, 500U);
    EXPECT_EQ(fired[0].watermark_bytes, 500U);
    EXPECT_EQ(fired[0].limit_bytes, 1000U);
    Block c = budget.allocate({.bytes = 100});  // still above: no second call
    EXPECT_EQ(fired.size(), 1U);
    c.reset();  // 500: not below, still the same crossing
    Block d = budget.allocate({.bytes = 10});
    EXPECT_EQ(fired.size(), 1U);
    a.reset();  // 210: below, so the next rise is a new crossing
    d.reset();
    Block e = budget.allocate({.bytes = 250});
    EXPECT_EQ(fired.size(), 1U);
    Block f = budget.allocate({.bytes = 100});
    ASSERT_EQ(fired.size(), 2U);
    EXPECT_EQ(fired[1].used_bytes, 550U);
}

TEST(Budget, WatermarkCallbackMayFreeThroughTheBudgetAndARefusedRequestDoesNotFireIt) {
    MallocUpstream upstream;
    Block spare;
    int calls = 0;
    Budget budget(upstream,
                  {.limit_bytes = 1000, .watermark_bytes = 600, .on_watermark = [&](const BudgetWatermark&) {
                       ++calls;
                       spare.reset();  // re-enters the budget: no lock may be held
                   }});
    spare = budget.allocate({.bytes = 300});
    upstream.fail_next(1);
    EXPECT_THROW((void)budget.allocate({.bytes = 400}), OutOfMemory);
    EXPECT_EQ(calls, 0) << "a reservation upstream refused never reached the watermark";
    Block big = budget.allocate({.bytes = 400});
    EXPECT_EQ(calls, 1);
    EXPECT_FALSE(spare);
    EXPECT_EQ(budget.bytes_used(), 400U);
}

TEST(Budget, ThrowingWatermarkCallbackGivesTheBlockBack) {
    MallocUpstream upstream;
    Budget budget(upstream,
                  {.limit_bytes = 1000, .watermark_bytes = 10, .on_watermark = [](const BudgetWatermark&) {
                       throw UsageError("test", "callback failed");
                   }});
    EXPECT_THROW((void)budget.allocate({.bytes = 20}), UsageError);
    EXPECT_EQ(budget.bytes_used(), 0U);
    EXPECT_EQ(upstream.live_count(), 0U);
}

// ----- OnOutOfMemory --------------------------------------------------------------------

TEST(OnOutOfMemory, CallbackFreesMemoryAndTheRetrySucceeds) {
    MallocUpstream upstream(1000);
    Block cache = upstream.allocate({.bytes = 800, .tag = "cache"});
    std::vector<std::uint64_t> attempts;
    OnOutOfMemory retrying(upstream, {.on_out_of_memory = [&](const OutOfMemory& e, std::uint64_t attempt) {
                               attempts.push_back(attempt);
                               EXPECT_EQ(e.requested_bytes(), 500U);
                               const bool freed = static_cast<bool>(cache);
                               cache.reset();
                               return freed;
                           }});
    Block b = retrying.allocate({.bytes = 500});
    EXPECT_EQ(b.bytes(), 500U);
    EXPECT_EQ(attempts, (std::vector<std::uint64_t>{1}));
    EXPECT_EQ(retrying.retry_count(), 1U);
    EXPECT_EQ(retrying.recovered_count(), 1U);
    EXPECT_EQ(retrying.given_up_count(), 0U);
    // A request that fits never calls the callback.
    Block small = retrying.allocate({.bytes = 100});
    EXPECT_EQ(attempts.size(), 1U);
}

TEST(OnOutOfMemory, GivesUpAfterTheBoundAndRethrowsTheLastError) {
    MallocUpstream upstream(100);
    std::uint64_t calls = 0;
    OnOutOfMemory retrying(upstream, {.on_out_of_memory =
                                          [&](const OutOfMemory&, std::uint64_t attempt) {
                                              EXPECT_EQ(attempt, calls + 1);
                                              ++calls;
                                              return true;  // claims progress, frees nothing
                                          },
                                      .max_retries = 5});
    const std::uint64_t upstream_calls = upstream.calls();
    try {
        (void)retrying.allocate({.bytes = 200, .kind = MemoryKind::HostCached});
        FAIL();
    } catch (const OutOfMemory& e) {
        EXPECT_EQ(e.component(), "test-upstream");
        EXPECT_EQ(e.requested_bytes(), 200U);
        EXPECT_EQ(e.tier(), tier_of(MemoryKind::HostCached));
    }
    EXPECT_EQ(calls, 5U);
    EXPECT_EQ(retrying.retry_count(), 5U);
    EXPECT_EQ(upstream.calls() - upstream_calls, 6U) << "one try plus max_retries retries";
    EXPECT_EQ(retrying.given_up_count(), 1U);
    EXPECT_EQ(retrying.recovered_count(), 0U);
}

TEST(OnOutOfMemory, DefaultBoundIsThreeAndACallbackThatFreedNothingStopsAtOnce) {
    MallocUpstream upstream(100);
    std::uint64_t calls = 0;
    OnOutOfMemory always(upstream, {.on_out_of_memory = [&](const OutOfMemory&, std::uint64_t) {
                             ++calls;
                             return true;
                         }});
    EXPECT_EQ(always.max_retries(), 3U);
    EXPECT_THROW((void)always.allocate({.bytes = 200}), OutOfMemory);
    EXPECT_EQ(calls, 3U);

    calls = 0;
    OnOutOfMemory never(upstream, {.on_out_of_memory = [&](const OutOfMemory&, std::uint64_t) {
                            ++calls;
                            return false;
                        }});
    EXPECT_THROW((void)never.allocate({.bytes = 200}), OutOfMemory);
    EXPECT_EQ(calls, 1U);
    EXPECT_EQ(never.retry_count(), 0U);

    EXPECT_THROW((void)OnOutOfMemory(upstream, {}), UsageError);
}

TEST(OnOutOfMemory, RecoversOverABudget) {
    // The intended stack: retry on top of a budget, the callback evicting a cache.
    MallocUpstream upstream;
    Budget budget(upstream, {.limit_bytes = 1024});
    std::vector<Block> cache;
    OnOutOfMemory retrying(budget, {.on_out_of_memory = [&](const OutOfMemory& e, std::uint64_t) {
                               EXPECT_EQ(e.component(), "budget");
                               if (cache.empty()) return false;
                               cache.pop_back();  // evict one entry per failure
                               return true;
                           }});
    for (int i = 0; i < 4; ++i) cache.push_back(retrying.allocate({.bytes = 256, .tag = "cache"}));
    Block big = retrying.allocate({.bytes = 600});
    EXPECT_EQ(cache.size(), 1U);  // 3 evictions were needed: 1 * 256 + 600 <= 1024
    EXPECT_EQ(retrying.retry_count(), 3U);
    EXPECT_EQ(budget.bytes_used(), 856U);
    cache.clear();  // its blocks belong to `retrying`, which is destroyed before `cache`
}

// ----- Statistics ------------------------------------------------------------------------

struct ModelCounters {
    std::uint64_t current = 0, peak = 0, live = 0, made = 0, total = 0;
    void add(std::uint64_t b) {
        current += b;
        peak = std::max(peak, current);
        live += 1;
        made += 1;
        total += b;
    }
    void remove(std::uint64_t b) {
        current -= b;
        live -= 1;
    }
};

void expect_same(const AllocationCounters& got, const ModelCounters& want, const std::string& what) {
    EXPECT_EQ(got.current_bytes, want.current) << what;
    EXPECT_EQ(got.peak_bytes, want.peak) << what;
    EXPECT_EQ(got.current_count, want.live) << what;
    EXPECT_EQ(got.allocation_count, want.made) << what;
    EXPECT_EQ(got.total_allocated_bytes, want.total) << what;
}

TEST(Statistics, BalanceAfterRandomSequencesThroughABudget) {
    std::mt19937_64 rng(test::seed());
    const std::uint64_t sequences = test::scaled(40);
    for (std::uint64_t s = 0; s < sequences && !HasFailure(); ++s) {
        MallocUpstream upstream;
        const std::uint64_t limit = std::uniform_int_distribution<std::uint64_t>(1, 64 * kKiB)(rng);
        Budget budget(upstream, {.limit_bytes = limit});
        Statistics stats(budget);

        struct Live {
            Block block;
            std::string_view tag;
        };
        std::vector<Live> live;
        ModelCounters total;
        std::map<std::string, ModelCounters> by_tag;
        std::map<int, ModelCounters> by_kind;
        const int steps = 200;
        for (int step = 0; step < steps && !HasFailure(); ++step) {
            const bool do_alloc = live.empty() || std::uniform_int_distribution<int>(0, 99)(rng) < 55;
            if (do_alloc) {
                const std::uint64_t bytes = std::uniform_int_distribution<std::uint64_t>(1, 8 * kKiB)(rng);
                const MemoryKind kind = kKinds[std::uniform_int_distribution<std::size_t>(0, 2)(rng)];
                const std::string_view tag = kTags[std::uniform_int_distribution<std::size_t>(0, 4)(rng)];
                const bool fits = total.current + bytes <= limit;
                try {
                    Block b = stats.allocate({.bytes = bytes, .kind = kind, .tag = tag});
                    EXPECT_TRUE(fits) << "step " << step;
                    total.add(bytes);
                    by_tag[std::string(tag)].add(bytes);
                    by_kind[static_cast<int>(kind)].add(bytes);
                    live.push_back({std::move(b), tag});
                } catch (const OutOfMemory& e) {
                    EXPECT_FALSE(fits) << "step " << step;
                    EXPECT_EQ(e.in_use_bytes(), total.current);
                }
            } else {
                const std::size_t i = std::uniform_int_distribution<std::size_t>(0, live.size() - 1)(rng);
                const std::uint64_t bytes = live[i].block.bytes();
                total.remove(bytes);
                by_tag[std::string(live[i].tag)].remove(bytes);
                by_kind[static_cast<int>(live[i].block.kind())].remove(bytes);
                live[i] = std::move(live.back());
                live.pop_back();
            }
            if (step % 20 == 0) {
                const StatisticsSnapshot snap = stats.snapshot();
                expect_same(snap.total, total, "total");
                for (const auto& [tag, m] : by_tag) expect_same(snap.by_tag.at(tag), m, "tag '" + tag + "'");
                for (const auto& [k, m] : by_kind) {
                    expect_same(snap.of(static_cast<MemoryKind>(k)), m, "kind " + std::to_string(k));
                }
                EXPECT_EQ(snap.total.current_bytes, budget.bytes_used());
                EXPECT_EQ(snap.total.current_bytes, upstream.live_bytes());
            }
        }
        live.clear();
        const StatisticsSnapshot end = stats.snapshot();
        EXPECT_EQ(end.total.current_bytes, 0U);
        EXPECT_EQ(end.total.current_count, 0U);
        for (const auto& [tag, c] : end.by_tag) EXPECT_EQ(c.current_bytes, 0U) << tag;
        for (const AllocationCounters& c : end.by_kind) EXPECT_EQ(c.current_bytes, 0U);
        EXPECT_EQ(end.total.peak_bytes, total.peak);
        EXPECT_LE(end.total.peak_bytes, limit);
        EXPECT_EQ(end.total.allocation_count, total.made);
        EXPECT_EQ(budget.bytes_used(), 0U);
        EXPECT_EQ(upstream.live_count(), 0U);
    }
}

TEST(Statistics, ResetPeakRestartsFromCurrentUsage) {
    MallocUpstream upstream;
    Statistics stats(upstream);
    Block a = stats.allocate({.bytes = 100, .tag = "x"});
    { Block b = stats.allocate({.bytes = 900, .kind = MemoryKind::HostPinned, .tag = "y"}); }
    StatisticsSnapshot s = stats.snapshot();
    EXPECT_EQ(s.total.peak_bytes, 1000U);
    EXPECT_EQ(s.by_tag.at("y").peak_bytes, 900U);
    EXPECT_EQ(s.by_tag.at("y").current_bytes, 0U);
    stats.reset_peak();
    s = stats.snapshot();
    EXPECT_EQ(s.total.peak_bytes, 100U);
    EXPECT_EQ(s.by_tag.at("x").peak_bytes, 100U);
    EXPECT_EQ(s.by_tag.at("y").peak_bytes, 0U);
    EXPECT_EQ(s.of(MemoryKind::HostPinned).peak_bytes, 0U);
    EXPECT_EQ(s.of(MemoryKind::HostPinned).allocation_count, 1U) << "reset_peak keeps the monotonic counts";
    EXPECT_EQ(stats.total().total_allocated_bytes, 1000U);
}

TEST(Statistics, FailedRequestsAreNotCounted) {
    MallocUpstream upstream(100);
    Statistics stats(upstream);
    EXPECT_THROW((void)stats.allocate({.bytes = 101, .tag = "big"}), OutOfMemory);
    const StatisticsSnapshot s = stats.snapshot();
    EXPECT_EQ(s.total, AllocationCounters{});
    EXPECT_EQ(s.by_tag.count("big"), 0U);
}

// ----- Tracking --------------------------------------------------------------------------

TEST(Tracking, ReportsExactlyTheLiveAllocationsGroupedByTag) {
    std::mt19937_64 rng(test::seed());
    MallocUpstream upstream;
    Tracking tracking(upstream, {.capture_stack_traces = false});
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::tuple<Block, std::string_view>> live;
    for (int i = 0; i < 60; ++i) {
        const std::string_view tag = kTags[std::uniform_int_distribution<std::size_t>(0, 4)(rng)];
        const std::uint64_t bytes = std::uniform_int_distribution<std::uint64_t>(1, 4096)(rng);
        const MemoryKind kind = kKinds[std::uniform_int_distribution<std::size_t>(0, 2)(rng)];
        live.emplace_back(tracking.allocate({.bytes = bytes, .kind = kind, .tag = tag}), tag);
    }
    // Free a random half.
    std::shuffle(live.begin(), live.end(), rng);
    live.resize(live.size() / 2);
    const auto t1 = std::chrono::steady_clock::now();

    std::multiset<std::tuple<std::string, std::uint64_t, MemoryKind>> want;
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> want_groups;  // count, bytes
    for (const auto& [block, tag] : live) {
        want.emplace(std::string(tag), block.bytes(), block.kind());
        auto& g = want_groups[std::string(tag)];
        g.first += 1;
        g.second += block.bytes();
    }
    std::multiset<std::tuple<std::string, std::uint64_t, MemoryKind>> got;
    const std::vector<LiveAllocation> reported = tracking.live_allocations();
    for (std::size_t i = 0; i < reported.size(); ++i) {
        got.emplace(std::string(reported[i].tag), reported[i].bytes, reported[i].kind);
        EXPECT_TRUE(reported[i].stack.empty());
        if (i > 0) {
            EXPECT_LT(reported[i - 1].sequence, reported[i].sequence);
        }
    }
    EXPECT_EQ(got, want);
    EXPECT_EQ(tracking.live_count(), live.size());

    std::map<std::string, std::chrono::steady_clock::time_point> oldest_at;
    for (const LiveAllocation& a : reported) {
        auto [it, fresh] = oldest_at.emplace(std::string(a.tag), a.allocated_at);
        if (!fresh) it->second = std::min(it->second, a.allocated_at);
        EXPECT_GE(a.allocated_at, t0);
        EXPECT_LE(a.allocated_at, t1);
    }
    auto ns_between = [](auto from, auto to) {
        return static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count());
    };

    const auto before_report = std::chrono::steady_clock::now();
    const LeakReport report = tracking.leak_report();
    const auto after_report = std::chrono::steady_clock::now();
    EXPECT_EQ(report.count, live.size());
    ASSERT_EQ(report.groups.size(), want_groups.size());
    std::uint64_t bytes = 0;
    for (const LeakGroup& g : report.groups) {
        ASSERT_TRUE(want_groups.count(g.tag)) << g.tag;
        EXPECT_EQ(g.count, want_groups[g.tag].first) << g.tag;
        EXPECT_EQ(g.bytes, want_groups[g.tag].second) << g.tag;
        // The age is of the group's oldest block, measured while the report was made.
        EXPECT_GE(g.oldest_age_ns, ns_between(oldest_at[g.tag], before_report)) << g.tag;
        EXPECT_LE(g.oldest_age_ns, ns_between(oldest_at[g.tag], after_report)) << g.tag;
        bytes += g.bytes;
    }
    EXPECT_EQ(report.bytes, bytes);
    for (std::size_t i = 1; i < report.groups.size(); ++i) {
        EXPECT_GE(report.groups[i - 1].bytes, report.groups[i].bytes);
    }
    const std::string text = tracking.format_leak_report();
    for (const auto& [tag, g] : want_groups) {
        EXPECT_NE(text.find(tag.empty() ? "(untagged)" : tag), std::string::npos) << text;
    }

    live.clear();
    EXPECT_TRUE(tracking.leak_report().empty());
    EXPECT_TRUE(tracking.live_allocations().empty());
    EXPECT_EQ(tracking.format_leak_report(), "");
}

TEST(Tracking, CapturesTheAllocatingStackWhenAsked) {
    MallocUpstream upstream;
    Tracking tracking(upstream, {.capture_stack_traces = true, .stack_depth = 8});
    EXPECT_TRUE(tracking.captures_stack_traces());
    Block b = tracking.allocate({.bytes = 64, .tag = "traced"});
    const std::vector<LiveAllocation> live = tracking.live_allocations();
    ASSERT_EQ(live.size(), 1U);
    EXPECT_FALSE(live[0].stack.empty());
    EXPECT_LE(live[0].stack.size(), 8U);
    const LeakReport report = tracking.leak_report();
    ASSERT_EQ(report.groups.size(), 1U);
    EXPECT_EQ(report.groups[0].oldest_stack, live[0].stack);
    EXPECT_NE(tracking.format_leak_report().find("at "), std::string::npos);
}

TEST(Tracking, ReportsLeaksAtDestructionThroughTheLog) {
    MallocUpstream upstream;
    const log::Level saved = log::level();
    log::set_level(log::Level::Warn);
    RawBlock leaked;
    testing::internal::CaptureStderr();
    {
        Tracking tracking(upstream, {.capture_stack_traces = false});
        leaked = tracking.allocate_raw({.bytes = 3000, .tag = "leaky.buffer"});
        Block freed = tracking.allocate({.bytes = 10, .tag = "freed.buffer"});
    }
    const std::string err = testing::internal::GetCapturedStderr();
    upstream.deallocate_raw(leaked);  // the Tracking is gone; give it back below it

    EXPECT_NE(err.find("leaky.buffer"), std::string::npos) << err;
    EXPECT_EQ(err.find("freed.buffer"), std::string::npos) << err;

    testing::internal::CaptureStderr();
    {
        Tracking quiet(upstream, {.capture_stack_traces = false, .report_at_destruction = false});
        leaked = quiet.allocate_raw({.bytes = 3000, .tag = "leaky.buffer"});
    }
    {
        Tracking clean(upstream, {.capture_stack_traces = false});
        Block b = clean.allocate({.bytes = 1, .tag = "fine"});
    }
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
    upstream.deallocate_raw(leaked);
    log::set_level(saved);
}

// ----- Stacked and concurrent ------------------------------------------------------------

TEST(AdaptorThreads, FourThreadsNeverExceedTheLimitAndBalance) {
    const std::uint64_t base_seed = test::seed();
    MallocUpstream upstream;
    const std::uint64_t limit = 256 * kKiB;
    Budget budget(
        upstream,
        {.limit_bytes = limit, .watermark_bytes = limit / 2, .on_watermark = [](const BudgetWatermark&) {}});
    Statistics stats(budget);
    Tracking tracking(stats, {.capture_stack_traces = false});

    constexpr int kThreads = 4;
    const std::uint64_t ops = test::scaled(3000);
    std::atomic<std::uint64_t> made{0};
    std::atomic<std::uint64_t> refused{0};
    std::atomic<bool> over_limit{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            std::mt19937_64 rng(base_seed + static_cast<std::uint64_t>(t));
            std::vector<Block> mine;
            for (std::uint64_t i = 0; i < ops; ++i) {
                if (mine.empty() || std::uniform_int_distribution<int>(0, 99)(rng) < 55) {
                    const std::uint64_t bytes =
                        std::uniform_int_distribution<std::uint64_t>(1, 16 * kKiB)(rng);
                    const std::string_view tag = kTags[std::uniform_int_distribution<std::size_t>(0, 4)(rng)];
                    try {
                        mine.push_back(tracking.allocate({.bytes = bytes, .tag = tag}));
                        made.fetch_add(1, std::memory_order_relaxed);
                    } catch (const OutOfMemory&) {
                        refused.fetch_add(1, std::memory_order_relaxed);
                    }
                } else {
                    const std::size_t k = std::uniform_int_distribution<std::size_t>(0, mine.size() - 1)(rng);
                    mine[k] = std::move(mine.back());
                    mine.pop_back();
                }
                if (budget.bytes_used() > limit) over_limit = true;
            }
        });
    }
    for (std::thread& th : threads) th.join();

    EXPECT_FALSE(over_limit.load());
    EXPECT_LE(upstream.peak_live_bytes(), limit);
    EXPECT_GT(refused.load(), 0U) << "the limit should have been reached (else the test proves little)";
    const StatisticsSnapshot s = stats.snapshot();
    EXPECT_EQ(s.total.current_bytes, 0U);
    EXPECT_EQ(s.total.current_count, 0U);
    EXPECT_EQ(s.total.allocation_count, made.load());
    EXPECT_LE(s.total.peak_bytes, limit);
    std::uint64_t per_tag_made = 0;
    for (const auto& [tag, c] : s.by_tag) {
        EXPECT_EQ(c.current_bytes, 0U) << tag;
        per_tag_made += c.allocation_count;
    }
    EXPECT_EQ(per_tag_made, made.load());
    EXPECT_EQ(budget.bytes_used(), 0U);
    EXPECT_EQ(tracking.live_count(), 0U);
    EXPECT_EQ(upstream.live_count(), 0U);
}

TEST(AdaptorThreads, RetryingOverABudgetUnderContention) {
    const std::uint64_t base_seed = test::seed();
    MallocUpstream upstream;
    const std::uint64_t limit = 64 * kKiB;
    Budget budget(upstream, {.limit_bytes = limit});
    // Each thread evicts from its own cache; the callback only touches the caller's.
    thread_local std::vector<Block>* cache = nullptr;
    OnOutOfMemory retrying(budget, {.on_out_of_memory = [](const OutOfMemory&, std::uint64_t) {
                               if (cache == nullptr || cache->empty()) return false;
                               cache->pop_back();
                               return true;
                           }});
    Statistics stats(retrying);
    std::vector<std::thread> threads;
    const std::uint64_t ops = test::scaled(2000);
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            std::mt19937_64 rng(base_seed + static_cast<std::uint64_t>(t));
            std::vector<Block> mine;
            cache = &mine;
            for (std::uint64_t i = 0; i < ops; ++i) {
                const std::uint64_t bytes = std::uniform_int_distribution<std::uint64_t>(1, 8 * kKiB)(rng);
                try {
                    // Allocate first: the callback may pop from `mine` meanwhile.
                    Block b = stats.allocate({.bytes = bytes, .tag = "cache"});
                    mine.insert(mine.begin(), std::move(b));
                } catch (const OutOfMemory&) {  // other threads hold the rest
                }
                EXPECT_LE(budget.bytes_used(), limit);
            }
            cache = nullptr;
        });
    }
    for (std::thread& th : threads) th.join();
    EXPECT_GT(retrying.retry_count(), 0U);
    EXPECT_EQ(stats.total().current_bytes, 0U);
    EXPECT_EQ(budget.bytes_used(), 0U);
    EXPECT_EQ(upstream.live_count(), 0U);
}

}  // namespace
}  // namespace outcore::alloc
