// The swap store's tiers: making room (LRU eviction, write-back), bringing units up
// (disk → host → device), device allocation with evict-and-retry, and the transfers.
// Locking rules (W1, W2) are in store_impl.hpp.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/core/size.hpp"
#include "outcore/monitor/hooks.hpp"
#include "store_impl.hpp"

namespace outcore::swap {

namespace {
constexpr const char* kComponent = "swap";

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}
/// Tells the monitors (the trace) about a move; `end` == `begin` for a clean drop.
void report_move(monitor::SwapKind kind, Tier from, Tier to, std::uint64_t bytes, bool dirty,
                 std::int64_t begin, std::int64_t end) noexcept {
    monitor::report(monitor::SwapEvent{.kind = kind,
                                       .from = from,
                                       .to = to,
                                       .bytes = bytes,
                                       .dirty = dirty,
                                       .begin_ns = begin,
                                       .end_ns = end});
}
}  // namespace

using Impl = detail::StoreImpl;

// --- lock scopes ---------------------------------------------------------------------

Impl::Unlocked::Unlocked(Impl& s, Lock& lock) : s_(s), lock_(lock) {
    ++s_.transfers_active;
    std::vector<Block> dead = std::exchange(s_.dead_blocks, {});
    for (const Block& b : dead) freed_bytes_ += b.bytes();
    lock_.unlock();
    dead.clear();  // device frees (cudaFree may synchronize) happen outside the lock
}

Impl::Unlocked::~Unlocked() {
    lock_.lock();
    s_.device_book.used -= freed_bytes_;
    --s_.transfers_active;
    s_.cv.notify_all();
}

void Impl::release_lock(Lock& lock) noexcept {
    if (!lock.owns_lock()) return;
    if (!dead_blocks.empty()) {
        const Unlocked free_dead(*this, lock);
    }
    lock.unlock();
}

// --- room and eviction -----------------------------------------------------------------

void Impl::note_resident(Book& b, std::int64_t delta) noexcept {
    b.resident = static_cast<std::uint64_t>(static_cast<std::int64_t>(b.resident) + delta);
    b.stats.peak_bytes = std::max(b.stats.peak_bytes, b.resident);
}

void Impl::throw_no_room(Tier tier, std::uint64_t bytes, const char* why) const {
    const Book& b = tier == Tier::Device ? device_book : host_book;
    throw OutOfMemory(
        kComponent,
        fmt::format("{} ({} units, {} pinned on the device)", why, pinned_units, format_size(pinned_bytes)),
        OutOfMemoryInfo{
            .requested_bytes = bytes, .tier = tier, .budget_bytes = b.budget, .in_use_bytes = b.used});
}

detail::Unit* Impl::pick_victim(Tier tier) noexcept {
    if (tier == Tier::Device) {
        for (Unit* u : device_lru) {
            if (!u->busy) return u;
        }
        return nullptr;
    }
    for (Unit* u : host_lru) {
        // Without a disk tier a host copy that is the only copy has nowhere to go.
        if (!u->busy && (u->on_disk() || u->on_device() || spill)) return u;
    }
    return nullptr;
}

bool Impl::make_room(Lock& lock, Tier tier, std::uint64_t bytes, Wait wait, Block* reuse) {
    Book& b = book(tier);
    for (;;) {
        if (bytes > b.budget) throw_no_room(tier, bytes, "the unit is larger than the tier's budget");
        if (b.used <= b.budget && bytes <= b.budget - b.used) {
            b.used += bytes;
            return true;
        }
        if (reuse != nullptr) {
            // A victim's block of the same size: its bytes, still counted in used,
            // become the reservation. Saves a free + allocate pair (cudaFree also
            // synchronizes the device), about a fifth of a 16 MiB PCIe transfer.
            const auto same = std::find_if(dead_blocks.begin(), dead_blocks.end(),
                                           [&](const Block& d) { return d.bytes() == bytes; });
            if (same != dead_blocks.end()) {
                *reuse = std::move(*same);
                dead_blocks.erase(same);
                return true;
            }
        }
        if (tier == Tier::Device && !dead_blocks.empty()) {
            const Unlocked free_dead(*this, lock);  // evicted blocks still count until freed
            continue;
        }
        if (Unit* victim = pick_victim(tier)) {
            if (!evict(lock, tier, *victim, wait)) return false;
            continue;
        }
        if (wait == Wait::No) return false;
        // W2: units in flight will land (or fail) and may become victims; wait only
        // while something is actually moving, else nothing can change: give up.
        if (transfers_active > 0) {
            cv.wait(lock);
            continue;
        }
        throw_no_room(tier, bytes,
                      tier == Tier::Device ? "every unit on the device is pinned or in use"
                                           : "every unit in the host tier is in use or has nowhere to go");
    }
}

void Impl::shrink(Lock& lock, Tier tier, std::uint64_t budget) {
    Book& b = book(tier);
    if (tier == Tier::Device && pinned_bytes > budget) {
        throw OutOfMemory(kComponent,
                          fmt::format("pinned units alone ({} units) exceed the new budget", pinned_units),
                          OutOfMemoryInfo{.requested_bytes = pinned_bytes,
                                          .tier = tier,
                                          .budget_bytes = budget,
                                          .in_use_bytes = b.used});
    }
    // Lower the budget first so concurrent requests evict with us instead of refilling.
    const std::uint64_t old_budget = b.budget;
    b.budget = budget;
    if (tier == Tier::Device) device_alloc.set_limit(budget);
    try {
        while (b.used > budget) {
            if (tier == Tier::Device && !dead_blocks.empty()) {
                const Unlocked free_dead(*this, lock);
                continue;
            }
            if (Unit* victim = pick_victim(tier)) {
                evict(lock, tier, *victim, Wait::Yes);
                continue;
            }
            if (transfers_active > 0) {
                cv.wait(lock);
                continue;
            }
            throw_no_room(tier, b.used - budget, "cannot evict down to the new budget");
        }
    } catch (...) {
        b.budget = old_budget;
        if (tier == Tier::Device) device_alloc.set_limit(old_budget);
        cv.notify_all();
        throw;
    }
    cv.notify_all();
}

bool Impl::evict(Lock& lock, Tier tier, Unit& victim, Wait wait) {
    Unit& v = victim;
    if (tier == Tier::Device) {
        if (!v.device_dirty()) {
            const Tier copy = v.on_host() ? Tier::Host : Tier::Disk;
            drop_device(v);
            v.device_evicted_seq = ++device_evictions;
            ++device_book.stats.clean_evictions;
            const std::int64_t now = monitor::now_ns();
            report_move(monitor::SwapKind::Evict, Tier::Device, copy, v.bytes, false, now, now);
            return true;
        }
        BusyScope busy(*this, v);
        if (!make_room(lock, Tier::Host, v.bytes, wait)) return false;
        HostBuffer buffer;
        const Clock::time_point start = Clock::now();
        std::int64_t moved_ns = 0;
        try {
            Unlocked unlocked(*this, lock);
            buffer = HostBuffer::allocate(pinned, v.bytes);
            download(v.device, buffer.data(), v.bytes);
            moved_ns = monitor::now_ns();
        } catch (...) {
            host_book.used -= v.bytes;  // the victim keeps its device copy
            throw;
        }
        device_book.stats.swap_out_seconds += seconds_since(start);
        device_book.stats.swap_out_bytes += v.bytes;
        ++device_book.stats.swap_out_count;
        ++device_book.stats.dirty_evictions;
        report_move(monitor::SwapKind::SwapOut, Tier::Device, Tier::Host, v.bytes, true,
                    std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count(),
                    moved_ns);
        land_host(v, std::move(buffer));
        drop_device(v);
        v.device_evicted_seq = ++device_evictions;
        want_wash();
        return true;
    }

    if (v.on_disk() || v.on_device()) {
        const Tier copy = v.on_device() ? Tier::Device : Tier::Disk;
        drop_host(v);
        v.host_evicted_seq = ++host_evictions;
        ++host_book.stats.clean_evictions;
        const std::int64_t now = monitor::now_ns();
        report_move(monitor::SwapKind::Evict, Tier::Host, copy, v.bytes, false, now, now);
        return true;
    }
    BusyScope busy(*this, v);
    SpillSlot slot;
    const Clock::time_point start = Clock::now();
    std::int64_t moved_ns = 0;
    {
        Unlocked unlocked(*this, lock);
        slot = spill->write({v.host.data(), static_cast<std::size_t>(v.bytes)});
        moved_ns = monitor::now_ns();
    }
    const double seconds = seconds_since(start);
    report_move(monitor::SwapKind::SwapOut, Tier::Host, Tier::Disk, v.bytes, true,
                std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count(),
                moved_ns);
    host_book.stats.swap_out_seconds += seconds;
    host_book.stats.swap_out_bytes += v.bytes;
    ++host_book.stats.swap_out_count;
    ++host_book.stats.dirty_evictions;
    land_disk(v, slot, seconds);
    drop_host(v);
    v.host_evicted_seq = ++host_evictions;
    return true;
}

// --- bringing units up ---------------------------------------------------------------------

void Impl::note_thrash(Tier tier, const Unit& u) {
    const std::uint64_t evicted = tier == Tier::Device ? u.device_evicted_seq : u.host_evicted_seq;
    const std::uint64_t now = tier == Tier::Device ? device_evictions : host_evictions;
    if (evicted == 0 || now - evicted >= options.thrash_window) return;
    ++thrash_count;
    if (thrash_count >= thrash_warn_at) {
        thrash_warn_at *= 2;
        log::warn(kComponent,
                  "thrashing: {} swap-ins of units evicted within the last {} evictions (device budget {}, "
                  "host budget {}): the working set does not fit",
                  thrash_count, options.thrash_window, format_size(device_book.budget),
                  format_size(host_book.budget));
    }
}

bool Impl::load_host(Lock& lock, Unit& u, Wait wait) {
    if (!make_room(lock, Tier::Host, u.bytes, wait)) return false;
    HostBuffer buffer;
    const Clock::time_point start = Clock::now();
    std::int64_t moved_ns = 0;
    try {
        Unlocked unlocked(*this, lock);
        buffer = HostBuffer::allocate(pinned, u.bytes);
        spill->read(u.slot, {buffer.data(), static_cast<std::size_t>(u.bytes)});
        moved_ns = monitor::now_ns();
    } catch (const CorruptionError&) {
        host_book.used -= u.bytes;
        ++checksum_failures;
        throw;
    } catch (...) {
        host_book.used -= u.bytes;
        throw;
    }
    const double seconds = seconds_since(start);
    host_book.stats.swap_in_seconds += seconds;
    host_book.stats.swap_in_bytes += u.bytes;
    ++host_book.stats.swap_in_count;
    disk_book.stats.swap_out_seconds += seconds;
    disk_book.stats.swap_out_bytes += u.bytes;
    ++disk_book.stats.swap_out_count;
    report_move(monitor::SwapKind::SwapIn, Tier::Disk, Tier::Host, u.bytes, false,
                std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count(),
                moved_ns);
    note_thrash(Tier::Host, u);
    land_host(u, std::move(buffer));
    return true;
}

Block Impl::allocate_device(Lock& lock, const Unit& u, Wait wait) {
    Block reused;
    if (!make_room(lock, Tier::Device, u.bytes, wait, &reused)) return {};
    if (reused) return reused;
    for (;;) {
        try {
            Unlocked unlocked(*this, lock);
            return device_alloc.allocate({.bytes = u.bytes, .kind = MemoryKind::Device, .tag = "swap.unit"});
        } catch (const OutOfMemory& e) {
            // Within our budget but the backend refused (the card is shared, or
            // fragmented): evict one more unit and retry.
            bool retry = false;
            try {
                if (Unit* victim = pick_victim(Tier::Device)) {
                    retry = evict(lock, Tier::Device, *victim, wait);
                    if (retry) ++oom_retries;
                } else if (wait == Wait::Yes && transfers_active > 0) {
                    cv.wait(lock);
                    retry = true;
                }
            } catch (...) {
                device_book.used -= u.bytes;
                throw;
            }
            if (retry) continue;
            device_book.used -= u.bytes;
            if (wait == Wait::No) return {};
            throw OutOfMemory(
                kComponent,
                fmt::format("the device refused a unit and no unit is left to evict ({})", e.what()),
                OutOfMemoryInfo{.requested_bytes = u.bytes,
                                .tier = Tier::Device,
                                .budget_bytes = device_book.budget,
                                .in_use_bytes = device_book.used});
        } catch (...) {
            device_book.used -= u.bytes;
            throw;
        }
    }
}

bool Impl::bring_to_device(Lock& lock, Unit& u, Wait wait) {
    const bool fetch = !u.zero;
    if (fetch && !u.on_host()) {
        ++host_book.stats.misses;
        ++disk_book.stats.hits;
        if (!load_host(lock, u, wait)) return false;
    } else if (fetch) {
        ++host_book.stats.hits;
    }
    Block block = allocate_device(lock, u, wait);
    if (!block) return false;
    const Clock::time_point start = Clock::now();
    std::int64_t moved_ns = 0;
    try {
        Unlocked unlocked(*this, lock);
        if (fetch) {
            upload(u.host.data(), block);
        } else {
            fill_zero(block);
        }
        moved_ns = monitor::now_ns();
    } catch (...) {
        dead_blocks.push_back(std::move(block));  // counted in used until freed
        throw;
    }
    if (fetch) {
        device_book.stats.swap_in_seconds += seconds_since(start);
        device_book.stats.swap_in_bytes += u.bytes;
        ++device_book.stats.swap_in_count;
        report_move(monitor::SwapKind::SwapIn, Tier::Host, Tier::Device, u.bytes, false,
                    std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count(),
                    moved_ns);
        note_thrash(Tier::Device, u);
    }
    land_device(u, std::move(block));
    return true;
}

// --- transfers -------------------------------------------------------------------------------

std::unique_ptr<Queue> Impl::take_queue() {
    {
        std::lock_guard guard(queue_mu);
        if (!queues.empty()) {
            std::unique_ptr<Queue> q = std::move(queues.back());
            queues.pop_back();
            return q;
        }
    }
    return device.create_queue(QueueRole::General);
}

void Impl::give_queue(std::unique_ptr<Queue> q) noexcept {
    std::lock_guard guard(queue_mu);
    if (queues.size() < queues.capacity()) queues.push_back(std::move(q));
    // else: more threads than the pool was sized for moved data at once; q is freed.
}

namespace {
/// Runs `submit` on a pooled queue and waits. A queue whose work failed is drained and
/// dropped, never reused.
template <typename Submit>
void run_transfer(Impl& s, Submit&& submit) {
    std::unique_ptr<Queue> q = s.take_queue();
    try {
        submit(*q);
        q->synchronize();
    } catch (...) {
        try {
            q->synchronize();
        } catch (...) {
            // the failure being propagated already says what went wrong
        }
        throw;
    }
    s.give_queue(std::move(q));
}
}  // namespace

void Impl::upload(const std::byte* src, const Block& dst) {
    run_transfer(*this, [&](Queue& q) { q.upload(src, BufferView(dst)); });
}

void Impl::download(const Block& src, std::byte* dst, std::uint64_t bytes) {
    run_transfer(*this, [&](Queue& q) { q.download(BufferView(src.raw(), 0, bytes), dst); });
}

void Impl::fill_zero(const Block& dst) {
    run_transfer(*this, [&](Queue& q) { q.fill(BufferView(dst), std::byte{0}); });
}

}  // namespace outcore::swap
