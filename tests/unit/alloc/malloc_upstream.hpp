// tests/unit/alloc/malloc_upstream.hpp — a minimal upstream Allocator for heap and
// pool tests: aligned_alloc'd host memory, an optional byte limit, and counters.
//
//   outcore::alloc_test::MallocUpstream upstream({.limit_bytes = 1 * kGiB});
//   outcore::alloc::Heap heap(upstream, 256, {.block_bytes = 64 * kMiB});
//
// Thread-safe. Device-kind blocks carry no host pointer (as on a GPU), but the native
// handle is still the host address, so tests can check placements.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>

#include "outcore/core/error.hpp"
#include "outcore/device/allocator.hpp"

namespace outcore::alloc_test {

struct MallocUpstreamOptions {
    std::uint64_t limit_bytes = UINT64_MAX;  ///< OutOfMemory past this many live bytes
    std::uint64_t device_id = 4242;          ///< stamped into every block
};

class MallocUpstream final : public Allocator {
public:
    static constexpr std::uint64_t kMaxSingleBytes = std::uint64_t{1} << 40;

    explicit MallocUpstream(const MallocUpstreamOptions& options = {}) : options_(options) {}

    [[nodiscard]] std::uint64_t bytes_live() const noexcept { return bytes_live_.load(); }
    [[nodiscard]] std::uint64_t blocks_live() const noexcept { return blocks_live_.load(); }
    [[nodiscard]] std::uint64_t allocate_calls() const noexcept { return allocate_calls_.load(); }
    /// Every later allocation fails with OutOfMemory while set.
    void set_failing(bool failing) noexcept { failing_.store(failing); }
    [[nodiscard]] std::uint64_t device_id() const noexcept { return options_.device_id; }

private:
    RawBlock do_allocate(const AllocationRequest& r) override {
        allocate_calls_.fetch_add(1);
        OutOfMemoryInfo info{.requested_bytes = r.bytes,
                             .tier = tier_of(r.kind),
                             .budget_bytes = options_.limit_bytes,
                             .in_use_bytes = bytes_live_.load(),
                             .largest_free_bytes = 0};
        if (failing_.load()) throw OutOfMemory("malloc", "failing on purpose", info);
        const std::uint64_t alignment = std::max<std::uint64_t>(r.alignment, 64);
        // Refused up front rather than passed to aligned_alloc: sanitizers abort on
        // absurd sizes instead of returning nullptr, and no test machine has 1 TiB.
        if (r.bytes > kMaxSingleBytes) throw OutOfMemory("malloc", "request too large", info);
        std::uint64_t live = bytes_live_.load();
        do {
            if (r.bytes > options_.limit_bytes - std::min(live, options_.limit_bytes)) {
                throw OutOfMemory("malloc", "test limit reached", info);
            }
        } while (!bytes_live_.compare_exchange_weak(live, live + r.bytes));
        void* p = std::aligned_alloc(alignment, (r.bytes + alignment - 1) / alignment * alignment);
        if (p == nullptr) {
            bytes_live_.fetch_sub(r.bytes);
            throw OutOfMemory("malloc", "aligned_alloc failed", info);
        }
        blocks_live_.fetch_add(1);
        RawBlock b;
        b.kind = r.kind;
        b.bytes = r.bytes;
        b.native = reinterpret_cast<std::uintptr_t>(p);
        b.host = host_visible(r.kind) ? static_cast<std::byte*>(p) : nullptr;
        b.device_id = options_.device_id;
        return b;
    }

    void do_deallocate(const RawBlock& b) noexcept override {
        std::free(reinterpret_cast<void*>(b.native));  // NOLINT(performance-no-int-to-ptr)
        bytes_live_.fetch_sub(b.bytes);
        blocks_live_.fetch_sub(1);
    }

    MallocUpstreamOptions options_;
    std::atomic<std::uint64_t> bytes_live_{0};
    std::atomic<std::uint64_t> blocks_live_{0};
    std::atomic<std::uint64_t> allocate_calls_{0};
    std::atomic<bool> failing_{false};
};

}  // namespace outcore::alloc_test
