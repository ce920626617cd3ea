// Queue::upload_2d / download_2d through the base class's default do_copy_2d, the one a
// backend without a native 2-D copy gets (one do_copy per run). The CPU and CUDA
// backends override it, so the conformance suite never reaches it: a recording queue
// here does, over HostPinned blocks of a CPU device (host-visible, so its copies run
// synchronously with memcpy). Also Copy2D's span arithmetic.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "outcore/backends/cpu.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/device.hpp"
#include "support/test_seed.hpp"

namespace outcore {
namespace {

/// A queue that runs every copy at once and records what the base class asked for.
class RecordingQueue final : public Queue {
public:
    struct Call {
        std::uint64_t buffer_offset = 0;  // offset of the view in its block
        const void* host = nullptr;
        std::uint64_t bytes = 0;
        bool upload = false;
    };
    explicit RecordingQueue(Device& device) : Queue(device, QueueRole::General) {}
    std::vector<Call> calls;

private:
    void do_copy(const BufferView& src, const BufferView& dst, HostRange host, std::uint64_t bytes) override {
        if (host.src != nullptr) {
            calls.push_back({dst.offset, host.src, bytes, true});
            std::memcpy(dst.host(), host.src, bytes);
        } else if (host.dst != nullptr) {
            calls.push_back({src.offset, host.dst, bytes, false});
            std::memcpy(host.dst, src.host(), bytes);
        } else {
            std::memcpy(dst.host(), src.host(), bytes);
        }
    }
    void do_fill(const BufferView& dst, std::byte value) override {
        std::memset(dst.host(), std::to_integer<int>(value), dst.bytes);
    }
    void do_record(Event&) override {}
    void do_wait(const Event&) override {}
    void do_host_task(std::function<void()> task) override { task(); }
    void do_synchronize() override {}
};

std::vector<std::byte> random_bytes(std::mt19937_64& rng, std::size_t n) {
    std::vector<std::byte> out(n);
    for (auto& b : out) b = static_cast<std::byte>(rng() & 0xFF);
    return out;
}

TEST(Copy2D, SpansCountWholePitchesButTheLastRun) {
    const Copy2D s{.width_bytes = 10, .rows = 4, .host_pitch_bytes = 32, .buffer_pitch_bytes = 12};
    EXPECT_EQ(s.host_span_bytes(), 3U * 32U + 10U);
    EXPECT_EQ(s.buffer_span_bytes(), 3U * 12U + 10U);
    const Copy2D one{.width_bytes = 7, .rows = 1, .host_pitch_bytes = 1000, .buffer_pitch_bytes = 7};
    EXPECT_EQ(one.host_span_bytes(), 7U);  // one run: the pitch does not matter
    EXPECT_EQ(one.buffer_span_bytes(), 7U);
    EXPECT_EQ((Copy2D{.width_bytes = 0, .rows = 9, .host_pitch_bytes = 4, .buffer_pitch_bytes = 4}
                   .buffer_span_bytes()),
              0U);
    EXPECT_EQ((Copy2D{.width_bytes = 4, .rows = 0, .host_pitch_bytes = 4, .buffer_pitch_bytes = 4}
                   .host_span_bytes()),
              0U);
}

// Random shapes through the default implementation: one do_copy per run, at the run's
// offsets on both sides, and the bytes land exactly there.
TEST(Copy2D, DefaultImplementationCopiesRunByRun) {
    std::mt19937_64 rng(test::seed());
    auto device = cpu::make_cpu_device({.total_memory_bytes = 64 * kMiB});
    RecordingQueue q(*device);
    for (int t = 0; t < 50; ++t) {
        Copy2D s{.width_bytes = 1 + rng() % 200, .rows = 1 + rng() % 20};
        s.host_pitch_bytes = s.width_bytes + (t % 3 == 0 ? 0 : rng() % 64);
        s.buffer_pitch_bytes = s.width_bytes + (t % 4 == 0 ? 0 : rng() % 64);
        SCOPED_TRACE(testing::Message() << s.rows << " runs of " << s.width_bytes << ", pitches "
                                        << s.host_pitch_bytes << " / " << s.buffer_pitch_bytes);
        const std::uint64_t view_off = rng() % 100;
        Block b = device->allocate(
            {.bytes = view_off + s.buffer_span_bytes() + rng() % 50, .kind = MemoryKind::HostPinned});
        const auto around = static_cast<std::byte>(rng() & 0xFF);
        std::memset(b.host(), std::to_integer<int>(around), b.bytes());
        const BufferView view(b, view_off, s.buffer_span_bytes());
        const std::vector<std::byte> src = random_bytes(rng, s.host_span_bytes());

        q.calls.clear();
        q.upload_2d(src.data(), view, s);
        ASSERT_EQ(q.calls.size(), s.rows);
        std::vector<std::byte> want(b.bytes(), around);
        for (std::uint64_t r = 0; r < s.rows; ++r) {
            const RecordingQueue::Call& c = q.calls[r];
            EXPECT_TRUE(c.upload);
            EXPECT_EQ(c.buffer_offset, view_off + r * s.buffer_pitch_bytes) << "run " << r;
            EXPECT_EQ(c.host, src.data() + r * s.host_pitch_bytes) << "run " << r;
            EXPECT_EQ(c.bytes, s.width_bytes);
            std::memcpy(want.data() + view_off + r * s.buffer_pitch_bytes,
                        src.data() + r * s.host_pitch_bytes, s.width_bytes);
        }
        ASSERT_EQ(std::memcmp(b.host(), want.data(), want.size()), 0);

        // Back out with another host pitch, into memory whose gaps must survive.
        Copy2D down = s;
        down.host_pitch_bytes = s.width_bytes + rng() % 32;
        std::vector<std::byte> dst = random_bytes(rng, down.host_span_bytes());
        std::vector<std::byte> dst_want = dst;
        for (std::uint64_t r = 0; r < s.rows; ++r) {
            std::memcpy(dst_want.data() + r * down.host_pitch_bytes, src.data() + r * s.host_pitch_bytes,
                        s.width_bytes);
        }
        q.calls.clear();
        q.download_2d(view, dst.data(), down);
        ASSERT_EQ(q.calls.size(), s.rows);
        for (std::uint64_t r = 0; r < s.rows; ++r) {
            EXPECT_FALSE(q.calls[r].upload);
            EXPECT_EQ(q.calls[r].buffer_offset, view_off + r * s.buffer_pitch_bytes);
            EXPECT_EQ(q.calls[r].host, dst.data() + r * down.host_pitch_bytes);
        }
        EXPECT_EQ(dst, dst_want);
    }
}

// The checks run before the backend sees anything: a bad or empty shape makes no call.
TEST(Copy2D, DefaultImplementationSeesOnlyCheckedNonEmptyCopies) {
    auto device = cpu::make_cpu_device({.total_memory_bytes = 64 * kMiB});
    RecordingQueue q(*device);
    Block b = device->allocate({.bytes = 256, .kind = MemoryKind::HostPinned});
    std::vector<std::byte> host(1024);
    EXPECT_THROW(q.upload_2d(host.data(), b,
                             {.width_bytes = 9, .rows = 2, .host_pitch_bytes = 8, .buffer_pitch_bytes = 9}),
                 UsageError);
    EXPECT_THROW(
        q.download_2d(b, host.data(),
                      {.width_bytes = 8, .rows = 2, .host_pitch_bytes = 8, .buffer_pitch_bytes = 249}),
        UsageError);  // span 257 > 256
    EXPECT_NO_THROW(q.upload_2d(
        host.data(), b, {.width_bytes = 8, .rows = 0, .host_pitch_bytes = 8, .buffer_pitch_bytes = 8}));
    EXPECT_NO_THROW(q.download_2d(
        b, host.data(), {.width_bytes = 0, .rows = 3, .host_pitch_bytes = 8, .buffer_pitch_bytes = 8}));
    EXPECT_TRUE(q.calls.empty());
    // Exactly filling the buffer is fine.
    q.download_2d(b, host.data(),
                  {.width_bytes = 8, .rows = 2, .host_pitch_bytes = 8, .buffer_pitch_bytes = 248});
    EXPECT_EQ(q.calls.size(), 2U);
}

}  // namespace
}  // namespace outcore
