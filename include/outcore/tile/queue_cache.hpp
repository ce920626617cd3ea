// outcore/tile/queue_cache.hpp — device queues kept across pipelines.
//
//   tile::QueueCache queues(device);
//   for (...) ops::gemm(device, a, b, c, {.budget_bytes = budget, .queue_cache = &queues});
//
// A pipeline makes an upload, a download and one or two compute queues and destroys
// them at its end. On NVIDIA's Vulkan driver that took 1.7 ms before a GEMM's first
// copy and 3–4 ms after its last (0.6–1.7 ms to destroy each queue: BENCHMARKS.md), and
// a CUDA queue carries a cuBLAS handle and its workspace. Pipelines given a cache take
// idle queues of the role they need from it and give them back synchronized; after a
// failure anywhere in a run none is given back (a failed queue skips later work).
//
// Queues are kept as the sets they were taken in: a pipeline with two compute lanes
// takes two compute queues at once, made one after the other when the cache has no such
// pair, which is what puts them on the device's two hardware queues (VulkanDevice hands
// compute queues out alternately); the pair goes back and comes out again together, so
// a later pipeline's lanes are as distinct as the first one's. Thread-safe; must
// outlive the pipelines that use it, and its device must outlive it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

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
    /// `count` queues of `role`: a set of that many given back earlier (the one given
    /// back longest ago, in the order it was given), else `count` new ones made in a row.
    [[nodiscard]] std::vector<std::unique_ptr<Queue>> take(QueueRole role, std::size_t count);
    /// take(role, 1), the one queue.
    [[nodiscard]] std::unique_ptr<Queue> take(QueueRole role);
    /// Keeps `set` for a later take of as many queues of its role. Its queues must be of
    /// this cache's device, of one role, with no work outstanding (synchronized) and
    /// none failed; a set that is not (or cannot be kept) is destroyed.
    void give_back(std::vector<std::unique_ptr<Queue>> set) noexcept;
    void give_back(std::unique_ptr<Queue> queue) noexcept;

    /// Queues take() had to make, ever (a warm cache stops counting up).
    [[nodiscard]] std::uint64_t created() const;
    /// Queues waiting in the cache.
    [[nodiscard]] std::size_t idle() const;
    /// Destroys every idle queue.
    void clear() noexcept;

private:
    using Set = std::vector<std::unique_ptr<Queue>>;
    Device& device_;
    mutable std::mutex mutex_;
    std::map<std::pair<QueueRole, std::size_t>, std::deque<Set>> idle_;  // by role and set size
    std::uint64_t created_ = 0;
};

}  // namespace outcore::tile
