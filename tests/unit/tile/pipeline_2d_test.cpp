// Tests of tile::Pipeline's 2-D transfers (upload_2d_from / download_2d_to) on the CPU
// backend: sub-blocks of a strided host array go up and come back with no staging,
// in program order with compute and with staged uploads into the same slot; no byte
// outside the runs changes on the host; a download's done callback runs only once its
// bytes have landed, in download order; downloads_wait_for holds later downloads behind
// a compute they do not read; the statistics count width × rows (not the span); bad
// ranges are UsageError; a staged upload lands in a pitched place. Suites named *Threads
// also run under TSan.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include "backends/cpu/cpu_queue.hpp"
#include "outcore/backends/cpu.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/tile/pipeline.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::Copy2D;
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
}

/// Waits (on a queue's thread) until `flag` is set, or a generous deadline passes so
/// a failed test cannot hang.
void wait_for(const std::atomic<bool>& flag) {
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (!flag.load() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(100us);
}

/// A rows × row_bytes array of bytes with `pitch` bytes between row starts.
struct Strided {
    std::uint64_t rows = 0, row_bytes = 0, pitch = 0;
    std::vector<std::byte> bytes;
    [[nodiscard]] std::byte* at(std::uint64_t r, std::uint64_t c) { return bytes.data() + r * pitch + c; }
};

// Tiles of a strided host array go up by upload_2d_from into a ring of two slots (with
// their own buffer pitch), a slow compute transforms each (XOR with a per-tile key)
// into an output ring (with another pitch), and download_2d_to puts it back at the same
// place of a strided output array. Slow, random compute makes uploads run ahead: a 2-D
// upload that overwrote a slot before its reader ran, or a download that read one
// before its writer finished, gives a wrong tile.
TEST(Pipeline2DThreads, TilesOfAStridedArrayRoundTripThroughRings) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    for (int round = 0; round < 3; ++round) {
        Strided in{.rows = 40 + rng() % 40, .row_bytes = 100 + rng() % 100, .pitch = 0, .bytes = {}};
        in.pitch = in.row_bytes + 1 + rng() % 50;
        in.bytes = random_bytes(rng, in.rows * in.pitch);
        Strided out{
            .rows = in.rows, .row_bytes = in.row_bytes, .pitch = in.row_bytes + rng() % 30, .bytes = {}};
        out.bytes = random_bytes(rng, out.rows * out.pitch);
        const std::vector<std::byte> out_before = out.bytes;
        const std::uint64_t tile_rows = 3 + rng() % 14;  // at most a few hundred tiles
        const std::uint64_t tile_cols = 9 + rng() % 56;
        // Slot pitches: the tile's width or wider; inputs land at a random offset.
        const std::uint64_t in_pitch = tile_cols + rng() % 8;
        const std::uint64_t out_pitch = tile_cols + rng() % 8;
        const std::uint64_t in_offset = rng() % 64;
        const std::uint64_t slot_bytes = in_offset + tile_rows * std::max(in_pitch, out_pitch);
        SCOPED_TRACE(testing::Message() << in.rows << "x" << in.row_bytes << " pitch " << in.pitch << " -> "
                                        << out.pitch << ", tiles " << tile_rows << "x" << tile_cols
                                        << ", slot pitches " << in_pitch << " / " << out_pitch);

        PipelineOptions o;
        o.budget_bytes = 4 * slot_bytes + 4 * kKiB;
        for (int i = 0; i < 4; ++i) o.slots.push_back({slot_bytes, "test.slot"});
        std::uint64_t tiles = 0, moved = 0;
        {
            Pipeline p(*device, o);
            for (std::uint64_t r0 = 0; r0 < in.rows; r0 += tile_rows) {
                for (std::uint64_t c0 = 0; c0 < in.row_bytes; c0 += tile_cols) {
                    const std::uint64_t rows = std::min(tile_rows, in.rows - r0);
                    const std::uint64_t cols = std::min(tile_cols, in.row_bytes - c0);
                    const SlotId src{static_cast<std::uint32_t>(tiles % 2)};
                    const SlotId dst{static_cast<std::uint32_t>(2 + tiles % 2)};
                    const auto key = static_cast<std::byte>(1 + tiles % 255);
                    const auto delay = std::chrono::microseconds(rng() % 200);
                    p.upload_2d_from(src, in_offset, in.at(r0, c0),
                                     {.width_bytes = cols,
                                      .rows = rows,
                                      .host_pitch_bytes = in.pitch,
                                      .buffer_pitch_bytes = in_pitch});
                    p.compute({reads(src), writes(dst)}, [&, src, dst, rows, cols, key, delay](Queue& q) {
                        const std::byte* from = outcore::cpu::address_of(p.view(src)) + in_offset;
                        std::byte* to = outcore::cpu::address_of(p.view(dst));
                        q.host_task([=] {
                            std::this_thread::sleep_for(delay);
                            for (std::uint64_t r = 0; r < rows; ++r)
                                for (std::uint64_t c = 0; c < cols; ++c)
                                    to[r * out_pitch + c] = from[r * in_pitch + c] ^ key;
                        });
                    });
                    p.download_2d_to(dst, 0, out.at(r0, c0),
                                     {.width_bytes = cols,
                                      .rows = rows,
                                      .host_pitch_bytes = out.pitch,
                                      .buffer_pitch_bytes = out_pitch});
                    ++tiles;
                    moved += rows * cols;
                }
            }
            const PipelineStats s = p.finish();
            EXPECT_EQ(s.upload_count, tiles);
            EXPECT_EQ(s.download_count, tiles);
            EXPECT_EQ(s.compute_count, tiles);
            // width × rows, not the spans (which include the gaps between runs).
            EXPECT_EQ(s.bytes_uploaded, moved);
            EXPECT_EQ(s.bytes_downloaded, moved);
            EXPECT_EQ(moved, in.rows * in.row_bytes);
            EXPECT_EQ(s.staging_bytes, 0U);
        }
        // Recompute the keys tile by tile and compare every byte, gaps included.
        std::vector<std::byte> want = out_before;
        std::uint64_t t = 0;
        for (std::uint64_t r0 = 0; r0 < in.rows; r0 += tile_rows) {
            for (std::uint64_t c0 = 0; c0 < in.row_bytes; c0 += tile_cols, ++t) {
                const auto key = static_cast<std::byte>(1 + t % 255);
                for (std::uint64_t r = r0; r < std::min(r0 + tile_rows, in.rows); ++r)
                    for (std::uint64_t c = c0; c < std::min(c0 + tile_cols, in.row_bytes); ++c)
                        want[r * out.pitch + c] = in.bytes[r * in.pitch + c] ^ key;
            }
        }
        const auto diff = std::mismatch(out.bytes.begin(), out.bytes.end(), want.begin());
        EXPECT_TRUE(diff.first == out.bytes.end())
            << "first difference at byte " << (diff.first - out.bytes.begin()) << " (row "
            << (diff.first - out.bytes.begin()) / static_cast<std::ptrdiff_t>(out.pitch) << ")";
        expect_nothing_held(*device);
    }
}

// Staged and 2-D uploads into one slot, in program order, each read by a compute that
// snapshots the slot. The staged fills are slow, so the 2-D upload behind one is
// ready first: it must still land after it (FIFO), and after the compute that read the
// slot before it (write after read).
TEST(Pipeline2DThreads, TwoDUploadsKeepProgramOrderWithStagedUploads) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    constexpr std::uint64_t kSlot = 8 * kKiB;
    for (int round = 0; round < 4; ++round) {
        const std::vector<std::byte> staged_a = random_bytes(rng, kSlot);
        const std::vector<std::byte> staged_b = random_bytes(rng, kSlot);
        Copy2D shape{.width_bytes = 1 + rng() % 200, .rows = 1 + rng() % 20};
        shape.host_pitch_bytes = shape.width_bytes + rng() % 100;
        shape.buffer_pitch_bytes = shape.width_bytes + rng() % 100;
        const std::uint64_t offset = rng() % (kSlot - shape.buffer_span_bytes() + 1);
        const std::vector<std::byte> host = random_bytes(rng, shape.host_span_bytes());
        auto overlay = [&](std::vector<std::byte> base) {
            for (std::uint64_t r = 0; r < shape.rows; ++r)
                std::memcpy(base.data() + offset + r * shape.buffer_pitch_bytes,
                            host.data() + r * shape.host_pitch_bytes, shape.width_bytes);
            return base;
        };
        // Snapshots: after staged A; after the 2-D upload on A; after staged B and the
        // 2-D upload queued behind its slow fill.
        std::vector<std::vector<std::byte>> seen(3, std::vector<std::byte>(kSlot));
        {
            PipelineOptions o;
            o.budget_bytes = 4 * kSlot + 4 * kKiB;
            for (int i = 0; i < 4; ++i) o.slots.push_back({kSlot, "test.slot"});
            o.upload_staging = {.bytes = kSlot, .count = 2};
            Pipeline p(*device, o);
            const SlotId slot{0};
            auto slow_fill = [&rng](const std::vector<std::byte>& src) {
                const auto delay = std::chrono::microseconds(500 + rng() % 3000);
                return [&src, delay](std::span<std::byte> s) {
                    std::this_thread::sleep_for(delay);
                    std::memcpy(s.data(), src.data(), s.size());
                };
            };
            auto snapshot = [&](std::uint32_t i) {
                const auto delay = std::chrono::microseconds(rng() % 2000);
                p.compute({reads(slot), writes(SlotId{1 + i})}, [&, i, delay](Queue& q) {
                    q.host_task([delay] { std::this_thread::sleep_for(delay); });  // a slow reader
                    q.copy(p.view(slot), p.view(SlotId{1 + i}));
                });
                p.download_to(SlotId{1 + i}, 0, seen[i].data(), kSlot);
            };
            p.upload(slot, 0, kSlot, slow_fill(staged_a));
            snapshot(0);
            p.upload_2d_from(slot, offset, host.data(), shape);
            snapshot(1);
            p.upload(slot, 0, kSlot, slow_fill(staged_b));
            p.upload_2d_from(slot, offset, host.data(), shape);  // ready before the fill ahead of it
            snapshot(2);
            const PipelineStats s = p.finish();
            EXPECT_EQ(s.upload_count, 4U);
            EXPECT_EQ(s.bytes_uploaded, 2 * kSlot + 2 * shape.rows * shape.width_bytes);
        }
        EXPECT_EQ(seen[0], staged_a) << "the 2-D upload overwrote the slot before its reader ran";
        EXPECT_EQ(seen[1], overlay(staged_a));
        EXPECT_EQ(seen[2], overlay(staged_b)) << "the 2-D upload overtook the staged upload before it";

        // A 2-D upload followed by a slow staged upload of the whole slot: the staged
        // bytes win.
        std::vector<std::byte> last(kSlot);
        {
            PipelineOptions o;
            o.budget_bytes = 2 * kSlot + 4 * kKiB;
            o.slots = {{kSlot, "in"}, {kSlot, "out"}};
            o.upload_staging = {.bytes = kSlot, .count = 1};
            Pipeline p(*device, o);
            p.upload_2d_from(SlotId{0}, offset, host.data(), shape);
            p.upload(SlotId{0}, 0, kSlot, [&staged_b](std::span<std::byte> s) {
                std::this_thread::sleep_for(2ms);
                std::memcpy(s.data(), staged_b.data(), s.size());
            });
            p.compute({reads(SlotId{0}), writes(SlotId{1})},
                      [&](Queue& q) { q.copy(p.view(SlotId{0}), p.view(SlotId{1})); });
            p.download_to(SlotId{1}, 0, last.data(), kSlot);
            (void)p.finish();
        }
        EXPECT_EQ(last, staged_b);
    }
    expect_nothing_held(*device);
}

// download_2d_to's done callback: not before the compute that writes the slot has run
// (held on a flag here), then once per download, in download order, and each sees its
// own bytes already in host memory.
TEST(Pipeline2DThreads, DoneRunsAfterTheBytesLandInOrder) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    constexpr int kTiles = 6;
    const Copy2D shape{.width_bytes = 48, .rows = 10, .host_pitch_bytes = 64, .buffer_pitch_bytes = 50};
    const std::uint64_t span = shape.buffer_span_bytes();
    std::vector<std::vector<std::byte>> inputs;
    for (int t = 0; t < kTiles; ++t) inputs.push_back(random_bytes(rng, span));
    std::vector<std::byte> host(kTiles * shape.host_span_bytes(), std::byte{0});
    std::atomic<bool> release{false};
    std::vector<int> order;           // written by the download queue's thread only
    std::vector<int> landed(kTiles);  // 1: the tile's bytes were all there when done ran
    std::atomic<int> done_count{0};
    {
        PipelineOptions o;
        o.budget_bytes = 4 * span + 4 * kKiB;
        for (int i = 0; i < 4; ++i) o.slots.push_back({span, "test.slot"});
        Pipeline p(*device, o);
        for (int t = 0; t < kTiles; ++t) {
            const SlotId in{static_cast<std::uint32_t>(t % 2)};
            const SlotId out{static_cast<std::uint32_t>(2 + t % 2)};
            p.upload_from(in, 0, inputs[static_cast<std::size_t>(t)].data(), span);
            p.compute({reads(in), writes(out)}, [&, in, out, t](Queue& q) {
                if (t == 0) q.host_task([&release] { wait_for(release); });
                q.copy(p.view(in), p.view(out));
            });
            std::byte* dst = host.data() + static_cast<std::size_t>(t) * shape.host_span_bytes();
            p.download_2d_to(out, 0, dst, shape, [&, t, dst] {
                bool ok = true;
                for (std::uint64_t r = 0; r < shape.rows; ++r) {
                    ok = ok && std::memcmp(
                                   dst + r * shape.host_pitch_bytes,
                                   inputs[static_cast<std::size_t>(t)].data() + r * shape.buffer_pitch_bytes,
                                   shape.width_bytes) == 0;
                }
                landed[static_cast<std::size_t>(t)] = ok ? 1 : 0;
                order.push_back(t);
                ++done_count;
            });
        }
        std::this_thread::sleep_for(5ms);
        EXPECT_EQ(done_count.load(), 0) << "a done callback ran before its tile was computed";
        release = true;
        const PipelineStats s = p.finish();
        EXPECT_EQ(s.bytes_downloaded, kTiles * shape.rows * shape.width_bytes);
    }
    EXPECT_EQ(done_count.load(), kTiles);
    std::vector<int> expected_order(kTiles);
    for (int t = 0; t < kTiles; ++t) expected_order[static_cast<std::size_t>(t)] = t;
    EXPECT_EQ(order, expected_order);
    EXPECT_EQ(landed, std::vector<int>(kTiles, 1)) << "a done callback ran before its bytes landed";
    expect_nothing_held(*device);
}

// downloads_wait_for: a download of a slot written long ago waits, on the device, for
// a later compute into another slot it does not touch (held on a flag here) — and
// without the call it does not, so the test can tell. An unknown slot is a UsageError.
TEST(Pipeline2DThreads, DownloadsWaitForALaterComputeOnlyWhenAsked) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    const Copy2D shape{.width_bytes = 64, .rows = 4, .host_pitch_bytes = 64, .buffer_pitch_bytes = 64};
    const std::uint64_t span = shape.buffer_span_bytes();
    const std::vector<std::byte> input = random_bytes(rng, span);
    for (const bool paced : {false, true}) {
        SCOPED_TRACE(paced ? "paced" : "not paced");
        std::vector<std::byte> host(span, std::byte{0});
        std::atomic<bool> release{false};
        std::atomic<bool> landed{false};
        {
            PipelineOptions o;
            o.budget_bytes = 3 * span + 4 * kKiB;
            for (int i = 0; i < 3; ++i) o.slots.push_back({span, "test.slot"});
            Pipeline p(*device, o);
            const SlotId in{0}, done{1}, later{2};
            p.upload_from(in, 0, input.data(), span);
            p.compute({reads(in), writes(done)}, [&](Queue& q) { q.copy(p.view(in), p.view(done)); });
            p.compute({writes(later)}, [&](Queue& q) {
                q.host_task([&release] { wait_for(release); });
                q.fill(p.view(later), std::byte{7});
            });
            if (paced) p.downloads_wait_for(later);
            p.download_2d_to(done, 0, host.data(), shape, [&landed] { landed = true; });
            const auto until = std::chrono::steady_clock::now() + 2s;
            while (!paced && !landed.load() && std::chrono::steady_clock::now() < until)
                std::this_thread::sleep_for(100us);
            if (!paced) {
                EXPECT_TRUE(landed.load()) << "an unpaced download waited for a compute it does not read";
            } else {
                std::this_thread::sleep_for(20ms);
                EXPECT_FALSE(landed.load()) << "the download ran before the compute it was to wait for";
            }
            release = true;
            (void)p.finish();
        }
        EXPECT_TRUE(landed.load());
        EXPECT_EQ(host, input);
    }
    {
        PipelineOptions o;
        o.budget_bytes = span + 4 * kKiB;
        o.slots.push_back({span, "test.slot"});
        Pipeline p(*device, o);
        EXPECT_THROW(p.downloads_wait_for(SlotId{3}), outcore::UsageError);
    }
    expect_nothing_held(*device);
}

TEST(Pipeline2D, BadRangesAreUsageErrorsAndEmptyShapesNoOps) {
    auto device = make_device();
    PipelineOptions o;
    o.budget_bytes = 64 * kKiB;
    o.slots = {{1024, "a"}, {1024, "b"}};
    std::vector<std::byte> host(64 * kKiB);
    const Copy2D fits{.width_bytes = 10, .rows = 4, .host_pitch_bytes = 100, .buffer_pitch_bytes = 338};
    ASSERT_EQ(fits.buffer_span_bytes(), 1024U);
    {
        Pipeline p(*device, o);
        // Empty shapes move nothing and count nothing.
        p.upload_2d_from(SlotId{0}, 0, host.data(),
                         {.width_bytes = 0, .rows = 4, .host_pitch_bytes = 8, .buffer_pitch_bytes = 8});
        p.upload_2d_from(SlotId{0}, 0, host.data(),
                         {.width_bytes = 8, .rows = 0, .host_pitch_bytes = 8, .buffer_pitch_bytes = 8});
        p.download_2d_to(SlotId{0}, 0, host.data(),
                         {.width_bytes = 8, .rows = 0, .host_pitch_bytes = 8, .buffer_pitch_bytes = 8});
        // Exactly the slot is fine, both ways.
        p.upload_2d_from(SlotId{0}, 0, host.data(), fits);
        p.download_2d_to(SlotId{0}, 0, host.data(), fits);
        const PipelineStats s = p.finish();
        EXPECT_EQ(s.upload_count, 1U);
        EXPECT_EQ(s.download_count, 1U);
        EXPECT_EQ(s.bytes_uploaded, 40U);
    }
    // One byte beyond the slot (by offset or by span), a null host pointer, no such slot.
    auto expect_usage = [&](auto&& call) {
        Pipeline p(*device, o);
        EXPECT_THROW(call(p), outcore::UsageError);
        EXPECT_TRUE(p.failed());
    };
    expect_usage([&](Pipeline& p) { p.upload_2d_from(SlotId{0}, 1, host.data(), fits); });
    expect_usage([&](Pipeline& p) { p.download_2d_to(SlotId{0}, 1, host.data(), fits); });
    Copy2D longer = fits;
    longer.buffer_pitch_bytes += 1;
    expect_usage([&](Pipeline& p) { p.upload_2d_from(SlotId{1}, 0, host.data(), longer); });
    expect_usage([&](Pipeline& p) { p.download_2d_to(SlotId{1}, 0, host.data(), longer); });
    expect_usage([&](Pipeline& p) { p.upload_2d_from(SlotId{0}, 0, nullptr, fits); });
    expect_usage([&](Pipeline& p) { p.download_2d_to(SlotId{0}, 0, nullptr, fits); });
    expect_usage([&](Pipeline& p) { p.upload_2d_from(SlotId{7}, 0, host.data(), fits); });
    expect_usage([&](Pipeline& p) { p.download_2d_to(SlotId{7}, 0, host.data(), fits); });
    // A run wider than its pitch, and a span whose (rows − 1) · pitch wraps around to
    // a few bytes that would fit the slot: a UsageError by finish() at the latest,
    // nothing copied.
    const Copy2D wide{.width_bytes = 101, .rows = 4, .host_pitch_bytes = 100, .buffer_pitch_bytes = 300};
    ASSERT_LE(wide.buffer_span_bytes(), 1024U);  // fits the slot: only the pitch is wrong
    const Copy2D wraps{
        .width_bytes = 8, .rows = 5, .host_pitch_bytes = 8, .buffer_pitch_bytes = std::uint64_t{1} << 62};
    for (const Copy2D& bad : {wide, wraps}) {
        for (const bool upload : {true, false}) {
            std::vector<std::byte> out(64 * kKiB, std::byte{0x33});
            Pipeline p(*device, o);
            EXPECT_THROW(
                {
                    if (upload) {
                        p.upload_2d_from(SlotId{0}, 0, host.data(), bad);
                    } else {
                        p.download_2d_to(SlotId{0}, 0, out.data(), bad);
                    }
                    (void)p.finish();
                },
                outcore::UsageError)
                << (upload ? "upload" : "download") << " of " << bad.rows << " runs of " << bad.width_bytes;
            EXPECT_EQ(out, std::vector<std::byte>(64 * kKiB, std::byte{0x33}));
        }
    }
    expect_nothing_held(*device);
}

// A staged upload into a pitched place (Pipeline::upload with a Copy2D): the fill writes
// the runs packed, they land buffer_pitch apart from the offset, and the bytes between
// them keep what was there; the statistics count the runs' bytes; a staging buffer need
// only hold the runs. A place whose host pitch is not its width (not packed), that spans
// past the slot or whose runs overflow the staging buffer is a UsageError.
TEST(Pipeline2D, AStagedUploadLandsInAPitchedPlace) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    PipelineOptions o;
    o.budget_bytes = 64 * kKiB;
    o.slots = {{1024, "a"}};
    o.upload_staging = {.bytes = 1024, .count = 2};
    const std::vector<std::byte> before = random_bytes(rng, 1024);
    const Copy2D place{
        .width_bytes = 10 + rng() % 20, .rows = 4, .host_pitch_bytes = 0, .buffer_pitch_bytes = 200};
    Copy2D packed = place;
    packed.host_pitch_bytes = place.width_bytes;
    const std::uint64_t offset = 1 + rng() % 100;
    const std::vector<std::byte> runs = random_bytes(rng, place.rows * place.width_bytes);
    std::vector<std::byte> got(1024);
    {
        Pipeline p(*device, o);
        p.upload(SlotId{0}, 0, 1024,
                 [&](std::span<std::byte> s) { std::memcpy(s.data(), before.data(), 1024); });
        p.upload(SlotId{0}, offset, packed, [&](std::span<std::byte> s) {
            ASSERT_EQ(s.size(), runs.size());
            std::memcpy(s.data(), runs.data(), s.size());
        });
        p.download_to(SlotId{0}, 0, got.data(), 1024);
        const PipelineStats stats = p.finish();
        EXPECT_EQ(stats.bytes_uploaded, 1024 + runs.size());
    }
    std::vector<std::byte> want = before;
    for (std::uint64_t r = 0; r < place.rows; ++r) {
        std::memcpy(want.data() + offset + r * place.buffer_pitch_bytes, runs.data() + r * place.width_bytes,
                    place.width_bytes);
    }
    EXPECT_EQ(got, want);
    auto refused = [&](std::uint64_t at, const Copy2D& shape) {
        Pipeline p(*device, o);
        EXPECT_THROW(p.upload(SlotId{0}, at, shape, [](std::span<std::byte>) {}), outcore::UsageError);
        EXPECT_TRUE(p.failed());
    };
    refused(offset, place);  // host pitch 0: not packed
    Copy2D wide = packed;
    wide.host_pitch_bytes = wide.width_bytes + 1;
    refused(offset, wide);
    refused(1024 - packed.buffer_span_bytes() + 1, packed);  // one byte past the slot
    // The staging buffer holds the runs, not the span: runs that fill it exactly go up,
    // one byte more is refused.
    o.upload_staging.bytes = place.rows * place.width_bytes;
    {
        Pipeline p(*device, o);
        p.upload(SlotId{0}, 0, packed,
                 [](std::span<std::byte> s) { std::fill(s.begin(), s.end(), std::byte{7}); });
        EXPECT_EQ(p.finish().bytes_uploaded, o.upload_staging.bytes);
    }
    o.upload_staging.bytes -= 1;
    refused(0, packed);
    expect_nothing_held(*device);
}

}  // namespace
