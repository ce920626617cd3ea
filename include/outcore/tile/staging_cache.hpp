// outcore/tile/staging_cache.hpp — pinned staging buffers kept across pipelines.
//
//   tile::StagingCache cache(device);                  // after the device, before pipelines
//   for (run ...) {
//       ops::gemm(device, a, b, c, {.budget_bytes = budget, .staging_cache = &cache});
//   }                                                  // the second run allocates no pinned memory
//
// A Pipeline reuses its staging ring for every tile; this reuses the rings across
// pipelines. Pinned memory is expensive to make (cudaMallocHost pins page by page:
// hundreds of milliseconds per GiB), so a caller that runs many tiled operations —
// a benchmark, a server — keeps one cache per device. take() hands out the best
// fitting free blocks (at least the size asked, at most twice it) and allocates the
// rest; give_back() keeps them for the next take, freeing the oldest beyond
// max_free_bytes. Thread-safe. The cache must outlive every pipeline using it, and the
// device must outlive the cache.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "outcore/device/block.hpp"

namespace outcore {
class Device;
}

namespace outcore::tile {

class StagingCache {
public:
    /// A cache of HostPinned blocks of `device`, keeping at most `max_free_bytes` of
    /// blocks nobody holds.
    explicit StagingCache(Device& device, std::uint64_t max_free_bytes = UINT64_MAX);
    ~StagingCache() = default;
    StagingCache(const StagingCache&) = delete;
    StagingCache& operator=(const StagingCache&) = delete;

    /// `count` blocks of at least `bytes` each (pinned, page-aligned). Throws
    /// OutOfMemory when the device refuses new ones (blocks taken so far go back).
    [[nodiscard]] std::vector<Block> take(std::uint64_t bytes, std::uint32_t count);
    /// Returns blocks made by take() for later takes. Never throws: blocks it cannot
    /// keep are freed.
    void give_back(std::vector<Block>& blocks) noexcept;

    /// Bytes of blocks waiting in the cache.
    [[nodiscard]] std::uint64_t free_bytes() const;
    /// Blocks the device had to allocate, ever (a warm cache stops counting up).
    [[nodiscard]] std::uint64_t allocation_count() const;
    /// Frees every block waiting in the cache.
    void clear() noexcept;

private:
    Device& device_;
    const std::uint64_t max_free_bytes_;
    mutable std::mutex mutex_;
    std::deque<Block> free_;  // oldest first
    std::uint64_t free_bytes_ = 0;
    std::uint64_t allocations_ = 0;
};

}  // namespace outcore::tile
