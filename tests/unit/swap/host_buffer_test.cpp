// Tests of the host tier's memory (src/swap/store_units.hpp): pinned slots first, then
// pageable buffers, and unit-sized pageable buffers kept for reuse (a fresh buffer
// page-faults on its first write) up to PinnedPool::kKeptPageable.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "outcore/backends/cpu.hpp"
#include "outcore/core/size.hpp"
#include "swap/store_units.hpp"

namespace outcore::swap::detail {
namespace {

constexpr std::uint64_t kSlot = 64 * kKiB;

TEST(HostBuffer, PinnedSlotsFirstThenPageable) {
    auto device = cpu::make_cpu_device({.total_memory_bytes = 64 * kMiB});
    PinnedPool pool(*device, kSlot, 1);
    HostBuffer pinned = HostBuffer::allocate(pool, kSlot);
    EXPECT_TRUE(pinned.pinned());
    HostBuffer pageable = HostBuffer::allocate(pool, kSlot);
    EXPECT_FALSE(pageable.pinned());
    ASSERT_TRUE(pageable);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(pageable.data()) % kSpillAlignment, 0U);
    pinned.reset();
    EXPECT_EQ(pool.free_count(), 1U);
    EXPECT_EQ(pool.kept_pageable_count(), 0U) << "a pinned slot goes back to the pinned free list";
}

TEST(HostBuffer, UnitSizedPageableBuffersAreKeptAndReused) {
    auto device = cpu::make_cpu_device({.total_memory_bytes = 64 * kMiB});
    PinnedPool pool(*device, kSlot, 0);  // no pinned slots: everything is pageable
    HostBuffer a = HostBuffer::allocate(pool, kSlot);
    std::byte* const first = a.data();
    a.reset();
    EXPECT_EQ(pool.kept_pageable_count(), 1U);
    HostBuffer b = HostBuffer::allocate(pool, kSlot);
    EXPECT_EQ(b.data(), first) << "the kept buffer is handed out again";
    EXPECT_EQ(pool.kept_pageable_count(), 0U);
    // A tail unit (not slot-sized) is never kept.
    HostBuffer tail = HostBuffer::allocate(pool, kSlot / 2);
    tail.reset();
    EXPECT_EQ(pool.kept_pageable_count(), 0U);
    // At most kKeptPageable are kept; the rest are freed.
    std::vector<HostBuffer> many;
    for (std::uint32_t i = 0; i < PinnedPool::kKeptPageable + 3; ++i)
        many.push_back(HostBuffer::allocate(pool, kSlot));
    many.clear();
    EXPECT_EQ(pool.kept_pageable_count(), PinnedPool::kKeptPageable);
    // Moving a buffer moves the duty to give it back.
    HostBuffer moved = HostBuffer::allocate(pool, kSlot);
    EXPECT_EQ(pool.kept_pageable_count(), PinnedPool::kKeptPageable - 1);
    HostBuffer target = std::move(moved);
    moved.reset();
    EXPECT_EQ(pool.kept_pageable_count(), PinnedPool::kKeptPageable - 1);
    target.reset();
    EXPECT_EQ(pool.kept_pageable_count(), PinnedPool::kKeptPageable);
}

}  // namespace
}  // namespace outcore::swap::detail
