// outcore/alloc/heap.hpp — Heap: sub-allocation from large native blocks (Metal's MTLHeap).
//
// A Heap takes large native blocks from an upstream Allocator (a Device, or a policy
// adaptor over one) and hands out ranges of them, placed by one Tlsf per block. It is
// itself an Allocator, so policies stack over it and Blocks free themselves into it.
//
//   outcore::alloc::Heap heap(device, {.kind = MemoryKind::Device, .block_bytes = 256 * kMiB});
//   outcore::Block tile = heap.allocate({.bytes = 48 * kMiB, .kind = MemoryKind::Device, .tag = "tile"});
//   // tile.raw().native is the parent block's handle, tile.raw().offset its place in it
//   heap.statistics().fragmentation;   // 1 - largest free range / free bytes
//   heap.trim();                       // gives empty native blocks back
//
// Growth: a request no existing block can place makes a new native block of
// block_bytes, or, for a request larger than that, a dedicated block of the request's
// own size (given back as soon as it is empty). limit_bytes caps the native bytes:
// with within_budget the heap throws OutOfMemory rather than grow past it; without,
// the limit is advisory (growth shrinks its block to fit under it when it can, and
// otherwise grows past it with a warning). With never_grow the heap only uses blocks
// that reserve() made.
//
// Every placement is aligned to max(request alignment, the device's
// min_offset_alignment), measured from the start of the native allocation.
//
// OutOfMemory from a heap carries: requested_bytes (the request), tier
// (tier_of(kind)), budget_bytes (limit_bytes if set; else, with never_grow, the bytes
// reserved; else the upstream's budget when the upstream refused), in_use_bytes (bytes
// in live sub-allocations) and largest_free_bytes (the largest free range in a shared
// block). An upstream OutOfMemory is re-thrown as the heap's, its message kept.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "outcore/alloc/tlsf.hpp"
#include "outcore/device/allocator.hpp"
#include "outcore/device/memory_kind.hpp"

namespace outcore {
class Device;
}

namespace outcore::alloc {

struct HeapOptions {
    /// The one kind of memory this heap holds; requests for another kind are UsageError.
    MemoryKind kind = MemoryKind::Device;
    /// Size of each native block. A request larger than this gets a dedicated block.
    std::uint64_t block_bytes = std::uint64_t{256} << 20;
    /// Most native bytes the heap should hold (see within_budget).
    std::uint64_t limit_bytes = UINT64_MAX;
    /// Refuse growth past limit_bytes with OutOfMemory (VMA's WITHIN_BUDGET).
    bool within_budget = false;
    /// Never make native blocks on allocate: only blocks reserve() made are used.
    bool never_grow = false;
    /// Tag for the native blocks in upstream statistics and leak reports; must outlive
    /// the heap (a string literal).
    std::string_view tag = "heap";
};

/// A snapshot of a heap's numbers.
struct HeapStatistics {
    std::uint64_t bytes_reserved = 0;       ///< native bytes held, all blocks
    std::uint64_t bytes_reserved_peak = 0;  ///< most native bytes ever held at once
    std::uint64_t bytes_used = 0;           ///< in live sub-allocations (rounded to the alignment)
    std::uint64_t bytes_free = 0;           ///< bytes_reserved - bytes_used
    std::uint64_t largest_free_bytes = 0;   ///< largest free range in any one block
    double fragmentation = 0.0;             ///< 1 - largest_free / bytes_free; 0 when nothing is free
    std::uint64_t block_count = 0;          ///< native blocks held
    std::uint64_t free_range_count = 0;     ///< free ranges over all blocks (block_count when all empty)
    std::uint64_t allocation_count = 0;     ///< live sub-allocations
    std::uint64_t invalid_free_count = 0;   ///< deallocations of blocks this heap did not make (bugs)
};

class Heap final : public Allocator {
public:
    /// A heap over `device`, aligned to its min_offset_alignment and never asking for a
    /// block over its max_allocation_bytes. The device must outlive the heap. Throws
    /// UsageError for block_bytes 0.
    explicit Heap(Device& device, const HeapOptions& options = {});
    /// A heap over any allocator; `alignment_bytes` (a power of two) plays the part of
    /// the device's min_offset_alignment. `upstream` must outlive the heap.
    Heap(Allocator& upstream, std::uint64_t alignment_bytes, const HeapOptions& options = {});
    /// Gives every native block back. Live sub-allocations at this point are a leak
    /// in the caller: they are logged, and their memory is gone with the blocks.
    ~Heap() override;
    Heap(Heap&&) = delete;
    Heap& operator=(Heap&&) = delete;

    /// Adds one native block of at least `bytes` (rounded up to the alignment), kept
    /// until trim(); it works even with never_grow. Throws OutOfMemory when within_budget
    /// forbids it or upstream refuses, UsageError for 0 bytes. Thread-safe.
    void reserve(std::uint64_t bytes);
    /// Gives back every native block with no live allocation; returns the bytes given
    /// back. Thread-safe; never throws.
    std::uint64_t trim() noexcept;

    /// A consistent snapshot. Thread-safe. O(blocks + free blocks of the top classes).
    [[nodiscard]] HeapStatistics statistics() const;
    /// Checks every block's Tlsf and the heap's own books (sums, slots). Throws
    /// InternalError naming the broken invariant. Thread-safe. O(blocks + allocations).
    void validate() const;

    [[nodiscard]] const HeapOptions& options() const noexcept { return options_; }
    /// The alignment every placement has at least.
    [[nodiscard]] std::uint64_t alignment_bytes() const noexcept { return alignment_bytes_; }

private:
    // One native block and the Tlsf placing ranges in it. A vacant slot has no tlsf.
    struct Slot {
        RawBlock native{};
        std::unique_ptr<Tlsf> tlsf;
        std::uint32_t generation = 0;
        bool dedicated = false;
    };

    // Thread safety: one mutex guards everything below. Critical sections are a few
    // Tlsf operations, except growth and trim, which call the upstream allocator under
    // the lock: concurrent callers wait for it, which keeps the books simple and stops
    // two threads from both growing for the same shortfall.
    RawBlock do_allocate(const AllocationRequest& request) override;
    void do_deallocate(const RawBlock& block) noexcept override;

    std::uint32_t grow_locked(std::uint64_t bytes, std::uint64_t alignment, bool for_reserve);
    void release_slot_locked(std::uint32_t index) noexcept;
    [[nodiscard]] RawBlock place_locked(std::uint32_t index, const Allocation& a,
                                        const AllocationRequest& r) const;
    [[nodiscard]] std::uint64_t bytes_used_locked() const noexcept;
    [[nodiscard]] std::uint64_t largest_free_locked() const noexcept;
    [[noreturn]] void throw_out_of_memory_locked(std::uint64_t requested_bytes,
                                                 std::string_view reason) const;

    Allocator& upstream_;
    HeapOptions options_;
    std::uint64_t alignment_bytes_;
    std::uint64_t max_block_bytes_;

    mutable std::mutex mutex_;
    std::vector<Slot> slots_;
    std::vector<std::uint32_t> vacant_;  // indices of vacant slots, reused first
    std::uint64_t bytes_reserved_ = 0;
    std::uint64_t bytes_reserved_peak_ = 0;
    std::uint64_t invalid_free_count_ = 0;
    bool warned_over_limit_ = false;
};

}  // namespace outcore::alloc
