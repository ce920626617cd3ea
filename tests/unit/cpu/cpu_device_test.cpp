// Tests of CpuDevice: DeviceInfo, allocation and its accounting per kind, the hard
// device capacity, flush/invalidate, and the registry entry.
#include "backends/cpu/cpu_device.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "outcore/backends/cpu.hpp"
#include "outcore/core/config.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/registry.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::AllocationRequest;
using outcore::Block;
using outcore::BufferView;
using outcore::MemoryKind;
using outcore::OutOfMemory;
using outcore::RawBlock;
using outcore::Tier;
using outcore::UsageError;
using outcore::cpu::CpuDeviceOptions;
using outcore::cpu::make_cpu_device;

constexpr std::array<MemoryKind, 3> kKinds = {MemoryKind::Device, MemoryKind::HostPinned,
                                              MemoryKind::HostCached};

TEST(CpuDevice, InfoReflectsOptions) {
    const CpuDeviceOptions opts{.total_memory_bytes = 3 * outcore::kGiB + 17,
                                .working_set_fraction = 0.6,
                                .index = 4,
                                .min_offset_alignment = 128,
                                .max_inline_bytes = 1024};
    auto dev = make_cpu_device(opts);
    const outcore::DeviceInfo& info = dev->info();
    EXPECT_EQ(info.backend, "cpu");
    EXPECT_EQ(info.id(), "cpu:4");
    EXPECT_EQ(info.name.rfind("CPU (", 0), 0U) << info.name;
    EXPECT_EQ(info.total_memory_bytes, opts.total_memory_bytes);
    const auto expected =
        static_cast<std::uint64_t>(std::floor(static_cast<long double>(opts.total_memory_bytes) * 0.6L));
    EXPECT_EQ(info.recommended_working_set_bytes, expected);
    EXPECT_TRUE(info.unified_memory);
    EXPECT_EQ(info.min_offset_alignment, 128U);
    EXPECT_EQ(info.max_inline_bytes, 1024U);
    EXPECT_EQ(info.max_buffer_bytes, info.total_memory_bytes);
    EXPECT_EQ(info.max_allocation_bytes, info.total_memory_bytes);
    EXPECT_TRUE(outcore::fits_inline(info, 1024));
    EXPECT_FALSE(outcore::fits_inline(info, 1025));
}

TEST(CpuDevice, DefaultsUseThePhysicalMemory) {
    auto dev = make_cpu_device();
    const std::uint64_t ram = outcore::cpu::physical_memory_bytes();
    ASSERT_GT(ram, 0U);
    EXPECT_EQ(dev->info().total_memory_bytes, ram);
    EXPECT_LE(dev->info().recommended_working_set_bytes, ram);
    EXPECT_NEAR(static_cast<double>(dev->info().recommended_working_set_bytes),
                0.75 * static_cast<double>(ram), 1.0);
    EXPECT_EQ(dev->info().min_offset_alignment, 64U);
    EXPECT_EQ(dev->info().max_inline_bytes, 4096U);
}

TEST(CpuDevice, RejectsBadOptions) {
    for (double f : {0.0, -0.5, 1.5, std::nan("")}) {
        EXPECT_THROW((void)make_cpu_device({.working_set_fraction = f}), UsageError) << f;
    }
    EXPECT_THROW((void)make_cpu_device({.min_offset_alignment = 48}), UsageError);
    EXPECT_THROW((void)make_cpu_device({.min_offset_alignment = 0}), UsageError);
    EXPECT_NO_THROW((void)make_cpu_device({.working_set_fraction = 1.0}));
}

TEST(CpuDevice, DistinctDevicesHaveDistinctIds) {
    auto a = make_cpu_device();
    auto b = make_cpu_device();
    EXPECT_NE(a->id(), b->id());
    Block block = a->allocate({.bytes = 100, .kind = MemoryKind::HostPinned});
    EXPECT_EQ(block.raw().device_id, a->id());
}

// A random sequence of allocations and frees of every kind: after every step the
// per-kind byte and count totals equal a model's, and each block is shaped as the
// contract says (alignment, host pointer only for host kinds, writable bytes).
TEST(CpuDevice, AccountingBalancesPerKindOverRandomSequences) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = make_cpu_device({.total_memory_bytes = 64 * outcore::kMiB});
    std::vector<RawBlock> live;
    std::array<std::uint64_t, 3> bytes{};
    std::array<std::uint64_t, 3> count{};
    const std::uint64_t steps = outcore::test::scaled(2000);
    for (std::uint64_t step = 0; step < steps; ++step) {
        const bool allocate = live.empty() || (rng() % 100) < 55;
        if (allocate) {
            const MemoryKind kind = kKinds[rng() % 3];
            const std::uint64_t size = 1 + rng() % (256 * outcore::kKiB);
            const std::uint64_t alignment = (rng() % 2 == 0) ? 0 : (std::uint64_t{1} << (rng() % 13));
            RawBlock raw;
            try {
                raw = dev->allocate_raw({.bytes = size, .kind = kind, .alignment = alignment, .tag = "test"});
            } catch (const OutOfMemory& e) {
                // Only the device kind has a capacity, and only a full one refuses.
                ASSERT_EQ(kind, MemoryKind::Device);
                ASSERT_GT(bytes[0] + size, dev->info().total_memory_bytes);
                EXPECT_EQ(e.in_use_bytes(), bytes[0]);
                continue;
            }
            ASSERT_EQ(raw.kind, kind);
            ASSERT_EQ(raw.bytes, size);
            ASSERT_EQ(raw.offset, 0U);
            ASSERT_EQ(raw.device_id, dev->id());
            ASSERT_EQ(raw.native % std::max<std::uint64_t>({64, alignment, dev->info().min_offset_alignment}),
                      0U);
            if (kind == MemoryKind::Device) {
                ASSERT_EQ(raw.host, nullptr) << "device memory must not be host-visible";
            } else {
                ASSERT_EQ(reinterpret_cast<std::uintptr_t>(raw.host), raw.native);
                // Every byte is really there (ASan checks the bounds).
                raw.host[0] = std::byte{1};
                raw.host[size - 1] = std::byte{2};
            }
            const auto k = static_cast<std::size_t>(kind);
            bytes[k] += size;
            count[k] += 1;
            live.push_back(raw);
        } else {
            const std::size_t i = rng() % live.size();
            const RawBlock raw = live[i];
            live[i] = live.back();
            live.pop_back();
            dev->deallocate_raw(raw);
            const auto k = static_cast<std::size_t>(raw.kind);
            bytes[k] -= raw.bytes;
            count[k] -= 1;
        }
        for (MemoryKind kind : kKinds) {
            const auto k = static_cast<std::size_t>(kind);
            ASSERT_EQ(dev->allocated_bytes(kind), bytes[k]) << "step " << step;
            ASSERT_EQ(dev->allocation_count(kind), count[k]) << "step " << step;
        }
        ASSERT_EQ(dev->allocated_bytes(), bytes[0]);
    }
    for (const RawBlock& raw : live) dev->deallocate_raw(raw);
    for (MemoryKind kind : kKinds) {
        EXPECT_EQ(dev->allocated_bytes(kind), 0U);
        EXPECT_EQ(dev->allocation_count(kind), 0U);
    }
}

TEST(CpuDevice, BlocksFreeThemselves) {
    auto dev = make_cpu_device({.total_memory_bytes = outcore::kMiB});
    {
        Block a = dev->allocate({.bytes = 1000, .kind = MemoryKind::Device});
        Block b = dev->allocate({.bytes = 2000, .kind = MemoryKind::HostCached});
        EXPECT_EQ(dev->allocated_bytes(), 1000U);
        EXPECT_EQ(dev->allocated_bytes(MemoryKind::HostCached), 2000U);
        Block moved = std::move(a);
        EXPECT_EQ(dev->allocated_bytes(), 1000U);
    }
    EXPECT_EQ(dev->allocated_bytes(), 0U);
    EXPECT_EQ(dev->allocated_bytes(MemoryKind::HostCached), 0U);
}

TEST(CpuDevice, ExceedingTheCapacityIsOutOfMemoryWithItsNumbers) {
    std::mt19937_64 rng(outcore::test::seed());
    const std::uint64_t capacity = outcore::kMiB + rng() % outcore::kMiB;
    auto dev = make_cpu_device({.total_memory_bytes = capacity});
    const std::uint64_t first = capacity / 2 + rng() % (capacity / 4);
    Block a = dev->allocate({.bytes = first, .kind = MemoryKind::Device});
    const std::uint64_t free_bytes = capacity - first;

    try {
        (void)dev->allocate({.bytes = free_bytes + 1, .kind = MemoryKind::Device});
        FAIL() << "allocation past the capacity succeeded";
    } catch (const OutOfMemory& e) {
        EXPECT_EQ(e.tier(), Tier::Device);
        EXPECT_EQ(e.requested_bytes(), free_bytes + 1);
        EXPECT_EQ(e.budget_bytes(), capacity);
        EXPECT_EQ(e.in_use_bytes(), first);
        EXPECT_EQ(e.component(), "cpu");
    }
    // A refusal changes nothing; exactly the rest still fits, and then nothing does.
    EXPECT_EQ(dev->allocated_bytes(), first);
    EXPECT_EQ(dev->allocation_count(MemoryKind::Device), 1U);
    Block b = dev->allocate({.bytes = free_bytes, .kind = MemoryKind::Device});
    EXPECT_EQ(dev->allocated_bytes(), capacity);
    EXPECT_THROW((void)dev->allocate({.bytes = 1, .kind = MemoryKind::Device}), OutOfMemory);
    // Freeing makes room again.
    a.reset();
    Block c = dev->allocate({.bytes = first, .kind = MemoryKind::Device});
    EXPECT_EQ(dev->allocated_bytes(), capacity);
}

TEST(CpuDevice, HostKindsDoNotCountAgainstTheDeviceCapacity) {
    auto dev = make_cpu_device({.total_memory_bytes = outcore::kMiB});
    Block full = dev->allocate({.bytes = outcore::kMiB, .kind = MemoryKind::Device});
    std::vector<Block> host;
    for (int i = 0; i < 4; ++i) {
        host.push_back(dev->allocate({.bytes = outcore::kMiB, .kind = MemoryKind::HostPinned}));
        host.push_back(dev->allocate({.bytes = outcore::kMiB, .kind = MemoryKind::HostCached}));
    }
    EXPECT_EQ(dev->allocated_bytes(MemoryKind::HostPinned), 4 * outcore::kMiB);
    EXPECT_EQ(dev->allocated_bytes(MemoryKind::HostCached), 4 * outcore::kMiB);
    EXPECT_EQ(dev->allocated_bytes(), outcore::kMiB);
}

TEST(CpuDevice, AbsurdSizesAreOutOfMemoryForEveryKind) {
    auto dev = make_cpu_device();
    const std::uint64_t ram = dev->info().total_memory_bytes;
    for (MemoryKind kind : kKinds) {
        for (std::uint64_t bytes : {ram + 1, std::uint64_t{1} << 62, std::uint64_t{1} << 63,
                                    std::numeric_limits<std::uint64_t>::max()}) {
            try {
                (void)dev->allocate({.bytes = bytes, .kind = kind});
                FAIL() << "allocated " << bytes << " bytes of " << outcore::to_string(kind);
            } catch (const OutOfMemory& e) {
                EXPECT_EQ(e.requested_bytes(), bytes);
                EXPECT_EQ(e.tier(), outcore::tier_of(kind));
            }
        }
        EXPECT_EQ(dev->allocated_bytes(kind), 0U);
        EXPECT_EQ(dev->allocation_count(kind), 0U);
    }
    EXPECT_THROW((void)dev->allocate({.bytes = 0}), UsageError);
    EXPECT_THROW((void)dev->allocate({.bytes = 64, .alignment = 3}), UsageError);
}

TEST(CpuDevice, FlushAndInvalidateCheckTheirRange) {
    auto dev = make_cpu_device({.total_memory_bytes = outcore::kMiB});
    auto other = make_cpu_device({.total_memory_bytes = outcore::kMiB});
    Block cached = dev->allocate({.bytes = 4096, .kind = MemoryKind::HostCached});
    Block foreign = other->allocate({.bytes = 4096, .kind = MemoryKind::HostCached});
    EXPECT_NO_THROW(dev->flush(BufferView(cached, 100, 200)));
    EXPECT_NO_THROW(dev->invalidate(BufferView(cached)));
    BufferView bad(cached);
    bad.offset = 4000;  // bypasses the constructor's check on purpose
    bad.bytes = 200;
    EXPECT_THROW(dev->flush(bad), UsageError);
    EXPECT_THROW(dev->invalidate(bad), UsageError);
    EXPECT_THROW(dev->flush(BufferView(foreign)), UsageError);
}

// Several threads allocate and free concurrently against a small capacity. The test
// tracks the device bytes its threads hold (added after allocate returns, removed
// before the free), which can only undercount what the device has reserved, so the
// tracked total passing the capacity means the capacity check raced.
TEST(CpuDeviceThreads, ConcurrentAllocationsNeverExceedTheCapacity) {
    const std::uint64_t base_seed = outcore::test::seed();
    const std::uint64_t capacity = 4 * outcore::kMiB;
    auto dev = make_cpu_device({.total_memory_bytes = capacity});
    std::atomic<std::uint64_t> held{0};
    std::atomic<bool> overshoot{false};
    std::atomic<bool> wrong_error{false};
    std::atomic<std::uint64_t> refusals{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            std::mt19937_64 rng(base_seed + static_cast<std::uint64_t>(t));
            std::vector<Block> mine;
            const std::uint64_t steps = outcore::test::scaled(2000);
            for (std::uint64_t i = 0; i < steps; ++i) {
                if (mine.empty() || rng() % 5 < 3) {  // a bias to allocate makes the device fill up
                    const MemoryKind kind = kKinds[rng() % 3];
                    try {
                        mine.push_back(
                            dev->allocate({.bytes = 1 + rng() % (512 * outcore::kKiB), .kind = kind}));
                        if (kind == MemoryKind::Device &&
                            held.fetch_add(mine.back().bytes()) + mine.back().bytes() > capacity) {
                            overshoot = true;
                        }
                    } catch (const OutOfMemory& e) {
                        if (e.tier() != Tier::Device || e.budget_bytes() != capacity) wrong_error = true;
                        ++refusals;
                    }
                } else {
                    const auto at = mine.begin() + static_cast<std::ptrdiff_t>(rng() % mine.size());
                    if (at->kind() == MemoryKind::Device) held.fetch_sub(at->bytes());
                    mine.erase(at);
                }
            }
            for (const Block& b : mine) {
                if (b.kind() == MemoryKind::Device) held.fetch_sub(b.bytes());
            }
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_FALSE(overshoot.load());
    EXPECT_FALSE(wrong_error.load());
    EXPECT_EQ(held.load(), 0U);
    for (MemoryKind kind : kKinds) {
        EXPECT_EQ(dev->allocated_bytes(kind), 0U);
        EXPECT_EQ(dev->allocation_count(kind), 0U);
    }
    // Not a property of the code under test, but without refusals the test proves little.
    EXPECT_GT(refusals.load(), 0U);
}

TEST(CpuBackend, ProbeListsTheConfiguredDevices) {
    const outcore::BackendEntry entry = outcore::cpu::backend_entry();
    EXPECT_EQ(entry.name, "cpu");
    EXPECT_FALSE(entry.is_gpu);
    outcore::Config config;
    config.cpu_devices = 3;
    const outcore::BackendProbe probe = entry.probe(config);
    EXPECT_TRUE(probe.available);
    EXPECT_EQ(probe.backend, "cpu");
    ASSERT_EQ(probe.devices.size(), 3U);
    for (std::uint32_t i = 0; i < 3; ++i) {
        EXPECT_EQ(probe.devices[i].index, i);
        EXPECT_EQ(probe.devices[i].backend, "cpu");
        EXPECT_EQ(probe.devices[i].total_memory_bytes, outcore::cpu::physical_memory_bytes());
    }
    auto dev = entry.open(2, config);
    EXPECT_EQ(dev->info().id(), "cpu:2");
    EXPECT_THROW((void)entry.open(3, config), UsageError);

    config.cpu_devices = 0;
    const outcore::BackendProbe none = entry.probe(config);
    EXPECT_FALSE(none.available);
    EXPECT_FALSE(none.reason.empty());
    EXPECT_THROW((void)entry.open(0, config), UsageError);
}

TEST(CpuBackend, OpenDeviceFindsTheCpuThroughTheRegistry) {
    outcore::Config config;
    config.cpu_devices = 2;
    auto dev = outcore::open_device("cpu:1", config);
    EXPECT_EQ(dev->info().id(), "cpu:1");
    EXPECT_THROW((void)outcore::open_device("cpu:2", config), UsageError);
    bool listed = false;
    for (const outcore::BackendProbe& p : outcore::probe_backends(config)) {
        if (p.backend == "cpu") listed = p.available && p.devices.size() == 2;
    }
    EXPECT_TRUE(listed);
}

}  // namespace
