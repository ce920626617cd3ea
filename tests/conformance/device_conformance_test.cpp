// The device contract every backend must meet, run against every device the registry
// finds (probe_backends(): CPU now, CUDA and Vulkan wherever they are built and find
// hardware). The CPU backend is the reference: GEMM results are compared with a
// float64 reference and with the CPU backend's result on the same inputs.
//
// What is checked: allocation of every kind and its accounting; bad requests are
// UsageError and impossible ones OutOfMemory, never a crash; upload → copy → download
// is bit-exact for odd sizes and offsets between every pair of kinds and touches
// nothing outside its range; fill; queue order; events across queues (CUDA
// semantics); host waits; failures reported once; HostCached flush/invalidate; GEMM;
// the edge fill of filter halos; f32 ↔ bf16/f16 conversions.
// A little over 800 lines: every test uses the one parameterized fixture (a device per
// backend, make_block, read) and is short; the 2-D copies, which need their own shapes
// and helpers, live in copy_2d_conformance_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "outcore/backends/cpu.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/kernels.hpp"
#include "outcore/device/registry.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::Block;
using outcore::BufferView;
using outcore::Device;
using outcore::DType;
using outcore::GemmCompute;
using outcore::GemmTileArgs;
using outcore::MemoryKind;
using outcore::OutOfMemory;
using outcore::Queue;
using outcore::UsageError;
using namespace std::chrono_literals;

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

/// Holds a queue inside a host_task until opened; opens itself on destruction so a
/// failed assertion cannot leave a queue draining forever (declare it after queues).
class Gate {
public:
    Gate() = default;
    Gate(const Gate&) = delete;
    Gate& operator=(const Gate&) = delete;
    ~Gate() { open(); }
    void open() {
        {
            std::lock_guard lock(mutex_);
            open_ = true;
        }
        cv_.notify_all();
    }
    void wait() {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [this] { return open_; });
    }

private:
    std::mutex mutex_;
    std::condition_variable cv_;
    bool open_ = false;
};

class DeviceConformance : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        dev_ = outcore::open_device(GetParam());
        ASSERT_NE(dev_, nullptr);
    }
    Device& dev() { return *dev_; }

    /// Uploads bytes into a new block of `kind` (whole block) and waits.
    Block make_block(Queue& q, MemoryKind kind, const std::vector<std::byte>& bytes) {
        Block b = dev().allocate({.bytes = bytes.size(), .kind = kind, .tag = "conformance"});
        q.upload(bytes.data(), b);
        q.synchronize();
        return b;
    }
    std::vector<std::byte> read(Queue& q, const BufferView& view) {
        std::vector<std::byte> out(view.bytes, std::byte{0xCC});
        q.download(view, out.data());
        q.synchronize();
        return out;
    }

    std::unique_ptr<Device> dev_;
};

TEST_P(DeviceConformance, InfoIsCoherent) {
    const outcore::DeviceInfo& info = dev().info();
    EXPECT_EQ(info.id(), GetParam());
    EXPECT_FALSE(info.name.empty());
    EXPECT_GT(info.total_memory_bytes, 0U);
    EXPECT_GT(info.recommended_working_set_bytes, 0U);
    EXPECT_LE(info.recommended_working_set_bytes, info.total_memory_bytes);
    EXPECT_TRUE(outcore::is_power_of_two(info.min_offset_alignment));
    EXPECT_GT(info.max_inline_bytes, 0U);
    EXPECT_GT(info.max_buffer_bytes, 0U);
    EXPECT_GT(info.max_allocation_bytes, 0U);
    EXPECT_EQ(dev().allocated_bytes(), dev().allocated_bytes(MemoryKind::Device));
}

TEST_P(DeviceConformance, AllocatesEveryKindAndAccountsForIt) {
    std::mt19937_64 rng(outcore::test::seed());
    for (MemoryKind kind : kKinds) {
        SCOPED_TRACE(outcore::to_string(kind));
        const std::uint64_t bytes_before = dev().allocated_bytes(kind);
        const std::uint64_t count_before = dev().allocation_count(kind);
        std::vector<Block> blocks;
        std::uint64_t sum = 0;
        for (std::uint64_t size :
             {std::uint64_t{1}, std::uint64_t{4097}, outcore::kMiB + 3, 1 + rng() % 200000}) {
            const std::uint64_t alignment = rng() % 2 == 0 ? 0 : std::uint64_t{1} << (rng() % 13);
            Block b =
                dev().allocate({.bytes = size, .kind = kind, .alignment = alignment, .tag = "conformance"});
            EXPECT_EQ(b.kind(), kind);
            EXPECT_EQ(b.bytes(), size);
            EXPECT_EQ(b.raw().device_id, dev().id());
            EXPECT_EQ(b.raw().offset % std::max<std::uint64_t>(alignment, 1), 0U);
            if (outcore::host_visible(kind)) {
                ASSERT_NE(b.host(), nullptr);
                EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.host()) % std::max<std::uint64_t>(alignment, 64),
                          0U);
                b.host()[0] = std::byte{1};  // host-visible memory is really there
                b.host()[size - 1] = std::byte{2};
            } else {
                EXPECT_EQ(b.host(), nullptr) << "device memory must not carry a host pointer";
            }
            sum += size;
            blocks.push_back(std::move(b));
            EXPECT_EQ(dev().allocated_bytes(kind), bytes_before + sum);
            EXPECT_EQ(dev().allocation_count(kind), count_before + blocks.size());
        }
        blocks.clear();
        EXPECT_EQ(dev().allocated_bytes(kind), bytes_before);
        EXPECT_EQ(dev().allocation_count(kind), count_before);
    }
}

TEST_P(DeviceConformance, BadRequestsAreUsageErrors) {
    EXPECT_THROW((void)dev().allocate({.bytes = 0}), UsageError);
    EXPECT_THROW((void)dev().allocate({.bytes = 64, .alignment = 3}), UsageError);
    auto q = dev().create_queue();
    Block b = dev().allocate({.bytes = 256});
    Block c = dev().allocate({.bytes = 256});
    auto other = outcore::open_device(GetParam());
    Block foreign = other->allocate({.bytes = 256});
    EXPECT_THROW(q->copy(BufferView(b, 0, 100), BufferView(c, 0, 101)), UsageError);
    EXPECT_THROW(q->copy(BufferView(b, 0, 100), BufferView(b, 50, 100)), UsageError);
    EXPECT_THROW(q->copy(b, foreign), UsageError);
    EXPECT_THROW(q->upload(nullptr, b), UsageError);
    EXPECT_THROW(q->fill(foreign, std::byte{0}), UsageError);
    EXPECT_THROW((void)BufferView(b, 200, 100), UsageError);
    EXPECT_NO_THROW(q->synchronize());
}

TEST_P(DeviceConformance, ImpossibleAllocationsAreOutOfMemory) {
    const std::uint64_t total = dev().info().total_memory_bytes;
    for (MemoryKind kind : kKinds) {
        SCOPED_TRACE(outcore::to_string(kind));
        const std::uint64_t bytes_before = dev().allocated_bytes(kind);
        std::vector<std::uint64_t> sizes = {std::uint64_t{1} << 62, std::uint64_t{1} << 63,
                                            std::numeric_limits<std::uint64_t>::max()};
        if (kind == MemoryKind::Device) sizes.push_back(total + 1);
        for (std::uint64_t bytes : sizes) {
            try {
                (void)dev().allocate({.bytes = bytes, .kind = kind});
                ADD_FAILURE() << "allocated " << bytes << " bytes";
            } catch (const OutOfMemory& e) {
                EXPECT_EQ(e.requested_bytes(), bytes);
                EXPECT_EQ(e.tier(), outcore::tier_of(kind));
            }
        }
        EXPECT_EQ(dev().allocated_bytes(kind), bytes_before);
        Block still_works = dev().allocate({.bytes = 4096, .kind = kind});
        EXPECT_EQ(still_works.bytes(), 4096U);
    }
}

// Random bytes of odd sizes at odd offsets go host → kind A → kind B → host for every
// pair of kinds. The destination block is pre-filled, so bytes written outside the
// view are caught too.
TEST_P(DeviceConformance, RoundTripIsBitExactBetweenEveryPairOfKinds) {
    std::mt19937_64 rng(outcore::test::seed());
    auto q = dev().create_queue();
    for (MemoryKind from : kKinds) {
        for (MemoryKind to : kKinds) {
            for (std::size_t n : {std::size_t{1}, std::size_t{3}, std::size_t{4097},
                                  static_cast<std::size_t>(1 + rng() % 300000)}) {
                SCOPED_TRACE(testing::Message() << outcore::to_string(from) << " -> "
                                                << outcore::to_string(to) << ", " << n << " bytes");
                const std::uint64_t src_off = rng() % 1000;
                const std::uint64_t dst_off = rng() % 1000;
                const std::uint64_t dst_tail = rng() % 100;
                Block src = dev().allocate({.bytes = src_off + n + rng() % 100, .kind = from});
                Block dst = dev().allocate({.bytes = dst_off + n + dst_tail, .kind = to});
                const auto around = static_cast<std::byte>(rng() & 0xFF);
                const std::vector<std::byte> data = random_bytes(rng, n);
                q->fill(dst, around);
                q->upload(data.data(), BufferView(src, src_off, n));
                q->copy(BufferView(src, src_off, n), BufferView(dst, dst_off, n));
                const std::vector<std::byte> whole = read(*q, dst);
                ASSERT_TRUE(std::equal(data.begin(), data.end(),
                                       whole.begin() + static_cast<std::ptrdiff_t>(dst_off)));
                for (std::uint64_t i = 0; i < dst_off; ++i) ASSERT_EQ(whole[i], around) << "before, at " << i;
                for (std::uint64_t i = dst_off + n; i < whole.size(); ++i)
                    ASSERT_EQ(whole[i], around) << "after, at " << i;
            }
        }
    }
}

TEST_P(DeviceConformance, FillSetsExactlyItsRange) {
    std::mt19937_64 rng(outcore::test::seed());
    auto q = dev().create_queue();
    for (MemoryKind kind : kKinds) {
        SCOPED_TRACE(outcore::to_string(kind));
        std::vector<std::byte> model = random_bytes(rng, 1 + rng() % 100000);
        Block b = make_block(*q, kind, model);
        for (int round = 0; round < 5; ++round) {
            const std::size_t off = rng() % model.size();
            const std::size_t len = 1 + rng() % (model.size() - off);
            const auto value = static_cast<std::byte>(rng() & 0xFF);
            q->fill(BufferView(b, off, len), value);
            std::fill_n(model.begin() + static_cast<std::ptrdiff_t>(off), len, value);
        }
        EXPECT_EQ(read(*q, b), model);
    }
}

// A random program of fills, uploads, downloads and copies, all behind a gate, must
// leave what running it in order on a host model leaves.
TEST_P(DeviceConformance, QueueWorkRunsInSubmissionOrder) {
    std::mt19937_64 rng(outcore::test::seed());
    constexpr std::size_t kBytes = 8192;
    std::vector<Block> blocks;
    std::vector<std::vector<std::byte>> model;
    for (MemoryKind kind :
         {MemoryKind::Device, MemoryKind::Device, MemoryKind::HostPinned, MemoryKind::HostCached}) {
        blocks.push_back(dev().allocate({.bytes = kBytes, .kind = kind}));
        model.emplace_back(kBytes, std::byte{0});
    }
    auto q = dev().create_queue();
    Gate gate;
    q->host_task([&] { gate.wait(); });
    for (const Block& b : blocks) q->fill(b, std::byte{0});
    std::vector<std::vector<std::byte>> uploads;
    std::vector<std::pair<std::vector<std::byte>, std::vector<std::byte>>> downloads;  // got, expected
    const std::uint64_t ops = outcore::test::scaled(300);
    uploads.reserve(ops);
    downloads.reserve(ops);
    for (std::uint64_t op = 0; op < ops; ++op) {
        const std::size_t bi = rng() % blocks.size();
        const std::size_t len = 1 + rng() % 2048;
        const std::size_t off = rng() % (kBytes - len + 1);
        const auto at = static_cast<std::ptrdiff_t>(off);
        switch (rng() % 4) {
            case 0: {
                const auto v = static_cast<std::byte>(rng() & 0xFF);
                q->fill(BufferView(blocks[bi], off, len), v);
                std::fill_n(model[bi].begin() + at, len, v);
                break;
            }
            case 1:
                uploads.push_back(random_bytes(rng, len));
                q->upload(uploads.back().data(), BufferView(blocks[bi], off, len));
                std::copy(uploads.back().begin(), uploads.back().end(), model[bi].begin() + at);
                break;
            case 2:
                downloads.emplace_back(
                    std::vector<std::byte>(len, std::byte{0xEE}),
                    std::vector<std::byte>(model[bi].begin() + at,
                                           model[bi].begin() + at + static_cast<std::ptrdiff_t>(len)));
                q->download(BufferView(blocks[bi], off, len), downloads.back().first.data());
                break;
            default: {
                const std::size_t di = (bi + 1 + rng() % (blocks.size() - 1)) % blocks.size();
                const std::size_t doff = rng() % (kBytes - len + 1);
                q->copy(BufferView(blocks[bi], off, len), BufferView(blocks[di], doff, len));
                std::copy_n(model[bi].begin() + at, len,
                            model[di].begin() + static_cast<std::ptrdiff_t>(doff));
                break;
            }
        }
    }
    gate.open();
    q->synchronize();
    for (std::size_t i = 0; i < downloads.size(); ++i)
        ASSERT_EQ(downloads[i].first, downloads[i].second) << i;
    for (std::size_t i = 0; i < blocks.size(); ++i) EXPECT_EQ(read(*q, blocks[i]), model[i]) << "block " << i;
}

// Queue 2 waits for an event queue 1 records after a gated upload; queue 2's copy
// must see queue 1's bytes, and the event must not complete before the gate opens.
TEST_P(DeviceConformance, EventsOrderWorkAcrossQueues) {
    std::mt19937_64 rng(outcore::test::seed());
    const std::size_t n = 1 + rng() % (4 << 20);
    const std::vector<std::byte> data = random_bytes(rng, n);
    Block a = dev().allocate({.bytes = n});
    Block b = dev().allocate({.bytes = n});
    std::vector<std::byte> out(n, std::byte{0});
    auto q1 = dev().create_queue(outcore::QueueRole::Upload);
    auto q2 = dev().create_queue(outcore::QueueRole::Download);
    auto uploaded = dev().create_event();
    Gate gate;
    q1->host_task([&] { gate.wait(); });
    q1->upload(data.data(), a);
    q1->record(*uploaded);
    q2->wait(*uploaded);
    q2->copy(a, b);
    q2->download(b, out.data());
    std::this_thread::sleep_for(5ms);
    EXPECT_FALSE(uploaded->query());
    gate.open();
    q2->synchronize();
    EXPECT_TRUE(uploaded->query());
    EXPECT_EQ(out, data);
    q1->synchronize();
}

TEST_P(DeviceConformance, NeverRecordedEventIsComplete) {
    auto e = dev().create_event();
    EXPECT_TRUE(e->query());
    EXPECT_NO_THROW(e->wait());
    auto q = dev().create_queue();
    std::atomic<bool> ran{false};
    q->wait(*e);
    q->host_task([&] { ran = true; });
    q->synchronize();
    EXPECT_TRUE(ran.load());
}

TEST_P(DeviceConformance, HostEventWaitReturnsAfterTheWork) {
    auto q = dev().create_queue();
    auto e = dev().create_event();
    std::atomic<bool> done{false};
    Gate gate;
    q->host_task([&] { gate.wait(); });
    q->host_task([&] { done = true; });
    q->record(*e);
    EXPECT_FALSE(e->query());
    std::thread opener([&] {
        std::this_thread::sleep_for(5ms);
        gate.open();
    });
    e->wait();
    EXPECT_TRUE(done.load());
    EXPECT_TRUE(e->query());
    opener.join();
}

TEST_P(DeviceConformance, HostTaskFailureIsReportedOnceAndSkipsLaterWork) {
    auto q = dev().create_queue();
    Block b = dev().allocate({.bytes = 64, .kind = MemoryKind::HostPinned});
    std::memset(b.host(), 0x11, 64);
    auto e = dev().create_event();
    std::atomic<bool> ran{false};
    q->host_task([] { throw std::runtime_error("boom"); });
    q->fill(b, std::byte{0x22});
    q->host_task([&] { ran = true; });
    q->record(*e);
    EXPECT_THROW(e->wait(), std::runtime_error);
    EXPECT_THROW(q->synchronize(), std::runtime_error);
    EXPECT_FALSE(ran.load());
    EXPECT_EQ(b.host()[0], std::byte{0x11});
    EXPECT_NO_THROW(q->synchronize());
    q->fill(b, std::byte{0x33});
    q->synchronize();
    EXPECT_EQ(b.host()[63], std::byte{0x33});
}

// Metal's managed storage: the host writes, flushes, the device copies; the device
// writes back, the host invalidates and reads.
TEST_P(DeviceConformance, HostCachedFlushAndInvalidateRoundTrip) {
    std::mt19937_64 rng(outcore::test::seed());
    auto q = dev().create_queue();
    const std::size_t n = 1 + rng() % 100000;
    const std::size_t off = rng() % 512;
    Block cached = dev().allocate({.bytes = off + n, .kind = MemoryKind::HostCached});
    Block device = dev().allocate({.bytes = n, .kind = MemoryKind::Device});
    const BufferView range(cached, off, n);
    const std::vector<std::byte> data = random_bytes(rng, n);

    std::memcpy(range.host(), data.data(), n);
    dev().flush(range);
    q->copy(range, device);
    q->synchronize();
    std::memset(range.host(), 0, n);  // the host copy now differs from the device's
    dev().flush(range);
    q->copy(device, range);
    q->synchronize();
    dev().invalidate(range);
    EXPECT_EQ(std::memcmp(range.host(), data.data(), n), 0);

    BufferView outside = range;
    outside.offset = cached.bytes();  // bypasses the constructor's check on purpose
    EXPECT_THROW(dev().flush(outside), UsageError);
    EXPECT_THROW(dev().invalidate(outside), UsageError);
    Block pinned = dev().allocate({.bytes = 64, .kind = MemoryKind::HostPinned});
    EXPECT_NO_THROW(dev().flush(pinned));  // a no-op for other kinds
    EXPECT_NO_THROW(dev().invalidate(pinned));
}

// --- GEMM ----------------------------------------------------------------------

/// Host bytes of a column-major matrix plus the exact value of each element.
struct HostMatrix {
    DType type;
    std::uint64_t rows, cols, ld;
    std::vector<std::byte> bytes;
    std::vector<double> exact;

    HostMatrix(DType t, std::uint64_t r, std::uint64_t c, std::uint64_t l)
        : type(t),
          rows(r),
          cols(c),
          ld(l),
          bytes(static_cast<std::size_t>(l * c * outcore::dtype_bytes(t))),
          exact(static_cast<std::size_t>(r * c)) {}

    void set(std::uint64_t i, std::uint64_t j, double v) {
        const auto at = static_cast<std::size_t>(i + j * ld);
        double stored = v;
        if (type == DType::F64) {
            std::memcpy(bytes.data() + at * 8, &v, 8);
        } else if (type == DType::F32) {
            const auto f = static_cast<float>(v);
            std::memcpy(bytes.data() + at * 4, &f, 4);
            stored = f;
        } else if (type == DType::F16) {
            const std::uint16_t h = outcore::f32_to_f16(static_cast<float>(v));
            std::memcpy(bytes.data() + at * 2, &h, 2);
            stored = outcore::f16_to_f32(h);
        } else {  // bf16: the upper half of the f32 pattern, exactly representable
            const auto f = static_cast<float>(v);
            std::uint32_t bits = 0;
            std::memcpy(&bits, &f, 4);
            const auto top = static_cast<std::uint16_t>(bits >> 16);
            std::memcpy(bytes.data() + at * 2, &top, 2);
            const std::uint32_t back = static_cast<std::uint32_t>(top) << 16;
            float g = 0;
            std::memcpy(&g, &back, 4);
            stored = g;
        }
        if (i < rows && j < cols) exact[static_cast<std::size_t>(i + j * rows)] = stored;
    }
    [[nodiscard]] double get(std::uint64_t i, std::uint64_t j) const {
        const auto at = static_cast<std::size_t>(i + j * ld);
        if (type == DType::F64) {
            double d = 0;
            std::memcpy(&d, bytes.data() + at * 8, 8);
            return d;
        }
        float f = 0;
        std::memcpy(&f, bytes.data() + at * 4, 4);
        return f;
    }
    [[nodiscard]] double value(std::uint64_t i, std::uint64_t j) const {
        return exact[static_cast<std::size_t>(i + j * rows)];
    }
};

struct GemmProblem {
    GemmTileArgs shape;  // views left empty; filled per device
    HostMatrix a, b, c;
};

constexpr double kPadding = 12345.0;

GemmProblem random_problem(std::mt19937_64& rng, DType type, GemmCompute compute) {
    std::uniform_real_distribution<double> uni(-1.0, 1.0);
    GemmTileArgs s{.type = type,
                   .compute = compute,
                   .trans_a = rng() % 2 == 0,
                   .trans_b = rng() % 2 == 0,
                   .m = 1 + rng() % 96,
                   .n = 1 + rng() % 96,
                   .k = 1 + rng() % 128};
    s.alpha = 2.0 * uni(rng);
    s.beta = rng() % 2 == 0 ? 0.0 : uni(rng);
    const std::uint64_t ar = s.trans_a ? s.k : s.m, ac = s.trans_a ? s.m : s.k;
    const std::uint64_t br = s.trans_b ? s.n : s.k, bc = s.trans_b ? s.k : s.n;
    s.lda = ar + rng() % 4;
    s.ldb = br + rng() % 4;
    s.ldc = s.m + rng() % 4;
    const DType out = type == DType::F64 ? DType::F64 : DType::F32;
    GemmProblem p{s, HostMatrix(type, ar, ac, s.lda), HostMatrix(type, br, bc, s.ldb),
                  HostMatrix(out, s.m, s.n, s.ldc)};
    for (std::uint64_t j = 0; j < ac; ++j)
        for (std::uint64_t i = 0; i < s.lda; ++i) p.a.set(i, j, uni(rng));
    for (std::uint64_t j = 0; j < bc; ++j)
        for (std::uint64_t i = 0; i < s.ldb; ++i) p.b.set(i, j, uni(rng));
    for (std::uint64_t j = 0; j < s.n; ++j) {
        for (std::uint64_t i = 0; i < s.ldc; ++i) {
            // Padding rows must survive; with beta == 0, NaN poison must be overwritten.
            p.c.set(i, j, i >= s.m ? kPadding : s.beta == 0.0 ? std::nan("") : uni(rng));
        }
    }
    return p;
}

/// Runs the problem on `device` (A in Device memory, B and C too) and returns C's bytes.
HostMatrix run_on(Device& device, const GemmProblem& p) {
    auto q = device.create_queue(outcore::QueueRole::Compute);
    Block a = device.allocate({.bytes = p.a.bytes.size()});
    Block b = device.allocate({.bytes = p.b.bytes.size()});
    Block c = device.allocate({.bytes = p.c.bytes.size()});
    q->upload(p.a.bytes.data(), a);
    q->upload(p.b.bytes.data(), b);
    q->upload(p.c.bytes.data(), c);
    GemmTileArgs args = p.shape;
    args.a = a;
    args.b = b;
    args.c = c;
    device.kernels().gemm(*q, args);
    HostMatrix out = p.c;
    q->download(c, out.bytes.data());
    q->synchronize();
    return out;
}

struct Mode {
    DType type;
    GemmCompute compute;
    double tolerance;  ///< ‖out − ref‖ / ‖ref‖ (QUALITY.md)
};
// bf16 and f16 inputs here are exact, so only f32 accumulation error remains; 1e-3 still
// leaves room for backends that round intermediate products.
constexpr Mode kModes[] = {{DType::F32, GemmCompute::Exact, 1e-5},
                           {DType::F32, GemmCompute::FastTF32, 2e-3},
                           {DType::F64, GemmCompute::Exact, 1e-12},
                           {DType::BF16, GemmCompute::Exact, 1e-3},
                           {DType::F16, GemmCompute::Exact, 1e-3}};

TEST_P(DeviceConformance, GemmMatchesAFloat64ReferenceAndTheCpuBackend) {
    std::mt19937_64 rng(outcore::test::seed());
    ASSERT_TRUE(dev().kernels().supports_gemm(DType::F32, GemmCompute::Exact)) << "f32 GEMM is required";
    auto reference_device = outcore::cpu::make_cpu_device({.total_memory_bytes = outcore::kGiB});
    for (const Mode& mode : kModes) {
        if (!dev().kernels().supports_gemm(mode.type, mode.compute)) continue;
        for (std::uint64_t t = 0; t < outcore::test::scaled(12); ++t) {
            const GemmProblem p = random_problem(rng, mode.type, mode.compute);
            const GemmTileArgs& s = p.shape;
            SCOPED_TRACE(testing::Message()
                         << outcore::to_string(s.type) << (s.compute == GemmCompute::FastTF32 ? " tf32" : "")
                         << " ta=" << s.trans_a << " tb=" << s.trans_b << " m=" << s.m << " n=" << s.n
                         << " k=" << s.k << " beta=" << s.beta);
            const HostMatrix got = run_on(dev(), p);
            const HostMatrix cpu = run_on(*reference_device, p);
            double diff2 = 0, cpu_diff2 = 0, ref2 = 0;
            bool finite = true, padding_intact = true;
            for (std::uint64_t j = 0; j < s.n; ++j) {
                for (std::uint64_t i = 0; i < s.m; ++i) {
                    double acc = 0;
                    for (std::uint64_t l = 0; l < s.k; ++l) {
                        acc += (s.trans_a ? p.a.value(l, i) : p.a.value(i, l)) *
                               (s.trans_b ? p.b.value(j, l) : p.b.value(l, j));
                    }
                    const double ref = s.alpha * acc + (s.beta != 0.0 ? s.beta * p.c.value(i, j) : 0.0);
                    const double g = got.get(i, j);
                    finite = finite && std::isfinite(g);
                    diff2 += (g - ref) * (g - ref);
                    cpu_diff2 += (g - cpu.get(i, j)) * (g - cpu.get(i, j));
                    ref2 += ref * ref;
                }
                for (std::uint64_t i = s.m; i < s.ldc; ++i)
                    padding_intact = padding_intact && got.get(i, j) == kPadding;
            }
            EXPECT_TRUE(finite) << "an element was not written (NaN poison left) or is not finite";
            EXPECT_TRUE(padding_intact) << "rows between m and ldc were written";
            EXPECT_LT(std::sqrt(diff2 / ref2), mode.tolerance) << "against the float64 reference";
            EXPECT_LT(std::sqrt(cpu_diff2 / ref2), mode.tolerance) << "against the CPU backend";
        }
    }
}

TEST_P(DeviceConformance, GemmRefusesWhatItDoesNotSupport) {
    auto q = dev().create_queue();
    Block m = dev().allocate({.bytes = 4096});
    for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16, DType::U8, DType::U16}) {
        for (GemmCompute c : {GemmCompute::Exact, GemmCompute::FastTF32}) {
            if (dev().kernels().supports_gemm(t, c)) continue;
            const GemmTileArgs args{.type = t,
                                    .compute = c,
                                    .m = 2,
                                    .n = 2,
                                    .k = 2,
                                    .a = m,
                                    .lda = 2,
                                    .b = m,
                                    .ldb = 2,
                                    .c = BufferView(m, 2048, 64),
                                    .ldc = 2};
            EXPECT_THROW(dev().kernels().gemm(*q, args), UsageError) << outcore::to_string(t);
        }
    }
    const GemmTileArgs too_small{
        .m = 8, .n = 8, .k = 8, .a = BufferView(m, 0, 255), .lda = 8, .b = m, .ldb = 8, .c = m, .ldc = 8};
    EXPECT_THROW(dev().kernels().gemm(*q, too_small), UsageError);
    EXPECT_NO_THROW(q->synchronize());
}

// Edge fill (Kernels::pad_edges) equals pad_edges_host byte for byte: random images,
// tiles anywhere (corners, edges, inside, tiles smaller than the halo), every edge
// mode, pixels of 1 to 16 bytes, padded rows; bytes between rows stay untouched.
TEST_P(DeviceConformance, PadEdgesMatchesTheHostFill) {
    std::mt19937_64 rng(outcore::test::seed());
    auto q = dev().create_queue();
    constexpr std::uint32_t kPixelBytes[] = {1, 2, 3, 4, 8, 12, 16};
    int filled = 0;
    for (std::uint64_t t = 0; t < outcore::test::scaled(60); ++t) {
        outcore::EdgePadding a;
        a.edge = static_cast<outcore::EdgeMode>(rng() % 3);
        a.pixel_bytes = kPixelBytes[rng() % std::size(kPixelBytes)];
        a.image_rows = 1 + rng() % 40;
        a.image_cols = 1 + rng() % 40;
        const std::uint64_t halo = rng() % 6;
        const std::uint64_t tile_row = rng() % a.image_rows;
        const std::uint64_t tile_col = rng() % a.image_cols;
        const std::uint64_t tile_rows = 1 + rng() % (a.image_rows - tile_row);
        const std::uint64_t tile_cols = 1 + rng() % (a.image_cols - tile_col);
        a.rows = tile_rows + 2 * halo;
        a.cols = tile_cols + 2 * halo;
        a.top = static_cast<std::int64_t>(tile_row) - static_cast<std::int64_t>(halo);
        a.left = static_cast<std::int64_t>(tile_col) - static_cast<std::int64_t>(halo);
        a.row_stride = a.cols * a.pixel_bytes + rng() % 9;
        SCOPED_TRACE(testing::Message()
                     << "area " << a.rows << "x" << a.cols << " at (" << a.top << ", " << a.left << ") of a "
                     << a.image_rows << "x" << a.image_cols << " image, edge " << static_cast<int>(a.edge)
                     << ", " << a.pixel_bytes << "-byte pixels, stride " << a.row_stride);
        const std::uint64_t offset = 256 * (rng() % 3);
        const std::vector<std::byte> initial = random_bytes(rng, offset + a.rows * a.row_stride + 64);
        std::vector<std::byte> want = initial;
        outcore::pad_edges_host(want.data() + offset, a);
        const Block b = make_block(*q, MemoryKind::Device, initial);
        const BufferView area(b, offset, a.rows * a.row_stride);
        dev().kernels().pad_edges(*q, {.area = a, .buffer = area});
        const std::vector<std::byte> got = read(*q, BufferView(b));
        ASSERT_EQ(got, want);
        filled += a.crosses_edge() ? 1 : 0;
    }
    EXPECT_GT(filled, 0);
    // Malformed areas are UsageErrors before anything is enqueued.
    const Block b = dev().allocate({.bytes = 4096});
    outcore::EdgePadding bad{.pixel_bytes = 4,
                             .rows = 4,
                             .cols = 4,
                             .top = -1,
                             .left = -1,
                             .image_rows = 2,
                             .image_cols = 2,
                             .row_stride = 16};
    EXPECT_NO_THROW(dev().kernels().pad_edges(*q, {.area = bad, .buffer = b}));
    // Rows -3..0 hold only image row 0; mirroring row -1 reads row 1, which the area lacks.
    bad.top = -3;
    bad.edge = outcore::EdgeMode::Mirror;
    EXPECT_THROW(dev().kernels().pad_edges(*q, {.area = bad, .buffer = b}), UsageError);
    bad = {.pixel_bytes = 17, .rows = 1, .cols = 1, .image_rows = 1, .image_cols = 1, .row_stride = 17};
    EXPECT_THROW(dev().kernels().pad_edges(*q, {.area = bad, .buffer = b}), UsageError);
    bad = {
        .pixel_bytes = 4, .rows = 2, .cols = 2, .top = 5, .image_rows = 2, .image_cols = 2, .row_stride = 8};
    EXPECT_THROW(dev().kernels().pad_edges(*q, {.area = bad, .buffer = b}), UsageError) << "no overlap";
    bad = {
        .pixel_bytes = 4, .rows = 2, .cols = 2, .top = -1, .image_rows = 2, .image_cols = 2, .row_stride = 4};
    EXPECT_THROW(dev().kernels().pad_edges(*q, {.area = bad, .buffer = b}), UsageError) << "short stride";
    bad = {.pixel_bytes = 4,
           .rows = 64,
           .cols = 64,
           .top = -1,
           .image_rows = 64,
           .image_cols = 64,
           .row_stride = 256};
    EXPECT_THROW(dev().kernels().pad_edges(*q, {.area = bad, .buffer = b}), UsageError) << "view too small";
    EXPECT_NO_THROW(q->synchronize());
}

// f32 → bf16/f16 rounds every number as f32_to_bf16 / f32_to_f16 do (nearest even; a
// NaN stays a NaN, its bits may differ), bf16/f16 → f32 is exact, on every backend that says it converts; the
// others refuse, as every backend refuses other pairs, short views and overlapping ones.
TEST_P(DeviceConformance, ConvertRoundsAsTheHostDoes) {
    std::mt19937_64 rng(outcore::test::seed());
    auto q = dev().create_queue();
    outcore::Kernels& k = dev().kernels();
    // Random bit patterns (every exponent, NaNs and infinities among them), values
    // halfway between two 16-bit ones, and the edges.
    std::vector<std::uint32_t> words;
    for (std::uint32_t v : {0x00000000U, 0x80000000U, 0x7F800000U, 0xFF800000U, 0x7FC00000U, 0x00000001U,
                            0x3F808000U, 0x3F818000U, 0x477FF000U, 0x477FE000U, 0x33000000U, 0x387FC000U})
        words.push_back(v);
    for (int i = 0; i < 3000; ++i) {
        const auto r = static_cast<std::uint32_t>(rng());
        words.push_back(i % 3 == 0 ? (r & 0xFFFF0000U) | 0x8000U : r);  // bf16 ties, then anything
        words.push_back((r & 0xFFFFE000U) | 0x1000U);                   // f16 ties (in range or not)
    }
    const std::uint64_t count = words.size();
    std::vector<std::byte> f32_bytes(count * 4);
    std::memcpy(f32_bytes.data(), words.data(), f32_bytes.size());
    for (const DType narrow : {DType::BF16, DType::F16}) {
        SCOPED_TRACE(outcore::to_string(narrow));
        const bool to = k.supports_convert(DType::F32, narrow);
        const bool from = k.supports_convert(narrow, DType::F32);
        EXPECT_EQ(to, from) << "a backend converts both ways or neither";
        const auto round = narrow == DType::BF16 ? outcore::f32_to_bf16 : outcore::f32_to_f16;
        const auto widen = narrow == DType::BF16 ? outcore::bf16_to_f32 : outcore::f16_to_f32;
        // Outputs at offsets inside larger blocks (256 bytes in; 4 for the widened ones).
        const Block in = make_block(*q, MemoryKind::Device, f32_bytes);
        const Block out = dev().allocate({.bytes = count * 2 + 512, .kind = MemoryKind::Device});
        const BufferView narrow_view(out, 256, count * 2);
        const outcore::ConvertArgs down{
            .from = DType::F32, .to = narrow, .count = count, .in = in, .out = narrow_view};
        if (!to) {
            EXPECT_THROW(k.convert(*q, down), UsageError);
            continue;
        }
        k.convert(*q, down);
        const std::vector<std::byte> got = read(*q, narrow_view);
        std::uint64_t wrong = 0;
        std::vector<std::uint16_t> bits(count);
        for (std::uint64_t i = 0; i < count; ++i) {
            float v = 0;
            std::memcpy(&v, &words[i], 4);
            std::memcpy(&bits[i], got.data() + i * 2, 2);
            const std::uint16_t want = round(v);
            const bool ok = std::isnan(v) ? std::isnan(widen(bits[i])) : bits[i] == want;
            if (!ok && ++wrong <= 3)
                ADD_FAILURE() << std::hex << words[i] << " → " << bits[i] << ", not " << want;
        }
        EXPECT_EQ(wrong, 0U);
        // And back: every 16-bit value widens exactly.
        const Block wide = dev().allocate({.bytes = count * 4 + 4, .kind = MemoryKind::Device});
        const BufferView wide_view(wide, 4, count * 4);
        k.convert(*q,
                  {.from = narrow, .to = DType::F32, .count = count, .in = narrow_view, .out = wide_view});
        const std::vector<std::byte> back = read(*q, wide_view);
        wrong = 0;
        for (std::uint64_t i = 0; i < count; ++i) {
            float v = 0;
            std::memcpy(&v, back.data() + i * 4, 4);
            const float want = widen(bits[i]);
            const bool ok = std::isnan(want) ? std::isnan(v) : std::memcmp(&v, &want, 4) == 0;
            if (!ok && ++wrong <= 3) ADD_FAILURE() << std::hex << bits[i] << " → " << v << ", not " << want;
        }
        EXPECT_EQ(wrong, 0U);
        // What every backend refuses before anything is enqueued.
        EXPECT_THROW(
            k.convert(*q,
                      {.from = DType::F32, .to = narrow, .count = count + 1, .in = in, .out = narrow_view}),
            UsageError)
            << "views too small";
        EXPECT_THROW(k.convert(*q, {.from = DType::F32,
                                    .to = narrow,
                                    .count = 64,
                                    .in = BufferView(in, 0, 256),
                                    .out = BufferView(in, 128, 128)}),
                     UsageError)
            << "overlapping views";
        EXPECT_NO_THROW(k.convert(*q, {.from = DType::F32,
                                       .to = narrow,
                                       .count = 32,
                                       .in = BufferView(in, 0, 128),
                                       .out = BufferView(in, 128, 64)}))
            << "adjacent views of one block";
        q->synchronize();  // before the blocks go
    }
    EXPECT_FALSE(k.supports_convert(DType::F32, DType::F64));
    EXPECT_FALSE(k.supports_convert(DType::BF16, DType::F16));
    const Block b = dev().allocate({.bytes = 4096});
    EXPECT_THROW(k.convert(*q, {.from = DType::F32,
                                .to = DType::F64,
                                .count = 8,
                                .in = BufferView(b, 0, 64),
                                .out = BufferView(b, 64, 64)}),
                 UsageError);
    EXPECT_NO_THROW(q->synchronize());
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
    std::string name = info.param;
    for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    }
    return name;
}

INSTANTIATE_TEST_SUITE_P(Devices, DeviceConformance, ::testing::ValuesIn(available_devices()), test_name);

}  // namespace
