// The Vulkan filter shader against the CPU backend, bit for bit (skipped where no
// Vulkan device is found): every op × input × output type × channel count on random
// tiles, weights inline (copied into staging, as setBytes) and in a caller's buffer,
// tiles at binding offsets the device's alignment does not allow, and refusals.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "outcore/backends/cpu.hpp"
#include "outcore/backends/vulkan.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "support/filter_cases.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::Block;
using outcore::BufferView;
using outcore::DType;
using outcore::FilterOp;
using outcore::FilterTileArgs;
using outcore::MemoryKind;
using outcore::test::every_combination;
using outcore::test::FilterCase;
using outcore::test::FilterInput;

class VulkanFilterTest : public ::testing::Test {
protected:
    void SetUp() override {
        const outcore::vulkan::VulkanProbe probe = outcore::vulkan::probe_vulkan();
        if (probe.devices.empty()) GTEST_SKIP() << "no Vulkan device: " << probe.reason;
        dev_ = outcore::vulkan::make_vulkan_device();
        cpu_ = outcore::cpu::make_cpu_device({.total_memory_bytes = outcore::kGiB});
    }
    void expect_same_as_cpu(const FilterCase& fc, std::mt19937_64& rng) {
        outcore::test::expect_same_bytes(*dev_, *cpu_, fc, rng);
    }

    std::unique_ptr<outcore::Device> dev_;
    std::unique_ptr<outcore::Device> cpu_;
};

TEST_F(VulkanFilterTest, EveryOpAndTypeMatchesTheCpuBitForBit) {
    std::mt19937_64 rng(outcore::test::seed());
    for (const FilterCase& fc : every_combination(rng)) expect_same_as_cpu(fc, rng);
}

// Weights above max_inline_bytes come from a device buffer the caller made
// (KernelParams); at or below it they are copied by the backend. Both must match.
TEST_F(VulkanFilterTest, WeightsInlineAndInABufferMatch) {
    std::mt19937_64 rng(outcore::test::seed());
    const std::uint64_t inline_taps = dev_->info().max_inline_bytes / sizeof(float);
    for (const std::uint32_t radius : {1U, static_cast<std::uint32_t>(inline_taps / 2), 30U}) {
        expect_same_as_cpu({.op = FilterOp::SeparableRow,
                            .in = DType::U16,
                            .out = DType::F32,
                            .channels = 2,
                            .radius = radius,
                            .rows = 9,
                            .cols = 77},
                           rng);
        expect_same_as_cpu({.op = FilterOp::SeparableColumn,
                            .in = DType::F32,
                            .out = DType::U8,
                            .channels = 1,
                            .radius = radius,
                            .rows = 13,
                            .cols = 50},
                           rng);
    }
}

// Input and output at byte offsets that are multiples of their elements but not of
// minStorageBufferOffsetAlignment: the bindings start below and the shader adds the rest.
TEST_F(VulkanFilterTest, TilesAtUnalignedOffsetsAreRight) {
    std::mt19937_64 rng(outcore::test::seed());
    const FilterCase fc{.op = FilterOp::Conv2D,
                        .in = DType::U8,
                        .out = DType::U16,
                        .channels = 3,
                        .radius = 2,
                        .rows = 20,
                        .cols = 31};
    const FilterInput input(fc, rng);
    const std::vector<std::byte> want = input.run(*cpu_);
    for (int t = 0; t < 6; ++t) {
        const std::uint64_t in_at = 1 + rng() % 63;
        const std::uint64_t out_at = 2 * (1 + rng() % 31);
        EXPECT_EQ(input.run(*dev_, MemoryKind::Device, in_at, out_at), want)
            << "input at +" << in_at << ", output at +" << out_at;
    }
}

TEST_F(VulkanFilterTest, OverlappingTilesAreRefused) {
    auto q = dev_->create_queue();
    Block block = dev_->allocate({.bytes = 4096});
    const std::vector<float> w{0.25F, 0.5F, 0.25F};
    const auto params = outcore::KernelParams::make(*dev_, *q, std::as_bytes(std::span(w)));
    EXPECT_THROW(dev_->kernels().filter(*q, FilterTileArgs{.op = FilterOp::SeparableRow,
                                                           .radius = 1,
                                                           .out_rows = 4,
                                                           .out_cols = 8,
                                                           .in = BufferView(block, 0, 160),
                                                           .in_row_stride = 40,
                                                           .out = BufferView(block, 64, 128),
                                                           .out_row_stride = 32,
                                                           .weights = &params}),
                 outcore::UsageError);
    q->synchronize();
}

}  // namespace
