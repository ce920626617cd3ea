// outcore/alloc/block_cache.hpp — BlockCache: freed blocks kept for the next request
// of the same size, so a caller that makes the same large allocations run after run
// (a tiled operation's slots) pays for the native allocation once.
//
//   outcore::alloc::BlockCache cache(device);              // after the device, before its users
//   for (run ...) {
//       ops::gemm(device, a, b, c, {.budget_bytes = budget, .device_cache = &cache});
//   }                                                      // runs 2.. allocate no device memory
//
// Making and freeing device memory is slow on some drivers (NVIDIA's Vulkan driver:
// 10–12 ms each way for a 500 MiB block, BENCHMARKS.md), and a pipeline makes one
// block for all its slots. A BlockCache sits between an allocator stack and its
// upstream (a Device) and caches one kind of memory: allocate() hands out a free block of exactly the
// requested size (as requested), kind and at least the requested alignment, else asks upstream; deallocate()
// keeps the block instead of freeing it.
//
// The cache never lets memory pile up beyond what its users hold at once: a request
// it cannot serve from its free blocks first frees every free block of that kind
// (so a new size replaces the old ones, and a refusal from upstream is never caused
// by the cache's own hoard), and it keeps at most `max_free_bytes` of free blocks,
// freeing the oldest beyond. Blocks it keeps are still allocated in the upstream's
// accounting (device statistics, leak reports) until clear() or destruction.
// Thread-safe. The upstream must outlive the cache, the cache its blocks.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include "outcore/device/allocator.hpp"

namespace outcore::alloc {

struct BlockCacheStatistics {
    std::uint64_t free_bytes = 0;    ///< bytes of blocks waiting in the cache
    std::uint64_t free_count = 0;    ///< blocks waiting in the cache
    std::uint64_t hits = 0;          ///< requests served from the cache
    std::uint64_t misses = 0;        ///< requests passed upstream
    std::uint64_t freed_blocks = 0;  ///< free blocks given back upstream (evicted or cleared)
};

class BlockCache final : public Allocator {
public:
    /// A cache of `kind` blocks over `upstream`, keeping at most `max_free_bytes` of
    /// free blocks. Requests for other kinds pass straight through.
    explicit BlockCache(Allocator& upstream, MemoryKind kind = MemoryKind::Device,
                        std::uint64_t max_free_bytes = UINT64_MAX);
    /// Gives every free block back upstream. Blocks still held by users must be gone.
    ~BlockCache() override;

    /// Gives every free block back upstream.
    void clear() noexcept;
    [[nodiscard]] BlockCacheStatistics statistics() const;

private:
    RawBlock do_allocate(const AllocationRequest& request) override;
    void do_deallocate(const RawBlock& block) noexcept override;
    /// Frees the free blocks `pred` selects; returns them to upstream outside the lock.
    template <class Pred>
    void evict(Pred pred) noexcept;

    // What a block was made for: a hit needs the same size asked for (an upstream may
    // round sizes up) and at least the alignment.
    struct Made {
        std::uint64_t bytes = 0;
        std::uint64_t alignment = 0;  // 0: natural
    };
    struct Entry {
        RawBlock block;
        Made made;
    };
    struct LiveMap;  // blocks handed out → what they were made for

    Allocator& upstream_;
    const MemoryKind kind_;
    const std::uint64_t max_free_bytes_;
    mutable std::mutex mutex_;
    std::deque<Entry> free_;  // oldest first
    std::unique_ptr<LiveMap> live_;
    BlockCacheStatistics stats_;
};

}  // namespace outcore::alloc
