// CudaKernels on a real GPU (skipped without one). GEMM: every type and mode against
// a float64 reference at sizes the conformance suite does not reach, transposes,
// padded leading dimensions, operands in pinned host memory, k == 0, a 16-bit C for
// 16-bit inputs, queue order and refusals. Filters: every op × input × output type × channel count on random
// tiles, compared bit for bit with the CPU backend, through the shared-memory kernel, the global-memory
// fallback, weights inline and in a buffer, pinned tiles, and refusals.
#include "backends/cuda/cuda_kernels.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cuda_test_support.hpp"
#include "outcore/backends/cpu.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/kernel_params.hpp"
#include "support/filter_cases.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::Block;
using outcore::BufferView;
using outcore::Device;
using outcore::DType;
using outcore::FilterOp;
using outcore::FilterTileArgs;
using outcore::GemmCompute;
using outcore::GemmTileArgs;
using outcore::KernelParams;
using outcore::kGiB;
using outcore::kMiB;
using outcore::MemoryKind;
using outcore::Queue;
using outcore::UsageError;
using CudaKernelsTest = outcore::cuda::test::CudaTest;
using outcore::test::every_combination;
using outcore::test::FilterCase;
using outcore::test::FilterInput;

// --- GEMM ------------------------------------------------------------------------

float bf16_round(double v) {
    const auto f = static_cast<float>(v);
    std::uint32_t bits = 0;
    std::memcpy(&bits, &f, 4);
    bits &= 0xFFFF0000U;  // truncation keeps the value exactly representable in bf16
    float g = 0;
    std::memcpy(&g, &bits, 4);
    return g;
}

/// A column-major matrix: device bytes in its type and the exact values in double.
struct Matrix {
    DType type;
    std::uint64_t rows, cols, ld;
    std::vector<std::byte> bytes;
    std::vector<double> exact;  ///< ld × cols

    Matrix(DType t, std::uint64_t r, std::uint64_t c, std::uint64_t l)
        : type(t), rows(r), cols(c), ld(l), bytes(l * c * outcore::dtype_bytes(t)), exact(l * c) {}
    void set(std::uint64_t at, double v) {
        switch (type) {
            case DType::F64:
                std::memcpy(bytes.data() + at * 8, &v, 8);
                exact[at] = v;
                break;
            case DType::F32: {
                const auto f = static_cast<float>(v);
                std::memcpy(bytes.data() + at * 4, &f, 4);
                exact[at] = f;
                break;
            }
            case DType::F16: {
                const std::uint16_t h = outcore::f32_to_f16(static_cast<float>(v));
                std::memcpy(bytes.data() + at * 2, &h, 2);
                exact[at] = outcore::f16_to_f32(h);
                break;
            }
            default: {
                const float f = bf16_round(v);
                std::uint32_t bits = 0;
                std::memcpy(&bits, &f, 4);
                const auto top = static_cast<std::uint16_t>(bits >> 16);
                std::memcpy(bytes.data() + at * 2, &top, 2);
                exact[at] = f;
                break;
            }
        }
    }
    [[nodiscard]] double get(std::uint64_t at) const {
        if (type == DType::BF16 || type == DType::F16) {
            std::uint16_t h = 0;
            std::memcpy(&h, bytes.data() + at * 2, 2);
            return type == DType::F16 ? outcore::f16_to_f32(h) : outcore::bf16_to_f32(h);
        }
        if (type == DType::F64) {
            double d = 0;
            std::memcpy(&d, bytes.data() + at * 8, 8);
            return d;
        }
        float f = 0;
        std::memcpy(&f, bytes.data() + at * 4, 4);
        return f;
    }
};

struct GemmCase {
    DType type = DType::F32;
    GemmCompute compute = GemmCompute::Exact;
    bool trans_a = false, trans_b = false;
    std::uint64_t m = 1, n = 1, k = 1, pad = 0;
    double alpha = 1.0, beta = 0.0;
    MemoryKind kind = MemoryKind::Device;  ///< where A, B and C live
    bool narrow_c = false;                 ///< C in the 16-bit input type
};

struct GemmResult {
    double relative_error = 0;
    bool all_written = true;
    bool padding_intact = true;
};

constexpr double kPadding = 12345.0;

GemmResult run_gemm(Device& dev, const GemmCase& gc, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> uni(-1.0, 1.0);
    const std::uint64_t ar = gc.trans_a ? gc.k : gc.m, ac = gc.trans_a ? gc.m : gc.k;
    const std::uint64_t br = gc.trans_b ? gc.n : gc.k, bc = gc.trans_b ? gc.k : gc.n;
    Matrix a(gc.type, ar, ac, std::max<std::uint64_t>(ar + gc.pad, 1));
    Matrix b(gc.type, br, bc, std::max<std::uint64_t>(br + gc.pad, 1));
    Matrix c(gc.narrow_c             ? gc.type
             : gc.type == DType::F64 ? DType::F64
                                     : DType::F32,
             gc.m, gc.n, gc.m + gc.pad);
    for (std::uint64_t i = 0; i < a.ld * ac; ++i) a.set(i, uni(rng));
    for (std::uint64_t i = 0; i < b.ld * bc; ++i) b.set(i, uni(rng));
    for (std::uint64_t j = 0; j < gc.n; ++j) {
        for (std::uint64_t i = 0; i < c.ld; ++i) {
            c.set(i + j * c.ld, i >= gc.m ? kPadding : gc.beta == 0.0 ? std::nan("") : uni(rng));
        }
    }
    auto q = dev.create_queue(outcore::QueueRole::Compute);
    auto place = [&](const Matrix& mtx) {
        Block block = dev.allocate({.bytes = std::max<std::size_t>(mtx.bytes.size(), 1), .kind = gc.kind});
        if (!mtx.bytes.empty()) q->upload(mtx.bytes.data(), BufferView(block, 0, mtx.bytes.size()));
        return block;
    };
    Block ab = place(a), bb = place(b), cb = place(c);
    dev.kernels().gemm(*q, GemmTileArgs{.type = gc.type,
                                        .compute = gc.compute,
                                        .trans_a = gc.trans_a,
                                        .trans_b = gc.trans_b,
                                        .m = gc.m,
                                        .n = gc.n,
                                        .k = gc.k,
                                        .a = BufferView(ab, 0, a.bytes.size()),
                                        .lda = a.ld,
                                        .b = BufferView(bb, 0, b.bytes.size()),
                                        .ldb = b.ld,
                                        .c = BufferView(cb, 0, c.bytes.size()),
                                        .ldc = c.ld,
                                        .alpha = gc.alpha,
                                        .beta = gc.beta,
                                        .narrow_c = gc.narrow_c});
    Matrix out = c;
    q->download(BufferView(cb, 0, c.bytes.size()), out.bytes.data());
    q->synchronize();

    GemmResult r;
    double diff2 = 0, ref2 = 0;
    for (std::uint64_t j = 0; j < gc.n; ++j) {
        for (std::uint64_t i = 0; i < gc.m; ++i) {
            double acc = 0;
            for (std::uint64_t l = 0; l < gc.k; ++l) {
                acc += (gc.trans_a ? a.exact[l + i * a.ld] : a.exact[i + l * a.ld]) *
                       (gc.trans_b ? b.exact[j + l * b.ld] : b.exact[l + j * b.ld]);
            }
            const double ref = gc.alpha * acc + (gc.beta != 0.0 ? gc.beta * c.exact[i + j * c.ld] : 0.0);
            const double got = out.get(i + j * c.ld);
            r.all_written = r.all_written && std::isfinite(got);
            diff2 += (got - ref) * (got - ref);
            ref2 += ref * ref;
        }
        for (std::uint64_t i = gc.m; i < c.ld; ++i)
            r.padding_intact = r.padding_intact && out.get(i + j * c.ld) == c.exact[i + j * c.ld];
    }
    r.relative_error = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
    return r;
}

struct Mode {
    DType type;
    GemmCompute compute;
    double tolerance;  ///< QUALITY.md: f32 well under 1e-5, tf32 near 3e-4, f64 1e-13
};
constexpr Mode kModes[] = {{DType::F32, GemmCompute::Exact, 1e-5},
                           {DType::F32, GemmCompute::FastTF32, 2e-3},
                           {DType::F64, GemmCompute::Exact, 1e-13},
                           {DType::BF16, GemmCompute::Exact, 1e-4},
                           {DType::F16, GemmCompute::Exact, 1e-4}};

TEST_F(CudaKernelsTest, GemmSupportsEveryTypeTheIssueNames) {
    for (const Mode& mode : kModes) EXPECT_TRUE(dev().kernels().supports_gemm(mode.type, mode.compute));
    EXPECT_FALSE(dev().kernels().supports_gemm(DType::F64, GemmCompute::FastTF32));
    EXPECT_FALSE(dev().kernels().supports_gemm(DType::U8, GemmCompute::Exact));
}

TEST_F(CudaKernelsTest, LargerRandomGemmsMatchAFloat64Reference) {
    std::mt19937_64 rng(outcore::test::seed());
    for (const Mode& mode : kModes) {
        for (std::uint64_t t = 0; t < outcore::test::scaled(3); ++t) {
            GemmCase gc{.type = mode.type,
                        .compute = mode.compute,
                        .trans_a = rng() % 2 == 0,
                        .trans_b = rng() % 2 == 0,
                        .m = 129 + rng() % 300,
                        .n = 65 + rng() % 300,
                        .k = 200 + rng() % 500,
                        .pad = rng() % 5,
                        .alpha = 0.5 + rng() % 3,
                        .beta = rng() % 2 == 0 ? 0.0 : -0.75};
            SCOPED_TRACE(testing::Message() << outcore::to_string(gc.type)
                                            << (gc.compute == GemmCompute::FastTF32 ? " tf32" : "") << " "
                                            << gc.m << "x" << gc.n << "x" << gc.k << " ta=" << gc.trans_a
                                            << " tb=" << gc.trans_b << " beta=" << gc.beta);
            const GemmResult r = run_gemm(dev(), gc, rng);
            EXPECT_LT(r.relative_error, mode.tolerance);
            EXPECT_TRUE(r.all_written);
            EXPECT_TRUE(r.padding_intact);
        }
    }
}

// A C in the inputs' 16-bit type (GemmTileArgs::narrow_c): f32 sums rounded once, so the
// error is the rounding of C (bf16 2^-9, f16 2^-12 relative at most per element).
TEST_F(CudaKernelsTest, SixteenBitInputsWriteASixteenBitC) {
    std::mt19937_64 rng(outcore::test::seed());
    for (const auto& [type, tolerance] : {std::pair{DType::BF16, 3e-3}, std::pair{DType::F16, 5e-4}}) {
        EXPECT_TRUE(dev().kernels().supports_narrow_c(type));
        for (const double beta : {0.0, -0.75}) {
            GemmCase gc{.type = type,
                        .trans_a = rng() % 2 == 0,
                        .trans_b = rng() % 2 == 0,
                        .m = 129 + rng() % 300,
                        .n = 65 + rng() % 300,
                        .k = 200 + rng() % 500,
                        .pad = rng() % 5,
                        .alpha = 0.5,
                        .beta = beta,
                        .narrow_c = true};
            SCOPED_TRACE(testing::Message() << outcore::to_string(type) << " " << gc.m << "x" << gc.n << "x"
                                            << gc.k << " beta=" << beta);
            const GemmResult r = run_gemm(dev(), gc, rng);
            EXPECT_LT(r.relative_error, tolerance);
            EXPECT_GT(r.relative_error, 0.0);  // rounded to 16 bits: never exact at these sizes
            EXPECT_TRUE(r.all_written);
            EXPECT_TRUE(r.padding_intact);
        }
    }
    EXPECT_FALSE(dev().kernels().supports_narrow_c(DType::F32));
}

TEST_F(CudaKernelsTest, GemmReadsAndWritesPinnedHostMemoryInPlace) {
    std::mt19937_64 rng(outcore::test::seed());
    const GemmResult r = run_gemm(
        dev(), {.m = 100, .n = 70, .k = 90, .pad = 3, .beta = 0.5, .kind = MemoryKind::HostPinned}, rng);
    EXPECT_LT(r.relative_error, 1e-5);
    EXPECT_TRUE(r.all_written);
    EXPECT_TRUE(r.padding_intact);
}

TEST_F(CudaKernelsTest, EmptyInnerDimensionScalesC) {
    std::mt19937_64 rng(outcore::test::seed());
    for (const Mode& mode : kModes) {
        for (double beta : {0.0, 0.5}) {
            const GemmResult r = run_gemm(dev(),
                                          {.type = mode.type,
                                           .compute = mode.compute,
                                           .m = 9,
                                           .n = 4,
                                           .k = 0,
                                           .pad = 2,
                                           .alpha = 3.0,
                                           .beta = beta},
                                          rng);
            EXPECT_LT(r.relative_error, 1e-6) << outcore::to_string(mode.type) << " beta " << beta;
            EXPECT_TRUE(r.all_written);
            EXPECT_TRUE(r.padding_intact);
        }
    }
}

TEST_F(CudaKernelsTest, GemmRefusesPageableOperandsAndForeignQueues) {
    auto q = dev().create_queue();
    auto cpu = outcore::open_device("cpu");
    auto cpu_q = cpu->create_queue();
    Block device = dev().allocate({.bytes = 4096});
    Block cached = dev().allocate({.bytes = 4096, .kind = MemoryKind::HostCached});
    const GemmTileArgs ok{.m = 4,
                          .n = 4,
                          .k = 4,
                          .a = device,
                          .lda = 4,
                          .b = device,
                          .ldb = 4,
                          .c = BufferView(device, 1024, 64),
                          .ldc = 4};
    EXPECT_THROW(dev().kernels().gemm(*cpu_q, ok), UsageError);
    GemmTileArgs bad = ok;
    bad.b = cached;
    EXPECT_THROW(dev().kernels().gemm(*q, bad), UsageError);
    bad = ok;
    bad.a = BufferView(device, 2, 64);  // not aligned to its elements
    EXPECT_THROW(dev().kernels().gemm(*q, bad), UsageError);
    bad = ok;
    bad.m = std::uint64_t{1} << 31;
    bad.ldc = bad.m;
    EXPECT_THROW(dev().kernels().gemm(*q, bad), UsageError);
    EXPECT_NO_THROW(dev().kernels().gemm(*q, ok));
    EXPECT_NO_THROW(q->synchronize());
}

// --- filters ---------------------------------------------------------------------

class CudaFilterTest : public CudaKernelsTest {
protected:
    void SetUp() override {
        CudaKernelsTest::SetUp();
        if (IsSkipped()) return;
        cpu_ = outcore::cpu::make_cpu_device({.total_memory_bytes = 4 * kGiB});
    }
    void TearDown() override { set_global(false); }

    void set_global(bool on) {
        if (dev_) dynamic_cast<outcore::cuda::CudaKernels&>(dev().kernels()).force_global_filters(on);
    }
    /// Runs on the CPU and on the GPU and expects the same bytes.
    void expect_same_as_cpu(const FilterCase& fc, std::mt19937_64& rng,
                            MemoryKind kind = MemoryKind::Device) {
        outcore::test::expect_same_bytes(dev(), *cpu_, fc, rng, kind);
    }

    std::unique_ptr<Device> cpu_;
};

TEST_F(CudaFilterTest, EveryOpAndTypeMatchesTheCpuBitForBit) {
    std::mt19937_64 rng(outcore::test::seed());
    for (const FilterCase& fc : every_combination(rng)) expect_same_as_cpu(fc, rng);
}

TEST_F(CudaFilterTest, TheGlobalMemoryFallbackMatchesTheCpuBitForBit) {
    std::mt19937_64 rng(outcore::test::seed());
    set_global(true);
    for (const FilterCase& fc : every_combination(rng)) expect_same_as_cpu(fc, rng);
}

// Tiles larger than one block's share in both directions, so every block position
// (interior, right and bottom edges, the grid-stride loop) is exercised.
TEST_F(CudaFilterTest, LargeTilesMatchTheCpuBitForBit) {
    std::mt19937_64 rng(outcore::test::seed());
    expect_same_as_cpu({.op = FilterOp::SeparableRow,
                        .in = DType::U16,
                        .out = DType::F32,
                        .channels = 3,
                        .radius = 24,
                        .rows = 1100,
                        .cols = 1500},
                       rng);
    expect_same_as_cpu({.op = FilterOp::SeparableColumn,
                        .in = DType::F32,
                        .out = DType::U8,
                        .channels = 1,
                        .radius = 24,
                        .rows = 1500,
                        .cols = 1100},
                       rng);
    expect_same_as_cpu({.op = FilterOp::Conv2D,
                        .in = DType::U8,
                        .out = DType::U8,
                        .channels = 4,
                        .radius = 7,
                        .rows = 700,
                        .cols = 900},
                       rng);
    expect_same_as_cpu({.op = FilterOp::SobelMagnitude,
                        .in = DType::F32,
                        .out = DType::F32,
                        .channels = 2,
                        .radius = 1,
                        .rows = 1000,
                        .cols = 1000},
                       rng);
}

// 2r+1 taps above the 1024 that travel inline: the weights go in a buffer; the
// column pass's halo is then too tall for shared memory and takes the fallback.
TEST_F(CudaFilterTest, WeightsInABufferAndHalosBeyondSharedMemory) {
    std::mt19937_64 rng(outcore::test::seed());
    expect_same_as_cpu({.op = FilterOp::SeparableRow,
                        .in = DType::F32,
                        .out = DType::F32,
                        .channels = 2,
                        .radius = 600,
                        .rows = 20,
                        .cols = 300},
                       rng);
    expect_same_as_cpu({.op = FilterOp::SeparableColumn,
                        .in = DType::F32,
                        .out = DType::U16,
                        .channels = 1,
                        .radius = 1000,
                        .rows = 40,
                        .cols = 70},
                       rng);
}

TEST_F(CudaFilterTest, TilesInPinnedHostMemoryWork) {
    std::mt19937_64 rng(outcore::test::seed());
    expect_same_as_cpu({.op = FilterOp::Conv2D,
                        .in = DType::F32,
                        .out = DType::U8,
                        .channels = 1,
                        .radius = 2,
                        .rows = 64,
                        .cols = 80},
                       rng, MemoryKind::HostPinned);
}

TEST_F(CudaFilterTest, RefusesWhatTheKernelsCannotReach) {
    auto q = dev().create_queue();
    Block device = dev().allocate({.bytes = 1 * kMiB});
    Block cached = dev().allocate({.bytes = 1 * kMiB, .kind = MemoryKind::HostCached});
    const std::vector<float> taps(9, 0.1F);
    const KernelParams params = KernelParams::make(dev(), *q, std::as_bytes(std::span(taps)));
    const FilterTileArgs ok{.op = FilterOp::Conv2D,
                            .radius = 1,
                            .out_rows = 8,
                            .out_cols = 8,
                            .in = BufferView(device, 0, 4096),
                            .in_row_stride = 40,
                            .out = BufferView(device, 8192, 4096),
                            .out_row_stride = 32,
                            .weights = &params};
    FilterTileArgs bad = ok;
    bad.in = BufferView(cached, 0, 4096);
    EXPECT_THROW(dev().kernels().filter(*q, bad), UsageError);
    bad = ok;
    bad.out = BufferView(device, 64, 4096);  // overlaps the input
    EXPECT_THROW(dev().kernels().filter(*q, bad), UsageError);
    bad = ok;
    bad.radius = 8;  // 17×17: over the shared 15×15 limit
    EXPECT_THROW(dev().kernels().filter(*q, bad), UsageError);
    bad = ok;
    bad.in_row_stride = 42;  // not a whole number of f32 samples
    EXPECT_THROW(dev().kernels().filter(*q, bad), UsageError);
    EXPECT_NO_THROW(dev().kernels().filter(*q, ok));
    EXPECT_NO_THROW(q->synchronize());
}

}  // namespace
