// store_impl.hpp — detail::StoreImpl (private), what a TieredStore holds: the unit table, the per-tier books
// and LRU lists, and the operations the public API is built from. Split over store.cpp (public API),
// store_tiers.cpp (room, eviction, swap-in, transfers) and store_background.cpp (washer, prefetcher).
//
// Locking. `mu` guards everything here except the queue pool (queue_mu) and the
// pinned pool (its own mutex); lock order is mu → queue_mu / pool mutex. A function
// taking `Lock&` is called with mu held and may release it for a transfer (an
// Unlocked scope) before returning with it held again. Two rules keep waits finite:
//   W1: a thread waits for a specific unit to stop being busy only while it holds no
//       busy unit itself;
//   W2: a thread that needs room and finds only pinned or busy units waits only while
//       some thread is inside a transfer (transfers_active > 0); transfers never wait.
// So every waiter is woken by a transfer that ends, and with nothing moving it throws
// OutOfMemory instead of sleeping: no deadlock, whatever the pins.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "outcore/alloc/budget.hpp"
#include "outcore/device/queue.hpp"
#include "outcore/monitor/snapshot.hpp"
#include "outcore/swap/spill_file.hpp"
#include "outcore/swap/store.hpp"
#include "store_units.hpp"

namespace outcore::swap::detail {

struct StoreImpl {
    using Lock = std::unique_lock<std::mutex>;

    /// Whether a request may wait for room (user requests) or gives up (prefetch).
    enum class Wait : bool { No, Yes };

    /// One tier's accounting. used = resident + bytes reserved for copies in flight
    /// (+ for the device, dead blocks not freed yet).
    struct Book {
        std::uint64_t budget = 0;
        std::uint64_t used = 0;
        std::uint64_t resident = 0;
        TierStats stats;
    };

    StoreImpl(Device& device, const StoreOptions& options);
    ~StoreImpl();
    StoreImpl(const StoreImpl&) = delete;
    StoreImpl& operator=(const StoreImpl&) = delete;

    // --- table (lock held) -------------------------------------------------------
    [[nodiscard]] std::shared_ptr<Object> find(BlockId id) const;
    /// W1: waits until `u` is not busy; UsageError if its object was erased meanwhile.
    void wait_idle(Lock& lock, const Object& object, Unit& u);
    void pin(Unit& u);
    void unpin(Unit& u) noexcept;
    void touch_device(Unit& u) noexcept;
    void touch_host(Unit& u) noexcept;
    /// Installs a copy that just landed (unit busy, its bytes already reserved).
    void land_device(Unit& u, Block block);
    void land_host(Unit& u, HostBuffer buffer);
    void land_disk(Unit& u, const SpillSlot& slot, double seconds);
    /// Drops a copy (no transfer): frees it, unlinks it, gives its bytes back.
    void drop_device(Unit& u) noexcept;
    void drop_host(Unit& u) noexcept;
    void drop_disk(Unit& u) noexcept;
    /// The unit now holds new bytes in its device copy: drops every other copy.
    void make_device_only(Unit& u) noexcept;
    /// Frees every copy of every unit and unlinks them (erase, failed put).
    void drop_object(Object& object) noexcept;

    // --- tiers (store_tiers.cpp; lock held, may release it) -----------------------
    [[nodiscard]] Book& book(Tier tier) noexcept { return tier == Tier::Device ? device_book : host_book; }
    /// Reserves `bytes` in `tier` (Device or Host), evicting LRU victims; false only
    /// with Wait::No when there is no room to be had now. Throws OutOfMemory (no room,
    /// nothing moving), IoError / BackendError from a victim's write-back.
    /// With `reuse` (device tier only): when an evicted block of exactly `bytes` is
    /// waiting to be freed, hand it over in *reuse as the reservation instead of
    /// freeing it and allocating anew.
    bool make_room(Lock& lock, Tier tier, std::uint64_t bytes, Wait wait, Block* reuse = nullptr);
    /// Evicts down to `budget` (set_budget), then sets it.
    void shrink(Lock& lock, Tier tier, std::uint64_t budget);
    [[nodiscard]] Unit* pick_victim(Tier tier) noexcept;
    /// Evicts one victim (not busy; on the tier's LRU). false: Wait::No and no room below.
    bool evict(Lock& lock, Tier tier, Unit& victim, Wait wait);
    /// Gives busy unit `u` (no device copy yet) a valid device copy: from the host
    /// copy, the disk copy (through a new host copy), or zeros. false: Wait::No, no room.
    bool bring_to_device(Lock& lock, Unit& u, Wait wait);
    /// Reads busy unit `u`'s disk copy into a new host copy. false: Wait::No, no room.
    bool load_host(Lock& lock, Unit& u, Wait wait);
    /// Allocates a device buffer for `u` (bytes reserved in device_book); evicts and
    /// retries on a backend OutOfMemory. Returns an empty Block for Wait::No, no room.
    Block allocate_device(Lock& lock, const Unit& u, Wait wait);
    [[noreturn]] void throw_no_room(Tier tier, std::uint64_t bytes, const char* why) const;
    void note_thrash(Tier tier, const Unit& u);
    void note_resident(Book& b, std::int64_t delta) noexcept;

    // --- transfers (no lock held) ---------------------------------------------------
    void upload(const std::byte* src, const Block& dst);
    void download(const Block& src, std::byte* dst, std::uint64_t bytes);
    void fill_zero(const Block& dst);
    [[nodiscard]] std::unique_ptr<Queue> take_queue();
    void give_queue(std::unique_ptr<Queue> q) noexcept;

    /// Releases mu for a transfer and counts it as one (W2); frees dead device blocks
    /// first (their bytes leave device_book.used as it relocks). Relocks and wakes
    /// every waiter on destruction.
    class Unlocked {
    public:
        Unlocked(StoreImpl& s, Lock& lock);
        ~Unlocked();
        Unlocked(const Unlocked&) = delete;
        Unlocked& operator=(const Unlocked&) = delete;

    private:
        StoreImpl& s_;
        Lock& lock_;
        std::uint64_t freed_bytes_ = 0;
    };
    /// Marks a unit busy for a scope; clears it (and wakes waiters) on exit.
    class BusyScope {
    public:
        BusyScope(StoreImpl& s, Unit& u) noexcept : s_(s), u_(u) { u_.busy = true; }
        ~BusyScope() {
            u_.busy = false;
            s_.cv.notify_all();
        }
        BusyScope(const BusyScope&) = delete;
        BusyScope& operator=(const BusyScope&) = delete;

    private:
        StoreImpl& s_;
        Unit& u_;
    };
    /// Frees dead device blocks outside the lock (called as a public call returns).
    void release_lock(Lock& lock) noexcept;

    // --- background (store_background.cpp) ----------------------------------------
    void start_washer();
    void wash_loop() noexcept;
    /// After a unit became host-dirty: wakes the washer once the host tier is half full.
    void want_wash() noexcept;
    void prefetch_locked(Lock& lock, const std::shared_ptr<Object>& object);
    void prefetch_loop() noexcept;
    void prefetch_object(Lock& lock, const std::shared_ptr<Object>& object) noexcept;
    /// acquire(id) advanced the prefetch order: queue what is now within the window.
    void advance_order(Lock& lock, BlockId id);
    void schedule_order(Lock& lock);
    void stop_background() noexcept;

    // --- configuration --------------------------------------------------------------
    Device& device;
    const StoreOptions options;
    alloc::Budget device_alloc;  ///< unit buffers: Budget(limit = device budget) over the device
    PinnedPool pinned;
    std::unique_ptr<SpillFile> spill;

    // --- state, guarded by mu ----------------------------------------------------------
    mutable std::mutex mu;
    std::condition_variable cv;  ///< busy cleared, transfer ended, pin released, room freed
    std::unordered_map<std::uint64_t, std::shared_ptr<Object>> objects;
    std::uint64_t next_id = 1;
    std::list<Unit*> device_lru;  ///< unpinned units with a device copy, least recent first
    std::list<Unit*> host_lru;    ///< units with a host copy, least recent first
    Book device_book;
    Book host_book;
    Book disk_book;
    std::uint64_t unit_count = 0;
    std::uint64_t pinned_units = 0;
    std::uint64_t pinned_bytes = 0;
    std::uint64_t transfers_active = 0;
    std::uint64_t device_evictions = 0;
    std::uint64_t host_evictions = 0;
    std::uint64_t thrash_count = 0;
    std::uint64_t thrash_warn_at = 16;
    std::uint64_t oom_retries = 0;
    std::uint64_t checksum_failures = 0;
    std::uint64_t prefetch_count = 0;
    std::uint64_t prefetch_failures = 0;
    std::uint64_t wash_failures = 0;
    /// Host copies in pageable memory (the Device counts the pinned slots itself).
    std::uint64_t host_pageable_bytes = 0;
    std::uint64_t host_pageable_peak = 0;
    /// Evicted device copies, freed outside the lock by the next Unlocked scope; their
    /// bytes stay in device_book.used (not in resident) until then.
    std::vector<Block> dead_blocks;

    std::mutex queue_mu;
    std::vector<std::unique_ptr<Queue>> queues;  ///< idle queues (guarded by queue_mu)

    std::condition_variable work_cv;  ///< wakes the background threads
    bool stopping = false;
    std::deque<std::shared_ptr<Object>> prefetch_queue;
    bool prefetch_busy = false;
    std::thread prefetcher;
    std::vector<BlockId> order;    ///< prefetch(order)
    std::size_t order_pos = 0;     ///< first entry not yet acquired
    std::size_t order_queued = 0;  ///< entries before this are queued for prefetch
    bool wash_wanted = false;
    bool wash_busy = false;
    bool wash_warned = false;
    std::thread washer;

    /// Adds the store to monitor::snapshot() (store.cpp); last, so it goes first.
    monitor::Source snapshot_source;
};

}  // namespace outcore::swap::detail
