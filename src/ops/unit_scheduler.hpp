// ops/unit_scheduler.hpp — hands the work units of one operation to several devices
// (private to outcore; used by gemm_on_devices and filter_on_devices).
//
//   run_units(devices, units.size(), [&](std::size_t device, std::size_t unit) { ... });
//
// One thread per device takes the next unit from a shared counter as soon as it is
// free (dynamic, not round-robin: uneven units and slower devices do not stall the
// end). The first exception stops every thread after its current unit, is logged with
// the device that threw it, and is rethrown once all threads have joined.
//
// Units that share an input (the pieces of one GEMM panel) go through a PanelQueue
// instead: a device keeps taking units of the panel it holds, and only when that panel
// has none left takes another — an untouched panel first, else the panel with the most
// units left (so no device idles while a unit remains). run_panels runs one call per
// (device, panel) visit; inside it the device claims that panel's units one by one.
// Every device takes its first unit before any takes a second: a device runs through
// the units of its panel without a break, so one that started a moment earlier (a
// thread scheduled first) would otherwise take a panel's every unit.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "outcore/device/device.hpp"
#include "outcore/ops/gemm_devices.hpp"

namespace outcore::ops::detail {

/// UsageError for no devices, a null one or one listed twice (the same DeviceInfo::id()).
void check_devices(std::span<Device* const> devices, const char* component);

/// One empty DeviceShare per device, named by its id.
[[nodiscard]] std::vector<DeviceShare> empty_shares(std::span<Device* const> devices);
/// The bytes the shares moved, together.
[[nodiscard]] std::uint64_t bytes_moved(std::span<const DeviceShare> shares) noexcept;

/// Runs `run(device_index, unit_index)` for every unit exactly once (see above).
void run_units(std::span<Device* const> devices, std::size_t units, const char* component,
               const std::function<void(std::size_t, std::size_t)>& run);

/// Units grouped by the panel they share, handed out with affinity (see above).
/// Thread-safe.
class PanelQueue {
public:
    /// Panel p owns units [first[p], first[p + 1]) (`units_per_panel` sizes, in order),
    /// shared by `devices` devices.
    PanelQueue(std::span<const std::size_t> units_per_panel, std::size_t devices);

    struct Visit {
        std::size_t panel = 0;
        std::size_t unit = 0;  ///< its first unit, already claimed
    };
    /// A device's first visit (each device calls it once, first): as visit(), but
    /// never waits.
    [[nodiscard]] std::optional<Visit> first_visit();
    /// A panel for a free device, with a unit of it claimed: an untouched panel (the
    /// first), else the one with the most units left (ties: the first); nullopt once
    /// every unit is taken or after stop(). Waits until every device made its first
    /// visit.
    [[nodiscard]] std::optional<Visit> visit();
    /// The next unit of `panel`; nullopt once it has none left or after stop(). Waits
    /// as visit() does.
    [[nodiscard]] std::optional<std::size_t> next(std::size_t panel);
    /// Hands out nothing more (and ends every wait).
    void stop() noexcept;
    /// The devices it was made for.
    [[nodiscard]] std::size_t devices() const noexcept { return devices_; }

private:
    [[nodiscard]] std::optional<Visit> visit_locked();
    void wait_for_everyone(std::unique_lock<std::mutex>& lock);

    std::mutex mutex_;
    std::condition_variable arrived_cv_;
    std::vector<std::size_t> next_, end_;  // per panel: its next unit, one past its last
    std::vector<bool> visited_;
    std::size_t devices_ = 0;
    std::size_t arrived_ = 0;  // devices that made their first visit
    bool stopped_ = false;
};

/// Runs `run(device_index, visit)` on one thread per device for every visit `queue`
/// hands out; `run` claims the panel's further units with queue.next(). The queue must
/// have been made for devices.size() devices (else UsageError: its first-claim barrier
/// would wait for devices that never come, or let a device start before the others).
/// Failures as for run_units (the queue is stopped, so the others end after their
/// current unit).
void run_panels(std::span<Device* const> devices, PanelQueue& queue, const char* component,
                const std::function<void(std::size_t, PanelQueue::Visit)>& run);

/// Cuts `extent` into about `pieces` runs whose lengths are multiples of `tile` (the
/// last may be shorter): (begin, length) pairs, at least one when extent > 0.
[[nodiscard]] std::vector<std::pair<std::uint64_t, std::uint64_t>> cut(std::uint64_t extent,
                                                                       std::uint64_t tile,
                                                                       std::uint64_t pieces);

}  // namespace outcore::ops::detail
