// Queues destroyed as soon as their work is done, while the driver's own threads may
// still be finishing it (skipped where no Vulkan device is found; CI has lavapipe).
// The suite is named *Threads so that the tsan preset runs it: on Mesa's lavapipe
// (22.3) a submission's fence signals before the queue thread is done with the timeline
// semaphores that the submission signals or waits on, so a semaphore destroyed right
// after the fences raced the queue thread (ThreadSanitizer: cnd_broadcast against
// cnd_destroy; once a test hung on the freed mutex). Context::destroy_semaphore settles
// the queues first; without it ThreadSanitizer stopped this test in each of 3 runs.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "outcore/backends/vulkan.hpp"
#include "outcore/device/queue.hpp"

namespace {

using outcore::Block;
using outcore::BufferView;
using outcore::QueueRole;

TEST(VulkanQueueThreads, QueuesDestroyedRightAfterCrossQueueWorkLeaveNothingBehind) {
    const outcore::vulkan::VulkanProbe probe = outcore::vulkan::probe_vulkan();
    if (probe.devices.empty()) GTEST_SKIP() << "no Vulkan device: " << probe.reason;
    auto dev = outcore::vulkan::make_vulkan_device();
    constexpr std::uint64_t kBytes = 256 << 10;
    constexpr int kRounds = 24;
    Block x = dev->allocate({.bytes = kBytes});
    Block y = dev->allocate({.bytes = kBytes * kRounds});
    for (int round = 0; round < kRounds; ++round) {
        // Fresh queues each round: each has its own timeline semaphore, destroyed with
        // it (or with the last batch that waited on it).
        auto up = dev->create_queue(QueueRole::Upload);
        auto compute = dev->create_queue(QueueRole::Compute);
        auto filled = dev->create_event();
        up->fill(x, static_cast<std::byte>(round + 1));
        up->record(*filled);
        compute->wait(*filled);  // a device-side wait on the upload queue's semaphore
        compute->copy(x, BufferView(y, static_cast<std::uint64_t>(round) * kBytes, kBytes));
        if (round % 2 == 0) {
            up.reset();  // the recorder goes first: the waiter's batch holds its semaphore
            compute->synchronize();
        } else {
            compute->synchronize();
            up->synchronize();
        }
    }
    auto q = dev->create_queue(QueueRole::Download);
    std::vector<std::byte> back(kBytes * kRounds);
    q->download(y, back.data());
    q->synchronize();
    for (int round = 0; round < kRounds; ++round) {
        const auto at = static_cast<std::uint64_t>(round) * kBytes;
        ASSERT_EQ(back[at], static_cast<std::byte>(round + 1)) << round;
        ASSERT_EQ(back[at + kBytes - 1], static_cast<std::byte>(round + 1)) << round;
    }
}

}  // namespace
