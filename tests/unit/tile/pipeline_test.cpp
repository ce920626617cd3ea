// Tests of tile::Pipeline on the CPU backend: bytes arrive intact through every path
// (staged, direct, regions), the overlap is safe when the host or the device is slow
// (a slot is never overwritten before its reader ran), transfers do overlap compute,
// the budget is enforced by the adaptor, and every failure comes out as the first
// exception with nothing leaked. Suites named *Threads also run under TSan.
#include "outcore/tile/pipeline.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backends/cpu/cpu_queue.hpp"
#include "outcore/backends/cpu.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/tile/staging_cache.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::Device;
using outcore::kKiB;
using outcore::kMiB;
using outcore::MemoryKind;
using outcore::Queue;
using outcore::tile::Pipeline;
using outcore::tile::PipelineOptions;
using outcore::tile::PipelineStats;
using outcore::tile::reads;
using outcore::tile::SlotId;
using outcore::tile::writes;
using namespace std::chrono_literals;

struct TestFailure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

std::unique_ptr<Device> make_device() {
    return outcore::cpu::make_cpu_device({.total_memory_bytes = 256 * kMiB});
}

std::vector<std::byte> random_bytes(std::mt19937_64& rng, std::size_t n) {
    std::vector<std::byte> out(n);
    for (auto& b : out) b = static_cast<std::byte>(rng() & 0xFF);
    return out;
}

void expect_nothing_held(const Device& device) {
    EXPECT_EQ(device.allocated_bytes(MemoryKind::Device), 0U);
    EXPECT_EQ(device.allocated_bytes(MemoryKind::HostPinned), 0U);
    EXPECT_EQ(device.allocation_count(MemoryKind::Device), 0U);
    EXPECT_EQ(device.allocation_count(MemoryKind::HostPinned), 0U);
}

/// Options for `depth` input slots and `depth` output slots of `slot_bytes` each.
PipelineOptions ring_options(std::uint32_t depth, std::uint64_t slot_bytes, std::uint32_t staging) {
    PipelineOptions o;
    o.budget_bytes = 2 * depth * slot_bytes + 4 * kKiB;
    for (std::uint32_t i = 0; i < 2 * depth; ++i) o.slots.push_back({slot_bytes, "test.slot"});
    o.upload_staging = {.bytes = slot_bytes, .count = staging};
    o.download_staging = {.bytes = slot_bytes, .count = staging};
    return o;
}

/// Streams `tiles` through in → (compute: copy, optionally after a delay) → out, with
/// random tile sizes; returns what the drains saw, in tile order.
struct StreamResult {
    std::vector<std::vector<std::byte>> outputs;
    PipelineStats stats;
};

struct Delays {
    std::chrono::microseconds fill{0};
    std::chrono::microseconds compute{0};
    std::chrono::microseconds drain{0};
    bool random = false;  // each delay uniform in [0, value]
};

StreamResult stream(Device& device, std::mt19937_64& rng, const std::vector<std::vector<std::byte>>& inputs,
                    std::uint32_t depth, std::uint32_t staging, std::uint64_t slot_bytes, Delays delays,
                    std::uint32_t readers = 2, std::uint32_t writers = 1) {
    PipelineOptions o = ring_options(depth, slot_bytes, staging);
    o.reader_threads = readers;
    o.writer_threads = writers;
    StreamResult r;  // before the pipeline: its drains write here until it is destroyed
    r.outputs.resize(inputs.size());
    Pipeline p(device, o);
    auto delay = [&](std::chrono::microseconds d) {
        if (d.count() == 0) return d;
        return delays.random ? std::chrono::microseconds(static_cast<std::int64_t>(rng() % (d.count() + 1)))
                             : d;
    };
    for (std::size_t t = 0; t < inputs.size(); ++t) {
        const SlotId in{static_cast<std::uint32_t>(t % depth)};
        const SlotId out{static_cast<std::uint32_t>(depth + t % depth)};
        const std::uint64_t bytes = inputs[t].size();
        const auto fill_delay = delay(delays.fill);
        p.upload(in, 0, bytes, [&inputs, t, fill_delay](std::span<std::byte> s) {
            std::this_thread::sleep_for(fill_delay);
            std::memcpy(s.data(), inputs[t].data(), s.size());
        });
        const auto compute_delay = delay(delays.compute);
        p.compute({reads(in), writes(out)}, [&](Queue& q) {
            if (compute_delay.count() > 0)
                q.host_task([compute_delay] { std::this_thread::sleep_for(compute_delay); });
            q.copy(p.view(in).sub(0, bytes), p.view(out).sub(0, bytes));
        });
        const auto drain_delay = delay(delays.drain);
        p.download(out, 0, bytes, [&r, t, drain_delay](std::span<const std::byte> s) {
            std::this_thread::sleep_for(drain_delay);
            r.outputs[t].assign(s.begin(), s.end());
        });
    }
    r.stats = p.finish();
    return r;
}

std::vector<std::vector<std::byte>> random_tiles(std::mt19937_64& rng, std::size_t count,
                                                 std::uint64_t max_bytes) {
    std::vector<std::vector<std::byte>> tiles;
    for (std::size_t i = 0; i < count; ++i) {
        tiles.push_back(random_bytes(rng, 1 + static_cast<std::size_t>(rng() % max_bytes)));
    }
    return tiles;
}

TEST(Pipeline, StreamsEveryTileIntactThroughRings) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    for (std::uint32_t depth : {1U, 2U, 3U}) {
        for (std::uint32_t staging : {1U, 2U, 4U}) {
            const auto inputs = random_tiles(rng, 24, 64 * kKiB);
            const StreamResult r = stream(*device, rng, inputs, depth, staging, 64 * kKiB, {});
            ASSERT_EQ(r.outputs, inputs) << "depth " << depth << " staging " << staging;
            std::uint64_t total = 0;
            for (const auto& t : inputs) total += t.size();
            EXPECT_EQ(r.stats.bytes_uploaded, total);
            EXPECT_EQ(r.stats.bytes_downloaded, total);
            EXPECT_EQ(r.stats.upload_count, inputs.size());
            EXPECT_EQ(r.stats.download_count, inputs.size());
            EXPECT_EQ(r.stats.compute_count, inputs.size());
            EXPECT_LE(r.stats.peak_device_bytes, r.stats.budget_bytes);
            EXPECT_EQ(r.stats.peak_device_bytes, r.stats.slot_bytes);
            expect_nothing_held(*device);
        }
    }
}

// Slow fills, slow compute and slow drains, at random: uploads run ahead of a slow
// compute and must not overwrite a slot it has not read yet; downloads must not read
// a slot before compute wrote it, and compute must not overwrite an output slot before
// its download ran. Any such race shows up as a wrong tile.
TEST(PipelineThreads, OrderingHoldsUnderSlowStages) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    const Delays cases[] = {
        {.fill = 2000us, .compute = 0us, .drain = 0us, .random = true},
        {.fill = 0us, .compute = 2000us, .drain = 0us, .random = true},
        {.fill = 0us, .compute = 0us, .drain = 2000us, .random = true},
        {.fill = 1000us, .compute = 1000us, .drain = 1000us, .random = true},
    };
    for (const Delays& d : cases) {
        for (std::uint32_t writers : {1U, 3U}) {
            const auto inputs =
                random_tiles(rng, static_cast<std::size_t>(outcore::test::scaled(20)), 32 * kKiB);
            const StreamResult r = stream(*device, rng, inputs, 2, 3, 32 * kKiB, d, 3, writers);
            ASSERT_EQ(r.outputs, inputs);
        }
    }
    expect_nothing_held(*device);
}

// Two compute lanes: a step on lane 0 cannot finish until a step on lane 1 has
// started (so lanes that ran one after the other would time out), and a lane-1 step
// that reads what lane 0 wrote still sees it (lanes are ordered through slots).
TEST(PipelineThreads, ComputeLanesRunAtOnceAndOrderThroughSlots) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    constexpr std::uint64_t kBytes = 64 * kKiB;
    const std::vector<std::byte> x = random_bytes(rng, kBytes);
    const std::vector<std::byte> y = random_bytes(rng, kBytes);
    PipelineOptions o;
    o.budget_bytes = 6 * kBytes;
    for (int i = 0; i < 6; ++i) o.slots.push_back({kBytes, "test.slot"});
    o.upload_staging = {.bytes = kBytes, .count = 2};
    o.download_staging = {.bytes = kBytes, .count = 2};
    o.compute_lanes = 2;
    std::vector<std::byte> out_mid, out_other;
    std::atomic<bool> lane1_started{false};
    std::atomic<bool> saw_lane1{false};
    {
        Pipeline p(*device, o);
        const SlotId in{0}, mid{1}, other_in{2}, other{3}, last{4};
        p.upload(in, 0, kBytes, [&](std::span<std::byte> s) { std::memcpy(s.data(), x.data(), kBytes); });
        p.upload(other_in, 0, kBytes,
                 [&](std::span<std::byte> s) { std::memcpy(s.data(), y.data(), kBytes); });
        p.compute(
            {reads(in), writes(mid)},
            [&](Queue& q) {
                q.host_task([&] {
                    const auto until = std::chrono::steady_clock::now() + 20s;
                    while (!lane1_started.load() && std::chrono::steady_clock::now() < until)
                        std::this_thread::sleep_for(1ms);
                    saw_lane1 = lane1_started.load();
                    std::this_thread::sleep_for(100ms);  // busy while lane 1 is
                });
                q.copy(p.view(in), p.view(mid));
            },
            "wait", 0);
        p.compute(
            {reads(other_in), writes(other)},
            [&](Queue& q) {
                q.host_task([&] {
                    lane1_started = true;
                    std::this_thread::sleep_for(100ms);
                });
                q.copy(p.view(other_in), p.view(other));
            },
            "start", 1);
        p.compute(
            {reads(mid), writes(last)}, [&](Queue& q) { q.copy(p.view(mid), p.view(last)); }, "follow", 1);
        p.download(last, 0, kBytes,
                   [&](std::span<const std::byte> s) { out_mid.assign(s.begin(), s.end()); });
        p.download(other, 0, kBytes,
                   [&](std::span<const std::byte> s) { out_other.assign(s.begin(), s.end()); });
        const PipelineStats st = p.finish();
        EXPECT_EQ(st.compute_count, 3U);
        // The lanes' busy times overlap: compute busy is their union, within the run.
        EXPECT_GT(st.compute_busy_seconds, 0.1);
        EXPECT_LE(st.compute_busy_seconds, st.wall_seconds);
    }
    EXPECT_TRUE(saw_lane1.load()) << "lane 0's step finished before lane 1's started: the lanes ran in turn";
    EXPECT_EQ(out_mid, x);
    EXPECT_EQ(out_other, y);
    expect_nothing_held(*device);
}

#if defined(__SANITIZE_THREAD__)
// Peeking at a slot while the upload queue writes it is a (deliberate) race; under
// TSan the test checks that the next tile's fill ran instead.
constexpr bool kPeekDeviceMemory = false;
#else
constexpr bool kPeekDeviceMemory = true;
#endif

// Overlap, shown without trusting timings on a loaded machine: compute i does not
// finish until the upload of tile i+1 has landed in its device slot and the drain of
// tile i−1 has run (each checked with a generous timeout). A pipeline that uploaded
// only after a compute, or downloaded only before the next one, would time out.
TEST(PipelineThreads, TransfersOverlapCompute) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    constexpr std::size_t kTiles = 10;
    constexpr std::uint64_t kBytes = 256 * kKiB;
    std::vector<std::vector<std::byte>> inputs;
    for (std::size_t i = 0; i < kTiles; ++i) inputs.push_back(random_bytes(rng, kBytes));
    std::vector<std::vector<std::byte>> outputs(kTiles);
    std::array<std::atomic<bool>, kTiles> filled{};
    std::array<std::atomic<bool>, kTiles> drained{};
    std::array<std::atomic<bool>, kTiles> next_uploaded{};
    std::array<std::atomic<bool>, kTiles> previous_drained{};
    const auto deadline = 10s;

    Pipeline p(*device, ring_options(2, kBytes, 3));
    for (std::size_t t = 0; t < kTiles; ++t) {
        const SlotId in{static_cast<std::uint32_t>(t % 2)};
        const SlotId out{static_cast<std::uint32_t>(2 + t % 2)};
        p.upload(in, 0, kBytes, [&inputs, &filled, t](std::span<std::byte> s) {
            std::memcpy(s.data(), inputs[t].data(), s.size());
            filled[t] = true;
        });
        // The CPU backend's device memory is host memory: peek at the next tile's slot.
        const std::byte* next_slot =
            outcore::cpu::address_of(p.view(SlotId{static_cast<std::uint32_t>((t + 1) % 2)}));
        p.compute({reads(in), writes(out)}, [&, t, next_slot](Queue& q) {
            q.copy(p.view(in), p.view(out));
            q.host_task([&, t, next_slot] {
                const auto until = std::chrono::steady_clock::now() + deadline;
                while (std::chrono::steady_clock::now() < until) {
                    const bool up =
                        t + 1 == kTiles ||
                        (kPeekDeviceMemory ? std::memcmp(next_slot, inputs[t + 1].data(), kBytes) == 0
                                           : filled[t + 1].load());
                    const bool down = t == 0 || drained[t - 1].load();
                    if (up && down) {
                        next_uploaded[t] = true;
                        previous_drained[t] = true;
                        return;
                    }
                    std::this_thread::sleep_for(200us);
                }
            });
        });
        p.download(out, 0, kBytes, [&outputs, &drained, t](std::span<const std::byte> s) {
            outputs[t].assign(s.begin(), s.end());
            drained[t] = true;
        });
    }
    const PipelineStats s = p.finish();
    EXPECT_EQ(outputs, inputs);
    for (std::size_t t = 0; t < kTiles; ++t) {
        EXPECT_TRUE(next_uploaded[t])
            << "tile " << t + 1 << " was not uploaded while tile " << t << " computed";
        EXPECT_TRUE(previous_drained[t])
            << "tile " << t - 1 << " was not drained while tile " << t << " computed";
    }
    EXPECT_NEAR(s.transfer_seconds, s.upload_busy_seconds + s.download_busy_seconds, 1e-9);
    EXPECT_NEAR(s.exposed_transfer_seconds, (1.0 - s.hidden_transfer_fraction) * s.transfer_seconds, 1e-9);
    // Every upload but the first ran inside a compute interval, at least partly.
    EXPECT_GT(s.hidden_transfer_fraction, 0.0);
    EXPECT_LE(s.hidden_transfer_fraction, 1.0);
    EXPECT_GE(s.wall_seconds, s.compute_busy_seconds);
}

TEST(Pipeline, SerialRunHidesNothing) {
    // One slot each way and a compute that waits: every transfer is exposed.
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    PipelineOptions o = ring_options(1, 1 * kMiB, 1);
    Pipeline p(*device, o);
    const auto data = random_bytes(rng, 1 * kMiB);
    std::vector<std::byte> out(data.size());
    for (int t = 0; t < 4; ++t) {
        p.upload_from(SlotId{0}, 0, data.data(), data.size());
        p.compute({reads(SlotId{0}), writes(SlotId{1})},
                  [&](Queue& q) { q.copy(p.view(SlotId{0}), p.view(SlotId{1})); });
        p.download_to(SlotId{1}, 0, out.data(), out.size());
        // No overlap at all: this step waits for the download and the next upload waits for it.
        p.compute({writes(SlotId{0}), writes(SlotId{1})},
                  [](Queue& q) { q.host_task([] { std::this_thread::sleep_for(1ms); }); });
    }
    const PipelineStats s = p.finish();
    EXPECT_EQ(out, data);
    EXPECT_LT(s.hidden_transfer_fraction, 0.2);
}

TEST(Pipeline, DirectUploadsAndDownloadsSkipStaging) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    PipelineOptions o;
    o.budget_bytes = 1 * kMiB;
    o.slots = {{256 * kKiB, "in"}, {256 * kKiB, "out"}};
    Pipeline p(*device, o);
    EXPECT_EQ(device->allocated_bytes(MemoryKind::HostPinned), 0U);
    const auto data = random_bytes(rng, 100'000);
    std::vector<std::byte> out(data.size(), std::byte{0});
    p.upload_from(SlotId{0}, 1000, data.data(), data.size());
    p.compute({reads(SlotId{0}), writes(SlotId{1})}, [&](Queue& q) {
        q.copy(p.view(SlotId{0}).sub(1000, data.size()), p.view(SlotId{1}).sub(7, data.size()));
    });
    p.download_to(SlotId{1}, 7, out.data(), out.size());
    const PipelineStats s = p.finish();
    EXPECT_EQ(out, data);
    EXPECT_EQ(s.bytes_uploaded, data.size());
    EXPECT_EQ(s.staging_bytes, 0U);
    // Without staging, staged transfers are a usage error.
    Pipeline q(*device, o);
    EXPECT_THROW(q.upload(SlotId{0}, 0, 16, [](std::span<std::byte>) {}), outcore::UsageError);
}

TEST(Pipeline, RegionsAreTrackedIndependently) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    PipelineOptions o;
    o.budget_bytes = 1 * kMiB;
    o.slots = {{64 * kKiB, "panel"}, {64 * kKiB, "out"}};
    o.upload_staging = {.bytes = 16 * kKiB, .count = 2};
    o.download_staging = {.bytes = 64 * kKiB, .count = 1};
    std::vector<std::byte> seen;
    std::vector<std::vector<std::byte>> chunks;
    for (int i = 0; i < 4; ++i) chunks.push_back(random_bytes(rng, 16 * kKiB));
    Pipeline p(*device, o);
    std::vector<SlotId> parts;
    for (std::uint64_t i = 0; i < 4; ++i) parts.push_back(p.region(SlotId{0}, i * 16 * kKiB, 16 * kKiB));
    EXPECT_THROW((void)p.region(SlotId{0}, 8 * kKiB, 16 * kKiB), outcore::UsageError);  // overlaps
    EXPECT_THROW((void)p.view(SlotId{0}), outcore::UsageError);                         // split
    // Fill the panel chunk by chunk; each compute gathers the chunks uploaded so far.
    for (std::size_t i = 0; i < parts.size(); ++i) {
        p.upload(parts[i], 0, 16 * kKiB,
                 [&chunks, i](std::span<std::byte> s) { std::memcpy(s.data(), chunks[i].data(), s.size()); });
        std::vector<outcore::tile::SlotAccess> acc;
        for (std::size_t j = 0; j <= i; ++j) acc.push_back(reads(parts[j]));
        acc.push_back(writes(SlotId{1}));
        p.compute(acc, [&](Queue& q) {
            for (std::size_t j = 0; j <= i; ++j)
                q.copy(p.view(parts[j]), p.view(SlotId{1}).sub(j * 16 * kKiB, 16 * kKiB));
        });
    }
    p.download(SlotId{1}, 0, 64 * kKiB,
               [&](std::span<const std::byte> s) { seen.assign(s.begin(), s.end()); });
    const PipelineStats s = p.finish();
    std::vector<std::byte> expected;
    for (const auto& c : chunks) expected.insert(expected.end(), c.begin(), c.end());
    EXPECT_EQ(seen, expected);
    EXPECT_EQ(s.upload_count, 4U);
    EXPECT_THROW((void)p.finish(), outcore::UsageError);
}

TEST(Pipeline, StagingCacheIsReusedAcrossPipelines) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    {
        outcore::tile::StagingCache cache(*device);
        PipelineOptions o = ring_options(2, 64 * kKiB, 3);
        o.staging_cache = &cache;
        for (int run = 0; run < 3; ++run) {
            const auto inputs = random_tiles(rng, 8, 64 * kKiB);
            std::vector<std::vector<std::byte>> outputs(inputs.size());
            {
                Pipeline p(*device, o);
                for (std::uint32_t t = 0; t < inputs.size(); ++t) {
                    const std::uint64_t bytes = inputs[t].size();
                    p.upload(SlotId{t % 2}, 0, bytes, [&inputs, t](std::span<std::byte> s) {
                        std::memcpy(s.data(), inputs[t].data(), s.size());
                    });
                    p.compute({reads(SlotId{t % 2}), writes(SlotId{2 + t % 2})}, [&](Queue& q) {
                        q.copy(p.view(SlotId{t % 2}).sub(0, bytes), p.view(SlotId{2 + t % 2}).sub(0, bytes));
                    });
                    p.download(SlotId{2 + t % 2}, 0, bytes, [&outputs, t](std::span<const std::byte> s) {
                        outputs[t].assign(s.begin(), s.end());
                    });
                }
                const PipelineStats s = p.finish();
                EXPECT_EQ(s.staging_bytes, 6 * 64 * kKiB);
            }
            EXPECT_EQ(outputs, inputs);
            // Only the first pipeline made pinned memory; the rest reused it.
            EXPECT_EQ(cache.allocation_count(), 6U);
            EXPECT_EQ(cache.free_bytes(), 6 * 64 * kKiB);
            EXPECT_EQ(device->allocated_bytes(MemoryKind::HostPinned), 6 * 64 * kKiB);
            EXPECT_EQ(device->allocated_bytes(MemoryKind::Device), 0U);
        }
        // Larger buffers than any cached one are allocated; the small ones stay.
        std::vector<outcore::Block> big = cache.take(256 * kKiB, 2);
        EXPECT_EQ(cache.allocation_count(), 8U);
        cache.give_back(big);
        EXPECT_TRUE(big.empty());
    }
    expect_nothing_held(*device);
    // A bounded cache frees the oldest blocks beyond its limit.
    outcore::tile::StagingCache small(*device, 100 * kKiB);
    std::vector<outcore::Block> blocks = small.take(64 * kKiB, 3);
    small.give_back(blocks);
    EXPECT_LE(small.free_bytes(), 100 * kKiB);
    EXPECT_EQ(device->allocated_bytes(MemoryKind::HostPinned), small.free_bytes());
    small.clear();
    expect_nothing_held(*device);
}

TEST(Pipeline, SlotsOverTheBudgetAreRefusedByTheAdaptor) {
    auto device = make_device();
    PipelineOptions o;
    o.budget_bytes = 1 * kMiB;
    o.slots = {{512 * kKiB, "a"}, {512 * kKiB, "b"}, {1, "c"}};  // 1 MiB + one aligned byte
    try {
        Pipeline p(*device, o);
        FAIL() << "slots over the budget were accepted";
    } catch (const outcore::OutOfMemory& e) {
        EXPECT_EQ(e.budget_bytes(), 1 * kMiB);
        EXPECT_GT(e.requested_bytes(), 1 * kMiB - e.in_use_bytes());
    }
    expect_nothing_held(*device);
    // Exactly at the budget is fine, and the peak is exactly the slots.
    o.slots.pop_back();
    Pipeline p(*device, o);
    EXPECT_EQ(device->allocated_bytes(), 1 * kMiB);
    // Extra device memory through the pipeline's allocator counts against the same budget.
    EXPECT_THROW(
        (void)p.device_allocator().allocate({.bytes = 64, .kind = MemoryKind::Device, .tag = "extra"}),
        outcore::OutOfMemory);
}

TEST(Pipeline, AbsurdSizesAreErrorsNotCrashes) {
    auto device = make_device();
    for (const std::uint64_t bytes : {std::uint64_t{1} << 31, std::uint64_t{1} << 32,
                                      std::uint64_t{46341} * 46341, std::uint64_t{1} << 63, UINT64_MAX}) {
        PipelineOptions o;
        o.budget_bytes = 1 * kMiB;
        o.slots = {{bytes, "huge"}};
        EXPECT_ANY_THROW({
            try {
                Pipeline p(*device, o);
            } catch (const outcore::UsageError&) {
                throw;
            } catch (const outcore::OutOfMemory&) {
                throw;
            }
        }) << bytes;
        PipelineOptions staging;
        staging.budget_bytes = 1 * kMiB;
        staging.upload_staging = {.bytes = bytes, .count = 1};
        EXPECT_THROW(Pipeline(*device, staging), outcore::OutOfMemory) << bytes;
        expect_nothing_held(*device);
    }
    PipelineOptions o = ring_options(1, 4 * kKiB, 1);
    Pipeline p(*device, o);
    EXPECT_THROW(p.upload(SlotId{0}, UINT64_MAX, 2, [](std::span<std::byte>) {}), outcore::UsageError);
}

TEST(Pipeline, BadOptionsAreUsageErrors) {
    auto device = make_device();
    EXPECT_THROW(Pipeline(*device, PipelineOptions{}), outcore::UsageError);
    PipelineOptions zero_slot;
    zero_slot.budget_bytes = kMiB;
    zero_slot.slots = {{0, "zero"}};
    EXPECT_THROW(Pipeline(*device, zero_slot), outcore::UsageError);
    PipelineOptions zero_staging;
    zero_staging.budget_bytes = kMiB;
    zero_staging.upload_staging = {.bytes = 0, .count = 2};
    EXPECT_THROW(Pipeline(*device, zero_staging), outcore::UsageError);
    for (const std::uint32_t lanes : {0U, 3U}) {
        PipelineOptions bad_lanes = ring_options(1, 4 * kKiB, 1);
        bad_lanes.compute_lanes = lanes;
        EXPECT_THROW(Pipeline(*device, bad_lanes), outcore::UsageError) << lanes;
    }
    PipelineOptions ok = ring_options(1, 4 * kKiB, 1);
    Pipeline p(*device, ok);
    EXPECT_THROW(p.upload(SlotId{0}, 0, 8 * kKiB, [](std::span<std::byte>) {}),
                 outcore::UsageError);                                                          // > slot
    EXPECT_THROW(p.upload(SlotId{9}, 0, 8, [](std::span<std::byte>) {}), outcore::UsageError);  // no slot
    // The first failure sticks: later calls rethrow it.
    EXPECT_THROW(p.compute({reads(SlotId{0})}, [](Queue&) {}), outcore::UsageError);
    EXPECT_TRUE(p.failed());
}

/// Runs a stream whose `fail_at`-th fill, compute or drain throws TestFailure, and
/// checks that exactly that error comes out and nothing is left allocated.
enum class FailIn { Fill, Compute, Drain, DeviceTask };

void run_failing(FailIn where, int fail_at, std::mt19937_64& rng) {
    auto device = make_device();
    const auto inputs = random_tiles(rng, 12, 16 * kKiB);
    bool thrown = false;
    try {
        Pipeline p(*device, ring_options(2, 16 * kKiB, 3));
        for (std::size_t t = 0; t < inputs.size(); ++t) {
            const bool fail = static_cast<int>(t) == fail_at;
            const SlotId in{static_cast<std::uint32_t>(t % 2)};
            const SlotId out{static_cast<std::uint32_t>(2 + t % 2)};
            const std::uint64_t bytes = inputs[t].size();
            p.upload(in, 0, bytes, [&inputs, t, fail, where](std::span<std::byte> s) {
                if (fail && where == FailIn::Fill) throw TestFailure("fill failed");
                std::memcpy(s.data(), inputs[t].data(), s.size());
            });
            p.compute({reads(in), writes(out)}, [&](Queue& q) {
                if (fail && where == FailIn::Compute) throw TestFailure("compute failed");
                if (fail && where == FailIn::DeviceTask)
                    q.host_task([] { throw TestFailure("kernel failed"); });
                q.copy(p.view(in).sub(0, bytes), p.view(out).sub(0, bytes));
            });
            p.download(out, 0, bytes, [fail, where](std::span<const std::byte>) {
                if (fail && where == FailIn::Drain) throw TestFailure("drain failed");
                std::this_thread::sleep_for(100us);
            });
        }
        (void)p.finish();
    } catch (const TestFailure& e) {
        thrown = true;
        const std::string what = e.what();
        switch (where) {
            case FailIn::Fill: EXPECT_EQ(what, "fill failed"); break;
            case FailIn::Compute: EXPECT_EQ(what, "compute failed"); break;
            case FailIn::Drain: EXPECT_EQ(what, "drain failed"); break;
            case FailIn::DeviceTask: EXPECT_EQ(what, "kernel failed"); break;
        }
    }
    EXPECT_TRUE(thrown) << "no failure surfaced (fail at " << fail_at << ")";
    expect_nothing_held(*device);
}

TEST(PipelineThreads, FirstFailureStopsTheRunAndLeaksNothing) {
    std::mt19937_64 rng(outcore::test::seed());
    for (FailIn where : {FailIn::Fill, FailIn::Compute, FailIn::Drain, FailIn::DeviceTask}) {
        for (int at : {0, 5, 11}) {
            SCOPED_TRACE(testing::Message() << "where " << static_cast<int>(where) << " at " << at);
            run_failing(where, at, rng);
        }
    }
}

TEST(PipelineThreads, AbandonedPipelineCleansUp) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    {
        Pipeline p(*device, ring_options(2, 64 * kKiB, 3));
        for (std::uint32_t t = 0; t < 8; ++t) {
            p.upload(SlotId{t % 2}, 0, 64 * kKiB, [](std::span<std::byte> s) {
                std::this_thread::sleep_for(1ms);
                std::fill(s.begin(), s.end(), std::byte{7});
            });
            p.compute({reads(SlotId{t % 2}), writes(SlotId{2 + t % 2})},
                      [&](Queue& q) { q.copy(p.view(SlotId{t % 2}), p.view(SlotId{2 + t % 2})); });
            p.download(SlotId{2 + t % 2}, 0, 64 * kKiB, [](std::span<const std::byte>) {});
        }
        // Destroyed without finish(): in-flight work is waited for, then freed.
    }
    expect_nothing_held(*device);
}

}  // namespace
