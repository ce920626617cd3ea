// outcore/alloc/buffer_pool.hpp — BufferPool: equal-sized buffers reused in O(1).
//
// A pool of slots of one size, carved at aligned offsets out of a few large chunks
// of an upstream Allocator: the "pool of equal buffers" that staging rings and tile
// slots reuse instead of allocating per tile. acquire() pops a free slot (growing by
// one chunk of slots_per_chunk slots when none is free, up to max_slots); the
// PooledBuffer it returns gives the slot back when it is destroyed.
//
//   outcore::alloc::BufferPool pool(device, {.slot_bytes = 4 * kMiB, .kind = MemoryKind::HostPinned,
//                                            .slots_per_chunk = 4, .max_slots = 12});
//   {
//       outcore::alloc::PooledBuffer staging = pool.acquire();   // O(1) after warm-up
//       std::memcpy(staging.host(), src, 4 * kMiB);
//       queue.upload(staging.view(), dst);
//   }                                                             // slot is free again
//
// Chunks are kept until the pool is destroyed. Thread-safe (one mutex; growth calls
// the upstream allocator under it).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "outcore/device/allocator.hpp"
#include "outcore/device/block.hpp"
#include "outcore/device/memory_kind.hpp"

namespace outcore {
class Device;
}

namespace outcore::alloc {

class BufferPool;

struct BufferPoolOptions {
    /// Bytes of each buffer; required (> 0).
    std::uint64_t slot_bytes = 0;
    MemoryKind kind = MemoryKind::Device;
    /// Slots made per upstream allocation when the pool grows.
    std::uint64_t slots_per_chunk = 8;
    /// Most slots the pool will hold; acquire() past it is OutOfMemory.
    std::uint64_t max_slots = UINT32_MAX;
    /// Slots made up front by the constructor.
    std::uint64_t initial_slots = 0;
    /// Tag for the chunks in upstream statistics; must outlive the pool (a literal).
    std::string_view tag = "buffer_pool";
};

struct BufferPoolStatistics {
    std::uint64_t slots_total = 0;     ///< slots made (free + in use)
    std::uint64_t slots_in_use = 0;    ///< slots held by PooledBuffers now
    std::uint64_t slots_peak = 0;      ///< most slots ever in use at once
    std::uint64_t chunk_count = 0;     ///< upstream allocations held
    std::uint64_t bytes_reserved = 0;  ///< upstream bytes held by the chunks
};

/// One slot of a BufferPool, held until destruction or reset(). Move-only. The pool
/// must outlive it.
class PooledBuffer {
public:
    PooledBuffer() noexcept = default;
    PooledBuffer(PooledBuffer&& other) noexcept;
    PooledBuffer& operator=(PooledBuffer&& other) noexcept;
    PooledBuffer(const PooledBuffer&) = delete;
    PooledBuffer& operator=(const PooledBuffer&) = delete;
    ~PooledBuffer() { reset(); }

    /// The slot as a block: its chunk's native handle at the slot's offset;
    /// bytes = slot_bytes.
    [[nodiscard]] const RawBlock& raw() const noexcept { return raw_; }
    /// The whole slot as a view, for queue copies and kernel bindings.
    [[nodiscard]] BufferView view() const noexcept { return BufferView(raw_); }
    /// Host address of the slot's first byte, or nullptr for Device memory.
    [[nodiscard]] std::byte* host() const noexcept { return raw_.host; }
    [[nodiscard]] std::uint64_t bytes() const noexcept { return raw_.bytes; }
    /// Which slot of the pool this is (0 .. slots_total - 1).
    [[nodiscard]] std::uint64_t slot_index() const noexcept { return slot_; }
    explicit operator bool() const noexcept { return pool_ != nullptr; }
    /// Gives the slot back now (no-op when empty). noexcept.
    void reset() noexcept;

private:
    friend class BufferPool;
    PooledBuffer(BufferPool& pool, const RawBlock& raw, std::uint64_t slot) noexcept
        : pool_(&pool), raw_(raw), slot_(slot) {}

    BufferPool* pool_ = nullptr;
    RawBlock raw_{};
    std::uint64_t slot_ = 0;
};

class BufferPool {
public:
    /// A pool over `device` with slots aligned to its min_offset_alignment. Throws
    /// UsageError for bad options, OutOfMemory if initial_slots cannot be made.
    BufferPool(Device& device, const BufferPoolOptions& options);
    /// A pool over any allocator; slot offsets are multiples of `alignment_bytes`
    /// (a power of two). `upstream` must outlive the pool.
    BufferPool(Allocator& upstream, std::uint64_t alignment_bytes, const BufferPoolOptions& options);
    /// Gives every chunk back. Slots still held are a bug in the caller: logged.
    ~BufferPool();
    BufferPool(const BufferPool&) = delete;
    BufferPool& operator=(const BufferPool&) = delete;

    /// A free slot, growing the pool by a chunk if none is free. O(1) when a slot is
    /// free. Throws OutOfMemory when max_slots are all in use (with the pool's numbers)
    /// or the upstream allocator refuses a chunk. Thread-safe.
    [[nodiscard]] PooledBuffer acquire();
    /// As acquire, but nullopt instead of OutOfMemory. Thread-safe.
    [[nodiscard]] std::optional<PooledBuffer> try_acquire();
    /// Grows until at least `slot_count` slots exist (capped by max_slots: UsageError
    /// above it). Throws OutOfMemory if upstream refuses. Thread-safe.
    void reserve(std::uint64_t slot_count);

    [[nodiscard]] BufferPoolStatistics statistics() const;
    [[nodiscard]] std::uint64_t slot_bytes() const noexcept { return options_.slot_bytes; }
    /// Distance between consecutive slots in a chunk: slot_bytes rounded up to the alignment.
    [[nodiscard]] std::uint64_t slot_stride_bytes() const noexcept { return stride_bytes_; }
    [[nodiscard]] const BufferPoolOptions& options() const noexcept { return options_; }

private:
    friend class PooledBuffer;
    void release(std::uint64_t slot) noexcept;
    void grow_locked();
    [[nodiscard]] PooledBuffer take_locked();
    [[nodiscard]] RawBlock slot_block(std::uint64_t slot) const noexcept;

    Allocator& upstream_;
    BufferPoolOptions options_;
    std::uint64_t alignment_bytes_;
    std::uint64_t stride_bytes_ = 0;

    mutable std::mutex mutex_;
    std::vector<RawBlock> chunks_;
    std::vector<std::uint64_t> free_slots_;  // a stack: the most recently freed slot is reused first
    std::uint64_t slots_total_ = 0;
    std::uint64_t slots_in_use_ = 0;
    std::uint64_t slots_peak_ = 0;
    std::uint64_t bytes_reserved_ = 0;
};

}  // namespace outcore::alloc
