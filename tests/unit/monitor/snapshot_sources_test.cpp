// What alloc::Budget and swap::TieredStore add to monitor::snapshot(): a Budget its
// limit (to its tier's budget, following set_limit); a store its host budget, pageable
// host copies, the disk tier and the swap counters, and never the device bytes or the
// device budget again (the Device and the store's own Budget count those), so every
// gauge's change equals the store's own stats exactly.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "outcore/alloc/budget.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/registry.hpp"
#include "outcore/monitor/snapshot.hpp"
#include "support/test_seed.hpp"

// A real device, not test::FaultyDevice: a wrapper device and the one it wraps are two
// Devices, and both add the same bytes to the snapshot.

#if OUTCORE_WITH_SWAP
#include <unistd.h>

#include <filesystem>

#include "outcore/swap/store.hpp"
#endif

namespace outcore::monitor {
namespace {

TEST(SnapshotSources, BudgetAddsItsLimitToItsTier) {
    auto device = open_device("cpu");
    const Snapshot base = snapshot();
    {
        alloc::Budget device_budget(*device, {.limit_bytes = 5 * kMiB, .kind = MemoryKind::Device});
        alloc::Budget pinned_budget(*device, {.limit_bytes = 3 * kMiB, .kind = MemoryKind::HostPinned});
        Snapshot s = snapshot();
        EXPECT_EQ(s.device.budget_bytes - base.device.budget_bytes, 5 * kMiB);
        EXPECT_EQ(s.host.budget_bytes - base.host.budget_bytes, 3 * kMiB);
        device_budget.set_limit(7 * kMiB);
        s = snapshot();
        EXPECT_EQ(s.device.budget_bytes - base.device.budget_bytes, 7 * kMiB);
        // The bytes are the Device's to count: allocating through the Budget counts once.
        const Block b = device_budget.allocate({.bytes = 2 * kMiB, .kind = MemoryKind::Device});
        s = snapshot();
        EXPECT_EQ(s.device.resident_bytes - base.device.resident_bytes, b.bytes());
    }
    const Snapshot after = snapshot();
    EXPECT_EQ(after.device.budget_bytes, base.device.budget_bytes);
    EXPECT_EQ(after.host.budget_bytes, base.host.budget_bytes);
}

#if OUTCORE_WITH_SWAP

/// A directory for the spill file, removed afterwards.
struct SpillDir {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("outcore-snapshot-" + std::to_string(::getpid()));
    SpillDir() { std::filesystem::create_directories(path); }
    ~SpillDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};

TEST(SnapshotSources, StoreAddsWhatOnlyItKnowsAndNothingTwice) {
    std::mt19937_64 rng(test::seed());
    SpillDir dir;
    auto device = open_device("cpu");
    const Snapshot base = snapshot();
    swap::StoreOptions o;
    o.device_budget_bytes = 4 * kMiB;
    o.host_budget_bytes = 6 * kMiB;
    o.pinned_pool_bytes = 2 * kMiB;  // two pinned slots (the Device's bytes), the rest pageable
    o.unit_bytes = kMiB;
    o.spill_dir = dir.path;
    o.direct_io = false;
    o.wash_queue_units = 0;  // no washer: nothing moves between our reads
    swap::TieredStore store(*device, o);

    // Random traffic: puts spill to disk, acquires swap in and evict.
    std::vector<swap::BlockId> ids;
    std::vector<std::byte> bytes(kMiB);
    for (auto& b : bytes) b = static_cast<std::byte>(rng());
    for (int i = 0; i < 12; ++i) ids.push_back(store.put(bytes));
    std::uniform_int_distribution<std::size_t> pick(0, ids.size() - 1);
    for (int i = 0; i < 40; ++i) {
        const swap::Pin pin =
            store.acquire(ids[pick(rng)], i % 3 == 0 ? swap::Access::Write : swap::Access::Read);
    }
    store.drain();

    const Snapshot s = snapshot();
    const swap::StoreStats st = store.stats();
    ASSERT_GT(st.disk.resident_bytes, 0U) << "the scenario must reach the disk tier";
    ASSERT_GT(st.device.swap_in_count, 0U);
    ASSERT_GT(st.device.clean_evictions + st.device.dirty_evictions, 0U);
    // Device: the Device counts the unit buffers, the store's Budget adds the budget.
    EXPECT_EQ(s.device.resident_bytes - base.device.resident_bytes, st.device.resident_bytes);
    EXPECT_EQ(s.device.budget_bytes - base.device.budget_bytes, o.device_budget_bytes);
    // Host: the pinned slots (the Device's HostPinned bytes) plus the pageable copies.
    const std::uint64_t pinned_slots = device->allocated_bytes(MemoryKind::HostPinned);
    EXPECT_LE(pinned_slots, o.pinned_pool_bytes);
    EXPECT_GE(s.host.resident_bytes - base.host.resident_bytes, st.host.resident_bytes)
        << "every host copy is counted";
    EXPECT_LE(s.host.resident_bytes - base.host.resident_bytes, st.host.resident_bytes + pinned_slots)
        << "no host copy is counted twice";
    EXPECT_EQ(s.host.budget_bytes - base.host.budget_bytes, o.host_budget_bytes);
    // Disk: only the store knows it.
    EXPECT_EQ(s.disk.resident_bytes - base.disk.resident_bytes, st.disk.resident_bytes);
    EXPECT_EQ(s.disk.peak_bytes - base.disk.peak_bytes, st.disk.peak_bytes);
    EXPECT_EQ(s.disk.budget_bytes - base.disk.budget_bytes, o.disk_limit_bytes);
    // Counters.
    EXPECT_EQ(s.swap_in_bytes - base.swap_in_bytes, st.device.swap_in_bytes + st.host.swap_in_bytes);
    EXPECT_EQ(s.swap_in_count - base.swap_in_count, st.device.swap_in_count + st.host.swap_in_count);
    EXPECT_EQ(s.swap_out_bytes - base.swap_out_bytes, st.device.swap_out_bytes + st.disk.swap_in_bytes);
    EXPECT_EQ(s.swap_out_count - base.swap_out_count, st.device.swap_out_count + st.disk.swap_in_count);
    EXPECT_EQ(s.evictions - base.evictions, st.device.clean_evictions + st.device.dirty_evictions +
                                                st.host.clean_evictions + st.host.dirty_evictions);
    EXPECT_EQ(s.thrash_count - base.thrash_count, st.thrash_count);
    EXPECT_EQ(s.oom_retries - base.oom_retries, st.oom_retries);
    EXPECT_EQ(s.checksum_failures - base.checksum_failures, st.checksum_failures);
}

#endif

}  // namespace
}  // namespace outcore::monitor
