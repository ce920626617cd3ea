// TieredStore's public API and the unit-table bookkeeping it shares with
// store_tiers.cpp and store_background.cpp (see store_impl.hpp for the locking rules).
#include "outcore/swap/store.hpp"

#include <fmt/format.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/core/size.hpp"
#include "store_impl.hpp"

namespace outcore::swap {

namespace {
constexpr const char* kComponent = "swap";
constexpr std::uint64_t kMinUnitBytes = 1ULL << 20;
constexpr std::uint64_t kMaxUnitBytes = 64ULL << 20;
/// Idle queues kept for reuse; more threads moving data at once make extra ones.
constexpr std::size_t kPooledQueues = 16;

std::uint64_t physical_memory_bytes() noexcept {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page_bytes = ::sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page_bytes <= 0) return 0;
    return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_bytes);
}

/// Checks the options and fills in the defaults (budgets of 0).
StoreOptions resolve(const Device& device, StoreOptions o) {
    if (o.unit_bytes < kMinUnitBytes || o.unit_bytes > kMaxUnitBytes) {
        throw UsageError(kComponent,
                         fmt::format("unit of {} outside 1 MiB – 64 MiB", format_size(o.unit_bytes)));
    }
    if (o.device_budget_bytes == 0) o.device_budget_bytes = device.info().recommended_working_set_bytes;
    if (o.host_budget_bytes == 0)
        o.host_budget_bytes = std::max<std::uint64_t>(physical_memory_bytes() / 4, 1);
    if (o.device_budget_bytes == 0)
        throw UsageError(kComponent, "the device reports no working set: set a budget");
    o.pinned_pool_bytes = std::min(o.pinned_pool_bytes, o.host_budget_bytes);
    return o;
}

std::uint32_t pinned_slots(const StoreOptions& o) {
    return static_cast<std::uint32_t>(
        std::min<std::uint64_t>(o.pinned_pool_bytes / o.unit_bytes, UINT32_MAX));
}

std::uint64_t unit_count_of(std::uint64_t bytes, std::uint64_t unit_bytes) {
    return bytes / unit_bytes + (bytes % unit_bytes != 0 ? 1 : 0);
}

/// A new object's units (zeros, no copies anywhere).
std::shared_ptr<detail::Object> make_object(BlockId id, std::uint64_t bytes, std::uint64_t unit_bytes) {
    auto object = std::make_shared<detail::Object>();
    object->id = id;
    object->bytes = bytes;
    const std::uint64_t n = unit_count_of(bytes, unit_bytes);
    object->units.reserve(n);
    for (std::uint64_t i = 0; i < n; ++i) {
        auto u = std::make_unique<detail::Unit>();
        u->object = object.get();
        u->index = static_cast<std::uint32_t>(i);
        u->bytes = std::min(unit_bytes, bytes - i * unit_bytes);
        object->units.push_back(std::move(u));
    }
    return object;
}
}  // namespace

using Impl = detail::StoreImpl;

namespace {
/// The lock of one public call; frees the device blocks it evicted outside the lock
/// as the call returns or throws.
struct Session {
    explicit Session(Impl& store) : s(store), lock(store.mu) {}
    ~Session() { s.release_lock(lock); }
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;
    Impl& s;
    Impl::Lock lock;
};
}  // namespace

// --- Impl: construction and the unit table ------------------------------------------------

Impl::StoreImpl(Device& d, const StoreOptions& o)
    : device(d),
      options(o),
      device_alloc(d, alloc::BudgetOptions{.limit_bytes = o.device_budget_bytes, .kind = MemoryKind::Device}),
      pinned(d, o.unit_bytes, pinned_slots(o)) {
    device_book.budget = o.device_budget_bytes;
    host_book.budget = o.host_budget_bytes;
    disk_book.budget = o.disk_limit_bytes;
    device_book.stats.budget_bytes = device_book.budget;
    if (!o.spill_dir.empty()) {
        spill = std::make_unique<SpillFile>(SpillOptions{.dir = o.spill_dir,
                                                         .slot_bytes = o.unit_bytes,
                                                         .limit_bytes = o.disk_limit_bytes,
                                                         .direct = o.direct_io,
                                                         .io = o.file_io});
    }
    queues.reserve(kPooledQueues);
    if (spill && o.wash_queue_units > 0) start_washer();
    // Device memory and pinned slots are the Device's allocations, which it adds to the
    // snapshot itself, and device_alloc (an alloc::Budget) adds the device budget: the
    // store adds only what nobody else sees, so nothing counts twice.
    snapshot_source = monitor::Source([this](monitor::Snapshot& snap) {
        const Lock lock(mu);
        snap.host.resident_bytes += host_pageable_bytes;
        snap.host.peak_bytes += host_pageable_peak;
        snap.host.budget_bytes += host_book.budget;
        snap.disk.resident_bytes += disk_book.resident;
        snap.disk.peak_bytes += disk_book.stats.peak_bytes;
        snap.disk.budget_bytes += disk_book.budget;
        // In: host → device and disk → host. Out: device → host and everything written
        // to the spill file (evictions and the washer).
        snap.swap_in_bytes += device_book.stats.swap_in_bytes + host_book.stats.swap_in_bytes;
        snap.swap_in_count += device_book.stats.swap_in_count + host_book.stats.swap_in_count;
        snap.swap_out_bytes += device_book.stats.swap_out_bytes + disk_book.stats.swap_in_bytes;
        snap.swap_out_count += device_book.stats.swap_out_count + disk_book.stats.swap_in_count;
        snap.evictions += device_evictions + host_evictions;
        snap.thrash_count += thrash_count;
        snap.oom_retries += oom_retries;
        snap.checksum_failures += checksum_failures;
    });
}

Impl::~StoreImpl() = default;

std::shared_ptr<detail::Object> Impl::find(BlockId id) const {
    const auto it = objects.find(id.value);
    if (it == objects.end()) throw UsageError(kComponent, fmt::format("unknown block id {}", id.value));
    return it->second;
}

void Impl::wait_idle(Lock& lock, const Object& object, Unit& u) {
    cv.wait(lock, [&] { return !u.busy; });
    if (object.erased)
        throw UsageError(kComponent, fmt::format("block {} was erased meanwhile", object.id.value));
}

void Impl::pin(Unit& u) {
    if (u.pins++ != 0) return;
    if (u.device_lru) {
        device_lru.erase(*u.device_lru);
        u.device_lru.reset();
    }
    ++pinned_units;
    pinned_bytes += u.bytes;
}

void Impl::unpin(Unit& u) noexcept {
    if (--u.pins != 0) return;
    u.device_lru = device_lru.insert(device_lru.end(), &u);
    --pinned_units;
    pinned_bytes -= u.bytes;
}

void Impl::touch_device(Unit& u) noexcept {
    if (u.device_lru) device_lru.splice(device_lru.end(), device_lru, *u.device_lru);
}

void Impl::touch_host(Unit& u) noexcept {
    if (u.host_lru) host_lru.splice(host_lru.end(), host_lru, *u.host_lru);
}

void Impl::land_device(Unit& u, Block block) {
    u.device = std::move(block);
    note_resident(device_book, static_cast<std::int64_t>(u.bytes));
    if (u.pins == 0) u.device_lru = device_lru.insert(device_lru.end(), &u);
}

void Impl::land_host(Unit& u, HostBuffer buffer) {
    u.host = std::move(buffer);
    note_resident(host_book, static_cast<std::int64_t>(u.bytes));
    if (!u.host.pinned()) {
        host_pageable_bytes += u.bytes;
        host_pageable_peak = std::max(host_pageable_peak, host_pageable_bytes);
    }
    u.host_lru = host_lru.insert(host_lru.end(), &u);
}

void Impl::land_disk(Unit& u, const SpillSlot& slot, double seconds) {
    u.slot = slot;
    note_resident(disk_book, static_cast<std::int64_t>(u.bytes));
    disk_book.stats.swap_in_bytes += u.bytes;
    ++disk_book.stats.swap_in_count;
    disk_book.stats.swap_in_seconds += seconds;
}

void Impl::drop_device(Unit& u) noexcept {
    if (u.device_lru) {
        device_lru.erase(*u.device_lru);
        u.device_lru.reset();
    }
    // Still counted in device_book.used until an Unlocked scope frees it: the
    // alloc::Budget only sees the bytes come back then.
    dead_blocks.push_back(std::move(u.device));
    note_resident(device_book, -static_cast<std::int64_t>(u.bytes));
}

void Impl::drop_host(Unit& u) noexcept {
    if (u.host_lru) {
        host_lru.erase(*u.host_lru);
        u.host_lru.reset();
    }
    if (!u.host.pinned()) host_pageable_bytes -= u.bytes;
    u.host.reset();
    host_book.used -= u.bytes;
    note_resident(host_book, -static_cast<std::int64_t>(u.bytes));
}

void Impl::drop_disk(Unit& u) noexcept {
    spill->free(u.slot);
    u.slot = SpillSlot{};
    note_resident(disk_book, -static_cast<std::int64_t>(u.bytes));
}

void Impl::make_device_only(Unit& u) noexcept {
    if (u.on_host()) drop_host(u);
    if (u.on_disk()) drop_disk(u);
    u.zero = false;
}

void Impl::drop_object(Object& object) noexcept {
    for (const std::unique_ptr<Unit>& up : object.units) {
        Unit& u = *up;
        if (u.pins != 0) {
            pinned_units -= 1;
            pinned_bytes -= u.bytes;
            u.pins = 0;
        }
        if (u.on_device()) drop_device(u);
        if (u.on_host()) drop_host(u);
        if (u.on_disk()) drop_disk(u);
    }
    unit_count -= object.units.size();
    object.erased = true;
    cv.notify_all();
}

// --- Pin ----------------------------------------------------------------------------------------

Pin::Pin(Pin&& other) noexcept
    : store_(std::exchange(other.store_, nullptr)),
      id_(other.id_),
      views_(std::move(other.views_)),
      bytes_(std::exchange(other.bytes_, 0)) {}

Pin& Pin::operator=(Pin&& other) noexcept {
    if (this != &other) {
        release();
        store_ = std::exchange(other.store_, nullptr);
        id_ = other.id_;
        views_ = std::move(other.views_);
        bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
}

void Pin::release() noexcept {
    if (store_ == nullptr) return;
    std::exchange(store_, nullptr)->release(id_);
    views_.clear();
    bytes_ = 0;
}

const TierStats& StoreStats::of(Tier tier) const noexcept {
    switch (tier) {
        case Tier::Device: return device;
        case Tier::HostPinned:
        case Tier::Host: return host;
        case Tier::Disk: return disk;
    }
    return host;
}

// --- TieredStore ----------------------------------------------------------------------------------

TieredStore::TieredStore(Device& device, StoreOptions options)
    : device_(&device),
      options_(resolve(device, std::move(options))),
      impl_(std::make_unique<Impl>(device, options_)) {}

TieredStore::~TieredStore() {
    impl_->stop_background();
    Impl::Lock lock(impl_->mu);
    if (impl_->pinned_units != 0) {
        log::error(kComponent, "store destroyed with {} units still pinned: their Pins now dangle",
                   impl_->pinned_units);
    }
    for (auto& [id, object] : impl_->objects) impl_->drop_object(*object);
    impl_->objects.clear();
    impl_->release_lock(lock);
}

BlockId TieredStore::put(std::span<const std::byte> bytes) {
    if (bytes.empty()) throw UsageError(kComponent, "put of an empty object");
    Impl& s = *impl_;
    Session op(s);
    Impl::Lock& lock = op.lock;
    const BlockId id{s.next_id++};
    std::shared_ptr<detail::Object> object = make_object(id, bytes.size(), options_.unit_bytes);
    s.unit_count += object->units.size();
    try {
        for (const std::unique_ptr<detail::Unit>& up : object->units) {
            detail::Unit& u = *up;
            // Busy while it is filled: nobody knows the id yet, but eviction sees the unit.
            Impl::BusyScope busy(s, u);
            s.make_room(lock, Tier::Host, u.bytes, Impl::Wait::Yes);
            detail::HostBuffer buffer;
            try {
                Impl::Unlocked unlocked(s, lock);
                buffer = detail::HostBuffer::allocate(s.pinned, u.bytes);
                std::memcpy(buffer.data(), bytes.data() + u.index * options_.unit_bytes, u.bytes);
            } catch (...) {
                s.host_book.used -= u.bytes;
                throw;
            }
            u.zero = false;
            s.land_host(u, std::move(buffer));
            s.want_wash();
        }
    } catch (...) {
        // The washer may be writing one of these units down: wait for it (W1), then forget them.
        for (const std::unique_ptr<detail::Unit>& up : object->units)
            s.cv.wait(lock, [&] { return !up->busy; });
        s.drop_object(*object);
        throw;
    }
    s.objects.emplace(id.value, std::move(object));
    return id;
}

BlockId TieredStore::create(std::uint64_t bytes) {
    if (bytes == 0) throw UsageError(kComponent, "create of an empty object");
    Impl& s = *impl_;
    // Refuse what could never be stored (and would need absurd unit tables): more than
    // every tier together can hold.
    std::uint64_t disk_bytes = options_.disk_limit_bytes;
    if (s.spill && disk_bytes == 0) {
        struct statvfs fs {};
        if (::statvfs(options_.spill_dir.c_str(), &fs) == 0) {
            disk_bytes = static_cast<std::uint64_t>(fs.f_bavail) * static_cast<std::uint64_t>(fs.f_frsize);
        }
    }
    if (!s.spill) disk_bytes = 0;
    Impl::Lock lock(s.mu);
    const auto saturating_add = [](std::uint64_t a, std::uint64_t b) {
        return b > UINT64_MAX - a ? UINT64_MAX : a + b;
    };
    const std::uint64_t capacity =
        saturating_add(saturating_add(s.device_book.budget, s.host_book.budget), disk_bytes);
    if (bytes > capacity) {
        throw OutOfMemory(kComponent, "object larger than every tier together",
                          OutOfMemoryInfo{.requested_bytes = bytes,
                                          .tier = s.spill ? Tier::Disk : Tier::Host,
                                          .budget_bytes = capacity});
    }
    const BlockId id{s.next_id++};
    std::shared_ptr<detail::Object> object = make_object(id, bytes, options_.unit_bytes);
    s.unit_count += object->units.size();
    s.objects.emplace(id.value, std::move(object));
    return id;
}

Pin TieredStore::acquire(BlockId id, Access access) {
    Impl& s = *impl_;
    Session op(s);
    Impl::Lock& lock = op.lock;
    const std::shared_ptr<detail::Object> object = s.find(id);
    if (object->bytes > s.device_book.budget) {
        throw OutOfMemory(kComponent, "object larger than the device budget",
                          OutOfMemoryInfo{.requested_bytes = object->bytes,
                                          .tier = Tier::Device,
                                          .budget_bytes = s.device_book.budget,
                                          .in_use_bytes = s.device_book.used});
    }
    s.advance_order(lock, id);
    // Gather: pin every unit that has (or is given) a valid device copy; for Discard,
    // only allocate buffers for the others. Nothing changes a unit's bytes or drops a
    // lower copy until every unit is in hand, so a throw here loses nothing.
    std::vector<detail::Unit*> pinned;
    std::vector<std::pair<detail::Unit*, Block>> fresh;  // Discard: buffers not landed yet
    pinned.reserve(object->units.size());
    auto roll_back = [&]() noexcept {
        for (detail::Unit* u : pinned) s.unpin(*u);
        for (auto& [u, block] : fresh) s.dead_blocks.push_back(std::move(block));
        s.cv.notify_all();
    };
    try {
        for (const std::unique_ptr<detail::Unit>& up : object->units) {
            detail::Unit& u = *up;
            s.wait_idle(lock, *object, u);
            if (u.on_device()) {
                ++s.device_book.stats.hits;
            } else if (access == Access::Discard) {
                ++s.device_book.stats.misses;
                fresh.emplace_back(&u, s.allocate_device(lock, u, Impl::Wait::Yes));
                continue;
            } else {
                ++s.device_book.stats.misses;
                Impl::BusyScope busy(s, u);
                s.bring_to_device(lock, u, Impl::Wait::Yes);
            }
            s.pin(u);
            pinned.push_back(&u);
        }
        // Commit the Discard buffers. While we allocated, another thread may have
        // brought a unit in (ours is then freed) or be moving it (wait, W1: we hold no
        // busy unit).
        while (!fresh.empty()) {
            auto& [u, block] = fresh.back();
            s.wait_idle(lock, *object, *u);
            if (u->on_device()) {
                s.dead_blocks.push_back(std::move(block));
            } else {
                s.land_device(*u, std::move(block));
            }
            s.pin(*u);
            pinned.push_back(u);
            fresh.pop_back();
        }
    } catch (...) {
        roll_back();
        throw;
    }
    if (access != Access::Read) {
        // Write and Discard: the device copy is the one that will change, so the others
        // go. A unit may have become busy while we waited for room (the washer writing
        // its host copy, a read): wait for it (W1: we hold pins, nothing busy). Pinned,
        // it keeps its device copy and gains no other meanwhile.
        for (const std::unique_ptr<detail::Unit>& up : object->units) {
            s.cv.wait(lock, [&] { return !up->busy; });
            s.make_device_only(*up);
        }
    }
    std::vector<BufferView> views;
    views.reserve(object->units.size());
    for (const std::unique_ptr<detail::Unit>& up : object->units) views.emplace_back(up->device.raw());
    return Pin(*this, id, std::move(views), object->bytes);
}

void TieredStore::release(BlockId id) noexcept {
    Impl& s = *impl_;
    const Session op(s);
    const auto it = s.objects.find(id.value);
    if (it == s.objects.end()) {
        log::error(kComponent, "release of block {}, which the store does not know (a bug)", id.value);
        return;
    }
    for (const std::unique_ptr<detail::Unit>& up : it->second->units) s.unpin(*up);
    s.cv.notify_all();
}

void TieredStore::prefetch(BlockId id) {
    Impl& s = *impl_;
    Session op(s);
    Impl::Lock& lock = op.lock;
    s.prefetch_locked(lock, s.find(id));
}

void TieredStore::prefetch(std::span<const BlockId> order) {
    Impl& s = *impl_;
    Session op(s);
    Impl::Lock& lock = op.lock;
    for (const BlockId id : order) (void)s.find(id);
    s.order.assign(order.begin(), order.end());
    s.order_pos = 0;
    s.order_queued = 0;
    s.schedule_order(lock);
}

void TieredStore::read(BlockId id, std::span<std::byte> out) {
    Impl& s = *impl_;
    Session op(s);
    Impl::Lock& lock = op.lock;
    const std::shared_ptr<detail::Object> object = s.find(id);
    if (out.size() != object->bytes) {
        throw UsageError(kComponent, fmt::format("read of block {} ({} bytes) into {} bytes", id.value,
                                                 object->bytes, out.size()));
    }
    for (const std::unique_ptr<detail::Unit>& up : object->units) {
        detail::Unit& u = *up;
        s.wait_idle(lock, *object, u);
        const std::span<std::byte> dst = out.subspan(u.index * options_.unit_bytes, u.bytes);
        Impl::BusyScope busy(s, u);
        if (u.on_host()) {
            ++s.host_book.stats.hits;
            s.touch_host(u);
            Impl::Unlocked unlocked(s, lock);
            std::memcpy(dst.data(), u.host.data(), dst.size());
        } else if (u.on_device()) {
            ++s.device_book.stats.hits;
            s.touch_device(u);
            Impl::Unlocked unlocked(s, lock);
            s.download(u.device, dst.data(), dst.size());
        } else if (u.on_disk()) {
            ++s.disk_book.stats.hits;
            try {
                Impl::Unlocked unlocked(s, lock);
                s.spill->read(u.slot, dst);
            } catch (const CorruptionError&) {
                ++s.checksum_failures;
                throw;
            }
            s.disk_book.stats.swap_out_bytes += u.bytes;
            ++s.disk_book.stats.swap_out_count;
        } else {
            std::memset(dst.data(), 0, dst.size());
        }
    }
}

void TieredStore::write(BlockId id, std::span<const std::byte> in) {
    Impl& s = *impl_;
    Session op(s);
    Impl::Lock& lock = op.lock;
    const std::shared_ptr<detail::Object> object = s.find(id);
    if (in.size() != object->bytes) {
        throw UsageError(kComponent, fmt::format("write of {} bytes to block {} ({} bytes)", in.size(),
                                                 id.value, object->bytes));
    }
    for (const std::unique_ptr<detail::Unit>& up : object->units) {
        detail::Unit& u = *up;
        s.wait_idle(lock, *object, u);
        if (u.pins != 0) {
            throw UsageError(
                kComponent,
                fmt::format("write to block {}, which is pinned (write through the Pin)", id.value));
        }
        const std::span<const std::byte> src = in.subspan(u.index * options_.unit_bytes, u.bytes);
        Impl::BusyScope busy(s, u);
        if (u.on_host()) {
            // In place: a memcpy cannot fail halfway, so the unit is replaced atomically.
            {
                Impl::Unlocked unlocked(s, lock);
                std::memcpy(u.host.data(), src.data(), src.size());
            }
            s.touch_host(u);
        } else {
            s.make_room(lock, Tier::Host, u.bytes, Impl::Wait::Yes);
            detail::HostBuffer buffer;
            try {
                Impl::Unlocked unlocked(s, lock);
                buffer = detail::HostBuffer::allocate(s.pinned, u.bytes);
                std::memcpy(buffer.data(), src.data(), src.size());
            } catch (...) {
                s.host_book.used -= u.bytes;
                throw;
            }
            s.land_host(u, std::move(buffer));
        }
        if (u.on_device()) s.drop_device(u);
        if (u.on_disk()) s.drop_disk(u);
        u.zero = false;
        s.want_wash();
    }
}

void TieredStore::erase(BlockId id) {
    Impl& s = *impl_;
    Session op(s);
    Impl::Lock& lock = op.lock;
    const std::shared_ptr<detail::Object> object = s.find(id);
    for (;;) {
        const auto& units = object->units;
        if (std::any_of(units.begin(), units.end(), [](const auto& u) { return u->pins != 0; })) {
            throw UsageError(kComponent, fmt::format("erase of block {}, which is pinned", id.value));
        }
        const auto busy = std::find_if(units.begin(), units.end(), [](const auto& u) { return u->busy; });
        if (busy == units.end()) break;
        s.cv.wait(lock, [&] { return !(*busy)->busy; });  // W1: we hold nothing busy
        if (object->erased) throw UsageError(kComponent, fmt::format("unknown block id {}", id.value));
    }
    s.objects.erase(id.value);
    s.drop_object(*object);
}

std::uint64_t TieredStore::size(BlockId id) const {
    Impl::Lock lock(impl_->mu);
    return impl_->find(id)->bytes;
}

void TieredStore::set_budget(Tier tier, std::uint64_t bytes) {
    if (tier != Tier::Device && tier != Tier::Host) {
        throw UsageError(kComponent, fmt::format("set_budget of the {} tier (only device and host have one)",
                                                 to_string(tier)));
    }
    if (bytes == 0) throw UsageError(kComponent, fmt::format("a {} budget of 0 bytes", to_string(tier)));
    Impl& s = *impl_;
    Session op(s);
    Impl::Lock& lock = op.lock;
    Impl::Book& b = s.book(tier);
    if (bytes >= b.budget) {
        b.budget = bytes;
        if (tier == Tier::Device) s.device_alloc.set_limit(bytes);
        s.cv.notify_all();
    } else {
        s.shrink(lock, tier, bytes);
    }
}

StoreStats TieredStore::stats() const {
    const Impl& s = *impl_;
    Impl::Lock lock(s.mu);
    StoreStats out;
    out.device = s.device_book.stats;
    out.host = s.host_book.stats;
    out.disk = s.disk_book.stats;
    out.device.resident_bytes = s.device_book.resident;
    out.host.resident_bytes = s.host_book.resident;
    out.disk.resident_bytes = s.disk_book.resident;
    out.device.budget_bytes = s.device_book.budget;
    out.host.budget_bytes = s.host_book.budget;
    out.disk.budget_bytes = s.disk_book.budget;
    out.objects = s.objects.size();
    out.units = s.unit_count;
    out.pinned_units = s.pinned_units;
    out.checksum_failures = s.checksum_failures;
    out.thrash_count = s.thrash_count;
    out.oom_retries = s.oom_retries;
    out.prefetch_count = s.prefetch_count;
    out.prefetch_failures = s.prefetch_failures;
    out.wash_failures = s.wash_failures;
    return out;
}

void TieredStore::validate() const {
    const Impl& s = *impl_;
    Impl::Lock lock(s.mu);
    auto fail = [](std::string_view what) {
        throw InternalError(kComponent, fmt::format("validate: {}", what));
    };
    std::uint64_t units = 0, pinned = 0, pinned_bytes = 0, on_device_lru = 0, on_host_lru = 0;
    std::uint64_t device_bytes = 0, host_bytes = 0, disk_bytes = 0;
    for (const auto& [value, object] : s.objects) {
        if (object->erased || object->id.value != value) fail("an erased or misfiled object in the table");
        std::uint64_t object_bytes = 0;
        for (const std::unique_ptr<detail::Unit>& up : object->units) {
            const detail::Unit& u = *up;
            ++units;
            object_bytes += u.bytes;
            if (u.object != object.get()) fail("a unit points at another object");
            if (u.bytes == 0 || u.bytes > s.options.unit_bytes) fail("a unit size outside (0, unit_bytes]");
            if (u.zero && (u.on_host() || u.on_disk())) fail("a zero unit with a host or disk copy");
            if (u.device_lru.has_value() != (u.on_device() && u.pins == 0))
                fail("device LRU membership differs from 'device copy and unpinned'");
            if (u.host_lru.has_value() != u.on_host()) fail("host LRU membership differs from 'host copy'");
            if (u.on_device() && u.device.bytes() != u.bytes) fail("a device copy of the wrong size");
            if (u.on_disk() && u.slot.bytes != u.bytes) fail("a disk copy of the wrong size");
            if (u.on_disk() && !s.spill) fail("a disk copy without a disk tier");
            if (u.pins != 0) {
                ++pinned;
                pinned_bytes += u.bytes;
                if (!u.on_device()) fail("a pinned unit without a device copy");
            }
            on_device_lru += u.device_lru.has_value() ? 1 : 0;
            on_host_lru += u.host_lru.has_value() ? 1 : 0;
            device_bytes += u.on_device() ? u.bytes : 0;
            host_bytes += u.on_host() ? u.bytes : 0;
            disk_bytes += u.on_disk() ? u.bytes : 0;
        }
        if (object_bytes != object->bytes) fail("unit sizes do not add up to the object's size");
    }
    if (units != s.unit_count) fail("unit count differs from the table");
    if (pinned != s.pinned_units || pinned_bytes != s.pinned_bytes)
        fail("pinned counts differ from the table");
    if (on_device_lru != s.device_lru.size() || on_host_lru != s.host_lru.size())
        fail("an LRU list holds units the table does not");
    if (device_bytes != s.device_book.resident) fail("device resident bytes differ from the table");
    if (host_bytes != s.host_book.resident) fail("host resident bytes differ from the table");
    if (disk_bytes != s.disk_book.resident) fail("disk resident bytes differ from the table");
    std::uint64_t dead_bytes = 0;
    for (const Block& b : s.dead_blocks) dead_bytes += b.bytes();
    if (s.device_book.used < s.device_book.resident + dead_bytes || s.host_book.used < s.host_book.resident)
        fail("a tier uses less than it holds");
    if (s.transfers_active == 0) {
        // Quiescent: nothing reserved in flight, and every tier within its budget.
        if (s.device_book.used != s.device_book.resident + dead_bytes ||
            s.host_book.used != s.host_book.resident)
            fail("bytes reserved with no transfer in flight");
        if (s.device_book.used > s.device_book.budget || s.host_book.used > s.host_book.budget)
            fail("a tier over its budget");
    }
}

void TieredStore::drain() {
    Impl& s = *impl_;
    Session op(s);
    Impl::Lock& lock = op.lock;
    s.cv.wait(lock,
              [&] { return s.prefetch_queue.empty() && !s.prefetch_busy && !s.wash_wanted && !s.wash_busy; });
}

}  // namespace outcore::swap
