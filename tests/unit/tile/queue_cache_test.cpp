// Tests for tile::QueueCache: queues kept across pipelines, none kept after a failure.
#include "outcore/tile/queue_cache.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <stdexcept>
#include <vector>

#include "outcore/backends/cpu.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/io/matrix.hpp"
#include "outcore/ops/gemm.hpp"
#include "outcore/tile/pipeline.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::Device;
using outcore::kKiB;
using outcore::kMiB;
using outcore::Queue;
using outcore::QueueRole;
using outcore::tile::Pipeline;
using outcore::tile::PipelineOptions;
using outcore::tile::QueueCache;
using outcore::tile::reads;
using outcore::tile::SlotId;
using outcore::tile::writes;

std::unique_ptr<Device> make_device() {
    return outcore::cpu::make_cpu_device({.total_memory_bytes = 64 * kMiB});
}

TEST(QueueCache, GivesBackTheSetsItWasGivenInOrder) {
    auto device = make_device();
    QueueCache cache(*device);
    std::unique_ptr<Queue> up = cache.take(QueueRole::Upload);
    std::vector<std::unique_ptr<Queue>> lanes = cache.take(QueueRole::Compute, 2);
    ASSERT_EQ(lanes.size(), 2U);
    EXPECT_EQ(cache.created(), 3U);
    EXPECT_EQ(up->role(), QueueRole::Upload);
    EXPECT_EQ(lanes[1]->role(), QueueRole::Compute);
    const Queue* const up_was = up.get();
    const Queue* const c1_was = lanes[0].get();
    const Queue* const c2_was = lanes[1].get();
    cache.give_back(std::move(up));
    cache.give_back(std::move(lanes));
    EXPECT_EQ(cache.idle(), 3U);
    // One compute queue asked for: the pair stays a pair, and a new one is made.
    EXPECT_EQ(cache.take(QueueRole::Compute)->role(), QueueRole::Compute);
    EXPECT_EQ(cache.created(), 4U);
    // Two asked for: the pair, in the order it went in (a pipeline's two lanes).
    lanes = cache.take(QueueRole::Compute, 2);
    ASSERT_EQ(lanes.size(), 2U);
    EXPECT_EQ(lanes[0].get(), c1_was);
    EXPECT_EQ(lanes[1].get(), c2_was);
    EXPECT_EQ(cache.take(QueueRole::Upload).get(), up_was);
    EXPECT_EQ(cache.created(), 4U);
    EXPECT_EQ(cache.idle(), 0U);
    // A set of mixed roles is not kept.
    std::vector<std::unique_ptr<Queue>> mixed;
    mixed.push_back(std::move(lanes[0]));
    mixed.push_back(device->create_queue(QueueRole::Download));
    cache.give_back(std::move(mixed));
    EXPECT_EQ(cache.idle(), 0U);
}

TEST(QueueCache, KeepsNoQueueOfAnotherDevice) {
    auto device = make_device();
    auto other = make_device();
    QueueCache cache(*device);
    cache.give_back(other->create_queue(QueueRole::Upload));
    cache.give_back(nullptr);
    EXPECT_EQ(cache.idle(), 0U);
    PipelineOptions o;
    o.budget_bytes = 4 * kKiB;
    o.queue_cache = &cache;
    EXPECT_THROW(Pipeline(*other, o), outcore::UsageError);
}

/// Streams `inputs` through two input and two output slots, copied by a compute step;
/// `fail_at` makes that tile's compute step fail on the queue.
std::vector<std::vector<std::byte>> stream(Device& device, QueueCache& cache,
                                           const std::vector<std::vector<std::byte>>& inputs,
                                           std::size_t fail_at = SIZE_MAX, std::uint32_t lanes = 1) {
    PipelineOptions o;
    o.compute_lanes = lanes;
    o.budget_bytes = 4 * 16 * kKiB + 4 * kKiB;
    for (int i = 0; i < 4; ++i) o.slots.push_back({16 * kKiB, "test.slot"});
    o.upload_staging = {.bytes = 16 * kKiB, .count = 2};
    o.download_staging = {.bytes = 16 * kKiB, .count = 2};
    o.queue_cache = &cache;
    std::vector<std::vector<std::byte>> outputs(inputs.size());
    Pipeline p(device, o);
    for (std::size_t t = 0; t < inputs.size(); ++t) {
        const SlotId in{static_cast<std::uint32_t>(t % 2)};
        const SlotId out{static_cast<std::uint32_t>(2 + t % 2)};
        const std::uint64_t bytes = inputs[t].size();
        p.upload(in, 0, bytes,
                 [&inputs, t](std::span<std::byte> s) { std::memcpy(s.data(), inputs[t].data(), s.size()); });
        p.compute({reads(in), writes(out)}, [&, t, in, out, bytes](Queue& q) {
            if (t == fail_at) q.host_task([] { throw std::runtime_error("kernel failed"); });
            q.copy(p.view(in).sub(0, bytes), p.view(out).sub(0, bytes));
        });
        p.download(out, 0, bytes,
                   [&outputs, t](std::span<const std::byte> s) { outputs[t].assign(s.begin(), s.end()); });
    }
    (void)p.finish();
    return outputs;
}

std::vector<std::vector<std::byte>> random_tiles(std::mt19937_64& rng, std::size_t count) {
    std::vector<std::vector<std::byte>> tiles(count);
    for (auto& t : tiles) {
        t.resize(1 + rng() % (16 * kKiB));
        for (auto& b : t) b = static_cast<std::byte>(rng() & 0xFF);
    }
    return tiles;
}

TEST(QueueCache, PipelinesReuseTheQueuesOfEarlierOnes) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    QueueCache cache(*device);
    for (int run = 0; run < 3; ++run) {
        const auto inputs = random_tiles(rng, 6);
        EXPECT_EQ(stream(*device, cache, inputs), inputs) << "run " << run;
        // Upload, compute and download (one lane on the CPU), made by the first run only.
        EXPECT_EQ(cache.created(), 3U) << "run " << run;
        EXPECT_EQ(cache.idle(), 3U) << "run " << run;
    }
}

TEST(QueueCache, PipelinesWithTwoLanesGetBackTheirPair) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    QueueCache cache(*device);
    const auto inputs = random_tiles(rng, 6);
    for (const std::uint32_t lanes : {2U, 1U, 2U, 1U}) {
        EXPECT_EQ(stream(*device, cache, inputs, SIZE_MAX, lanes), inputs) << lanes << " lanes";
    }
    // Upload, download, the two-lane pair and the one-lane queue: five, made by the first
    // run of each kind only, all waiting.
    EXPECT_EQ(cache.created(), 5U);
    EXPECT_EQ(cache.idle(), 5U);
}

TEST(QueueCache, ARunThatFailedGivesNoQueueBack) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    QueueCache cache(*device);
    const auto inputs = random_tiles(rng, 6);
    EXPECT_EQ(stream(*device, cache, inputs), inputs);
    ASSERT_EQ(cache.idle(), 3U);
    EXPECT_THROW((void)stream(*device, cache, inputs, 3), std::runtime_error);
    // The failed queue skips later work, so none of the run's queues is kept.
    EXPECT_EQ(cache.idle(), 0U);
    EXPECT_EQ(stream(*device, cache, inputs), inputs);
    EXPECT_EQ(cache.created(), 6U);
}

TEST(QueueCache, GemmsWithTheCacheGiveWhatGemmsWithoutItGive) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    constexpr std::uint64_t m = 150, n = 130, k = 170;
    std::uniform_real_distribution<float> dist(-1.0F, 1.0F);
    std::vector<float> a(m * k), b(k * n), want(m * n), got(m * n);
    for (float& x : a) x = dist(rng);
    for (float& x : b) x = dist(rng);
    using outcore::io::HostMatrix;
    using outcore::io::Layout;
    const HostMatrix ma(a.data(), m, k, m, Layout::ColMajor, outcore::DType::F32);
    const HostMatrix mb(b.data(), k, n, k, Layout::ColMajor, outcore::DType::F32);
    HostMatrix mwant(want.data(), m, n, m, Layout::ColMajor, outcore::DType::F32);
    HostMatrix mgot(got.data(), m, n, m, Layout::ColMajor, outcore::DType::F32);
    outcore::ops::GemmOptions o{.budget_bytes = (m * k + k * n + m * n) * 4 / 5};
    (void)outcore::ops::gemm(*device, ma, mb, mwant, o);
    QueueCache cache(*device);
    o.queue_cache = &cache;
    for (int run = 0; run < 3; ++run) {
        std::fill(got.begin(), got.end(), -7.0F);
        (void)outcore::ops::gemm(*device, ma, mb, mgot, o);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "run " << run;
        EXPECT_EQ(cache.created(), cache.idle()) << "run " << run;  // every queue came back
    }
    EXPECT_EQ(cache.created(), 3U);  // upload, compute (one lane on the CPU), download: run 0's
}

}  // namespace
