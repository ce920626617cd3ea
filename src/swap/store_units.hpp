// store_units.hpp — the swap store's unit table (private): one Unit per swap unit with
// its copy in each tier, and the host memory those copies live in (a pool of pinned
// unit-sized slots, else pageable memory).
//
// A Unit's fields are guarded by the store's mutex, except the bytes of its copies,
// which the thread that marked the unit busy may touch without the lock.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "outcore/device/block.hpp"
#include "outcore/device/device.hpp"
#include "outcore/swap/spill_file.hpp"
#include "outcore/swap/store.hpp"

namespace outcore::swap::detail {

class PinnedPool;

/// Frees pageable host memory made for a unit: aligned to kSpillAlignment, so the spill
/// file's O_DIRECT reads and writes use it without a bounce copy.
struct AlignedDelete {
    void operator()(std::byte* p) const noexcept;
};
using PageableBytes = std::unique_ptr<std::byte[], AlignedDelete>;

/// One host copy: a slot of the pinned pool, or pageable memory. Move-only; gives its
/// memory back on destruction. Empty (data() == nullptr) means "no host copy".
class HostBuffer {
public:
    HostBuffer() noexcept = default;
    HostBuffer(HostBuffer&& other) noexcept { *this = std::move(other); }
    HostBuffer& operator=(HostBuffer&& other) noexcept;
    HostBuffer(const HostBuffer&) = delete;
    HostBuffer& operator=(const HostBuffer&) = delete;
    ~HostBuffer() { reset(); }

    /// A pinned slot if the pool has one (or can make one) and `bytes` is at least half
    /// a slot, else pageable memory (a small tail unit would waste a pinned slot): a
    /// buffer the pool kept from an earlier copy when there is one of this size.
    /// Throws OutOfMemory (tier Host) only when pageable memory is refused.
    [[nodiscard]] static HostBuffer allocate(PinnedPool& pool, std::uint64_t bytes);

    [[nodiscard]] std::byte* data() const noexcept { return data_; }
    [[nodiscard]] bool pinned() const noexcept { return pool_ != nullptr; }
    explicit operator bool() const noexcept { return data_ != nullptr; }
    void reset() noexcept;

private:
    std::byte* data_ = nullptr;
    PinnedPool* pool_ = nullptr;  ///< set for a pinned slot
    std::uint32_t slot_ = 0;
    PageableBytes pageable_;
    PinnedPool* keeper_ = nullptr;  ///< for pageable memory: the pool that may keep it
    std::uint64_t pageable_bytes_ = 0;
};

/// Pinned (HostPinned) unit-sized slots, made on demand up to a fixed count and kept
/// until the pool is destroyed. Thread-safe (own mutex; allocation outside it).
class PinnedPool {
public:
    /// Room for `max_slots` slots is reserved up front, so take/give never allocate
    /// bookkeeping memory (they are noexcept).
    PinnedPool(Device& device, std::uint64_t slot_bytes, std::uint32_t max_slots);
    PinnedPool(const PinnedPool&) = delete;
    PinnedPool& operator=(const PinnedPool&) = delete;

    struct Taken {
        std::uint32_t slot = 0;
        std::byte* data = nullptr;
    };
    /// A free slot for `bytes` (slot_bytes / 2 ≤ bytes ≤ slot_bytes), making one if under the count; nullopt
    /// when none is free or the device refused pinned memory (the pool then stops
    /// growing). Never throws.
    [[nodiscard]] std::optional<Taken> take(std::uint64_t bytes) noexcept;
    void give(std::uint32_t slot) noexcept;
    /// Slots made so far (each slot_bytes of HostPinned memory).
    [[nodiscard]] std::uint32_t slot_count() const;
    [[nodiscard]] std::uint32_t free_count() const;

    /// Pageable buffers of exactly slot_bytes are kept when freed, up to this many,
    /// and handed out again: a fresh 16 MiB buffer page-faults on its first write
    /// (4,096 faults, about 2 GB/s), which would cap every swap-out into pageable
    /// memory. At most kKeptPageable × slot_bytes of host memory sits unused.
    static constexpr std::uint32_t kKeptPageable = 8;
    /// A kept pageable buffer of `bytes`, or null.
    [[nodiscard]] PageableBytes take_pageable(std::uint64_t bytes) noexcept;
    /// Keeps `buffer` (of `bytes`) for take_pageable if it is slot-sized and there is
    /// room; otherwise it is freed.
    void keep_pageable(PageableBytes buffer, std::uint64_t bytes) noexcept;
    [[nodiscard]] std::uint32_t kept_pageable_count() const;

private:
    Device& device_;
    const std::uint64_t slot_bytes_;
    mutable std::mutex mutex_;
    std::uint32_t max_slots_;    // guarded by mutex_ (shrinks when the device refuses)
    std::uint32_t growing_ = 0;  // slots being allocated right now
    std::vector<Block> slots_;   // index = slot number
    std::vector<std::uint32_t> free_;
    std::vector<PageableBytes> kept_;  // at most kKeptPageable, each slot_bytes
};

struct Object;

/// One swap unit and its copies. Valid copies all hold the unit's current bytes.
struct Unit {
    Object* object = nullptr;
    std::uint32_t index = 0;  ///< unit number within its object
    std::uint64_t bytes = 0;

    Block device;      ///< the device copy, if valid
    HostBuffer host;   ///< the host copy, if valid
    SpillSlot slot;    ///< the disk copy, if valid (it keeps the checksum)
    bool zero = true;  ///< the bytes are all zeros and no copy is needed anywhere

    std::uint32_t pins = 0;
    bool busy = false;  ///< a thread is moving, reading or writing this unit's copies

    /// Set while the unit is on the device LRU (device copy valid, pins == 0).
    std::optional<std::list<Unit*>::iterator> device_lru;
    /// Set while the unit is on the host LRU (host copy valid).
    std::optional<std::list<Unit*>::iterator> host_lru;
    /// Eviction sequence numbers of the last eviction from each tier (0 = never).
    std::uint64_t device_evicted_seq = 0;
    std::uint64_t host_evicted_seq = 0;

    [[nodiscard]] bool on_device() const noexcept { return static_cast<bool>(device); }
    [[nodiscard]] bool on_host() const noexcept { return static_cast<bool>(host); }
    [[nodiscard]] bool on_disk() const noexcept { return slot.valid(); }
    /// The device copy is the only copy of non-zero bytes.
    [[nodiscard]] bool device_dirty() const noexcept {
        return on_device() && !on_host() && !on_disk() && !zero;
    }
    /// The host copy has no valid copy below it.
    [[nodiscard]] bool host_dirty() const noexcept { return on_host() && !on_disk(); }
};

/// One stored object: its units in order. Kept alive by shared_ptr while a thread
/// works on it, so an erase only marks it and unlinks it from the table.
struct Object : std::enable_shared_from_this<Object> {
    BlockId id;
    std::uint64_t bytes = 0;
    std::vector<std::unique_ptr<Unit>> units;
    bool erased = false;
};

}  // namespace outcore::swap::detail
