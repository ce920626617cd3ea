// outcore/device/allocator.hpp — the one allocation interface every layer speaks.
//
// A Device is an Allocator of raw native memory; a Heap is an Allocator that
// sub-allocates; the policies (Budget, Statistics, Tracking, OnOutOfMemory in
// outcore/alloc/) are Allocators that wrap another one. So they stack:
//
//   outcore::alloc::Budget budget(device, {.limit_bytes = 2 * kGiB});
//   outcore::alloc::Statistics stats(budget);
//   outcore::Block b = stats.allocate({.bytes = 1 * kMiB, .kind = MemoryKind::Device, .tag = "slot"});
//
// The public functions are non-virtual: they check arguments, then call the private
// do_* functions a subclass overrides (two of them).
#pragma once

#include <cstdint>
#include <string_view>

#include "outcore/device/block.hpp"

namespace outcore {

struct AllocationRequest {
    std::uint64_t bytes = 0;
    MemoryKind kind = MemoryKind::Device;
    /// Power of two, or 0 for the allocator's natural alignment (the device's
    /// min_offset_alignment for sub-allocators).
    std::uint64_t alignment = 0;
    /// What the memory is for ("gemm.a", "swap.unit"). Must point to storage that
    /// outlives the allocation: a string literal.
    std::string_view tag = {};
};

class Allocator {
public:
    Allocator() = default;
    Allocator(const Allocator&) = delete;
    Allocator& operator=(const Allocator&) = delete;
    virtual ~Allocator() = default;

    /// Allocates and returns an owning Block. Throws UsageError for 0 bytes or a bad
    /// alignment, OutOfMemory when the memory cannot be had. Thread safety: as the
    /// implementation documents (every allocator in outcore is thread-safe).
    [[nodiscard]] Block allocate(const AllocationRequest& request) {
        return Block(*this, allocate_raw(request));
    }
    /// As allocate, but the caller must give the block back with deallocate_raw.
    [[nodiscard]] RawBlock allocate_raw(const AllocationRequest& request);
    /// Gives back a block this allocator made. Never throws.
    void deallocate_raw(const RawBlock& block) noexcept { do_deallocate(block); }

private:
    /// Allocate `request` (already checked: bytes > 0, alignment 0 or a power of two).
    /// Throw OutOfMemory if it cannot be satisfied.
    virtual RawBlock do_allocate(const AllocationRequest& request) = 0;
    /// Free a block this allocator returned.
    virtual void do_deallocate(const RawBlock& block) noexcept = 0;
};

}  // namespace outcore
