// Tests of the CPU backend's filter kernels (Kernels::filter): every op × input type ×
// output type × channel count on random tiles against two references — a scalar
// re-implementation of the documented float arithmetic (must match bit for bit) and
// a float64 one (must agree within the float error bound) — plus the integer
// rounding rule, weights inline and in a buffer, padded strides, and refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "filter_test_support.hpp"
#include "outcore/core/error.hpp"
#include "outcore/device/kernel_params.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::Block;
using outcore::BufferView;
using outcore::Device;
using outcore::DType;
using outcore::FilterOp;
using outcore::FilterTileArgs;
using outcore::KernelParams;
using outcore::Queue;
using outcore::UsageError;
namespace ft = outcore::filter_test;

struct KernelCase {
    FilterOp op = FilterOp::Conv2D;
    DType in = DType::F32;
    DType out = DType::F32;
    std::uint32_t channels = 1;
    std::uint32_t radius = 0;
    std::uint64_t out_rows = 1, out_cols = 1;
    std::uint64_t in_pad_elems = 0, out_pad_elems = 0;  ///< row padding beyond the pixels
};

std::uint64_t halo_rows(const KernelCase& k) { return k.op == FilterOp::SeparableRow ? 0 : k.radius; }
std::uint64_t halo_cols(const KernelCase& k) { return k.op == FilterOp::SeparableColumn ? 0 : k.radius; }
std::size_t tap_count(const KernelCase& k) {
    const std::size_t side = 2 * std::size_t{k.radius} + 1;
    switch (k.op) {
        case FilterOp::Conv2D: return side * side;
        case FilterOp::SobelMagnitude: return 0;
        default: return side;
    }
}

/// One output sample by the documented sequence, in float (`exact` false), or in
/// double with the sum of |terms| for the error bound (`exact` true).
struct Sample {
    float in_float = 0;
    double in_double = 0;
    double magnitude = 0;  ///< Σ|w·x| (the float error scales with it)
};

class KernelRun {
public:
    KernelRun(const KernelCase& kc, std::mt19937_64& rng) : kc_(kc) {
        in_rows_ = kc.out_rows + 2 * halo_rows(kc);
        in_elems_ = (kc.out_cols + 2 * halo_cols(kc)) * kc.channels;
        in_stride_ = (in_elems_ + kc.in_pad_elems) * outcore::dtype_bytes(kc.in);
        out_elems_ = kc.out_cols * kc.channels;
        out_stride_ = (out_elems_ + kc.out_pad_elems) * outcore::dtype_bytes(kc.out);
        input_ = ft::random_elements(kc.in, in_rows_ * (in_elems_ + kc.in_pad_elems), rng);
        std::uniform_real_distribution<float> w(-1.0F, 1.0F);
        weights_.resize(tap_count(kc));
        for (float& v : weights_) v = w(rng);
    }

    /// Runs the kernel on `dev` and returns the output rows (padding included).
    std::vector<std::byte> run(Device& dev) const {
        auto q = dev.create_queue(outcore::QueueRole::Compute);
        std::vector<std::byte> out(kc_.out_rows * out_stride_, std::byte{0xAB});  // poison
        Block in_block = ft::upload(dev, *q, input_);
        Block out_block = ft::upload(dev, *q, out);
        const KernelParams params = KernelParams::make(dev, *q, std::as_bytes(std::span(weights_)));
        dev.kernels().filter(*q, FilterTileArgs{.op = kc_.op,
                                                .channels = kc_.channels,
                                                .radius = kc_.radius,
                                                .in_type = kc_.in,
                                                .out_type = kc_.out,
                                                .out_rows = kc_.out_rows,
                                                .out_cols = kc_.out_cols,
                                                .in = BufferView(in_block),
                                                .in_row_stride = in_stride_,
                                                .out = BufferView(out_block),
                                                .out_row_stride = out_stride_,
                                                .weights = weights_.empty() ? nullptr : &params});
        q->download(BufferView(out_block, 0, out.size()), out.data());
        q->synchronize();
        return out;
    }

    /// Checks every output element against both references, and the padding.
    void check(const std::vector<std::byte>& out) const {
        const std::uint32_t ebytes = outcore::dtype_bytes(kc_.out);
        const double max_out = kc_.out == DType::U8 ? 255.0 : 65535.0;
        int failures = 0;
        for (std::uint64_t y = 0; y < kc_.out_rows && failures < 5; ++y) {
            const std::byte* row = out.data() + y * out_stride_;
            for (std::uint64_t e = 0; e < out_elems_; ++e) {
                const Sample s = sample(y, e / kc_.channels, static_cast<std::uint32_t>(e % kc_.channels));
                const double got = ft::load(row, kc_.out, e);
                const double tol =
                    (static_cast<double>(tap_count(kc_)) + 16.0) * std::ldexp(1.0, -24) * s.magnitude;
                bool ok = true;
                if (kc_.out == DType::F32) {
                    const auto expect = s.in_float;
                    ok = std::memcmp(&expect, row + e * 4, 4) == 0 && std::fabs(got - s.in_double) <= tol;
                } else {
                    // Exact against the float sequence; within the rounding of the
                    // float64 value ± the float error bound.
                    const double lo = std::nearbyint(std::clamp(s.in_double - tol, 0.0, max_out));
                    const double hi = std::nearbyint(std::clamp(s.in_double + tol, 0.0, max_out));
                    ok = got == ft::round_to(kc_.out, s.in_float) && got >= lo && got <= hi;
                }
                if (!ok) {
                    ++failures;
                    ADD_FAILURE() << describe() << " at row " << y << " element " << e << ": got " << got
                                  << ", float sequence " << s.in_float << ", float64 " << s.in_double;
                    if (failures >= 5) break;
                }
            }
            for (std::uint64_t b = out_elems_ * ebytes; b < out_stride_; ++b) {
                if (row[b] != std::byte{0xAB}) {
                    ADD_FAILURE() << describe() << ": row padding overwritten in row " << y;
                    break;
                }
            }
        }
    }

    [[nodiscard]] std::string describe() const {
        return "op " + std::to_string(static_cast<int>(kc_.op)) + " " +
               std::string(outcore::to_string(kc_.in)) + "->" + std::string(outcore::to_string(kc_.out)) +
               " c" + std::to_string(kc_.channels) + " r" + std::to_string(kc_.radius) + " " +
               std::to_string(kc_.out_rows) + "x" + std::to_string(kc_.out_cols);
    }

    [[nodiscard]] const std::vector<float>& weights() const noexcept { return weights_; }

private:
    [[nodiscard]] double px(std::uint64_t r, std::uint64_t c, std::uint32_t ch) const {
        return ft::load(input_.data() + r * in_stride_, kc_.in, c * kc_.channels + ch);
    }

    [[nodiscard]] Sample sample(std::uint64_t y, std::uint64_t x, std::uint32_t ch) const {
        Sample s;
        const std::size_t side = 2 * std::size_t{kc_.radius} + 1;
        auto tap = [&](std::size_t i, double v, bool first) {
            const float term = weights_[i] * static_cast<float>(v);
            s.in_float = first ? term : s.in_float + term;
            s.in_double += static_cast<double>(weights_[i]) * v;
            s.magnitude += std::fabs(static_cast<double>(weights_[i]) * v);
        };
        switch (kc_.op) {
            case FilterOp::SeparableRow:
                for (std::size_t t = 0; t < side; ++t) tap(t, px(y, x + t, ch), t == 0);
                break;
            case FilterOp::SeparableColumn:
                for (std::size_t t = 0; t < side; ++t) tap(t, px(y + t, x, ch), t == 0);
                break;
            case FilterOp::Conv2D:
                for (std::size_t dy = 0; dy < side; ++dy) {
                    for (std::size_t dx = 0; dx < side; ++dx)
                        tap(dy * side + dx, px(y + dy, x + dx, ch), dy + dx == 0);
                }
                break;
            case FilterOp::SobelMagnitude: {
                auto f = [&](std::uint64_t r, std::uint64_t c) {
                    return static_cast<float>(px(y + r, x + c, ch));
                };
                const float gx = ((f(0, 2) - f(0, 0)) + 2.0F * (f(1, 2) - f(1, 0))) + (f(2, 2) - f(2, 0));
                const float gy =
                    ((f(2, 0) + 2.0F * f(2, 1)) + f(2, 2)) - ((f(0, 0) + 2.0F * f(0, 1)) + f(0, 2));
                s.in_float = std::sqrt(gx * gx + gy * gy);
                auto d = [&](std::uint64_t r, std::uint64_t c) { return px(y + r, x + c, ch); };
                const double dgx = -d(0, 0) + d(0, 2) - 2 * d(1, 0) + 2 * d(1, 2) - d(2, 0) + d(2, 2);
                const double dgy = -d(0, 0) - 2 * d(0, 1) - d(0, 2) + d(2, 0) + 2 * d(2, 1) + d(2, 2);
                s.in_double = std::sqrt(dgx * dgx + dgy * dgy);
                for (std::uint64_t r = 0; r < 3; ++r) {
                    for (std::uint64_t c = 0; c < 3; ++c) s.magnitude += 2 * std::fabs(d(r, c));
                }
                break;
            }
        }
        return s;
    }

    KernelCase kc_;
    std::uint64_t in_rows_ = 0, in_elems_ = 0, in_stride_ = 0, out_elems_ = 0, out_stride_ = 0;
    std::vector<std::byte> input_;
    std::vector<float> weights_;
};

/// Every valid (op, in, out) combination.
std::vector<KernelCase> every_combination() {
    std::vector<KernelCase> cases;
    for (FilterOp op :
         {FilterOp::SeparableRow, FilterOp::SeparableColumn, FilterOp::Conv2D, FilterOp::SobelMagnitude}) {
        for (DType in : ft::kPixelTypes) {
            for (DType out : ft::kPixelTypes) {
                if (op == FilterOp::SeparableRow && out != DType::F32) continue;
                if (op == FilterOp::SeparableColumn && in != DType::F32) continue;
                for (std::uint32_t c = 1; c <= 4; ++c)
                    cases.push_back({.op = op, .in = in, .out = out, .channels = c});
            }
        }
    }
    return cases;
}

TEST(FilterKernels, EveryOpTypeAndChannelCountMatchesBothReferences) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = ft::cpu_device();
    for (std::uint64_t rep = 0; rep < outcore::test::scaled(2); ++rep) {
        for (KernelCase kc : every_combination()) {
            kc.radius = kc.op == FilterOp::SobelMagnitude ? 1
                        : kc.op == FilterOp::Conv2D       ? static_cast<std::uint32_t>(rng() % 8)
                                                          : static_cast<std::uint32_t>(rng() % 6);
            kc.out_rows = 1 + rng() % 9;
            kc.out_cols = 1 + rng() % 45;  // below and above a vector's width, odd remainders
            kc.in_pad_elems = rng() % 3 == 0 ? rng() % 7 : 0;
            kc.out_pad_elems = rng() % 3 == 0 ? rng() % 7 : 0;
            const KernelRun run(kc, rng);
            run.check(run.run(*dev));
        }
    }
}

TEST(FilterKernels, WideTilesSpanColumnBlocksAndThreads) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = ft::cpu_device();
    // Rows wider than the kernels' 1024-float column block, and enough work per tile
    // for the thread pool to split the rows.
    const KernelCase cases[] = {
        {.op = FilterOp::SeparableRow,
         .in = DType::U16,
         .out = DType::F32,
         .channels = 4,
         .radius = 5,
         .out_rows = 40,
         .out_cols = 700},
        {.op = FilterOp::SeparableColumn,
         .in = DType::F32,
         .out = DType::U8,
         .channels = 3,
         .radius = 9,
         .out_rows = 33,
         .out_cols = 530},
        {.op = FilterOp::Conv2D,
         .in = DType::U8,
         .out = DType::F32,
         .channels = 3,
         .radius = 7,
         .out_rows = 24,
         .out_cols = 401,
         .in_pad_elems = 5},
        {.op = FilterOp::SobelMagnitude,
         .in = DType::F32,
         .out = DType::U16,
         .channels = 2,
         .radius = 1,
         .out_rows = 70,
         .out_cols = 1100},
    };
    for (const KernelCase& kc : cases) {
        const KernelRun run(kc, rng);
        const std::vector<std::byte> first = run.run(*dev);
        run.check(first);
        // Rerun: the split over threads varies between runs, the bits may not.
        EXPECT_EQ(run.run(*dev), first) << run.describe();
    }
}

TEST(FilterKernels, WeightsInABufferGiveTheSameBitsAsInline) {
    std::mt19937_64 rng(outcore::test::seed());
    auto inline_dev = ft::cpu_device(4096);
    auto buffer_dev = ft::cpu_device(16);  // every tap set over 16 bytes goes in a buffer
    for (FilterOp op : {FilterOp::SeparableRow, FilterOp::Conv2D}) {
        const KernelCase kc{.op = op,
                            .in = DType::U8,
                            .out = DType::F32,
                            .channels = 2,
                            .radius = 3,
                            .out_rows = 6,
                            .out_cols = 19};
        const KernelRun run(kc, rng);
        const std::vector<std::byte> a = run.run(*inline_dev);
        run.check(a);
        EXPECT_EQ(run.run(*buffer_dev), a);
    }
}

TEST(FilterKernels, IntegerOutputsClampAndRoundHalfToEven) {
    auto dev = ft::cpu_device();
    auto q = dev->create_queue();
    const float nan = std::nanf("");
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> in = {0.5F,  1.5F, 2.5F, 3.5F, 254.5F,      255.49F,  255.5F,   300.0F, -0.4F,
                                   -3.0F, nan,  inf,  -inf, 0.49999997F, 65534.5F, 65535.5F, 1e9F,   7.0F};
    const std::vector<double> want_u8 = {0, 2, 2,   4, 254, 255, 255, 255, 0,
                                         0, 0, 255, 0, 0,   255, 255, 255, 7};
    const std::vector<double> want_u16 = {0, 2, 2,     4, 254, 255,   256,   300,   0,
                                          0, 0, 65535, 0, 0,   65534, 65535, 65535, 7};
    const float one = 1.0F;
    const KernelParams identity = KernelParams::make(*dev, *q, std::as_bytes(std::span(&one, 1)));
    Block in_block = ft::upload(*dev, *q, std::as_bytes(std::span(in)));
    for (DType out_type : {DType::U8, DType::U16}) {
        std::vector<std::byte> out(in.size() * outcore::dtype_bytes(out_type));
        Block out_block = dev->allocate({.bytes = out.size(), .kind = outcore::MemoryKind::Device});
        dev->kernels().filter(*q, FilterTileArgs{.op = FilterOp::Conv2D,
                                                 .in_type = DType::F32,
                                                 .out_type = out_type,
                                                 .out_rows = 1,
                                                 .out_cols = in.size(),
                                                 .in = BufferView(in_block),
                                                 .in_row_stride = in.size() * 4,
                                                 .out = BufferView(out_block),
                                                 .out_row_stride = out.size(),
                                                 .weights = &identity});
        q->download(BufferView(out_block), out.data());
        q->synchronize();
        const std::vector<double>& want = out_type == DType::U8 ? want_u8 : want_u16;
        for (std::size_t i = 0; i < in.size(); ++i) {
            EXPECT_EQ(ft::load(out.data(), out_type, i), want[i])
                << "input " << in[i] << " to " << outcore::to_string(out_type);
        }
    }
}

TEST(FilterKernels, RefusesWhatItCannotRun) {
    auto dev = ft::cpu_device();
    auto other = ft::cpu_device();
    auto q = dev->create_queue();
    auto other_q = other->create_queue();
    std::vector<float> taps(15 * 15, 0.01F);
    const KernelParams w3 = KernelParams::make(*dev, *q, std::as_bytes(std::span(taps.data(), 3)));
    const KernelParams w225 = KernelParams::make(*dev, *q, std::as_bytes(std::span(taps)));
    const std::vector<float> taps289(17 * 17, 0.0F);
    const KernelParams w289 = KernelParams::make(*dev, *q, std::as_bytes(std::span(taps289)));
    Block in = dev->allocate({.bytes = 64 * 1024, .kind = outcore::MemoryKind::Device});
    Block out = dev->allocate({.bytes = 64 * 1024, .kind = outcore::MemoryKind::Device});
    const FilterTileArgs good{.op = FilterOp::SeparableRow,
                              .channels = 1,
                              .radius = 1,
                              .in_type = DType::U8,
                              .out_type = DType::F32,
                              .out_rows = 4,
                              .out_cols = 4,
                              .in = BufferView(in),
                              .in_row_stride = 6,
                              .out = BufferView(out),
                              .out_row_stride = 16,
                              .weights = &w3};
    dev->kernels().filter(*q, good);
    q->synchronize();

    FilterTileArgs a = good;
    a.out_type = DType::U8;  // the row pass writes f32 only
    a.out_row_stride = 4;
    EXPECT_THROW(dev->kernels().filter(*q, a), UsageError);
    a = good;
    a.op = FilterOp::SeparableColumn;  // reads f32 only
    EXPECT_THROW(dev->kernels().filter(*q, a), UsageError);
    a = good;
    a.in_type = DType::F64;
    a.in_row_stride = 48;
    EXPECT_THROW(dev->kernels().filter(*q, a), UsageError);
    a = good;
    a.op = FilterOp::Conv2D;  // 17×17 is over the limit
    a.radius = 8;
    a.in_row_stride = 64;
    a.weights = &w289;
    EXPECT_THROW(dev->kernels().filter(*q, a), UsageError);
    a.radius = 7;  // 15×15 is fine
    a.weights = &w225;
    EXPECT_NO_THROW(dev->kernels().filter(*q, a));
    a = good;
    a.in_type = DType::F32;  // f32 rows must be 4-byte aligned
    a.in = BufferView(in, 2, 1024);
    a.in_row_stride = 24;
    EXPECT_THROW(dev->kernels().filter(*q, a), UsageError);
    a = good;
    a.out = BufferView(in, 0, 1024);  // output over the input
    EXPECT_THROW(dev->kernels().filter(*q, a), UsageError);
    EXPECT_THROW(dev->kernels().filter(*other_q, good), UsageError);  // a foreign queue
    q->synchronize();
}

}  // namespace
