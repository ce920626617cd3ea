// Tlsf: placement properties, exhaustion, merging, and a random stress against a
// reference set of live ranges with validate() after every step.
#include "outcore/alloc/tlsf.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <ostream>
#include <random>
#include <vector>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "support/test_seed.hpp"

namespace outcore::alloc {
namespace {

// Live ranges [offset, end) keyed by offset: the reference the allocator is checked against.
class ReferenceRanges {
public:
    /// Adds a range; fails the test if it overlaps a live one.
    void add(std::uint64_t offset, std::uint64_t bytes) {
        const std::uint64_t end = offset + bytes;
        auto next = ranges_.lower_bound(offset);
        if (next != ranges_.end()) {
            ASSERT_GE(next->first, end)
                << "range [" << offset << ", " << end << ") overlaps one at " << next->first;
        }
        if (next != ranges_.begin()) {
            auto prev = std::prev(next);
            ASSERT_LE(prev->second, offset)
                << "range at " << offset << " overlaps [" << prev->first << ", " << prev->second << ")";
        }
        ranges_.emplace(offset, end);
        offsets_.push_back(offset);
        bytes_ += bytes;
    }
    /// Removes and returns a random live offset.
    std::uint64_t take_random(std::mt19937_64& rng) {
        std::uniform_int_distribution<std::size_t> pick(0, offsets_.size() - 1);
        const std::size_t i = pick(rng);
        const std::uint64_t offset = offsets_[i];
        offsets_[i] = offsets_.back();
        offsets_.pop_back();
        auto it = ranges_.find(offset);
        bytes_ -= it->second - it->first;
        ranges_.erase(it);
        return offset;
    }
    [[nodiscard]] bool empty() const { return offsets_.empty(); }
    [[nodiscard]] std::uint64_t count() const { return offsets_.size(); }
    [[nodiscard]] std::uint64_t bytes() const { return bytes_; }

private:
    std::map<std::uint64_t, std::uint64_t> ranges_;
    std::vector<std::uint64_t> offsets_;
    std::uint64_t bytes_ = 0;
};

// Log-uniform in [1, max_bytes]: small and large sizes equally likely per octave.
std::uint64_t log_uniform_bytes(std::mt19937_64& rng, std::uint64_t max_bytes) {
    std::uniform_real_distribution<double> exponent(0.0, std::log2(static_cast<double>(max_bytes)));
    return std::clamp<std::uint64_t>(static_cast<std::uint64_t>(std::exp2(exponent(rng))), 1, max_bytes);
}

std::uint64_t random_alignment(std::mt19937_64& rng, unsigned max_log2) {
    return std::uint64_t{1} << std::uniform_int_distribution<unsigned>(0, max_log2)(rng);
}

TEST(Tlsf, RejectsBadConstruction) {
    EXPECT_THROW(Tlsf(0), UsageError);
    EXPECT_THROW(Tlsf(Tlsf::kMaxCapacityBytes + 1), UsageError);
    EXPECT_THROW(Tlsf(kMiB, 3), UsageError);
    EXPECT_THROW(Tlsf(kMiB, 0), UsageError);
    EXPECT_NO_THROW(Tlsf(Tlsf::kMaxCapacityBytes).validate());
}

TEST(Tlsf, ZeroBytesAndBadAlignmentAreUsageErrors) {
    Tlsf tlsf(kMiB);
    EXPECT_THROW((void)tlsf.find(0, 1), UsageError);
    EXPECT_THROW((void)tlsf.allocate(0), UsageError);
    EXPECT_THROW((void)tlsf.allocate(64, 0), UsageError);
    EXPECT_THROW((void)tlsf.allocate(64, 48), UsageError);
    tlsf.validate();
    EXPECT_EQ(tlsf.allocation_count(), 0U);
}

TEST(Tlsf, FindIsPureAndCommitTakesThePlacement) {
    std::mt19937_64 rng(test::seed());
    const std::uint64_t capacity = std::uniform_int_distribution<std::uint64_t>(kMiB, kGiB)(rng);
    Tlsf tlsf(capacity, 256);
    const std::uint64_t bytes = std::uniform_int_distribution<std::uint64_t>(1, capacity / 4)(rng);
    const std::uint64_t alignment = random_alignment(rng, 16);
    const auto p = tlsf.find(bytes, alignment);
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(tlsf.allocation_count(), 0U);
    EXPECT_EQ(tlsf.bytes_used(), 0U);
    EXPECT_EQ(tlsf.free_block_count(), 1U);
    EXPECT_EQ(tlsf.find(bytes, alignment)->offset, p->offset) << "find changed state";
    const Allocation a = tlsf.commit(*p);
    EXPECT_EQ(a.offset, p->offset);
    EXPECT_EQ(a.offset % alignment, 0U);
    EXPECT_EQ(a.bytes, align_up(bytes, 256));
    EXPECT_EQ(tlsf.bytes_used(), a.bytes);
    EXPECT_EQ(tlsf.allocation_count(), 1U);
    tlsf.validate();
}

TEST(Tlsf, StalePlacementIsInternalError) {
    Tlsf tlsf(kMiB);
    const auto p = tlsf.find(1000);
    ASSERT_TRUE(p);
    ASSERT_TRUE(tlsf.allocate(1000));  // takes the same free block
    EXPECT_THROW((void)tlsf.commit(*p), InternalError);
    Placement bogus = *p;
    bogus.block_index = 1'000'000;
    EXPECT_THROW((void)tlsf.commit(bogus), InternalError);
    tlsf.validate();
    EXPECT_EQ(tlsf.allocation_count(), 1U);
}

TEST(Tlsf, FreeOfUnknownOrFreedOffsetIsInternalErrorAndChangesNothing) {
    Tlsf tlsf(kMiB);
    const auto a = tlsf.allocate(4096);
    const auto b = tlsf.allocate(4096);
    ASSERT_TRUE(a && b);
    EXPECT_THROW(tlsf.free(a->offset + 1), InternalError);
    EXPECT_THROW(tlsf.free(kMiB * 2), InternalError);
    tlsf.free(a->offset);
    EXPECT_THROW(tlsf.free(a->offset), InternalError);
    tlsf.validate();
    EXPECT_EQ(tlsf.allocation_count(), 1U);
    EXPECT_EQ(tlsf.bytes_used(), 4096U);
}

TEST(Tlsf, FillsExactlyThenReturnsNulloptAndRefillsAFreedHole) {
    std::mt19937_64 rng(test::seed());
    const std::uint64_t granularity = 256;
    const std::uint64_t chunk = granularity * std::uniform_int_distribution<std::uint64_t>(1, 4096)(rng);
    const std::uint64_t count = std::uniform_int_distribution<std::uint64_t>(2, 200)(rng);
    Tlsf tlsf(chunk * count, granularity);
    std::vector<std::uint64_t> offsets;
    for (std::uint64_t i = 0; i < count; ++i) {
        const auto a = tlsf.allocate(chunk, granularity);
        ASSERT_TRUE(a) << "chunk " << i << " of " << count << " did not fit";
        offsets.push_back(a->offset);
    }
    tlsf.validate();
    EXPECT_EQ(tlsf.bytes_free(), 0U);
    EXPECT_EQ(tlsf.largest_free_bytes(), 0U);
    EXPECT_EQ(tlsf.fragmentation(), 0.0);
    EXPECT_FALSE(tlsf.allocate(1)) << "a full Tlsf placed a byte";
    EXPECT_FALSE(tlsf.find(chunk));

    const std::uint64_t hole = offsets[std::uniform_int_distribution<std::size_t>(0, count - 1)(rng)];
    tlsf.free(hole);
    EXPECT_FALSE(tlsf.allocate(chunk + 1)) << "placed more than the only hole holds";
    const auto again = tlsf.allocate(chunk);
    ASSERT_TRUE(again) << "an exact-size hole was not found";
    EXPECT_EQ(again->offset, hole);
    tlsf.validate();
}

TEST(Tlsf, WholeRangeIsAllocatableAtAnyCapacityAndAlignment) {
    std::mt19937_64 rng(test::seed());
    for (int trial = 0; trial < 200; ++trial) {
        const std::uint64_t capacity = log_uniform_bytes(rng, std::uint64_t{1} << 40);
        Tlsf tlsf(capacity);
        const std::uint64_t alignment = random_alignment(rng, 16);
        const auto a = tlsf.allocate(capacity, alignment);
        ASSERT_TRUE(a) << "capacity " << capacity << " alignment " << alignment;
        EXPECT_EQ(a->offset, 0U);
        EXPECT_EQ(tlsf.bytes_free(), 0U);
        tlsf.validate();
        EXPECT_FALSE(tlsf.allocate(1));
        tlsf.free(0);
        EXPECT_FALSE(tlsf.allocate(capacity + 1));
        tlsf.validate();
    }
}

TEST(Tlsf, NeighboursMergeOnFree) {
    Tlsf tlsf(3 * kMiB);
    const auto a = tlsf.allocate(kMiB);
    const auto b = tlsf.allocate(kMiB);
    const auto c = tlsf.allocate(kMiB);
    ASSERT_TRUE(a && b && c);
    EXPECT_EQ(tlsf.free_block_count(), 0U);
    tlsf.free(a->offset);
    tlsf.free(c->offset);
    EXPECT_EQ(tlsf.free_block_count(), 2U) << "a and c are not adjacent";
    EXPECT_EQ(tlsf.largest_free_bytes(), kMiB);
    EXPECT_DOUBLE_EQ(tlsf.fragmentation(), 0.5);
    tlsf.validate();
    tlsf.free(b->offset);
    EXPECT_EQ(tlsf.free_block_count(), 1U) << "three free neighbours did not merge";
    EXPECT_EQ(tlsf.largest_free_bytes(), 3 * kMiB);
    EXPECT_EQ(tlsf.fragmentation(), 0.0);
    tlsf.validate();
}

TEST(Tlsf, AlignedAllocationLeavesItsLeadingGapFree) {
    for (unsigned shift = 1; shift <= 20; ++shift) {
        const std::uint64_t alignment = std::uint64_t{1} << shift;
        // Exactly room for the byte, the gap and the aligned block: only the bounded
        // fallback of find can place these (the padded good-fit search overshoots).
        Tlsf tlsf(2 * alignment);
        ASSERT_TRUE(tlsf.allocate(1));  // puts the free space at offset 1
        const auto a = tlsf.allocate(alignment, alignment);
        ASSERT_TRUE(a) << "alignment " << alignment;
        EXPECT_EQ(a->offset % alignment, 0U);
        EXPECT_EQ(a->offset, alignment) << "took a later aligned spot than the first";
        tlsf.validate();
        // The gap [1, alignment) went back to the free lists and can be used.
        const auto gap = tlsf.allocate(alignment - 1);
        ASSERT_TRUE(gap);
        EXPECT_EQ(gap->offset, 1U);
        EXPECT_EQ(tlsf.bytes_free(), 0U);
        tlsf.validate();
    }
}

TEST(Tlsf, CapacityOfTwoToTheSixtyThree) {
    const std::uint64_t quarter = std::uint64_t{1} << 61;
    Tlsf tlsf(Tlsf::kMaxCapacityBytes, 4096);
    std::vector<Allocation> all;
    for (int i = 0; i < 4; ++i) {
        const auto a = tlsf.allocate(quarter, quarter);
        ASSERT_TRUE(a);
        EXPECT_EQ(a->offset % quarter, 0U);
        all.push_back(*a);
    }
    EXPECT_FALSE(tlsf.allocate(1));
    EXPECT_FALSE(tlsf.allocate(UINT64_MAX));
    tlsf.validate();
    tlsf.free(all[1].offset);
    tlsf.free(all[2].offset);
    EXPECT_EQ(tlsf.largest_free_bytes(), 2 * quarter);
    EXPECT_FALSE(tlsf.allocate(2 * quarter, 2 * quarter)) << "no free range starts at a multiple of 2^62";
    const auto merged = tlsf.allocate(2 * quarter);
    ASSERT_TRUE(merged);
    EXPECT_EQ(merged->offset, quarter);
    tlsf.validate();
    EXPECT_EQ(tlsf.bytes_free(), 0U);
}

TEST(Tlsf, FreeEverythingReturnsToOneRange) {
    std::mt19937_64 rng(test::seed());
    const std::uint64_t capacity = 512 * kMiB;
    Tlsf tlsf(capacity);
    ReferenceRanges live;
    for (int i = 0; i < 2000; ++i) {
        const auto a = tlsf.allocate(log_uniform_bytes(rng, 4 * kMiB), random_alignment(rng, 12));
        if (a) live.add(a->offset, a->bytes);
    }
    ASSERT_GT(live.count(), 10U);
    while (!live.empty()) tlsf.free(live.take_random(rng));
    tlsf.validate();
    EXPECT_EQ(tlsf.allocation_count(), 0U);
    EXPECT_EQ(tlsf.free_block_count(), 1U);
    EXPECT_EQ(tlsf.largest_free_bytes(), capacity);
    EXPECT_EQ(tlsf.bytes_free(), capacity);
    EXPECT_EQ(tlsf.fragmentation(), 0.0);
    const auto whole = tlsf.allocate(capacity);
    ASSERT_TRUE(whole);
    EXPECT_EQ(whole->offset, 0U);
}

TEST(Tlsf, ResetFreesEverything) {
    Tlsf tlsf(kGiB, 256);
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(tlsf.allocate(kMiB + 3));
    tlsf.reset();
    tlsf.validate();
    EXPECT_EQ(tlsf.allocation_count(), 0U);
    EXPECT_EQ(tlsf.largest_free_bytes(), kGiB);
}

struct StressConfig {
    std::uint64_t capacity_bytes;
    std::uint64_t granularity_bytes;
};

std::ostream& operator<<(std::ostream& os, const StressConfig& c) {
    return os << "capacity " << c.capacity_bytes << " B, granularity " << c.granularity_bytes << " B";
}

class TlsfStress : public ::testing::TestWithParam<StressConfig> {};

// Random allocate/find+commit/free, in phases that fill towards exhaustion and
// drain again. After every step: validate(), the statistics equal the reference,
// new ranges are aligned, inside the range and overlap no live one; a nullopt is
// allowed only when no free block is large enough to be sure of a fit.
TEST_P(TlsfStress, RandomOperationsKeepEveryInvariant) {
    const StressConfig cfg = GetParam();
    std::mt19937_64 rng(test::seed());
    Tlsf tlsf(cfg.capacity_bytes, cfg.granularity_bytes);
    ReferenceRanges live;
    const std::uint64_t steps = test::scaled(100'000);
    std::uint64_t failures = 0;
    double allocate_probability = 0.7;
    std::bernoulli_distribution use_find(0.3);
    for (std::uint64_t step = 0; step < steps; ++step) {
        if (step % 1000 == 0) allocate_probability = 1.0 - allocate_probability;
        const bool allocate = live.empty() || std::bernoulli_distribution(allocate_probability)(rng);
        if (allocate) {
            const std::uint64_t bytes = log_uniform_bytes(rng, 64 * kMiB);
            const std::uint64_t alignment = random_alignment(rng, 12);
            std::optional<Allocation> a;
            if (use_find(rng)) {
                const auto before = tlsf.bytes_used();
                const auto p = tlsf.find(bytes, alignment);
                ASSERT_EQ(tlsf.bytes_used(), before);
                if (p) a = tlsf.commit(*p);
            } else {
                a = tlsf.allocate(bytes, alignment);
            }
            if (a) {
                ASSERT_EQ(a->offset % alignment, 0U) << "step " << step;
                ASSERT_EQ(a->bytes, align_up(bytes, cfg.granularity_bytes));
                ASSERT_LE(a->offset + a->bytes, cfg.capacity_bytes);
                live.add(a->offset, a->bytes);
                if (::testing::Test::HasFatalFailure()) return;
            } else {
                ++failures;
                ASSERT_LT(tlsf.largest_free_bytes(), tlsf.sure_fit_bytes(bytes, alignment))
                    << "step " << step << ": nullopt although a block large enough is free";
            }
        } else {
            tlsf.free(live.take_random(rng));
        }
        ASSERT_NO_THROW(tlsf.validate()) << "step " << step;
        ASSERT_EQ(tlsf.allocation_count(), live.count());
        ASSERT_EQ(tlsf.bytes_used(), live.bytes());
    }
    EXPECT_GT(failures, 0U) << "the stress never reached exhaustion";
    while (!live.empty()) tlsf.free(live.take_random(rng));
    tlsf.validate();
    EXPECT_EQ(tlsf.free_block_count(), 1U);
    EXPECT_EQ(tlsf.largest_free_bytes(), cfg.capacity_bytes);
}

INSTANTIATE_TEST_SUITE_P(Configs, TlsfStress,
                         ::testing::Values(StressConfig{512 * kMiB, 1}, StressConfig{512 * kMiB + 12345, 256},
                                           StressConfig{768 * kMiB, 4096}),
                         [](const auto& param_info) {
                             return "granularity" + std::to_string(param_info.param.granularity_bytes);
                         });

}  // namespace
}  // namespace outcore::alloc
