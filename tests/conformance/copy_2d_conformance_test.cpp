// Queue::upload_2d / download_2d, run against every device the registry finds (the
// same devices as device_conformance_test.cpp; CUDA uses cudaMemcpy2DAsync, the CPU
// backend its own loop).
//
// What is checked: random 2-D shapes with host pitch, buffer pitch and width all
// different go host → buffer → host bit-exact, for every memory kind of the buffer and
// for pageable and pinned host memory; no byte outside the runs changes, neither in
// the buffer (between runs, before the view, after the span) nor in host memory (the
// gaps between runs); 2-D copies keep queue order with fills, plain copies and
// each other; zero rows or zero width are no-ops; a run wider than a pitch, a span
// beyond the buffer, a span whose rows × pitch overflows, a null host pointer and a
// foreign buffer are UsageError, and leave the buffer and the queue untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "outcore/core/error.hpp"
#include "outcore/device/registry.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::Block;
using outcore::BufferView;
using outcore::Copy2D;
using outcore::Device;
using outcore::MemoryKind;
using outcore::Queue;
using outcore::UsageError;

constexpr std::array<MemoryKind, 3> kKinds = {MemoryKind::Device, MemoryKind::HostPinned,
                                              MemoryKind::HostCached};

std::vector<std::string> available_devices() {
    std::vector<std::string> ids;
    for (const outcore::BackendProbe& probe : outcore::probe_backends()) {
        if (!probe.available) continue;
        for (const outcore::DeviceInfo& info : probe.devices) ids.push_back(info.id());
    }
    return ids;
}

std::vector<std::byte> random_bytes(std::mt19937_64& rng, std::size_t n) {
    std::vector<std::byte> out(n);
    for (auto& b : out) b = static_cast<std::byte>(rng() & 0xFF);
    return out;
}

/// A random shape: widths from 1 byte to a few KiB, pitches equal to the width or
/// wider by a random amount, so every combination of "packed" and "strided" occurs.
Copy2D random_shape(std::mt19937_64& rng) {
    Copy2D s;
    s.width_bytes = rng() % 4 == 0 ? 1 + rng() % 8 : 1 + rng() % 3000;
    s.rows = 1 + rng() % 48;
    s.host_pitch_bytes = s.width_bytes + (rng() % 3 == 0 ? 0 : 1 + rng() % 200);
    s.buffer_pitch_bytes = s.width_bytes + (rng() % 3 == 0 ? 0 : 1 + rng() % 200);
    return s;
}

/// Host memory for one side of a copy: pageable (a vector) or pinned (a HostPinned
/// block of the device, what a direct tile transfer uses).
class HostSide {
public:
    HostSide(Device& dev, bool pinned, std::size_t bytes) {
        if (pinned) {
            block_ = dev.allocate({.bytes = std::max<std::size_t>(bytes, 1),
                                   .kind = MemoryKind::HostPinned,
                                   .tag = "conformance.host"});
            data_ = block_.host();
        } else {
            pageable_.resize(std::max<std::size_t>(bytes, 1));
            data_ = pageable_.data();
        }
        bytes_ = bytes;
    }
    [[nodiscard]] std::byte* data() const noexcept { return data_; }
    [[nodiscard]] std::vector<std::byte> bytes() const { return {data_, data_ + bytes_}; }
    void assign(const std::vector<std::byte>& v) { std::memcpy(data_, v.data(), std::min(v.size(), bytes_)); }

private:
    Block block_;
    std::vector<std::byte> pageable_;
    std::byte* data_ = nullptr;
    std::size_t bytes_ = 0;
};

/// `before` with the runs of `shape` (at `at` on the side with pitch `pitch`) taken
/// from `runs` (at `runs_at` with pitch `runs_pitch`).
std::vector<std::byte> with_runs(std::vector<std::byte> before, std::uint64_t at, std::uint64_t pitch,
                                 const std::vector<std::byte>& runs, std::uint64_t runs_at,
                                 std::uint64_t runs_pitch, const Copy2D& shape) {
    for (std::uint64_t r = 0; r < shape.rows; ++r) {
        std::memcpy(before.data() + at + r * pitch, runs.data() + runs_at + r * runs_pitch,
                    static_cast<std::size_t>(shape.width_bytes));
    }
    return before;
}

/// Index of the first difference, or -1.
std::int64_t first_difference(const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
    if (a.size() != b.size()) return static_cast<std::int64_t>(std::min(a.size(), b.size()));
    const auto it = std::mismatch(a.begin(), a.end(), b.begin());
    return it.first == a.end() ? -1 : it.first - a.begin();
}

class Copy2DConformance : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        dev_ = outcore::open_device(GetParam());
        ASSERT_NE(dev_, nullptr);
    }
    Device& dev() { return *dev_; }
    std::vector<std::byte> read(Queue& q, const BufferView& view) {
        std::vector<std::byte> out(view.bytes, std::byte{0xCC});
        q.download(view, out.data());
        q.synchronize();
        return out;
    }

    std::unique_ptr<Device> dev_;
};

// Host (pitch h) → buffer (pitch b) → host (another pitch h'): the bytes of every run
// arrive, and nothing else changes on either side.
TEST_P(Copy2DConformance, RoundTripsWithPitchesOtherThanTheWidth) {
    std::mt19937_64 rng(outcore::test::seed());
    auto q = dev().create_queue();
    for (MemoryKind kind : kKinds) {
        for (const bool pinned : {false, true}) {
            for (std::uint64_t t = 0; t < outcore::test::scaled(6); ++t) {
                Copy2D up = random_shape(rng);
                if (t == 0) {  // one large, strided copy: the DMA path rather than a few bytes
                    up = {.width_bytes = 4096 + rng() % 64,
                          .rows = 200 + rng() % 56,
                          .host_pitch_bytes = 0,
                          .buffer_pitch_bytes = 0};
                    up.host_pitch_bytes = up.width_bytes + 64 + rng() % 64;
                    up.buffer_pitch_bytes = up.width_bytes + 1 + rng() % 64;
                }
                Copy2D down = up;
                down.host_pitch_bytes = up.width_bytes + rng() % 100;
                SCOPED_TRACE(testing::Message()
                             << outcore::to_string(kind) << (pinned ? ", pinned host" : ", pageable host")
                             << ": " << up.rows << " runs of " << up.width_bytes << " bytes, pitches host "
                             << up.host_pitch_bytes << " / buffer " << up.buffer_pitch_bytes << " / back "
                             << down.host_pitch_bytes);
                const std::uint64_t view_off = rng() % 300;
                const std::uint64_t view_extra =
                    rng() % 2 == 0 ? 0 : 1 + rng() % 100;  // view beyond the span
                const std::uint64_t span = up.buffer_span_bytes();
                ASSERT_EQ(span, (up.rows - 1) * up.buffer_pitch_bytes + up.width_bytes);
                Block b = dev().allocate({.bytes = view_off + span + view_extra + rng() % 100, .kind = kind});
                const BufferView view(b, view_off, span + view_extra);
                const auto around = static_cast<std::byte>(rng() & 0xFF);
                q->fill(b, around);

                const std::uint64_t src_off = rng() % 64;
                HostSide src(dev(), pinned, src_off + up.host_span_bytes() + rng() % 64);
                const std::vector<std::byte> src_bytes = random_bytes(rng, src.bytes().size());
                src.assign(src_bytes);
                q->upload_2d(src.data() + src_off, view, up);
                const std::vector<std::byte> in_buffer = read(*q, b);
                const std::vector<std::byte> want_buffer =
                    with_runs(std::vector<std::byte>(in_buffer.size(), around), view_off,
                              up.buffer_pitch_bytes, src_bytes, src_off, up.host_pitch_bytes, up);
                EXPECT_EQ(first_difference(in_buffer, want_buffer), -1) << "buffer after upload_2d";
                EXPECT_EQ(src.bytes(), src_bytes) << "upload_2d changed its source";

                const std::uint64_t dst_off = rng() % 64;
                HostSide dst(dev(), pinned, dst_off + down.host_span_bytes() + rng() % 64);
                const std::vector<std::byte> dst_before = random_bytes(rng, dst.bytes().size());
                dst.assign(dst_before);
                q->download_2d(view, dst.data() + dst_off, down);
                q->synchronize();
                const std::vector<std::byte> want_host = with_runs(
                    dst_before, dst_off, down.host_pitch_bytes, src_bytes, src_off, up.host_pitch_bytes, up);
                EXPECT_EQ(first_difference(dst.bytes(), want_host), -1) << "host memory after download_2d";
                EXPECT_EQ(read(*q, b), in_buffer) << "download_2d changed the buffer";
            }
        }
    }
}

// A random program of 2-D uploads and downloads mixed with fills, plain uploads and
// copies between two buffers, all queued before any runs (a gate holds the queue):
// it must leave what running it in order on a host model leaves.
TEST_P(Copy2DConformance, TwoDCopiesKeepQueueOrder) {
    std::mt19937_64 rng(outcore::test::seed());
    constexpr std::size_t kBytes = 16384;
    std::array<Block, 2> blocks = {dev().allocate({.bytes = kBytes, .kind = MemoryKind::Device}),
                                   dev().allocate({.bytes = kBytes, .kind = MemoryKind::Device})};
    std::array<std::vector<std::byte>, 2> model = {std::vector<std::byte>(kBytes, std::byte{0}),
                                                   std::vector<std::byte>(kBytes, std::byte{0})};
    HostSide pinned(dev(), true, kBytes);  // pinned sources are read when the queue gets there
    const std::vector<std::byte> pinned_bytes = random_bytes(rng, kBytes);
    pinned.assign(pinned_bytes);
    auto q = dev().create_queue();
    std::atomic<bool> open{false};
    q->host_task([&open] {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (!open.load() && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::microseconds(200));
    });
    for (std::size_t i = 0; i < blocks.size(); ++i) q->fill(blocks[i], std::byte{0});
    std::vector<std::vector<std::byte>> sources;
    struct Download {
        std::vector<std::byte> got, want;
    };
    std::vector<Download> downloads;
    const std::uint64_t ops = outcore::test::scaled(200);
    sources.reserve(ops);
    downloads.reserve(ops);
    for (std::uint64_t op = 0; op < ops; ++op) {
        const std::size_t bi = rng() % blocks.size();
        Copy2D s{.width_bytes = 1 + rng() % 256, .rows = 1 + rng() % 16};
        s.host_pitch_bytes = s.width_bytes + rng() % 64;
        s.buffer_pitch_bytes = s.width_bytes + rng() % 64;
        const std::uint64_t off = rng() % (kBytes - s.buffer_span_bytes() + 1);
        const BufferView view(blocks[bi], off, s.buffer_span_bytes());
        switch (rng() % 5) {
            case 0: {
                const auto v = static_cast<std::byte>(rng() & 0xFF);
                q->fill(view, v);
                std::fill_n(model[bi].begin() + static_cast<std::ptrdiff_t>(off), view.bytes, v);
                break;
            }
            case 1: {  // pageable source
                sources.push_back(random_bytes(rng, s.host_span_bytes()));
                q->upload_2d(sources.back().data(), view, s);
                model[bi] =
                    with_runs(model[bi], off, s.buffer_pitch_bytes, sources.back(), 0, s.host_pitch_bytes, s);
                break;
            }
            case 2: {  // pinned source
                const std::uint64_t at = rng() % (kBytes - s.host_span_bytes() + 1);
                q->upload_2d(pinned.data() + at, view, s);
                model[bi] =
                    with_runs(model[bi], off, s.buffer_pitch_bytes, pinned_bytes, at, s.host_pitch_bytes, s);
                break;
            }
            case 3: {
                Download d;
                d.got = std::vector<std::byte>(s.host_span_bytes(), std::byte{0xEE});
                d.want = with_runs(d.got, 0, s.host_pitch_bytes, model[bi], off, s.buffer_pitch_bytes, s);
                downloads.push_back(std::move(d));
                q->download_2d(view, downloads.back().got.data(), s);
                break;
            }
            default: {
                const std::size_t di = 1 - bi;
                const std::uint64_t doff = rng() % (kBytes - view.bytes + 1);
                q->copy(view, BufferView(blocks[di], doff, view.bytes));
                std::copy_n(model[bi].begin() + static_cast<std::ptrdiff_t>(off), view.bytes,
                            model[di].begin() + static_cast<std::ptrdiff_t>(doff));
                break;
            }
        }
    }
    open = true;
    q->synchronize();
    for (std::size_t i = 0; i < downloads.size(); ++i)
        EXPECT_EQ(first_difference(downloads[i].got, downloads[i].want), -1) << "download " << i;
    for (std::size_t i = 0; i < blocks.size(); ++i)
        EXPECT_EQ(first_difference(read(*q, blocks[i]), model[i]), -1) << "block " << i;
    EXPECT_EQ(pinned.bytes(), pinned_bytes);
}

TEST_P(Copy2DConformance, ZeroRowsOrZeroWidthIsANoOp) {
    std::mt19937_64 rng(outcore::test::seed());
    auto q = dev().create_queue();
    const std::vector<std::byte> data = random_bytes(rng, 4096);
    Block b = dev().allocate({.bytes = 4096});
    q->upload(data.data(), b);
    std::vector<std::byte> host(4096, std::byte{0x5A});
    const std::vector<std::byte> host_before = host;
    const Copy2D empties[] = {
        {.width_bytes = 16, .rows = 0, .host_pitch_bytes = 32, .buffer_pitch_bytes = 32},
        {.width_bytes = 0, .rows = 7, .host_pitch_bytes = 32, .buffer_pitch_bytes = 32},
        {.width_bytes = 0, .rows = 0, .host_pitch_bytes = 0, .buffer_pitch_bytes = 0},
        {.width_bytes = 0, .rows = UINT64_MAX, .host_pitch_bytes = UINT64_MAX, .buffer_pitch_bytes = 0},
    };
    for (const Copy2D& s : empties) {
        EXPECT_EQ(s.buffer_span_bytes(), 0U);
        EXPECT_EQ(s.host_span_bytes(), 0U);
        // Even into an empty view: an empty copy needs no room.
        for (const BufferView& view : {BufferView(b), BufferView(b, 4096, 0), BufferView(b, 100, 0)}) {
            EXPECT_NO_THROW(q->upload_2d(host.data(), view, s));
            EXPECT_NO_THROW(q->download_2d(view, host.data(), s));
        }
    }
    EXPECT_EQ(read(*q, b), data);
    EXPECT_EQ(host, host_before);
}

TEST_P(Copy2DConformance, BadShapesAreUsageErrorsAndChangeNothing) {
    std::mt19937_64 rng(outcore::test::seed());
    auto q = dev().create_queue();
    constexpr std::uint64_t kBytes = 4096;
    const std::vector<std::byte> data = random_bytes(rng, kBytes);
    Block b = dev().allocate({.bytes = kBytes});
    q->upload(data.data(), b);
    std::vector<std::byte> host(kBytes, std::byte{0x5A});
    const std::vector<std::byte> host_before = host;
    struct Bad {
        const char* why;
        Copy2D shape;
        BufferView view;
    };
    const Bad bad[] = {
        {"run wider than the host pitch",
         {.width_bytes = 33, .rows = 2, .host_pitch_bytes = 32, .buffer_pitch_bytes = 64},
         b},
        {"run wider than the buffer pitch",
         {.width_bytes = 33, .rows = 2, .host_pitch_bytes = 64, .buffer_pitch_bytes = 32},
         b},
        {"one run wider than its pitch",
         {.width_bytes = 33, .rows = 1, .host_pitch_bytes = 32, .buffer_pitch_bytes = 32},
         b},
        // (rows − 1) · pitch + width is one byte more than the view.
        {"span one byte beyond the view",
         {.width_bytes = 16, .rows = 4, .host_pitch_bytes = 16, .buffer_pitch_bytes = 100},
         BufferView(b, 0, 315)},
        {"span beyond the view's end in the block",
         {.width_bytes = 8, .rows = 2, .host_pitch_bytes = 8, .buffer_pitch_bytes = 8},
         BufferView(b, kBytes - 15, 15)},
        {"span beyond the buffer",
         {.width_bytes = 64, .rows = kBytes / 64 + 1, .host_pitch_bytes = 64, .buffer_pitch_bytes = 64},
         b},
        // Overflows: the buffer side is small, the host side wraps.
        {"host rows × pitch overflow",
         {.width_bytes = 1, .rows = 3, .host_pitch_bytes = std::uint64_t{1} << 63, .buffer_pitch_bytes = 1},
         b},
        {"host span overflows by the width",
         {.width_bytes = 2, .rows = 2, .host_pitch_bytes = UINT64_MAX, .buffer_pitch_bytes = 2},
         b},
        // The host side is small, the buffer side wraps to a span that would fit the view.
        {"buffer rows × pitch overflow",
         {.width_bytes = 8, .rows = 5, .host_pitch_bytes = 8, .buffer_pitch_bytes = std::uint64_t{1} << 62},
         b},
        {"buffer span overflows by the width",
         {.width_bytes = 2, .rows = 2, .host_pitch_bytes = 2, .buffer_pitch_bytes = UINT64_MAX},
         b},
        {"rows at the maximum",
         {.width_bytes = 1,
          .rows = UINT64_MAX,
          .host_pitch_bytes = std::uint64_t{1} << 32,
          .buffer_pitch_bytes = 1},
         b},
    };
    for (const Bad& c : bad) {
        SCOPED_TRACE(c.why);
        EXPECT_THROW(q->upload_2d(host.data(), c.view, c.shape), UsageError);
        EXPECT_THROW(q->download_2d(c.view, host.data(), c.shape), UsageError);
    }
    const Copy2D ok{.width_bytes = 8, .rows = 4, .host_pitch_bytes = 16, .buffer_pitch_bytes = 16};
    EXPECT_THROW(q->upload_2d(nullptr, b, ok), UsageError);
    EXPECT_THROW(q->download_2d(b, nullptr, ok), UsageError);
    auto other = outcore::open_device(GetParam());
    Block foreign = other->allocate({.bytes = kBytes});
    EXPECT_THROW(q->upload_2d(host.data(), foreign, ok), UsageError);
    EXPECT_THROW(q->download_2d(foreign, host.data(), ok), UsageError);
    BufferView outside(b);
    outside.offset = 1;  // bypasses the constructor's check on purpose: [1, 4097) is outside
    EXPECT_THROW(q->upload_2d(host.data(), outside, ok), UsageError);
    // Nothing moved, and the queue still works.
    EXPECT_NO_THROW(q->synchronize());
    EXPECT_EQ(read(*q, b), data);
    EXPECT_EQ(host, host_before);
    q->upload_2d(host.data(), b, ok);
    EXPECT_EQ(read(*q, b), with_runs(data, 0, 16, host, 0, 16, ok));
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
    std::string name = info.param;
    for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    }
    return name;
}

INSTANTIATE_TEST_SUITE_P(Devices, Copy2DConformance, ::testing::ValuesIn(available_devices()), test_name);

}  // namespace
