// Tests of the CPU backend's GEMM (OpenBLAS): every supported type and mode against a
// float64 reference on random inputs, transposes, padded leading dimensions, operands
// at offsets in every memory kind, beta == 0 never reading C, queue ordering, and
// clean refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <vector>

#include "outcore/backends/cpu.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::Block;
using outcore::BufferView;
using outcore::Device;
using outcore::DType;
using outcore::GemmCompute;
using outcore::GemmTileArgs;
using outcore::MemoryKind;
using outcore::Queue;
using outcore::UsageError;

/// A column-major matrix as host bytes of some element type, with the exact value of
/// every element in double (so the reference sees precisely what the device sees).
struct HostMatrix {
    DType type = DType::F32;
    std::uint64_t rows = 0, cols = 0, ld = 0;
    std::vector<std::byte> bytes;
    std::vector<double> exact;  // rows*cols, packed column-major

    HostMatrix(DType t, std::uint64_t r, std::uint64_t c, std::uint64_t l)
        : type(t),
          rows(r),
          cols(c),
          ld(l),
          bytes(static_cast<std::size_t>(l * c * outcore::dtype_bytes(t))),
          exact(static_cast<std::size_t>(r * c)) {}

    /// Stores the value nearest `v` in the element type and returns what was stored.
    double set(std::uint64_t i, std::uint64_t j, double v) {
        const std::size_t at = static_cast<std::size_t>(i + j * ld);
        double stored = 0;
        switch (type) {
            case DType::F64:
                std::memcpy(bytes.data() + at * 8, &v, 8);
                stored = v;
                break;
            case DType::F32: {
                const auto f = static_cast<float>(v);
                std::memcpy(bytes.data() + at * 4, &f, 4);
                stored = f;
                break;
            }
            case DType::BF16: {
                const auto f = static_cast<float>(v);
                std::uint32_t bits = 0;
                std::memcpy(&bits, &f, 4);
                const auto top = static_cast<std::uint16_t>(bits >> 16);
                std::memcpy(bytes.data() + at * 2, &top, 2);
                const std::uint32_t back = static_cast<std::uint32_t>(top) << 16;
                float g = 0;
                std::memcpy(&g, &back, 4);
                stored = g;
                break;
            }
            case DType::F16: {
                const std::uint16_t h = outcore::f32_to_f16(static_cast<float>(v));
                std::memcpy(bytes.data() + at * 2, &h, 2);
                stored = outcore::f16_to_f32(h);
                break;
            }
            default: ADD_FAILURE() << "unsupported test type";
        }
        if (i < rows && j < cols) exact[static_cast<std::size_t>(i + j * rows)] = stored;
        return stored;
    }
    [[nodiscard]] double get(std::uint64_t i, std::uint64_t j) const {
        const std::size_t at = static_cast<std::size_t>(i + j * ld);
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

struct GemmCase {
    DType type = DType::F32;
    GemmCompute compute = GemmCompute::Exact;
    bool trans_a = false, trans_b = false;
    std::uint64_t m = 1, n = 1, k = 1;
    std::uint64_t lda_pad = 0, ldb_pad = 0, ldc_pad = 0;
    double alpha = 1.0, beta = 0.0;
};

struct GemmOutcome {
    double relative_error = 0;          ///< ‖out − ref‖ / ‖ref‖ over the m×n result
    bool every_element_written = true;  ///< no NaN poison (or non-finite value) left
    bool padding_intact = true;         ///< rows between m and ldc untouched
};

constexpr double kPaddingSentinel = 12345.0;

/// Runs one GEMM on `dev` with A in Device memory, B in HostCached, C in `c_kind`,
/// each at a random element-aligned offset, and compares with a float64 reference.
GemmOutcome run_gemm(Device& dev, Queue& q, const GemmCase& gc, std::mt19937_64& rng,
                     MemoryKind c_kind = MemoryKind::Device) {
    std::uniform_real_distribution<double> uni(-1.0, 1.0);
    const DType out_type = gc.type == DType::F64 ? DType::F64 : DType::F32;
    const std::uint64_t a_rows = gc.trans_a ? gc.k : gc.m, a_cols = gc.trans_a ? gc.m : gc.k;
    const std::uint64_t b_rows = gc.trans_b ? gc.n : gc.k, b_cols = gc.trans_b ? gc.k : gc.n;
    HostMatrix a(gc.type, a_rows, a_cols, std::max<std::uint64_t>(a_rows + gc.lda_pad, 1));
    HostMatrix b(gc.type, b_rows, b_cols, std::max<std::uint64_t>(b_rows + gc.ldb_pad, 1));
    HostMatrix c(out_type, gc.m, gc.n, std::max<std::uint64_t>(gc.m + gc.ldc_pad, 1));
    for (std::uint64_t j = 0; j < a_cols; ++j)
        for (std::uint64_t i = 0; i < a.ld; ++i) a.set(i, j, uni(rng));
    for (std::uint64_t j = 0; j < b_cols; ++j)
        for (std::uint64_t i = 0; i < b.ld; ++i) b.set(i, j, uni(rng));
    for (std::uint64_t j = 0; j < gc.n; ++j) {
        for (std::uint64_t i = 0; i < c.ld; ++i) {
            const double v = i >= gc.m ? kPaddingSentinel : gc.beta == 0.0 ? std::nan("") : uni(rng);
            c.set(i, j, v);
        }
    }

    auto place = [&](const HostMatrix& h, MemoryKind kind) {
        const std::uint64_t elem = outcore::dtype_bytes(h.type);
        const std::uint64_t offset = elem * (rng() % 64);
        Block block = dev.allocate({.bytes = offset + h.bytes.size() + 1, .kind = kind, .tag = "gemm.test"});
        BufferView view(block, offset, h.bytes.size());
        if (!h.bytes.empty()) q.upload(h.bytes.data(), view);
        return std::pair{std::move(block), view};
    };
    auto [a_block, a_view] = place(a, MemoryKind::Device);
    auto [b_block, b_view] = place(b, MemoryKind::HostCached);
    auto [c_block, c_view] = place(c, c_kind);

    GemmTileArgs args{.type = gc.type,
                      .compute = gc.compute,
                      .trans_a = gc.trans_a,
                      .trans_b = gc.trans_b,
                      .m = gc.m,
                      .n = gc.n,
                      .k = gc.k,
                      .a = a_view,
                      .lda = a.ld,
                      .b = b_view,
                      .ldb = b.ld,
                      .c = c_view,
                      .ldc = c.ld,
                      .alpha = gc.alpha,
                      .beta = gc.beta};
    dev.kernels().gemm(q, args);
    HostMatrix out = c;
    if (!out.bytes.empty()) q.download(c_view, out.bytes.data());
    q.synchronize();

    GemmOutcome result;
    double diff2 = 0, ref2 = 0;
    for (std::uint64_t j = 0; j < gc.n; ++j) {
        for (std::uint64_t i = 0; i < gc.m; ++i) {
            double acc = 0;
            for (std::uint64_t l = 0; l < gc.k; ++l) {
                const double av = gc.trans_a ? a.value(l, i) : a.value(i, l);
                const double bv = gc.trans_b ? b.value(j, l) : b.value(l, j);
                acc += av * bv;
            }
            double ref = gc.alpha * acc;
            if (gc.beta != 0.0) ref += gc.beta * c.value(i, j);
            const double got = out.get(i, j);
            if (!std::isfinite(got)) result.every_element_written = false;
            diff2 += (got - ref) * (got - ref);
            ref2 += ref * ref;
        }
        for (std::uint64_t i = gc.m; i < c.ld; ++i) {
            if (out.get(i, j) != kPaddingSentinel) result.padding_intact = false;
        }
    }
    result.relative_error = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
    return result;
}

double tolerance(DType type) { return type == DType::F64 ? 1e-13 : 1e-5; }

struct Mode {
    DType type;
    GemmCompute compute;
};
constexpr Mode kModes[] = {{DType::F32, GemmCompute::Exact},
                           {DType::F32, GemmCompute::FastTF32},
                           {DType::F64, GemmCompute::Exact},
                           {DType::BF16, GemmCompute::Exact},
                           {DType::F16, GemmCompute::Exact}};

TEST(CpuGemm, SupportsWhatTheHeaderPromises) {
    auto dev = outcore::cpu::make_cpu_device({.total_memory_bytes = outcore::kGiB});
    const outcore::Kernels& k = dev->kernels();
    for (const Mode& m : kModes)
        EXPECT_TRUE(k.supports_gemm(m.type, m.compute)) << outcore::to_string(m.type);
    EXPECT_FALSE(k.supports_gemm(DType::F64, GemmCompute::FastTF32));
    EXPECT_FALSE(k.supports_gemm(DType::BF16, GemmCompute::FastTF32));
    EXPECT_FALSE(k.supports_gemm(DType::F16, GemmCompute::FastTF32));
    for (DType t : {DType::U8, DType::U16}) {
        EXPECT_FALSE(k.supports_gemm(t, GemmCompute::Exact)) << outcore::to_string(t);
    }
}

TEST(CpuGemm, RandomTilesMatchAFloat64Reference) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = outcore::cpu::make_cpu_device({.total_memory_bytes = outcore::kGiB});
    auto q = dev->create_queue(outcore::QueueRole::Compute);
    std::uniform_real_distribution<double> scale(-2.0, 2.0);
    const std::array<MemoryKind, 3> c_kinds = {MemoryKind::Device, MemoryKind::HostPinned,
                                               MemoryKind::HostCached};
    for (const Mode& mode : kModes) {
        for (std::uint64_t t = 0; t < outcore::test::scaled(40); ++t) {
            GemmCase gc{.type = mode.type,
                        .compute = mode.compute,
                        .trans_a = rng() % 2 == 0,
                        .trans_b = rng() % 2 == 0,
                        .m = 1 + rng() % 70,
                        .n = 1 + rng() % 70,
                        .k = 1 + rng() % 90,
                        .lda_pad = rng() % 3 == 0 ? rng() % 7 : 0,
                        .ldb_pad = rng() % 3 == 0 ? rng() % 7 : 0,
                        .ldc_pad = rng() % 3 == 0 ? rng() % 7 : 0,
                        .alpha = scale(rng),
                        .beta = rng() % 2 == 0 ? 0.0 : scale(rng)};
            const GemmOutcome r = run_gemm(*dev, *q, gc, rng, c_kinds[t % 3]);
            SCOPED_TRACE(testing::Message()
                         << outcore::to_string(mode.type) << " ta=" << gc.trans_a << " tb=" << gc.trans_b
                         << " m=" << gc.m << " n=" << gc.n << " k=" << gc.k << " beta=" << gc.beta);
            EXPECT_LT(r.relative_error, tolerance(mode.type));
            EXPECT_TRUE(r.every_element_written);
            EXPECT_TRUE(r.padding_intact);
        }
    }
}

TEST(CpuGemm, LargeTileMatchesTheReference) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = outcore::cpu::make_cpu_device({.total_memory_bytes = outcore::kGiB});
    auto q = dev->create_queue();
    for (bool ta : {false, true}) {
        const GemmOutcome r = run_gemm(
            *dev, *q,
            {.type = DType::F32, .trans_a = ta, .trans_b = !ta, .m = 300, .n = 257, .k = 311, .ldc_pad = 5},
            rng);
        EXPECT_LT(r.relative_error, 1e-5);
        EXPECT_TRUE(r.every_element_written);
        EXPECT_TRUE(r.padding_intact);
    }
}

TEST(CpuGemm, EmptyInnerDimensionScalesC) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = outcore::cpu::make_cpu_device({.total_memory_bytes = outcore::kGiB});
    auto q = dev->create_queue();
    for (const Mode& mode : kModes) {
        for (double beta : {0.0, 0.5}) {
            // With k == 0 the product is empty: C = beta·C (and beta == 0 clears NaN poison).
            const GemmOutcome r = run_gemm(*dev, *q,
                                           {.type = mode.type,
                                            .compute = mode.compute,
                                            .m = 9,
                                            .n = 4,
                                            .k = 0,
                                            .ldc_pad = 2,
                                            .alpha = 3.0,
                                            .beta = beta},
                                           rng);
            EXPECT_LT(r.relative_error, tolerance(mode.type))
                << outcore::to_string(mode.type) << " beta " << beta;
            EXPECT_TRUE(r.every_element_written);
            EXPECT_TRUE(r.padding_intact);
        }
    }
}

TEST(CpuGemm, EmptyOutputWritesNothing) {
    auto dev = outcore::cpu::make_cpu_device({.total_memory_bytes = outcore::kGiB});
    auto q = dev->create_queue();
    Block c = dev->allocate({.bytes = 64, .kind = MemoryKind::HostPinned});
    std::memset(c.host(), 0x7F, 64);
    Block a = dev->allocate({.bytes = 64, .kind = MemoryKind::Device});
    GemmTileArgs args{.m = 0, .n = 4, .k = 4, .a = a, .lda = 1, .b = a, .ldb = 4, .c = c, .ldc = 1};
    EXPECT_NO_THROW(dev->kernels().gemm(*q, args));
    args.m = 4;
    args.n = 0;
    args.lda = 4;
    args.ldc = 4;
    EXPECT_NO_THROW(dev->kernels().gemm(*q, args));
    q->synchronize();
    for (int i = 0; i < 64; ++i) ASSERT_EQ(c.host()[i], std::byte{0x7F});
}

/// Holds a queue's worker until opened.
struct Gate {
    std::mutex mutex;
    std::condition_variable cv;
    bool open = false;
    void release() {
        {
            std::lock_guard lock(mutex);
            open = true;
        }
        cv.notify_all();
    }
    void wait() {
        std::unique_lock lock(mutex);
        cv.wait(lock, [this] { return open; });
    }
};

// The GEMM reads its inputs when the worker reaches it: here A is uploaded after a
// gate, from host memory rewritten after submission; C is host-visible so the test
// can see it was not written early.
TEST(CpuGemm, RunsInQueueOrder) {
    auto dev = outcore::cpu::make_cpu_device({.total_memory_bytes = outcore::kGiB});
    auto q = dev->create_queue();
    constexpr std::uint64_t kN = 8;
    Block a = dev->allocate({.bytes = kN * kN * 4, .kind = MemoryKind::Device});
    Block b = dev->allocate({.bytes = kN * kN * 4, .kind = MemoryKind::Device});
    Block c = dev->allocate({.bytes = kN * kN * 4, .kind = MemoryKind::HostPinned});
    std::vector<float> host_a(kN * kN, 1.0F);
    std::vector<float> host_b(kN * kN, 1.0F);
    auto* c_host = reinterpret_cast<float*>(c.host());
    std::fill_n(c_host, kN * kN, -1.0F);
    Gate gate;
    struct Opener {
        Gate& g;
        ~Opener() { g.release(); }
    };
    q->host_task([&] { gate.wait(); });
    q->upload(host_a.data(), a);
    q->upload(host_b.data(), b);
    Opener opener{gate};
    dev->kernels().gemm(*q,
                        {.m = kN, .n = kN, .k = kN, .a = a, .lda = kN, .b = b, .ldb = kN, .c = c, .ldc = kN});
    EXPECT_EQ(c_host[0], -1.0F) << "the GEMM ran at submission";
    std::fill(host_a.begin(), host_a.end(), 2.0F);
    gate.release();
    q->synchronize();
    for (std::uint64_t i = 0; i < kN * kN; ++i) ASSERT_EQ(c_host[i], 2.0F * kN) << i;
}

TEST(CpuGemm, RefusesForeignQueuesOperandsAndBadViews) {
    auto dev = outcore::cpu::make_cpu_device({.total_memory_bytes = outcore::kGiB});
    auto other = outcore::cpu::make_cpu_device({.total_memory_bytes = outcore::kGiB});
    auto q = dev->create_queue();
    auto other_q = other->create_queue();
    Block mine = dev->allocate({.bytes = 4096});
    Block theirs = other->allocate({.bytes = 4096});
    const GemmTileArgs ok{
        .m = 4, .n = 4, .k = 4, .a = mine, .lda = 4, .b = mine, .ldb = 4, .c = mine, .ldc = 4};
    EXPECT_THROW(dev->kernels().gemm(*other_q, ok), UsageError);
    GemmTileArgs bad = ok;
    bad.b = theirs;
    EXPECT_THROW(dev->kernels().gemm(*q, bad), UsageError);
    bad = ok;
    bad.a = BufferView(mine, 2, 64);  // not aligned to 4-byte elements
    EXPECT_THROW(dev->kernels().gemm(*q, bad), UsageError);
    bad = ok;
    bad.c = BufferView(mine, 0, 60);  // one element short
    EXPECT_THROW(dev->kernels().gemm(*q, bad), UsageError);
    bad = ok;
    bad.ldc = 3;
    EXPECT_THROW(dev->kernels().gemm(*q, bad), UsageError);
    bad = ok;
    bad.type = DType::U16;
    EXPECT_THROW(dev->kernels().gemm(*q, bad), UsageError);
    bad = ok;
    bad.type = DType::F64;
    bad.compute = GemmCompute::FastTF32;
    EXPECT_THROW(dev->kernels().gemm(*q, bad), UsageError);
    bad = ok;
    bad.m = std::uint64_t{1} << 32;
    bad.ldc = bad.m;
    EXPECT_THROW(dev->kernels().gemm(*q, bad), UsageError);
    EXPECT_NO_THROW(q->synchronize());  // nothing refused was enqueued
}

}  // namespace
