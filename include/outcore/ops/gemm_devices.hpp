// outcore/ops/gemm_devices.hpp — one out-of-core GEMM over several devices, each
// under its own budget.
//
//   std::vector<std::unique_ptr<Device>> owned = ...;   // e.g. cuda:0, cuda:1
//   std::vector<Device*> devices = {owned[0].get(), owned[1].get()};
//   ops::MultiGemmReport r = ops::gemm_on_devices(devices, a, b, c, {.budget_bytes = 8 * kGiB});
//   r.devices[1].units;   // how many work units device 1 took
//
// C is cut into work units along the plan's panels (the panels a single device would
// walk: rows of C tiles for A-panel and square-tile plans, columns for B-panel
// plans), each panel split further along the other dimension only when there are
// fewer than two panels per device. Devices take units from one shared queue as they
// finish (not round-robin), so uneven edge units and slower devices do not stall the
// end. Each unit is a GEMM on windows of A, B and C run by ops::gemm on that device —
// its own plan, budget (GemmOptions::budget_bytes, or each device's recommended
// working set), queues, heap and staging (pinned buffers kept per device across its
// units; GemmOptions::staging_cache is not used) — so inside a unit the resident panel is
// reused exactly as on one device, and units cut at panel boundaries move no more
// bytes than one device would.
//
// Every device plans the problem before any starts, so one that cannot run it (a type
// its kernels lack, a budget below the minimum) fails before anything is written.
// Every element of C is written exactly once, by the unit that owns it. The first
// failure (a device error, OutOfMemory, an I/O error) stops the other devices after
// their current unit and is rethrown, after a log line naming the device; C then holds
// only whole, correct C tiles (each is written after its last k-chunk), though a failed
// unit may be partly written: with β ≠ 0 in place (c_in is C's memory) those tiles
// already hold the result, so such a run cannot simply be repeated.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "outcore/ops/gemm.hpp"

namespace outcore::ops {

/// What one device did in a gemm_on_devices run.
struct DeviceShare {
    std::string device;                   ///< DeviceInfo::id(): "cuda:1"
    std::uint64_t units = 0;              ///< work units it ran
    std::uint64_t bytes_moved = 0;        ///< uploaded + downloaded over its units
    std::uint64_t peak_device_bytes = 0;  ///< the largest peak of its units
    std::uint64_t budget_bytes = 0;
    double busy_seconds = 0;  ///< wall time inside its units
    /// Its queues' busy times summed over its units (tile::PipelineStats).
    double upload_busy_seconds = 0, compute_busy_seconds = 0, download_busy_seconds = 0;
    /// Transfer time hidden behind compute, as a fraction of upload + download busy time.
    double hidden_transfer_fraction = 1.0;

    /// Adds one unit's report (GemmReport or FilterReport).
    template <typename Report>
    void add(const Report& r) {
        const double transfer = r.upload_busy_seconds + r.download_busy_seconds;
        const double before = upload_busy_seconds + download_busy_seconds;
        hidden_transfer_fraction =
            before + transfer > 0
                ? (hidden_transfer_fraction * before + r.hidden_transfer_fraction * transfer) /
                      (before + transfer)
                : 1.0;
        units += 1;
        bytes_moved += r.bytes_moved;
        peak_device_bytes = peak_device_bytes > r.peak_device_bytes ? peak_device_bytes : r.peak_device_bytes;
        budget_bytes = r.budget_bytes;
        busy_seconds += r.seconds;
        upload_busy_seconds += r.upload_busy_seconds;
        compute_busy_seconds += r.compute_busy_seconds;
        download_busy_seconds += r.download_busy_seconds;
    }
};

struct MultiGemmReport {
    double seconds = 0;  ///< the whole call
    double tflops = 0;   ///< 2·m·n·k / seconds / 1e12
    std::uint64_t bytes_moved = 0;
    std::uint64_t units = 0;
    tile::GemmPlan plan{};  ///< the whole problem's plan on the first device (sets the units)
    std::vector<DeviceShare> devices;
};

/// C = α·op(A)·op(B) + β·C over `devices` (at least one; a device listed twice is a
/// UsageError). Options as for ops::gemm; `progress` is called with the fraction of
/// units done. Does not commit() the sink.
MultiGemmReport gemm_on_devices(std::span<Device* const> devices, const io::MatrixSource& a,
                                const io::MatrixSource& b, io::MatrixSink& c, const GemmOptions& options);

}  // namespace outcore::ops
