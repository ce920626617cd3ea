// The Vulkan backend beyond the conformance suite (skipped where no Vulkan device is
// found; CI has Mesa's lavapipe): validation messages are fatal, the heap sizes are
// enforced by outcore (lavapipe itself never refuses), user blocks are ranges of a
// few large VkDeviceMemory blocks at aligned offsets, GEMM bindings at offsets the
// device's binding alignment does not allow, and the push-constant/buffer switch of
// kernel parameters at maxPushConstantsSize.
#include <gtest/gtest.h>
#include <vulkan/vulkan.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <future>
#include <random>
#include <set>
#include <string_view>
#include <vector>

#include "outcore/backends/cpu.hpp"
#include "outcore/backends/vulkan.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/kernel_params.hpp"
#include "support/test_seed.hpp"
#include "vulkan/vulkan_context.hpp"
#include "vulkan/vulkan_queue.hpp"

namespace {

using outcore::Block;
using outcore::BufferView;
using outcore::GemmTileArgs;
using outcore::kMiB;
using outcore::MemoryKind;

class VulkanTest : public ::testing::Test {
protected:
    void SetUp() override {
        const outcore::vulkan::VulkanProbe probe = outcore::vulkan::probe_vulkan();
        if (probe.devices.empty()) GTEST_SKIP() << "no Vulkan device: " << probe.reason;
        dev_ = outcore::vulkan::make_vulkan_device();
    }
    outcore::Device& dev() { return *dev_; }

private:
    std::unique_ptr<outcore::Device> dev_;
};

// Breaks VUID-VkBufferCreateInfo-size-00912 (a buffer of size 0) on a device opened
// with validation on.
void make_a_validation_error() {
    setenv("OUTCORE_VULKAN_VALIDATION", "1", 1);
    outcore::vulkan::Context cx(0);
    VkBufferCreateInfo bad{};
    bad.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    bad.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    bad.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    VkBuffer buffer = VK_NULL_HANDLE;
    (void)vkCreateBuffer(cx.device(), &bad, nullptr, &buffer);
}

TEST_F(VulkanTest, ValidationMessagesAreFatal) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(make_a_validation_error(), "Vulkan validation");
}

// lavapipe hands out far more than its heap and never reports out-of-memory, so the
// heap's size is outcore's to enforce; the refusal is OutOfMemory and not sticky.
TEST_F(VulkanTest, HeapSizesAreEnforcedInSoftware) {
    const std::uint64_t total = dev().info().total_memory_bytes;
    EXPECT_THROW((void)dev().allocate({.bytes = total + 1}), outcore::OutOfMemory);
    {
        // Fill the heap in the largest pieces the device allocates (4 GiB on NVIDIA),
        // then in 64 MiB ones, until refused: never more than the heap, and (a driver
        // may hold some back) at least half of it.
        const std::uint64_t piece = std::min(total / 2, dev().info().max_allocation_bytes);
        std::vector<Block> held;
        std::uint64_t got = 0;
        try {
            for (;;) {
                held.push_back(dev().allocate({.bytes = piece}));
                got += piece;
                ASSERT_LE(got, total);
            }
        } catch (const outcore::OutOfMemory&) {}
        try {
            for (;;) {
                held.push_back(dev().allocate({.bytes = 64 * kMiB}));
                got += 64 * kMiB;
                ASSERT_LE(got, total) << "a block past the heap's size was handed out";
            }
        } catch (const outcore::OutOfMemory& e) {
            EXPECT_EQ(e.requested_bytes(), 64 * kMiB);
        }
        EXPECT_GE(got, total / 2);
    }
    Block again = dev().allocate({.bytes = 64 * kMiB});  // not sticky
    EXPECT_EQ(again.bytes(), 64 * kMiB);
}

// Small blocks are ranges of one native block (never a vkAllocateMemory each), at
// offsets that are multiples of the device's alignment.
TEST_F(VulkanTest, BlocksAreAlignedRangesOfFewNativeBlocks) {
    std::mt19937_64 rng(outcore::test::seed());
    const std::uint64_t align = dev().info().min_offset_alignment;
    for (MemoryKind kind : {MemoryKind::Device, MemoryKind::HostPinned, MemoryKind::HostCached}) {
        std::vector<Block> blocks;
        std::set<std::uintptr_t> natives;
        for (int i = 0; i < 200; ++i) {
            blocks.push_back(dev().allocate({.bytes = 1 + rng() % (256 * 1024), .kind = kind}));
            EXPECT_EQ(blocks.back().raw().offset % align, 0U);
            natives.insert(blocks.back().raw().native);
        }
        EXPECT_LE(natives.size(), 1U) << "200 small blocks took " << natives.size() << " native allocations";
    }
}

// Matrices at byte offsets 4, 8, 12, ... past an aligned start: the binding starts
// at the aligned offset below and the shader adds the rest; a result that is off by
// that difference, or a binding the device refuses, fails here.
TEST_F(VulkanTest, GemmViewsAtAnyFourByteOffsetAreRight) {
    std::mt19937_64 rng(outcore::test::seed());
    std::uniform_real_distribution<float> uni(-1.0F, 1.0F);
    auto cpu = outcore::cpu::make_cpu_device({.total_memory_bytes = outcore::kGiB});
    for (int t = 0; t < 8; ++t) {
        const std::uint64_t m = 1 + rng() % 70, n = 1 + rng() % 70, k = 1 + rng() % 90;
        std::vector<float> a(m * k), b(k * n), c(m * n);
        for (float& x : a) x = uni(rng);
        for (float& x : b) x = uni(rng);
        for (float& x : c) x = uni(rng);
        const std::uint64_t off_a = 4 * (1 + rng() % 15), off_b = 4 * (1 + rng() % 15),
                            off_c = 4 * (1 + rng() % 15);
        auto run = [&](outcore::Device& d) {
            auto q = d.create_queue();
            Block block = d.allocate({.bytes = 64 * 3 + (a.size() + b.size() + c.size()) * 4 + 3 * 64});
            const BufferView va(block, off_a, a.size() * 4);
            const std::uint64_t b_at = 64 * ((off_a + va.bytes) / 64 + 1) + off_b;
            const BufferView vb(block, b_at, b.size() * 4);
            const std::uint64_t c_at = 64 * ((b_at + vb.bytes) / 64 + 1) + off_c;
            const BufferView vc(block, c_at, c.size() * 4);
            q->upload(a.data(), va);
            q->upload(b.data(), vb);
            q->upload(c.data(), vc);
            d.kernels().gemm(*q, GemmTileArgs{.m = m,
                                              .n = n,
                                              .k = k,
                                              .a = va,
                                              .lda = m,
                                              .b = vb,
                                              .ldb = k,
                                              .c = vc,
                                              .ldc = m,
                                              .alpha = 1.5,
                                              .beta = 0.5});
            std::vector<float> out(c.size());
            q->download(vc, out.data());
            q->synchronize();
            return out;
        };
        const std::vector<float> got = run(dev());
        const std::vector<float> want = run(*cpu);
        for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4) << "element " << i;
    }
    auto q = dev().create_queue();
    Block block = dev().allocate({.bytes = 4096});
    const GemmTileArgs odd{.m = 2,
                           .n = 2,
                           .k = 2,
                           .a = BufferView(block, 2, 16),
                           .lda = 2,
                           .b = block,
                           .ldb = 2,
                           .c = block,
                           .ldc = 2};
    EXPECT_THROW(dev().kernels().gemm(*q, odd), outcore::UsageError) << "f32 at byte offset 2";
}

// The GEMM shader's blocking is a set of specialization constants: other values give
// the same products (against the CPU backend), and values the device cannot run, or
// that leave threads without whole slices to stage, are refused when the device opens.
TEST_F(VulkanTest, GemmBlockingIsSpecializedAtPipelineCreation) {
    std::mt19937_64 rng(outcore::test::seed());
    std::uniform_real_distribution<float> uni(-1.0F, 1.0F);
    auto cpu = outcore::cpu::make_cpu_device({.total_memory_bytes = outcore::kGiB});
    const std::uint64_t m = 37, n = 45, k = 29;
    std::vector<float> a(m * k), b(k * n);
    for (float& x : a) x = uni(rng);
    for (float& x : b) x = uni(rng);
    auto run = [&](outcore::Device& d, bool ta, bool tb) {
        auto q = d.create_queue();
        Block ba = d.allocate({.bytes = a.size() * 4});
        Block bb = d.allocate({.bytes = b.size() * 4});
        Block bc = d.allocate({.bytes = m * n * 4});
        q->upload(a.data(), ba);
        q->upload(b.data(), bb);
        d.kernels().gemm(*q, GemmTileArgs{.trans_a = ta,
                                          .trans_b = tb,
                                          .m = m,
                                          .n = n,
                                          .k = k,
                                          .a = ba,
                                          .lda = ta ? k : m,
                                          .b = bb,
                                          .ldb = tb ? n : k,
                                          .c = bc,
                                          .ldc = m});
        std::vector<float> out(m * n);
        q->download(bc, out.data());
        q->synchronize();
        return out;
    };
    // Every transpose: each stages its slices along a different memory direction.
    std::vector<float> want[4];
    for (int t = 0; t < 4; ++t) want[t] = run(*cpu, (t & 1) != 0, (t & 2) != 0);
    for (const outcore::vulkan::GemmTile tile :
         {outcore::vulkan::GemmTile{8, 2, 8, false, false}, outcore::vulkan::GemmTile{8, 4, 8, false, false},
          outcore::vulkan::GemmTile{16, 2, 32, false, false}, outcore::vulkan::GemmTile{8, 4, 8, true, false},
          outcore::vulkan::GemmTile{8, 8, 16, true, false}}) {
        auto d = outcore::vulkan::make_vulkan_device({.index = 0, .gemm_tile = tile});
        for (int t = 0; t < 4; ++t) {
            const std::vector<float> got = run(*d, (t & 1) != 0, (t & 2) != 0);
            for (std::size_t i = 0; i < got.size(); ++i) {
                ASSERT_NEAR(got[i], want[t][i], 1e-5)
                    << tile.workgroup << "/" << tile.per_thread << "/" << tile.depth
                    << (tile.contiguous ? "c" : "") << " t" << t;
            }
        }
    }
    EXPECT_THROW(
        (void)outcore::vulkan::make_vulkan_device({.index = 0, .gemm_tile = {4, 9, 16, false, false}}),
        outcore::UsageError)
        << "more than 8x8 per thread";
    EXPECT_THROW(
        (void)outcore::vulkan::make_vulkan_device({.index = 0, .gemm_tile = {16, 4, 15, false, false}}),
        outcore::UsageError);
    EXPECT_THROW(
        (void)outcore::vulkan::make_vulkan_device({.index = 0, .gemm_tile = {64, 4, 16, false, false}}),
        outcore::UsageError)
        << "64x64 threads are more than a workgroup may have";
}

// Parameters up to maxPushConstantsSize travel inline (push constants); one byte more
// goes to a device buffer holding exactly those bytes.
TEST_F(VulkanTest, KernelParametersSwitchToABufferPastThePushConstantLimit) {
    const std::uint64_t limit = dev().info().max_inline_bytes;
    ASSERT_GE(limit, 128U) << "Vulkan guarantees 128 bytes of push constants";
    auto q = dev().create_queue();
    std::vector<std::byte> bytes(limit + 1);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 7 + 1);
    const outcore::KernelParams small =
        outcore::KernelParams::make(dev(), *q, std::span<const std::byte>(bytes.data(), limit));
    EXPECT_TRUE(small.is_inline());
    const outcore::KernelParams large = outcore::KernelParams::make(dev(), *q, bytes);
    ASSERT_FALSE(large.is_inline());
    std::vector<std::byte> back(bytes.size());
    q->download(large.buffer().sub(0, bytes.size()), back.data());
    q->synchronize();
    EXPECT_EQ(back, bytes);
}

// Copies with this device's HostPinned memory are DMA straight from its buffer; one
// whose host side overlaps its device side in the same buffer (undefined for
// vkCmdCopyBuffer) goes through staging and moves the bytes as memmove would.
TEST_F(VulkanTest, PinnedCopiesGoDirectAndOverlapsThroughStaging) {
    auto q = dev().create_queue();
    Block pinned = dev().allocate({.bytes = 4096, .kind = outcore::MemoryKind::HostPinned});
    Block device = dev().allocate({.bytes = 4096});
    std::vector<std::byte> want(4096);
    for (std::size_t i = 0; i < want.size(); ++i) {
        want[i] = static_cast<std::byte>(i * 13 + 5);
        pinned.host()[i] = want[i];
    }
    q->upload(pinned.host(), device);
    std::vector<std::byte> back(4096);
    q->download(device, back.data());
    q->synchronize();
    EXPECT_EQ(back, want);
    // Up 16 bytes within the same block: host [0, 2048) onto [16, 2064).
    q->upload(pinned.host(), BufferView(pinned, 16, 2048));
    q->synchronize();
    for (std::size_t i = 0; i < 2048; ++i) ASSERT_EQ(pinned.host()[16 + i], want[i]) << i;
    // Down into pinned memory from the device block, 2-D, straight into its buffer.
    std::memset(pinned.host(), 0, 4096);
    q->download_2d(
        device, pinned.host(),
        outcore::Copy2D{.width_bytes = 64, .rows = 8, .host_pitch_bytes = 256, .buffer_pitch_bytes = 64});
    q->synchronize();
    for (std::size_t r = 0; r < 8; ++r) {
        for (std::size_t c = 0; c < 64; ++c)
            ASSERT_EQ(pinned.host()[r * 256 + c], want[r * 64 + c]) << r << "," << c;
        ASSERT_EQ(pinned.host()[r * 256 + 64], std::byte{0}) << "the gap between rows is not written";
    }
}

// Staged copies (packed on the host into 32 MiB bands): the device holds exactly the
// bytes sent, read back through the direct path, not the staged one; a 1-D copy with
// a tail that is not a whole 1 MiB row; and a short-run upload from pinned memory that
// a download on the same queue has just written reads what the download wrote, not
// what was there when the upload was recorded.
TEST_F(VulkanTest, StagedCopiesPutEveryByteInPlaceAndInQueueOrder) {
    auto q = dev().create_queue(outcore::QueueRole::Upload);
    const std::uint64_t bytes = 40 * kMiB + 123;
    std::vector<std::byte> sent(bytes);
    std::mt19937_64 rng(outcore::test::seed());
    for (auto& b : sent) b = static_cast<std::byte>(rng());
    Block device = dev().allocate({.bytes = bytes});
    Block pinned = dev().allocate({.bytes = 2 * bytes, .kind = outcore::MemoryKind::HostPinned});
    q->upload(sent.data(), device);      // pageable: staged, in bands of 1 MiB rows and a 123-byte tail
    q->download(device, pinned.host());  // straight into the pinned block
    q->synchronize();
    ASSERT_EQ(std::memcmp(pinned.host(), sent.data(), bytes), 0);
    std::vector<std::byte> back(bytes);
    q->download(device, back.data());  // pageable: staged
    q->synchronize();
    ASSERT_EQ(back, sent);

    // 4 KiB runs 8 KiB apart in pinned memory that a direct download has just written.
    const std::uint64_t run = 4096;
    const std::uint64_t rows = 9 * kMiB / run;
    std::memset(pinned.host(), 0, 2 * bytes);
    Block other = dev().allocate({.bytes = rows * run});
    q->download(device, pinned.host());  // recorded, not yet run, when the upload is reached
    q->upload_2d(
        pinned.host(), other,
        outcore::Copy2D{
            .width_bytes = run, .rows = rows, .host_pitch_bytes = 2 * run, .buffer_pitch_bytes = run});
    q->download(other, back.data());
    q->synchronize();
    for (std::uint64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(std::memcmp(back.data() + r * run, sent.data() + r * 2 * run, run), 0)
            << "row " << r << ": the upload read the bytes before the download wrote them";
    }
}

// A short-run upload packs its bytes on the host when its queue reaches it. It waits
// for earlier work only where a download not yet finished writes those bytes: one on
// another queue that it waits for through an event (the upload must read what the
// download wrote), but not one into other bytes of the same pinned block (the GEMM's C
// tiles going down while its B chunks go up: waiting there serialised every pack).
TEST_F(VulkanTest, ShortRunUploadsWaitOnlyForDownloadsIntoTheirBytes) {
    auto down = dev().create_queue(outcore::QueueRole::Download);
    auto up = dev().create_queue(outcore::QueueRole::Upload);
    auto& vk_up = outcore::vulkan::vulkan_queue(*up, "test");
    const std::uint64_t run = 4096;
    const std::uint64_t rows = 8 * kMiB / run;
    const std::uint64_t span = rows * 2 * run;  // runs 8 KiB apart
    std::vector<std::byte> sent(span);
    std::mt19937_64 rng(outcore::test::seed());
    for (auto& b : sent) b = static_cast<std::byte>(rng());
    Block device = dev().allocate({.bytes = span});
    Block pinned = dev().allocate({.bytes = 2 * span, .kind = outcore::MemoryKind::HostPinned});
    Block other = dev().allocate({.bytes = rows * run});
    up->upload(sent.data(), device);
    up->synchronize();
    std::memset(pinned.host(), 0, 2 * span);
    const outcore::Copy2D shape{
        .width_bytes = run, .rows = rows, .host_pitch_bytes = 2 * run, .buffer_pitch_bytes = run};
    std::vector<std::byte> back(rows * run);

    // Disjoint: a download into the first half, an upload from the second. Work is
    // pending on the upload queue (the first copy) but none writes the packed bytes.
    down->download(device, pinned.host());
    up->upload(sent.data(), outcore::BufferView(device).sub(0, run));
    up->upload_2d(static_cast<const std::byte*>(pinned.host()) + span, other, shape);
    up->download(other, back.data());
    up->synchronize();
    down->synchronize();
    EXPECT_EQ(vk_up.host_read_waits(), 0U) << "waited for work that writes none of its bytes";
    for (std::uint64_t r = 0; r < rows; ++r) ASSERT_EQ(back[r * run], std::byte{0}) << "row " << r;

    // Overlapping, across queues: the upload waits for the download's record.
    std::memset(pinned.host(), 0, 2 * span);
    auto landed = dev().create_event();
    down->download(device, pinned.host());
    down->record(*landed);
    up->wait(*landed);
    up->upload_2d(pinned.host(), other, shape);
    up->download(other, back.data());
    up->synchronize();
    for (std::uint64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(std::memcmp(back.data() + r * run, sent.data() + r * 2 * run, run), 0)
            << "row " << r << ": the upload read the bytes before the download wrote them";
    }
}

// Many small commands from several queues, ordered by events: batching into command
// buffers must keep each queue's order.
TEST_F(VulkanTest, LongStreamsOfSmallCommandsKeepTheirOrder) {
    auto q = dev().create_queue(outcore::QueueRole::Upload);
    auto r = dev().create_queue(outcore::QueueRole::Compute);
    auto done = dev().create_event();
    Block x = dev().allocate({.bytes = 4096});
    Block y = dev().allocate({.bytes = 4096});
    std::vector<std::uint32_t> values(1024);
    for (std::uint32_t round = 0; round < 600; ++round) {
        q->fill(BufferView(x, 4 * (round % 1024), 4), static_cast<std::byte>(round & 0xFF));
    }
    q->record(*done);
    r->wait(*done);
    r->copy(x, y);
    r->download(y, values.data());
    r->synchronize();
    for (std::uint32_t i = 0; i < 1024; ++i) {
        // The last round that wrote word i: rounds i, i + 1024 (none past 600).
        if (i < 600) {
            EXPECT_EQ(values[i], (i & 0xFFU) * 0x01010101U) << i;
        }
    }
}

// Waits with no command between them go in one submission (with the command after
// them), one wait per timeline: a GEMM reading four A pieces, its B chunk and its C slot
// waited in six submissions on an H100, five with no commands (BENCHMARKS.md).
TEST_F(VulkanTest, WaitsWithNoCommandBetweenThemShareOneSubmission) {
    const char* mode = std::getenv("OUTCORE_VULKAN_EVENTS");
    if (mode != nullptr && std::string_view(mode) != "device") GTEST_SKIP() << "waits on the host";
    auto up = dev().create_queue(outcore::QueueRole::Upload);
    auto compute = dev().create_queue(outcore::QueueRole::Compute);
    auto& vk_compute = outcore::vulkan::vulkan_queue(*compute, "test");
    constexpr std::uint32_t kWaits = 4;
    Block big = dev().allocate({.bytes = 256ULL << 20});
    Block x = dev().allocate({.bytes = kWaits * 4096});
    Block y = dev().allocate({.bytes = kWaits * 4096});
    std::vector<std::unique_ptr<outcore::Event>> filled;
    for (std::uint32_t attempt = 0; attempt < 5; ++attempt) {
        compute->synchronize();
        const std::uint64_t submits = vk_compute.submits();
        const std::uint64_t device_waits = vk_compute.device_waits();
        // A long fill first, so every record below is still in flight when waited for.
        up->fill(big, std::byte{1});
        filled.clear();
        for (std::uint32_t i = 0; i < kWaits; ++i) {
            up->fill(BufferView(x, i * 4096, 4096), static_cast<std::byte>(i + 1));
            filled.push_back(dev().create_event());
            up->record(*filled.back());
        }
        // The compute worker waits here until every wait and the copy are queued, so it
        // never finds its FIFO empty between them (an idle queue submits what it has).
        std::promise<void> queued;
        compute->host_task([ready = queued.get_future().share()] { ready.wait(); });
        for (const auto& e : filled) compute->wait(*e);
        compute->copy(x, y);
        queued.set_value();
        compute->synchronize();
        std::vector<std::byte> back(kWaits * 4096);
        compute->download(y, back.data());
        compute->synchronize();
        for (std::uint32_t i = 0; i < kWaits; ++i)
            ASSERT_EQ(back[i * 4096 + 7], static_cast<std::byte>(i + 1));
        const std::uint64_t waited = vk_compute.device_waits() - device_waits;
        if (waited < 2) continue;  // the fills finished first: nothing to share, try again
        // The copy and every device wait: one submission (the download's is after it).
        EXPECT_EQ(vk_compute.submits() - submits, 2U) << waited << " device waits";
        return;
    }
    GTEST_SKIP() << "the upload queue finished before every wait, five times";
}

// Two queues hand a buffer back and forth through events: each wait is made on the
// device (the record's timeline semaphore), the data come out in order, and a queue
// may be destroyed while another still has a device wait on its semaphore pending.
TEST_F(VulkanTest, EventWaitsBetweenQueuesHappenOnTheDevice) {
    auto up = dev().create_queue(outcore::QueueRole::Upload);
    auto compute = dev().create_queue(outcore::QueueRole::Compute);
    auto& vk_compute = outcore::vulkan::vulkan_queue(*compute, "test");
    auto& vk_up = outcore::vulkan::vulkan_queue(*up, "test");
    constexpr std::uint32_t kRounds = 40;
    constexpr std::uint64_t kBytes = 1 << 20;
    Block x = dev().allocate({.bytes = kBytes});
    Block y = dev().allocate({.bytes = kBytes * kRounds});
    auto filled = dev().create_event();
    auto copied = dev().create_event();
    up->fill(y, std::byte{0});  // 40 MiB first: the first record is still in flight when waited for
    for (std::uint32_t round = 0; round < kRounds; ++round) {
        if (round > 0) up->wait(*copied);  // x is free again
        up->fill(x, static_cast<std::byte>(round + 1));
        up->record(*filled);
        compute->wait(*filled);
        compute->copy(x, BufferView(y, round * kBytes, kBytes));
        compute->record(*copied);
    }
    compute->synchronize();
    EXPECT_TRUE(filled->query());  // the waiter's synchronize completes what it waited for
    up->synchronize();
    std::vector<std::byte> back(kBytes * kRounds);
    compute->download(y, back.data());
    compute->synchronize();
    for (std::uint32_t round = 0; round < kRounds; ++round) {
        ASSERT_EQ(back[round * kBytes], static_cast<std::byte>(round + 1)) << round;
        ASSERT_EQ(back[(round + 1) * kBytes - 1], static_cast<std::byte>(round + 1)) << round;
    }
    // Every wait had a record still in flight or already done; those in flight went to
    // the device (unless OUTCORE_VULKAN_EVENTS chose host waits).
    const char* mode = std::getenv("OUTCORE_VULKAN_EVENTS");
    if (mode == nullptr || std::string_view(mode) == "device") {
        EXPECT_GT(vk_compute.device_waits() + vk_up.device_waits(), 0U);
    } else {
        EXPECT_EQ(vk_compute.device_waits() + vk_up.device_waits(), 0U);
    }
    EXPECT_LE(vk_compute.device_waits(), kRounds);

    // The recording queue goes away before the waiter has run: its semaphore must live on.
    up->fill(x, std::byte{0x5A});
    up->record(*filled);
    compute->wait(*filled);
    up.reset();
    compute->copy(x, BufferView(y, 0, kBytes));
    compute->download(BufferView(y, 0, 16), back.data());
    compute->synchronize();
    EXPECT_EQ(back[0], std::byte{0x5A});
}

}  // namespace
