// CudaDevice on a real GPU (skipped without one): outcore's accounting against
// cudaMemGetInfo, OutOfMemory with its numbers and a device that still works after
// it, alignments above what cudaMalloc/cudaHostAlloc guarantee, and the working set.
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_support.hpp"
#include "outcore/backends/cuda.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::Block;
using outcore::BufferView;
using outcore::kMiB;
using outcore::MemoryKind;
using CudaDeviceTest = outcore::cuda::test::CudaTest;

std::uint64_t free_device_bytes() {
    std::size_t free_bytes = 0, total_bytes = 0;
    EXPECT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
    return free_bytes;
}

// cudaMalloc rounds each allocation up to its page size (2 MiB on current GPUs), so
// the free memory falls by at least what outcore counts and by at most that plus a
// page per allocation (and a little for the allocator's own bookkeeping).
// cudaMemGetInfo counts the whole card, and `ctest -j` runs other GPU tests in other
// processes beside this one (on the H200 it failed once that way): a measurement is
// taken up to three times, and the card's numbers must agree in one of them.
TEST_F(CudaDeviceTest, AccountingMatchesCudaMemGetInfo) {
    std::mt19937_64 rng(outcore::test::seed());
    constexpr std::uint64_t kPage = 2 * kMiB;
    std::string last_failure;
    for (int attempt = 0; attempt < 3; ++attempt) {
        const std::uint64_t counted_before = dev().allocated_bytes();
        const std::uint64_t free_before = free_device_bytes();
        std::vector<Block> blocks;
        std::uint64_t sum = 0;
        for (int i = 0; i < 12; ++i) {
            const std::uint64_t bytes = 1 + rng() % (48 * kMiB);
            blocks.push_back(
                dev().allocate({.bytes = bytes, .kind = MemoryKind::Device, .tag = "accounting"}));
            sum += bytes;
        }
        const std::uint64_t free_during = free_device_bytes();
        // Our own accounting must be exact every time.
        ASSERT_EQ(dev().allocated_bytes(), counted_before + sum);
        blocks.clear();
        ASSERT_EQ(dev().allocated_bytes(), counted_before);
        const std::uint64_t free_after = free_device_bytes();
        const std::uint64_t drop = free_before - std::min(free_before, free_during);
        if (free_during > free_before || drop < sum || drop > sum + (12 + 4) * kPage) {
            last_failure = fmt::format("the card's free memory fell by {} for {} bytes allocated", drop, sum);
            continue;
        }
        if (free_before - std::min(free_before, free_after) > 4 * kPage) {
            last_failure = fmt::format("{} bytes not given back", free_before - free_after);
            continue;
        }
        return;
    }
    FAIL() << "in three attempts: " << last_failure;
}

TEST_F(CudaDeviceTest, OutOfMemoryCarriesTheNumbersAndIsNotSticky) {
    Block held = dev().allocate({.bytes = 64 * kMiB});
    const std::uint64_t total = dev().info().total_memory_bytes;
    try {
        // The context itself occupies memory, so the whole card can never be had.
        (void)dev().allocate({.bytes = total, .kind = MemoryKind::Device});
        FAIL() << "allocated the whole card";
    } catch (const outcore::OutOfMemory& e) {
        EXPECT_EQ(e.requested_bytes(), total);
        EXPECT_EQ(e.tier(), outcore::Tier::Device);
        EXPECT_EQ(e.budget_bytes(), total);
        EXPECT_EQ(e.in_use_bytes(), dev().allocated_bytes());
        EXPECT_GT(e.largest_free_bytes(), 0U);
        EXPECT_LT(e.largest_free_bytes(), total);
    }
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the failed cudaMalloc left an error behind";
    // The device still works: allocate, copy, read back.
    auto q = dev().create_queue();
    Block b = dev().allocate({.bytes = 4096});
    std::vector<std::byte> in(4096, std::byte{0x5A}), out(4096);
    q->upload(in.data(), b);
    q->download(b, out.data());
    q->synchronize();
    EXPECT_EQ(in, out);
}

TEST_F(CudaDeviceTest, AlignmentsAboveTheNaturalOnesAreHonoured) {
    std::mt19937_64 rng(outcore::test::seed());
    auto q = dev().create_queue();
    for (MemoryKind kind : {MemoryKind::Device, MemoryKind::HostPinned, MemoryKind::HostCached}) {
        for (std::uint64_t alignment = 512; alignment <= 4 * kMiB; alignment *= 4) {
            SCOPED_TRACE(testing::Message() << outcore::to_string(kind) << " alignment " << alignment);
            const std::uint64_t bytes = 1 + rng() % 100000;
            Block b = dev().allocate({.bytes = bytes, .kind = kind, .alignment = alignment});
            EXPECT_EQ(b.raw().native % alignment, 0U) << "the address the GPU uses";
            if (b.host() != nullptr) {
                EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.host()) % alignment, 0U);
            }
            std::vector<std::byte> in(bytes), out(bytes);
            for (auto& v : in) v = static_cast<std::byte>(rng());
            q->upload(in.data(), b);
            q->download(b, out.data());
            q->synchronize();
            EXPECT_EQ(in, out);
        }
    }
    EXPECT_EQ(dev().allocated_bytes(MemoryKind::Device), 0U);
}

TEST_F(CudaDeviceTest, WorkingSetIsFreeMemoryLessTheReserve) {
    // Free memory is bracketed by reads before and after the device is made; other
    // processes on the card (ctest -j) can move it in between, so a few tries may be
    // needed — a working set that ignores the reserve is off by 3 GiB every time.
    const std::uint64_t reserve = 3 * outcore::kGiB;
    bool bracketed = false;
    for (int attempt = 0; attempt < 5 && !bracketed; ++attempt) {
        const std::uint64_t free_before = free_device_bytes();
        auto custom = outcore::cuda::make_cuda_device({.ordinal = 0, .reserve_bytes = reserve});
        const std::uint64_t free_after = free_device_bytes();
        const std::uint64_t working_set = custom->info().recommended_working_set_bytes;
        bracketed = working_set + reserve <= std::max(free_before, free_after) &&
                    working_set + reserve >= std::min(free_before, free_after);
        EXPECT_EQ(custom->info().total_memory_bytes, dev().info().total_memory_bytes);
        EXPECT_EQ(custom->info().name, dev().info().name);
    }
    EXPECT_TRUE(bracketed) << "working set + reserve never lay between the free memory before and after";
}

TEST_F(CudaDeviceTest, HostPinnedMemoryIsTheSameBytesOnBothSides) {
    // Kernels may read pinned blocks in place: a device-side fill shows on the host.
    auto q = dev().create_queue();
    Block pinned = dev().allocate({.bytes = 1000, .kind = MemoryKind::HostPinned});
    std::memset(pinned.host(), 0, 1000);
    q->fill(BufferView(pinned, 100, 800), std::byte{0x3C});
    q->synchronize();
    for (int i = 0; i < 1000; ++i) {
        ASSERT_EQ(pinned.host()[i], i >= 100 && i < 900 ? std::byte{0x3C} : std::byte{0}) << i;
    }
}

}  // namespace
