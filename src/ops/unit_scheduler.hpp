// ops/unit_scheduler.hpp — hands the work units of one operation to several devices
// (private to outcore; used by gemm_on_devices and filter_on_devices).
//
//   run_units(devices, units.size(), [&](std::size_t device, std::size_t unit) { ... });
//
// One thread per device takes the next unit from a shared counter as soon as it is
// free (dynamic, not round-robin: uneven units and slower devices do not stall the
// end). The first exception stops every thread after its current unit, is logged with
// the device that threw it, and is rethrown once all threads have joined.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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

/// Cuts `extent` into about `pieces` runs whose lengths are multiples of `tile` (the
/// last may be shorter): (begin, length) pairs, at least one when extent > 0.
[[nodiscard]] std::vector<std::pair<std::uint64_t, std::uint64_t>> cut(std::uint64_t extent,
                                                                       std::uint64_t tile,
                                                                       std::uint64_t pieces);

}  // namespace outcore::ops::detail
