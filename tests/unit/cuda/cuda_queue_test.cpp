// CudaQueue and CudaEvent on a real GPU (skipped without one), beyond the conformance
// suite: work deferred behind host tasks and submitted directly interleaves in
// order; host tasks see the GPU results before them; failures travel through events
// to the queues that wait; pageable transfers never block the submitter; several
// queues chained by events move large buffers correctly.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <vector>

#include "cuda_test_support.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::Block;
using outcore::BufferView;
using outcore::kMiB;
using outcore::MemoryKind;
using CudaQueueTest = outcore::cuda::test::CudaTest;

/// Holds a queue inside a host task until opened; opens on destruction (declare it
/// after the queues it holds).
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

// Each round fills device memory, copies it into pinned memory and checks it in a
// host task. A host task defers what follows it; synchronizing every third round lets
// the queue go direct again, so both paths and the switches between them run.
TEST_F(CudaQueueTest, HostTasksSeeTheGpuWorkBeforeThem) {
    auto q = dev().create_queue();
    constexpr std::uint64_t kBytes = 3 * kMiB + 7;
    Block device = dev().allocate({.bytes = kBytes});
    Block pinned = dev().allocate({.bytes = kBytes, .kind = MemoryKind::HostPinned});
    std::atomic<int> checked{0};
    std::atomic<int> wrong{0};
    const int rounds = static_cast<int>(outcore::test::scaled(40));
    for (int round = 0; round < rounds; ++round) {
        const auto value = static_cast<std::byte>(round + 1);
        q->fill(device, value);
        q->copy(device, pinned);
        q->host_task([&, value] {
            const std::byte* p = pinned.host();
            if (p[0] != value || p[kBytes / 2] != value || p[kBytes - 1] != value) ++wrong;
            ++checked;
        });
        if (round % 3 == 0) q->synchronize();
    }
    q->synchronize();
    EXPECT_EQ(checked.load(), rounds);
    EXPECT_EQ(wrong.load(), 0);
}

TEST_F(CudaQueueTest, FailuresTravelThroughEventsToWaitingQueues) {
    auto producer = dev().create_queue();
    auto consumer = dev().create_queue();
    Block pinned = dev().allocate({.bytes = 256, .kind = MemoryKind::HostPinned});
    std::memset(pinned.host(), 0x11, 256);
    auto produced = dev().create_event();
    producer->host_task([] { throw std::runtime_error("producer failed"); });
    producer->record(*produced);
    consumer->wait(*produced);
    consumer->fill(pinned, std::byte{0x22});  // depends on failed work: must not run
    EXPECT_THROW(consumer->synchronize(), std::runtime_error);
    EXPECT_EQ(pinned.host()[0], std::byte{0x11});
    EXPECT_NO_THROW(consumer->synchronize()) << "reported once";
    EXPECT_THROW(produced->wait(), std::runtime_error);
    EXPECT_THROW(producer->synchronize(), std::runtime_error);
    // Both queues work again, and a new record of the event is a good one.
    producer->fill(pinned, std::byte{0x33});
    producer->record(*produced);
    consumer->wait(*produced);
    consumer->fill(BufferView(pinned, 0, 1), std::byte{0x44});
    consumer->synchronize();
    EXPECT_NO_THROW(produced->wait());
    EXPECT_EQ(pinned.host()[0], std::byte{0x44});
    EXPECT_EQ(pinned.host()[255], std::byte{0x33});
}

TEST_F(CudaQueueTest, ADirectWaitOnAFailedRecordFailsTheWaiter) {
    auto producer = dev().create_queue();
    auto consumer = dev().create_queue();
    auto produced = dev().create_event();
    producer->host_task([] { throw std::runtime_error("boom"); });
    producer->record(*produced);
    EXPECT_THROW(produced->wait(), std::runtime_error);  // the record is resolved (failed) now
    EXPECT_TRUE(produced->query());
    std::atomic<bool> ran{false};
    consumer->wait(*produced);  // taken directly: the record is already resolved
    consumer->host_task([&] { ran = true; });
    EXPECT_THROW(consumer->synchronize(), std::runtime_error);
    EXPECT_FALSE(ran.load());
    EXPECT_THROW(producer->synchronize(), std::runtime_error);
}

// Pageable copies are staged synchronously by the CUDA runtime; the queue's worker
// does them, so the submitting thread returns while the queue is still held.
TEST_F(CudaQueueTest, PageableTransfersDoNotBlockTheSubmitter) {
    std::mt19937_64 rng(outcore::test::seed());
    const std::size_t n = 8 * kMiB + rng() % 4096;
    std::vector<std::byte> in(n), out(n, std::byte{0});
    for (auto& v : in) v = static_cast<std::byte>(rng());
    Block device = dev().allocate({.bytes = n});
    Block cached = dev().allocate({.bytes = n, .kind = MemoryKind::HostCached});
    auto q = dev().create_queue();
    auto done = dev().create_event();
    Gate gate;
    q->host_task([&] { gate.wait(); });
    q->upload(in.data(), device);     // pageable → device
    q->copy(device, cached);          // device → pageable
    q->download(cached, out.data());  // host → host
    q->record(*done);
    EXPECT_FALSE(done->query());
    gate.open();
    done->wait();
    EXPECT_EQ(in, out);
    q->synchronize();
}

// Four queues pass a large buffer along a chain with events, each adding its own
// pattern at its own range, while the submitting thread never waits in between.
TEST_F(CudaQueueTest, ChainedQueuesMoveLargeBuffersInOrder) {
    std::mt19937_64 rng(outcore::test::seed());
    constexpr std::size_t kBytes = 64 * kMiB;
    constexpr int kQueues = 4;
    Block pinned_in = dev().allocate({.bytes = kBytes, .kind = MemoryKind::HostPinned});
    Block pinned_out = dev().allocate({.bytes = kBytes, .kind = MemoryKind::HostPinned});
    std::vector<Block> stages;
    std::vector<std::unique_ptr<outcore::Queue>> queues;
    std::vector<std::unique_ptr<outcore::Event>> events;
    for (int i = 0; i < kQueues; ++i) {
        stages.push_back(dev().allocate({.bytes = kBytes}));
        queues.push_back(dev().create_queue());
        events.push_back(dev().create_event());
    }
    std::vector<std::byte> expect(kBytes);
    for (std::size_t i = 0; i < kBytes; ++i) expect[i] = static_cast<std::byte>(rng());
    std::memcpy(pinned_in.host(), expect.data(), kBytes);
    std::memset(pinned_out.host(), 0, kBytes);

    queues[0]->copy(pinned_in, stages[0]);
    for (int i = 0; i < kQueues; ++i) {
        if (i > 0) {
            queues[i]->wait(*events[i - 1]);
            queues[i]->copy(stages[i - 1], stages[i]);
        }
        const std::size_t offset = (rng() % (kBytes / 4096)) * 4096;
        const std::size_t length = 1 + rng() % (kBytes - offset);
        const auto value = static_cast<std::byte>(rng());
        queues[i]->fill(BufferView(stages[i], offset, length), value);
        std::fill_n(expect.begin() + static_cast<std::ptrdiff_t>(offset), length, value);
        queues[i]->record(*events[i]);
    }
    queues[kQueues - 1]->copy(stages[kQueues - 1], pinned_out);
    queues[kQueues - 1]->synchronize();
    EXPECT_EQ(std::memcmp(pinned_out.host(), expect.data(), kBytes), 0);
    for (auto& q : queues) q->synchronize();
}

TEST_F(CudaQueueTest, RefusesEventsOfOtherBackends) {
    auto cpu = outcore::open_device("cpu");
    auto foreign = cpu->create_event();
    auto q = dev().create_queue();
    EXPECT_THROW(q->record(*foreign), outcore::UsageError);
    EXPECT_THROW(q->wait(*foreign), outcore::UsageError);
    EXPECT_NO_THROW(q->synchronize());
}

}  // namespace
