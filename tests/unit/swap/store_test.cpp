// TieredStore basics: round trips across unit boundaries and tiers, acquire
// Read/Write/Discard semantics, create, erase, read/write, budgets, prefetch, the
// washer, backend out-of-memory retries, thrash detection, "every unit pinned"
// (OutOfMemory, never a hang) and the errors of every call.
#include "outcore/swap/store.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/core/size.hpp"
#include "support/test_seed.hpp"
#include "unit/swap/store_test_support.hpp"

namespace outcore::swap {
namespace {

using namespace store_test;  // NOLINT(google-build-using-namespace): test helpers

/// Runs `fn` on another thread; a call that does not return within `limit` is a hang:
/// the test process aborts (a hung test would otherwise stall the whole suite).
template <typename F>
auto within(std::chrono::seconds limit, F&& fn) {
    auto future = std::async(std::launch::async, std::forward<F>(fn));
    if (future.wait_for(limit) != std::future_status::ready) {
        std::fprintf(stderr, "FATAL: call did not return within %lld s (a deadlock)\n",
                     static_cast<long long>(limit.count()));
        std::abort();
    }
    return future.get();
}

constexpr std::chrono::seconds kHangLimit{60};

class StoreTest : public ::testing::Test {
protected:
    StoreOptions options(std::uint64_t device_units, std::uint64_t host_units, bool disk = true) const {
        return {.device_budget_bytes = device_units * kUnit,
                .host_budget_bytes = host_units * kUnit,
                .pinned_pool_bytes = 2 * kUnit,
                .unit_bytes = kUnit,
                .spill_dir = disk ? dir_.path() : std::filesystem::path{},
                .direct_io = false,
                .wash_queue_units = 0};
    }

    std::mt19937_64 rng_{test::seed()};
    TempDir dir_;
    std::unique_ptr<test::FaultyDevice> device_ = make_device();
};

TEST_F(StoreTest, PutReadRoundTripsAcrossUnitBoundariesAndTiers) {
    // Budgets far below the data: objects end up split over device, host and disk.
    TieredStore store(*device_, options(2, 3));
    const std::vector<std::uint64_t> sizes = {
        1, 4095, kUnit - 1, kUnit, kUnit + 1, 2 * kUnit + kUnit / 2, 3 * kUnit};
    std::vector<std::pair<BlockId, std::vector<std::byte>>> stored;
    for (const std::uint64_t n : sizes) {
        std::vector<std::byte> bytes = random_bytes(rng_, n);
        const BlockId id = store.put(bytes);
        EXPECT_TRUE(id.valid());
        EXPECT_EQ(store.size(id), n);
        stored.emplace_back(id, std::move(bytes));
    }
    EXPECT_GT(store.stats().disk.resident_bytes, 0U) << "the host budget is 3 units: some must have spilled";
    for (const auto& [id, bytes] : stored)
        EXPECT_TRUE(same_bytes(read_all(store, id), bytes)) << "size " << bytes.size();
    // Through the device: each object pinned in turn holds its bytes there.
    for (const auto& [id, bytes] : stored) {
        if (bytes.size() > 2 * kUnit) continue;  // larger than the device budget
        const Pin pin = store.acquire(id, Access::Read);
        ASSERT_EQ(pin.views().size(), (bytes.size() + kUnit - 1) / kUnit);
        EXPECT_TRUE(same_bytes(device_bytes(pin), bytes));
    }
    for (const auto& [id, bytes] : stored) EXPECT_TRUE(same_bytes(read_all(store, id), bytes));
    const StoreStats s = store.stats();
    EXPECT_EQ(s.objects, sizes.size());
    EXPECT_EQ(s.checksum_failures, 0U);
    expect_balanced(store, *device_);
}

TEST_F(StoreTest, ObjectLargerThanTheDeviceBudgetIsOutOfMemoryOnAcquire) {
    TieredStore store(*device_, options(2, 4));
    const BlockId id = store.put(random_bytes(rng_, 2 * kUnit + 1));
    EXPECT_THROW((void)store.acquire(id, Access::Read), OutOfMemory);
    expect_balanced(store, *device_);
}

TEST_F(StoreTest, ReadAcquireKeepsLowerCopiesSoEvictionIsClean) {
    TieredStore store(*device_, options(1, 4));
    const std::vector<std::byte> a = random_bytes(rng_, kUnit);
    const BlockId id = store.put(a);
    { const Pin pin = store.acquire(id, Access::Read); }
    const StoreStats before = store.stats();
    EXPECT_EQ(before.device.swap_in_count, 1U);
    // A second object pushes the first off the device: clean, so no transfer down.
    const BlockId other = store.put(random_bytes(rng_, kUnit));
    { const Pin pin = store.acquire(other, Access::Read); }
    const StoreStats after = store.stats();
    EXPECT_EQ(after.device.clean_evictions, before.device.clean_evictions + 1);
    EXPECT_EQ(after.device.dirty_evictions, before.device.dirty_evictions);
    EXPECT_EQ(after.device.swap_out_bytes, before.device.swap_out_bytes);
    EXPECT_TRUE(same_bytes(read_all(store, id), a));
    expect_balanced(store, *device_);
}

TEST_F(StoreTest, WriteAcquireMakesLowerCopiesStale) {
    TieredStore store(*device_, options(1, 2));
    const std::uint64_t n = kUnit - 100;  // a tail unit, not a whole one
    const BlockId id = store.put(random_bytes(rng_, n));
    const std::vector<std::byte> written = random_bytes(rng_, n);
    {
        const Pin pin = store.acquire(id, Access::Write);
        write_through(pin, 0, written, kUnit);
    }
    // Evict it from the device (dirty: written back), then from the host (to disk).
    { const Pin pin = store.acquire(store.put(random_bytes(rng_, kUnit)), Access::Read); }
    EXPECT_EQ(store.stats().device.dirty_evictions, 1U);
    (void)store.put(random_bytes(rng_, kUnit));
    (void)store.put(random_bytes(rng_, kUnit));
    EXPECT_TRUE(same_bytes(read_all(store, id), written))
        << "read after eviction must return the bytes written on the device";
    // And back up to the device from wherever it is now.
    {
        const Pin pin = store.acquire(id, Access::Read);
        EXPECT_TRUE(same_bytes(device_bytes(pin), written));
    }
    expect_balanced(store, *device_);
}

TEST_F(StoreTest, WriteThroughAQueueUploadIsKeptToo) {
    TieredStore store(*device_, options(2, 4));
    const std::uint64_t n = 2 * kUnit - 7;
    std::vector<std::byte> expected = random_bytes(rng_, n);
    const BlockId id = store.put(expected);
    const std::vector<std::byte> patch = random_bytes(rng_, kUnit / 2);
    const std::uint64_t offset = kUnit - kUnit / 4;  // straddles the unit boundary
    {
        const Pin pin = store.acquire(id, Access::Write);
        upload_through(*device_, pin, offset, patch, kUnit);
    }
    std::copy(patch.begin(), patch.end(), expected.begin() + static_cast<std::ptrdiff_t>(offset));
    store.set_budget(Tier::Device, 1);  // everything off the device
    store.set_budget(Tier::Device, 2 * kUnit);
    EXPECT_EQ(store.stats().device.resident_bytes, 0U);
    EXPECT_TRUE(same_bytes(read_all(store, id), expected));
    expect_balanced(store, *device_);
}

TEST_F(StoreTest, DiscardAcquireDoesNotSwapIn) {
    TieredStore store(*device_, options(2, 4));
    const std::uint64_t n = kUnit + 12345;
    const BlockId id = store.put(random_bytes(rng_, n));
    const std::vector<std::byte> fresh = random_bytes(rng_, n);
    const StoreStats before = store.stats();
    {
        const Pin pin = store.acquire(id, Access::Discard);
        EXPECT_EQ(pin.bytes(), n);
        write_through(pin, 0, fresh, kUnit);
    }
    const StoreStats after = store.stats();
    EXPECT_EQ(after.device.swap_in_count, before.device.swap_in_count)
        << "Discard must not copy the old bytes in";
    EXPECT_EQ(after.host.resident_bytes, 0U) << "the old host copy is stale after Discard";
    store.set_budget(Tier::Device, 1);
    EXPECT_TRUE(same_bytes(read_all(store, id), fresh));
    expect_balanced(store, *device_);
}

TEST_F(StoreTest, CreateReadsAsZerosUntilWritten) {
    TieredStore store(*device_, options(3, 4));
    const std::uint64_t n = 2 * kUnit + 333;
    const BlockId id = store.create(n);
    const std::vector<std::byte> zeros(n);
    EXPECT_TRUE(same_bytes(read_all(store, id), zeros));
    EXPECT_EQ(store.stats().host.resident_bytes, 0U) << "create moves no data";
    {
        const Pin pin = store.acquire(id, Access::Read);
        EXPECT_TRUE(same_bytes(device_bytes(pin), zeros));
    }
    // A zero unit's device copy is clean: evicting it writes nothing down.
    store.set_budget(Tier::Device, 1);
    EXPECT_EQ(store.stats().device.swap_out_bytes, 0U);
    std::vector<std::byte> bytes = random_bytes(rng_, n);
    store.write(id, bytes);
    EXPECT_TRUE(same_bytes(read_all(store, id), bytes));
    expect_balanced(store, *device_);
}

TEST_F(StoreTest, WriteReplacesBytesInEveryTier) {
    TieredStore store(*device_, options(2, 2));
    const std::uint64_t n = kUnit + kUnit / 3;
    const BlockId id = store.put(random_bytes(rng_, n));
    { const Pin pin = store.acquire(id, Access::Read); }  // copies on device and host
    (void)store.put(random_bytes(rng_, 2 * kUnit));       // drops its host copies (on the device too)
    const std::vector<std::byte> bytes = random_bytes(rng_, n);
    store.write(id, bytes);
    EXPECT_TRUE(same_bytes(read_all(store, id), bytes));
    {
        const Pin pin = store.acquire(id, Access::Read);
        EXPECT_TRUE(same_bytes(device_bytes(pin), bytes)) << "a stale device copy must not survive write()";
    }
    expect_balanced(store, *device_);
}

TEST_F(StoreTest, EraseForgetsTheObjectInEveryTier) {
    TieredStore store(*device_, options(1, 2));
    std::vector<BlockId> ids;
    for (int i = 0; i < 4; ++i) ids.push_back(store.put(random_bytes(rng_, kUnit)));
    { const Pin pin = store.acquire(ids[0], Access::Write); }
    ASSERT_GT(store.stats().disk.resident_bytes, 0U);
    for (const BlockId id : ids) store.erase(id);
    const StoreStats s = store.stats();
    EXPECT_EQ(s.objects, 0U);
    EXPECT_EQ(s.units, 0U);
    EXPECT_EQ(s.device.resident_bytes, 0U);
    EXPECT_EQ(s.host.resident_bytes, 0U);
    EXPECT_EQ(s.disk.resident_bytes, 0U);
    EXPECT_THROW((void)store.size(ids[0]), UsageError);
    expect_balanced(store, *device_);
}

TEST_F(StoreTest, ErrorsOfEveryCall) {
    TieredStore store(*device_, options(2, 4));
    const BlockId unknown{12345};
    std::vector<std::byte> buffer(16);
    EXPECT_THROW((void)store.acquire(unknown, Access::Read), UsageError);
    EXPECT_THROW(store.read(unknown, buffer), UsageError);
    EXPECT_THROW(store.write(unknown, buffer), UsageError);
    EXPECT_THROW(store.erase(unknown), UsageError);
    EXPECT_THROW((void)store.size(unknown), UsageError);
    EXPECT_THROW(store.prefetch(unknown), UsageError);
    const std::vector<BlockId> order{unknown};
    EXPECT_THROW(store.prefetch(order), UsageError);
    EXPECT_THROW((void)store.put({}), UsageError);
    EXPECT_THROW((void)store.create(0), UsageError);

    const BlockId id = store.put(random_bytes(rng_, 100));
    std::vector<std::byte> wrong(99);
    EXPECT_THROW(store.read(id, wrong), UsageError);
    EXPECT_THROW(store.write(id, wrong), UsageError);
    {
        const Pin pin = store.acquire(id, Access::Read);
        std::vector<std::byte> right(100);
        EXPECT_THROW(store.erase(id), UsageError) << "erase of a pinned object";
        EXPECT_THROW(store.write(id, right), UsageError) << "write to a pinned object";
        store.read(id, right);  // reading a pinned object is fine
    }
    store.erase(id);
    EXPECT_THROW(store.erase(id), UsageError) << "erase twice";

    EXPECT_THROW(store.set_budget(Tier::Disk, kUnit), UsageError);
    EXPECT_THROW(store.set_budget(Tier::Device, 0), UsageError);
    StoreOptions bad_unit = options(2, 4);
    bad_unit.unit_bytes = kUnit - 1;
    EXPECT_THROW(TieredStore(*device_, bad_unit), UsageError);
    bad_unit.unit_bytes = 64 * kMiB + 1;
    EXPECT_THROW(TieredStore(*device_, bad_unit), UsageError);
    EXPECT_THROW(TieredStore(*device_, {.unit_bytes = kUnit, .spill_dir = dir_.path() / "missing"}), IoError);
    expect_balanced(store, *device_);
}

TEST_F(StoreTest, AbsurdSizesAreRefusedNeverACrash) {
    TieredStore store(*device_, options(2, 4));
    const std::uint64_t sizes[] = {
        0, 1, 1ULL << 31, 1ULL << 32, 46341ULL * 46341ULL, 65536ULL * 65536ULL * 8, 1ULL << 63, SIZE_MAX};
    for (const std::uint64_t n : sizes) {
        try {
            const BlockId id = store.create(n);
            EXPECT_EQ(store.size(id), n);
            store.erase(id);
        } catch (const UsageError&) {
            EXPECT_EQ(n, 0U);
        } catch (const OutOfMemory& e) {
            EXPECT_GE(n, 1ULL << 31) << e.what();
        }
    }
    expect_balanced(store, *device_);
}

TEST_F(StoreTest, EveryUnitPinnedIsOutOfMemoryNeverAHang) {
    TieredStore store(*device_, options(2, 8));
    const BlockId a = store.put(random_bytes(rng_, kUnit));
    const BlockId b = store.put(random_bytes(rng_, kUnit));
    const BlockId c = store.put(random_bytes(rng_, kUnit));
    const Pin pa = store.acquire(a, Access::Read);
    const Pin pb = store.acquire(b, Access::Write);
    const std::string message = within(kHangLimit, [&] {
        try {
            (void)store.acquire(c, Access::Read);
        } catch (const OutOfMemory& e) {
            EXPECT_EQ(e.tier(), Tier::Device);
            EXPECT_EQ(e.requested_bytes(), kUnit);
            return std::string(e.what());
        }
        return std::string("no error");
    });
    EXPECT_NE(message.find("pinned"), std::string::npos) << message;
    // The same from the prefetcher: it gives up instead of waiting.
    store.prefetch(c);
    within(kHangLimit, [&] { store.drain(); });
    EXPECT_EQ(store.stats().prefetch_failures, 1U);
    // And a budget below the pinned bytes is refused, leaving the budget as it was.
    EXPECT_THROW(store.set_budget(Tier::Device, kUnit), OutOfMemory);
    EXPECT_EQ(store.stats().device.budget_bytes, 2 * kUnit);
    expect_balanced(store, *device_);
}

TEST_F(StoreTest, PinsOfAnotherThreadAreOutOfMemoryNeverAHang) {
    TieredStore store(*device_, options(2, 8));
    const BlockId big = store.put(random_bytes(rng_, 2 * kUnit));
    const BlockId small = store.put(random_bytes(rng_, kUnit));
    std::promise<void> pinned;
    std::promise<void> done;
    std::thread holder([&] {
        const Pin pin = store.acquire(small, Access::Read);
        pinned.set_value();
        done.get_future().wait();
    });
    pinned.get_future().wait();
    within(kHangLimit, [&] { EXPECT_THROW((void)store.acquire(big, Access::Read), OutOfMemory); });
    done.set_value();
    holder.join();
    const Pin pin = store.acquire(big, Access::Read);  // fits once the other pin is gone
    EXPECT_EQ(pin.views().size(), 2U);
}

TEST_F(StoreTest, SetBudgetEvictsDownAndBackUp) {
    TieredStore store(*device_, options(4, 8));
    std::vector<std::pair<BlockId, std::vector<std::byte>>> stored;
    for (int i = 0; i < 4; ++i) {
        std::vector<std::byte> bytes = random_bytes(rng_, kUnit);
        const BlockId id = store.put(bytes);
        { const Pin pin = store.acquire(id, Access::Write); }
        stored.emplace_back(id, std::move(bytes));
    }
    EXPECT_EQ(store.stats().device.resident_bytes, 4 * kUnit);
    store.set_budget(Tier::Device, kUnit);
    EXPECT_EQ(store.stats().device.resident_bytes, kUnit);
    EXPECT_EQ(store.stats().device.dirty_evictions, 3U);
    store.set_budget(Tier::Host, 2 * kUnit);
    EXPECT_LE(store.stats().host.resident_bytes, 2 * kUnit);
    for (const auto& [id, bytes] : stored) EXPECT_TRUE(same_bytes(read_all(store, id), bytes));
    expect_balanced(store, *device_);
}

TEST_F(StoreTest, WithoutADiskTierAFullHostIsOutOfMemoryAndKeepsEverything) {
    TieredStore store(*device_, options(1, 2, /*disk=*/false));
    const std::vector<std::byte> a = random_bytes(rng_, kUnit);
    const std::vector<std::byte> b = random_bytes(rng_, kUnit);
    const BlockId ia = store.put(a);
    const BlockId ib = store.put(b);
    EXPECT_THROW((void)store.put(random_bytes(rng_, kUnit)), OutOfMemory);
    EXPECT_EQ(store.stats().objects, 2U) << "a failed put keeps nothing";
    EXPECT_TRUE(same_bytes(read_all(store, ia), a));
    EXPECT_TRUE(same_bytes(read_all(store, ib), b));
    expect_balanced(store, *device_);
}

TEST_F(StoreTest, PrefetchBringsAnObjectToTheDevice) {
    TieredStore store(*device_, options(2, 8));
    const std::vector<std::byte> bytes = random_bytes(rng_, kUnit + 1);
    const BlockId id = store.put(bytes);
    store.prefetch(id);
    store.drain();
    const StoreStats before = store.stats();
    EXPECT_EQ(before.prefetch_count, 2U);
    EXPECT_EQ(before.device.resident_bytes, kUnit + 1);
    const Pin pin = store.acquire(id, Access::Read);
    const StoreStats after = store.stats();
    EXPECT_EQ(after.device.hits, before.device.hits + 2);
    EXPECT_EQ(after.device.swap_in_count, before.device.swap_in_count);
    EXPECT_TRUE(same_bytes(device_bytes(pin), bytes));
}

TEST_F(StoreTest, PrefetchOrderStaysAheadOfTheConsumer) {
    // 8 objects of one unit, a device budget of 4: the order window is 2 units.
    TieredStore store(*device_, options(4, 16));
    std::vector<BlockId> order;
    std::vector<std::vector<std::byte>> bytes;
    for (int i = 0; i < 8; ++i) {
        bytes.push_back(random_bytes(rng_, kUnit));
        order.push_back(store.put(bytes.back()));
    }
    store.prefetch(order);
    for (std::size_t i = 0; i < order.size(); ++i) {
        store.drain();
        EXPECT_EQ(store.stats().device.resident_bytes, std::min<std::uint64_t>(4, 2 + i) * kUnit)
            << "prefetched ahead of object " << i;
        const Pin pin = store.acquire(order[i], Access::Read);
        EXPECT_TRUE(same_bytes(device_bytes(pin), bytes[i]));
    }
    const StoreStats s = store.stats();
    EXPECT_EQ(s.device.misses, 0U) << "every acquire should find its object prefetched";
    EXPECT_EQ(s.prefetch_count, order.size());
    expect_balanced(store, *device_);
}

TEST_F(StoreTest, WasherWritesDirtyHostUnitsToDisk) {
    StoreOptions o = options(2, 4);
    o.wash_queue_units = 2;
    TieredStore store(*device_, o);
    std::vector<std::pair<BlockId, std::vector<std::byte>>> stored;
    for (int i = 0; i < 3; ++i) {
        std::vector<std::byte> bytes = random_bytes(rng_, kUnit);
        stored.emplace_back(store.put(bytes), std::move(bytes));
    }
    store.drain();
    const StoreStats s = store.stats();
    EXPECT_EQ(s.host.write_back_bytes, 3 * kUnit) << "the host tier is over half full: wash all dirty units";
    EXPECT_EQ(s.disk.resident_bytes, 3 * kUnit);
    // Now eviction from the host is clean: no write at eviction time.
    (void)store.put(random_bytes(rng_, 2 * kUnit));
    store.drain();
    EXPECT_EQ(store.stats().host.dirty_evictions, 0U);
    EXPECT_GE(store.stats().host.clean_evictions, 1U);
    for (const auto& [id, bytes] : stored) EXPECT_TRUE(same_bytes(read_all(store, id), bytes));
    expect_balanced(store, *device_);
}

TEST_F(StoreTest, BackendOutOfMemoryEvictsAndRetries) {
    TieredStore store(*device_, options(4, 8));
    std::vector<std::pair<BlockId, std::vector<std::byte>>> stored;
    for (int i = 0; i < 3; ++i) {
        std::vector<std::byte> bytes = random_bytes(rng_, kUnit);
        const BlockId id = store.put(bytes);
        { const Pin pin = store.acquire(id, Access::Write); }
        stored.emplace_back(id, std::move(bytes));
    }
    // Once: the store evicts one unit and the retry succeeds.
    device_->fail_allocation(MemoryKind::Device, 1);
    const BlockId id = store.put(random_bytes(rng_, kUnit));
    { const Pin pin = store.acquire(id, Access::Read); }
    EXPECT_EQ(device_->injected(), 1U);
    EXPECT_EQ(store.stats().oom_retries, 1U);
    EXPECT_EQ(store.stats().device.resident_bytes, 3 * kUnit);
    // Persistent: everything evictable goes, then OutOfMemory; nothing is lost.
    device_->fail_allocation(MemoryKind::Device, 1, /*persistent=*/true);
    store.set_budget(Tier::Device, 8 * kUnit);
    const BlockId more = store.put(random_bytes(rng_, kUnit));
    try {
        (void)store.acquire(more, Access::Read);
        ADD_FAILURE() << "acquire succeeded although every device allocation fails";
    } catch (const OutOfMemory& e) {
        EXPECT_NE(std::string(e.what()).find("refused"), std::string::npos) << e.what();
    }
    EXPECT_EQ(store.stats().device.resident_bytes, 0U);
    device_->disarm();
    for (const auto& [sid, bytes] : stored) EXPECT_TRUE(same_bytes(read_all(store, sid), bytes));
    expect_balanced(store, *device_);
}

TEST_F(StoreTest, PinnedPoolFallsBackToPageableMemory) {
    device_->fail_allocation(MemoryKind::HostPinned, 1, /*persistent=*/true);
    TieredStore store(*device_, options(2, 8));
    const std::vector<std::byte> bytes = random_bytes(rng_, 3 * kUnit);
    const BlockId id = store.put(bytes);
    EXPECT_EQ(device_->injected(), 1U) << "the pool asks once, then stops growing";
    EXPECT_EQ(device_->allocated_bytes(MemoryKind::HostPinned), 0U);
    EXPECT_TRUE(same_bytes(read_all(store, id), bytes));
    device_->disarm();
    // Without faults the pool holds up to pinned_pool_bytes of slots.
    TieredStore fresh(*device_, options(2, 8));
    (void)fresh.put(bytes);
    EXPECT_EQ(device_->allocated_bytes(MemoryKind::HostPinned), 2 * kUnit);
}

TEST_F(StoreTest, ThrashingIsCountedAndWarnedAbout) {
    TieredStore store(*device_, options(1, 4));
    const BlockId a = store.put(random_bytes(rng_, kUnit));
    const BlockId b = store.put(random_bytes(rng_, kUnit));
    const log::Level level = log::level();
    log::set_level(log::Level::Warn);
    ::testing::internal::CaptureStderr();
    constexpr int kRounds = 20;
    for (int i = 0; i < kRounds; ++i) {
        { const Pin pin = store.acquire(a, Access::Read); }
        { const Pin pin = store.acquire(b, Access::Read); }
    }
    const std::string err = ::testing::internal::GetCapturedStderr();
    log::set_level(level);
    // Every swap-in after the first two brings back a unit evicted one eviction ago.
    EXPECT_EQ(store.stats().thrash_count, 2U * kRounds - 2);
    EXPECT_NE(err.find("thrashing"), std::string::npos) << err;
}

TEST_F(StoreTest, StatsCountHitsMissesAndSwaps) {
    TieredStore store(*device_, options(2, 4));
    const BlockId id = store.put(random_bytes(rng_, 2 * kUnit));
    { const Pin pin = store.acquire(id, Access::Read); }
    { const Pin pin = store.acquire(id, Access::Read); }
    const StoreStats s = store.stats();
    EXPECT_EQ(s.device.misses, 2U);
    EXPECT_EQ(s.device.hits, 2U);
    EXPECT_EQ(s.device.swap_in_count, 2U);
    EXPECT_EQ(s.device.swap_in_bytes, 2 * kUnit);
    EXPECT_EQ(s.host.hits, 2U) << "the device misses were served from the host";
    EXPECT_EQ(s.device.peak_bytes, 2 * kUnit);
    EXPECT_EQ(s.units, 2U);
    EXPECT_EQ(s.pinned_units, 0U);
    EXPECT_EQ(&s.of(Tier::Device), &s.device);
    EXPECT_EQ(&s.of(Tier::HostPinned), &s.host);
    EXPECT_EQ(&s.of(Tier::Disk), &s.disk);
}

}  // namespace
}  // namespace outcore::swap
