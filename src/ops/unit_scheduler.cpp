#include "ops/unit_scheduler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
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

void run_units(std::span<Device* const> devices, std::size_t units, const char* component,
               const std::function<void(std::size_t, std::size_t)>& run) {
    std::atomic<std::size_t> next{0};
    std::atomic<bool> stop{false};
    std::mutex mutex;
    std::exception_ptr failure;
    auto worker = [&](std::size_t d) {
        try {
            while (!stop.load()) {
                const std::size_t u = next.fetch_add(1);
                if (u >= units) return;
                run(d, u);
            }
        } catch (...) {
            stop.store(true);
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
        stop.store(true);
        for (std::thread& t : threads) t.join();
        throw;
    }
    for (std::thread& t : threads) t.join();
    if (failure) std::rethrow_exception(failure);
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
