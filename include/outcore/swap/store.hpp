// outcore/swap/store.hpp — the tiered swap store: blocks live hot on the device, warm
// in host memory (pinned staging plus pageable), cold in an unnamed spill file, moved
// by LRU under a budget per tier; nothing stored is ever lost or silently corrupted.
//
//   swap::TieredStore store(device, {.device_budget_bytes = 2 * kGiB,
//                                    .host_budget_bytes = 8 * kGiB,
//                                    .spill_dir = "/var/tmp"});
//   swap::BlockId id = store.put(bytes);                 // any size; split into units
//   {
//       swap::Pin pin = store.acquire(id, swap::Access::Write);  // resident on the device
//       kernels.run(queue, pin.view());                  // BufferView of unit 0
//   }                                                    // released: may be evicted now
//   store.prefetch(id);                                  // start bringing it back
//   store.read(id, out);                                 // copy to host memory
//   store.erase(id);
//
// Objects are split into units of options.unit_bytes (1–64 MiB, default 16 MiB); a
// unit is what moves between tiers, what LRU orders, and what carries one checksum on
// disk. A Pin pins every unit of its object; views()[u] is unit u on the device.
//
// Tiers. Device: each unit copy is its own allocation from an alloc::Budget over the
// device (no Heap: units are ≥ 1 MiB, so a native allocation per unit costs little
// next to moving it, frees give memory back at once, and set_budget never meets a
// fragmented heap it cannot shrink). Host: unit copies go to a pool of pinned
// unit-sized slots (pinned_pool_bytes; a failed pinned allocation falls back) and
// otherwise to pageable memory; both count against host_budget_bytes. Disk: one
// SpillFile slot per unit with its XXH3-64 checksum, verified on every read.
//
// Residency: a unit may have a valid copy in several tiers at once; all valid copies
// hold the same bytes. A copy is dirty when no tier below it holds a valid one. A unit
// made by create() and never written holds zeros and needs no copy anywhere. Eviction
// when a tier needs room takes its least-recently-used unit that is not pinned (device)
// and not in flight: a victim with a valid copy elsewhere is dropped without a
// transfer; a dirty one is written down first (device → host → spill file). A backend
// OutOfMemory on a device allocation also evicts one unit and retries (oom_retries).
// When every unit in the way is pinned the request throws OutOfMemory saying so —
// never a deadlock. A background washer writes dirty host units to disk (a bounded
// batch at a time, once the host tier is half full) so eviction rarely has to wait;
// prefetch() and prefetch(order) bring units to the device on a background thread.
//
// Failures never lose data: when a copy, an allocation or a disk call fails, every
// unit keeps the copies it had (the failed transfer's target is freed), the request
// throws, and all other objects still read back bit-exact.
//
// Thread safety: every member may be called from several threads. One mutex guards
// the unit table, the LRU lists and the accounting; it is never held during a copy, an
// allocation or disk I/O. A unit being moved (or read, or written) is marked busy;
// other threads wanting that unit wait on a condition variable, and eviction skips it.
// A thread that needs room and finds only pinned or busy units waits while some other
// thread is actually moving data, and throws OutOfMemory once nothing is moving. With
// several threads an OutOfMemory can therefore also mean "the tier is full of units
// other threads have pinned or are moving". Background prefetches never wait for room.
// A Pin may be released on any thread; the store must outlive its Pins.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "outcore/core/tier.hpp"
#include "outcore/device/block.hpp"
#include "outcore/device/device.hpp"
#include "outcore/swap/file_io.hpp"

namespace outcore::swap {

/// Names one stored object; 0 is never a valid id.
struct BlockId {
    std::uint64_t value = 0;
    [[nodiscard]] bool valid() const noexcept { return value != 0; }
    friend bool operator==(BlockId, BlockId) = default;
    friend auto operator<=>(BlockId, BlockId) = default;
};

/// What an acquire will do with the device copy.
enum class Access : unsigned char {
    Read,     ///< bring it in; the device copy stays clean
    Write,    ///< bring it in; the device copy becomes dirty (lower copies dropped)
    Discard,  ///< the caller overwrites every byte: no swap-in, becomes dirty
};

struct StoreOptions {
    /// Device bytes the store may hold; 0 = the device's recommended working set.
    std::uint64_t device_budget_bytes = 0;
    /// Host bytes (pinned staging pool + pageable) the store may hold; 0 = 1/4 of RAM.
    std::uint64_t host_budget_bytes = 0;
    /// Of the host budget, bytes kept as a pool of pinned unit-sized slots (HostPinned).
    std::uint64_t pinned_pool_bytes = 64ULL << 20;
    /// Swap unit, 1–64 MiB.
    std::uint64_t unit_bytes = 16ULL << 20;
    /// Directory of the spill file; empty = no disk tier (host full → OutOfMemory).
    std::filesystem::path spill_dir;
    /// Most bytes the spill file may hold; 0 = unlimited.
    std::uint64_t disk_limit_bytes = 0;
    /// O_DIRECT for the spill file where the filesystem allows it.
    bool direct_io = true;
    /// Dirty host units the washer takes per batch (0 = no washer).
    std::uint32_t wash_queue_units = 8;
    /// A swap-in of a unit evicted within this many evictions (of the tier it comes
    /// back to) counts as a thrash.
    std::uint64_t thrash_window = 64;
    /// Disk system calls (tests inject faults here); null = the real ones.
    FileIo* file_io = nullptr;
};

/// Counters of one tier. For the disk tier, swap_in_* counts bytes written into the
/// spill file (evictions and washer), swap_out_* bytes read back from it, hits the
/// reads it served.
struct TierStats {
    std::uint64_t resident_bytes = 0;  ///< bytes of valid unit copies in this tier
    std::uint64_t peak_bytes = 0;
    std::uint64_t budget_bytes = 0;   ///< 0 for an unlimited disk tier
    std::uint64_t swap_in_bytes = 0;  ///< bytes copied into this tier from the one below
    std::uint64_t swap_in_count = 0;
    std::uint64_t swap_out_bytes = 0;  ///< bytes written from this tier to the one below by eviction
    std::uint64_t swap_out_count = 0;
    std::uint64_t hits = 0;    ///< unit requests served from this tier
    std::uint64_t misses = 0;  ///< unit requests that had to come from below
    std::uint64_t clean_evictions = 0;
    std::uint64_t dirty_evictions = 0;
    std::uint64_t write_back_bytes = 0;  ///< by the background washer (host tier)
    double swap_in_seconds = 0;          ///< time spent moving swap_in_bytes
    double swap_out_seconds = 0;
};

struct StoreStats {
    TierStats device;
    TierStats host;
    TierStats disk;
    std::uint64_t objects = 0;
    std::uint64_t units = 0;
    std::uint64_t pinned_units = 0;
    std::uint64_t checksum_failures = 0;
    std::uint64_t thrash_count = 0;
    std::uint64_t oom_retries = 0;        ///< backend OutOfMemory answered by eviction + retry
    std::uint64_t prefetch_count = 0;     ///< units brought to the device by prefetch
    std::uint64_t prefetch_failures = 0;  ///< prefetches that gave up (no room, I/O error)
    std::uint64_t wash_failures = 0;      ///< washer writes that failed (the data stayed in host)
    /// device/host/disk; HostPinned maps to host.
    [[nodiscard]] const TierStats& of(Tier tier) const noexcept;
};

class TieredStore;
namespace detail {
struct StoreImpl;
}

/// Keeps an object resident and pinned on the device until destroyed (RAII).
class Pin {
public:
    Pin() noexcept = default;
    Pin(Pin&& other) noexcept;
    Pin& operator=(Pin&& other) noexcept;
    Pin(const Pin&) = delete;
    Pin& operator=(const Pin&) = delete;
    ~Pin() { release(); }

    [[nodiscard]] BlockId id() const noexcept { return id_; }
    /// Unit u of the object on the device (size: the unit's bytes).
    [[nodiscard]] std::span<const BufferView> views() const noexcept { return views_; }
    /// Unit 0 (the whole object when it fits one unit).
    [[nodiscard]] const BufferView& view() const noexcept { return views_.front(); }
    [[nodiscard]] std::uint64_t bytes() const noexcept { return bytes_; }
    explicit operator bool() const noexcept { return store_ != nullptr; }
    /// Unpins now (no-op when empty). noexcept.
    void release() noexcept;

private:
    friend class TieredStore;
    Pin(TieredStore& store, BlockId id, std::vector<BufferView> views, std::uint64_t bytes) noexcept
        : store_(&store), id_(id), views_(std::move(views)), bytes_(bytes) {}

    TieredStore* store_ = nullptr;
    BlockId id_{};
    std::vector<BufferView> views_;
    std::uint64_t bytes_ = 0;
};

class TieredStore {
public:
    /// UsageError for a unit outside 1–64 MiB; IoError when spill_dir is set but
    /// missing or not writable. A budget below one unit is allowed (small objects):
    /// a unit larger than a tier's budget can never enter that tier (OutOfMemory).
    /// `device` must outlive the store.
    TieredStore(Device& device, StoreOptions options);
    /// Waits for background work; frees every tier. Pins must be gone. Never throws.
    ~TieredStore();
    TieredStore(const TieredStore&) = delete;
    TieredStore& operator=(const TieredStore&) = delete;

    /// Stores a copy of `bytes` (starts in the host tier, spilling to disk as needed).
    /// OutOfMemory when no tier has room (nothing is kept then); UsageError for empty
    /// data; IoError from the disk tier.
    [[nodiscard]] BlockId put(std::span<const std::byte> bytes);
    /// A new object of `bytes` bytes that reads as zeros until written (no data moved).
    /// UsageError for 0; OutOfMemory when it could never fit in the host budget plus
    /// the disk tier (its limit, or the free space of spill_dir).
    [[nodiscard]] BlockId create(std::uint64_t bytes);
    /// Makes the object resident on the device and pins it (see Access).
    /// OutOfMemory (every unit in the way pinned, the object larger than the device
    /// budget, or the backend refusing with nothing left to evict); BackendError from
    /// a failed copy; IoError / CorruptionError from the disk tier; UsageError for an
    /// unknown id. On a throw nothing is pinned and no data is lost.
    [[nodiscard]] Pin acquire(BlockId id, Access access);
    /// Starts bringing the object to the device without waiting (a hint: it gives up
    /// rather than wait for room, and a failure only counts in stats; the next acquire
    /// does the work itself and throws if it fails again). UsageError for an unknown id.
    void prefetch(BlockId id);
    /// Prefetches objects in this order, ahead of the consumer: at most half the device
    /// budget (and at least one object) past the last one acquired from the order.
    /// Replaces an earlier order. UsageError for an unknown id.
    void prefetch(std::span<const BlockId> order);
    /// Copies the object's current bytes into `out` (exactly its size), from the host
    /// copy when there is one, else the device copy, else the spill file. Does not make
    /// it resident. UsageError (unknown id, wrong size), BackendError, IoError,
    /// CorruptionError (wrong bytes are never returned).
    void read(BlockId id, std::span<std::byte> out);
    /// Replaces the object's bytes (exactly its size) with `in`; copies elsewhere are
    /// dropped. The new bytes go to the host tier. UsageError when the object is pinned
    /// (write through the Pin instead), unknown, or `in` has the wrong size. Each unit is
    /// replaced atomically: on a throw (OutOfMemory, IoError) units before the failing
    /// one hold the new bytes, the rest the old ones.
    void write(BlockId id, std::span<const std::byte> in);
    /// Forgets the object in every tier. UsageError if it is pinned or unknown.
    void erase(BlockId id);
    /// The object's size in bytes. UsageError for an unknown id.
    [[nodiscard]] std::uint64_t size(BlockId id) const;
    /// Changes a tier's budget (Tier::Device or Tier::Host; else UsageError, as for
    /// 0 bytes); evicts down to it now. OutOfMemory when pinned units alone exceed it,
    /// or when what stays cannot be moved down (budget left unchanged); IoError from
    /// the disk tier.
    void set_budget(Tier tier, std::uint64_t bytes);
    /// Waits until background write-back and prefetches are idle.
    void drain();

    [[nodiscard]] StoreStats stats() const;
    /// Checks the unit table against the LRU lists and the per-tier accounting; throws
    /// InternalError naming the broken invariant. O(units). Tests call it after each step.
    void validate() const;
    [[nodiscard]] const StoreOptions& options() const noexcept { return options_; }
    [[nodiscard]] Device& device() const noexcept { return *device_; }

private:
    friend class Pin;
    void release(BlockId id) noexcept;

    Device* device_;
    StoreOptions options_;
    std::unique_ptr<detail::StoreImpl> impl_;
};

}  // namespace outcore::swap
