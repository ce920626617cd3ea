#include "ops/unit_scheduler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"

namespace outcore::ops::detail {

void check_devices(std::span<Device* const> devices, const char* component) {
    if (devices.empty()) throw UsageError(component, "no devices to run on");
    std::set<std::string> seen;  // by id: two objects for one GPU would each take a whole budget
    for (const Device* d : devices) {
        if (d == nullptr) throw UsageError(component, "a null device");
        if (!seen.insert(d->info().id()).second) {
            throw UsageError(component, fmt::format("device {} is listed twice", d->info().id()));
        }
    }
}

std::vector<DeviceShare> empty_shares(std::span<Device* const> devices) {
    std::vector<DeviceShare> shares(devices.size());
    for (std::size_t d = 0; d < devices.size(); ++d) shares[d].device = devices[d]->info().id();
    return shares;
}

std::uint64_t bytes_moved(std::span<const DeviceShare> shares) noexcept {
    std::uint64_t sum = 0;
    for (const DeviceShare& s : shares) sum += s.bytes_moved;
    return sum;
}

namespace {

/// One thread per device running `loop(device_index)`; the first exception calls
/// `stop` (so the other loops end after their current unit), is logged with its
/// device and is rethrown once every thread has joined.
void run_threads(std::span<Device* const> devices, const char* component,
                 const std::function<void(std::size_t)>& loop, const std::function<void()>& stop) {
    std::mutex mutex;
    std::exception_ptr failure;
    auto worker = [&](std::size_t d) {
        try {
            loop(d);
        } catch (...) {
            stop();
            std::lock_guard lock(mutex);
            if (failure) return;
            failure = std::current_exception();
            try {  // logging must not end the thread with an exception
                const std::string id = devices[d]->info().id();
                try {
                    std::rethrow_exception(failure);
                } catch (const std::exception& e) {
                    log::error(component, "device {} failed; stopping the others: {}", id, e.what());
                } catch (...) {
                    log::error(component, "device {} failed; stopping the others", id);
                }
            } catch (...) {}
        }
    };
    std::vector<std::thread> threads;
    threads.reserve(devices.size());
    try {
        for (std::size_t d = 0; d < devices.size(); ++d) threads.emplace_back(worker, d);
    } catch (...) {  // a thread could not start: stop and join those that did
        stop();
        for (std::thread& t : threads) t.join();
        throw;
    }
    for (std::thread& t : threads) t.join();
    if (failure) std::rethrow_exception(failure);
}

}  // namespace

void run_units(std::span<Device* const> devices, std::size_t units, const char* component,
               const std::function<void(std::size_t, std::size_t)>& run) {
    std::atomic<std::size_t> next{0};
    std::atomic<bool> stop{false};
    run_threads(
        devices, component,
        [&](std::size_t d) {
            while (!stop.load()) {
                const std::size_t u = next.fetch_add(1);
                if (u >= units) return;
                run(d, u);
            }
        },
        [&] { stop.store(true); });
}

PanelQueue::PanelQueue(std::span<const std::size_t> units_per_panel, std::size_t devices)
    : devices_(devices) {
    std::size_t first = 0;
    for (const std::size_t n : units_per_panel) {
        next_.push_back(first);
        first += n;
        end_.push_back(first);
    }
    visited_.assign(next_.size(), false);
}

void PanelQueue::wait_for_everyone(std::unique_lock<std::mutex>& lock) {
    arrived_cv_.wait(lock, [&] { return stopped_ || arrived_ >= devices_; });
}

std::optional<PanelQueue::Visit> PanelQueue::first_visit() {
    std::optional<Visit> v;
    {
        std::lock_guard lock(mutex_);
        v = visit_locked();
        ++arrived_;
    }
    arrived_cv_.notify_all();
    return v;
}

std::optional<PanelQueue::Visit> PanelQueue::visit() {
    std::unique_lock lock(mutex_);
    wait_for_everyone(lock);
    return visit_locked();
}

std::optional<PanelQueue::Visit> PanelQueue::visit_locked() {
    if (stopped_) return std::nullopt;
    // An untouched panel costs no upload that one device would not make too; joining
    // another device's panel loads it a second time, so it comes last, where the
    // alternative is idling.
    const std::size_t none = next_.size();
    auto left = [&](std::size_t p) { return end_[p] - next_[p]; };
    std::size_t pick = none;
    for (std::size_t p = 0; p < next_.size() && pick == none; ++p) {
        if (!visited_[p] && left(p) > 0) pick = p;
    }
    if (pick == none) {
        for (std::size_t p = 0; p < next_.size(); ++p) {
            if (left(p) > 0 && (pick == none || left(p) > left(pick))) pick = p;
        }
    }
    if (pick == none) return std::nullopt;
    visited_[pick] = true;
    return Visit{.panel = pick, .unit = next_[pick]++};
}

std::optional<std::size_t> PanelQueue::next(std::size_t panel) {
    std::unique_lock lock(mutex_);
    wait_for_everyone(lock);
    if (stopped_ || next_[panel] >= end_[panel]) return std::nullopt;
    return next_[panel]++;
}

void PanelQueue::stop() noexcept {
    {
        std::lock_guard lock(mutex_);
        stopped_ = true;
    }
    arrived_cv_.notify_all();
}

void run_panels(std::span<Device* const> devices, PanelQueue& queue, const char* component,
                const std::function<void(std::size_t, PanelQueue::Visit)>& run) {
    if (queue.devices() != devices.size()) {
        throw UsageError(component, fmt::format("a panel queue for {} devices run on {}", queue.devices(),
                                                devices.size()));
    }
    run_threads(
        devices, component,
        [&](std::size_t d) {
            for (std::optional<PanelQueue::Visit> v = queue.first_visit(); v; v = queue.visit()) run(d, *v);
        },
        [&] { queue.stop(); });
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> cut(std::uint64_t extent, std::uint64_t tile,
                                                         std::uint64_t pieces) {
    tile = std::max<std::uint64_t>(tile, 1);
    const std::uint64_t tiles = (extent + tile - 1) / tile;
    pieces = std::clamp<std::uint64_t>(pieces, 1, std::max<std::uint64_t>(tiles, 1));
    std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
    std::uint64_t begin_tile = 0;
    for (std::uint64_t p = 0; p < pieces; ++p) {
        const std::uint64_t end_tile = tiles * (p + 1) / pieces;
        const std::uint64_t begin = begin_tile * tile;
        const std::uint64_t end = std::min(extent, end_tile * tile);
        if (end > begin) out.emplace_back(begin, end - begin);
        begin_tile = end_tile;
    }
    return out;
}

}  // namespace outcore::ops::detail
