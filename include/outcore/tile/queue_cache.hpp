// outcore/tile/queue_cache.hpp — device queues kept across pipelines.
//
//   tile::QueueCache queues(device);
//   for (...) ops::gemm(device, a, b, c, {.budget_bytes = budget, .queue_cache = &queues});
//
// A pipeline makes an upload, a download and one or two compute queues and destroys
// them at its end. On NVIDIA's Vulkan driver that took 1.7 ms before a GEMM's first
// copy and 3–4 ms after its last (0.6–1.4 ms to destroy each queue: BENCHMARKS.md), and
// a CUDA queue carries a cuBLAS handle and its workspace. Pipelines given a cache take
// idle queues of the role they need from it and give them back synchronized; a queue
// whose work failed is destroyed instead (a failed queue skips later work). Compute
// queues come back in the order they were taken, so a pipeline that takes two gets
// the two VkQueues (lanes) it had before. Thread-safe; must outlive the pipelines
// that use it, and its device must outlive it.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include "outcore/device/queue.hpp"

namespace outcore {
class Device;
}

namespace outcore::tile {

class QueueCache {
public:
    explicit QueueCache(Device& device) noexcept : device_(device) {}
    ~QueueCache() = default;
    QueueCache(const QueueCache&) = delete;
    QueueCache& operator=(const QueueCache&) = delete;

    [[nodiscard]] Device& device() const noexcept { return device_; }
    /// An idle queue of `role` (the one given back longest ago), else a new one.
    [[nodiscard]] std::unique_ptr<Queue> take(QueueRole role);
    /// Keeps `queue` for a later take(). It must be of this cache's device, with no
    /// work outstanding (synchronized) and none failed.
    void give_back(std::unique_ptr<Queue> queue) noexcept;

    /// Queues take() had to make, ever (a warm cache stops counting up).
    [[nodiscard]] std::uint64_t created() const;
    /// Queues waiting in the cache.
    [[nodiscard]] std::size_t idle() const;
    /// Destroys every idle queue.
    void clear() noexcept;

private:
    static constexpr std::size_t kRoles = 4;  // QueueRole's values
    Device& device_;
    mutable std::mutex mutex_;
    std::array<std::deque<std::unique_ptr<Queue>>, kRoles> idle_{};
    std::uint64_t created_ = 0;
};

}  // namespace outcore::tile
