// The swap store's background threads: the washer (dirty host units → spill file, a
// bounded batch at a time) and the prefetcher (objects → device, never waiting for
// room). Both follow the locking rules in store_impl.hpp; neither ever waits on `cv`.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/monitor/hooks.hpp"
#include "store_impl.hpp"

namespace outcore::swap {

namespace {
constexpr const char* kComponent = "swap";
/// prefetch(id) requests queued at most; more are dropped (prefetch is a hint).
constexpr std::size_t kMaxQueuedPrefetches = 1024;
}  // namespace

using Impl = detail::StoreImpl;

// --- washer ----------------------------------------------------------------------------------

void Impl::start_washer() {
    washer = std::thread([this] { wash_loop(); });
}

void Impl::want_wash() noexcept {
    if (!spill || options.wash_queue_units == 0 || wash_wanted) return;
    // Wash once the host tier is half full: below that, eviction has room to spare and
    // writing data that may soon be overwritten or erased would only cost disk bandwidth.
    if (host_book.used < host_book.budget / 2) return;
    wash_wanted = true;
    work_cv.notify_all();
}

void Impl::wash_loop() noexcept {
    Lock lock(mu);
    for (;;) {
        work_cv.wait(lock, [this] { return stopping || wash_wanted; });
        if (stopping) break;
        wash_wanted = false;
        wash_busy = true;
        // The bounded queue: the oldest dirty host units, at most wash_queue_units.
        std::vector<std::pair<std::shared_ptr<Object>, Unit*>> batch;
        for (Unit* u : host_lru) {
            if (batch.size() >= options.wash_queue_units) break;
            if (!u->busy && u->host_dirty()) batch.emplace_back(u->object->shared_from_this(), u);
        }
        bool failed = false;
        for (auto& [object, u] : batch) {
            if (stopping) break;
            // Re-check: while we wrote the previous one, this one may have been erased,
            // written to disk by eviction, or taken by another thread.
            if (object->erased || u->busy || !u->host_dirty()) continue;
            BusyScope busy(*this, *u);
            const auto start = std::chrono::steady_clock::now();
            try {
                SpillSlot slot;
                const std::int64_t begin_ns = monitor::now_ns();
                std::int64_t end_ns = 0;
                {
                    Unlocked unlocked(*this, lock);
                    slot = spill->write({u->host.data(), static_cast<std::size_t>(u->bytes)});
                    end_ns = monitor::now_ns();
                }
                monitor::report(monitor::SwapEvent{.kind = monitor::SwapKind::WriteBack,
                                                   .from = Tier::Host,
                                                   .to = Tier::Disk,
                                                   .bytes = u->bytes,
                                                   .dirty = true,
                                                   .begin_ns = begin_ns,
                                                   .end_ns = end_ns});
                const double seconds =
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
                land_disk(*u, slot, seconds);
                host_book.stats.write_back_bytes += u->bytes;
            } catch (const std::exception& e) {
                // The data stays in the host tier (still dirty); eviction will try again
                // and report the error to the request that needs the room.
                ++wash_failures;
                failed = true;
                if (!wash_warned) {
                    wash_warned = true;
                    log::warn(kComponent, "background write-back failed, dirty units stay in host memory: {}",
                              e.what());
                }
                break;
            }
        }
        if (!failed && !stopping && batch.size() >= options.wash_queue_units) wash_wanted = true;
        wash_busy = false;
        cv.notify_all();
    }
}

// --- prefetcher ------------------------------------------------------------------------------

void Impl::prefetch_locked(Lock& /*lock*/, const std::shared_ptr<Object>& object) {
    if (prefetch_queue.size() >= kMaxQueuedPrefetches) return;
    prefetch_queue.push_back(object);
    if (!prefetcher.joinable()) prefetcher = std::thread([this] { prefetch_loop(); });
    work_cv.notify_all();
}

void Impl::prefetch_loop() noexcept {
    Lock lock(mu);
    for (;;) {
        work_cv.wait(lock, [this] { return stopping || !prefetch_queue.empty(); });
        if (stopping) break;
        std::shared_ptr<Object> object = std::move(prefetch_queue.front());
        prefetch_queue.pop_front();
        prefetch_busy = true;
        prefetch_object(lock, object);
        release_lock(lock);  // frees what it evicted from the device, outside the lock
        object.reset();
        lock.lock();
        prefetch_busy = false;
        cv.notify_all();
    }
}

void Impl::prefetch_object(Lock& lock, const std::shared_ptr<Object>& object) noexcept {
    if (object->bytes > device_book.budget) return;
    for (const std::unique_ptr<Unit>& up : object->units) {
        Unit& u = *up;
        if (stopping || object->erased) return;
        if (u.busy) continue;  // someone else is moving it: not ours to wait for
        if (u.on_device()) {
            touch_device(u);
            continue;
        }
        BusyScope busy(*this, u);
        try {
            if (!bring_to_device(lock, u, Wait::No)) {
                ++prefetch_failures;
                return;
            }
            ++prefetch_count;
        } catch (const std::exception& e) {
            ++prefetch_failures;
            log::debug(kComponent, "prefetch of block {} gave up: {}", object->id.value, e.what());
            return;
        }
    }
}

void Impl::advance_order(Lock& lock, BlockId id) {
    if (order.empty()) return;
    const auto first = order.begin() + static_cast<std::ptrdiff_t>(order_pos);
    const auto last = order.begin() + static_cast<std::ptrdiff_t>(std::max(order_queued, order_pos + 1));
    const auto it = std::find(first, std::min(last, order.end()), id);
    if (it == std::min(last, order.end())) return;
    order_pos = static_cast<std::size_t>(it - order.begin()) + 1;
    order_queued = std::max(order_queued, order_pos);
    schedule_order(lock);
}

void Impl::schedule_order(Lock& lock) {
    // Bytes already queued ahead of the consumer.
    std::uint64_t ahead = 0;
    for (std::size_t i = order_pos; i < order_queued; ++i) {
        if (const auto it = objects.find(order[i].value); it != objects.end()) ahead += it->second->bytes;
    }
    while (order_queued < order.size()) {
        const auto it = objects.find(order[order_queued].value);
        if (it == objects.end()) {  // erased since: skip it
            ++order_queued;
            continue;
        }
        const std::uint64_t bytes = it->second->bytes;
        if (order_queued > order_pos && ahead + bytes > device_book.budget / 2) break;
        ahead += bytes;
        prefetch_locked(lock, it->second);
        ++order_queued;
    }
}

void Impl::stop_background() noexcept {
    {
        Lock lock(mu);
        stopping = true;
        prefetch_queue.clear();
    }
    work_cv.notify_all();
    if (washer.joinable()) washer.join();
    if (prefetcher.joinable()) prefetcher.join();
}

}  // namespace outcore::swap
