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
// fewer than two panels per device. Devices take units as they finish (not
// round-robin), so uneven edge units and slower devices do not stall the end.
//
// Panel reuse (BLASX's tile cache, kept where it pays: the resident panel). A device
// keeps taking units of the panel it holds; only when that panel has none left does it
// take another — an untouched panel first, else the one with the most units left, so no
// device idles while a unit remains. All its units of one visit run in one ops::gemm
// over the panel's window (GemmOptions::next_tiles: the GEMM asks for the next unit
// once no more of its tiles are still to come off the device than it has C slots, so a
// device holds no work another could take sooner; a lone device claims the whole panel
// at once), so the panel's k-chunk slots stay on the device and
// are uploaded once per visit, not once per unit: a split panel costs one upload per
// device that works on it instead of one per piece. That GEMM runs the whole problem's
// tiles (schedule, tile_m/n/k, group), so its slots are those of the plan's own panel (no
// memory beyond what one device's plan holds, checked against each device's own budget) and
// every C tile is computed exactly as on one device: C is bit for bit the single-device
// result with GemmOptions::one_call_per_chunk (which these runs set: a window's first and
// last tiles are not the problem's, so the first-chunk pieces and the last tile's drain
// parts, which may sum in another order, are left out). A device whose budget cannot hold
// those tiles runs each unit as its own GEMM, planned for that unit alone (as without
// reuse). DeviceShare::runs counts the GEMMs (for panel plans, each uploads its panel once;
// square-tile plans have no resident panel and gain only the bit-exact tiles).
//
// Each GEMM has its device's own plan, budget (GemmOptions::budget_bytes, or each
// device's recommended working set), queues, heap and staging (pinned buffers and slot
// memory kept per device across its units; GemmOptions::staging_cache and device_cache
// are not used). Units cut at panel
// boundaries move no more bytes than one device would.
//
// Every device plans the problem before any starts, so one that cannot run it (a type
// its kernels lack, a budget below the minimum) fails before anything is written. Every
// element of C is written exactly once, by the unit that owns it (a unit is claimed by
// one device only). The first failure (a device error, OutOfMemory, an I/O error) stops
// the other devices after their current unit and is rethrown, after a log line naming
// the device; C then holds only whole, correct C tiles (each is written after its last
// k-chunk), though a failed unit may be partly written: with β ≠ 0 in place (c_in is
// C's memory) those tiles already hold the result, so such a run cannot simply be
// repeated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "outcore/ops/gemm.hpp"

namespace outcore::ops {

/// What one device did in a gemm_on_devices run.
struct DeviceShare {
    std::string device;       ///< DeviceInfo::id(): "cuda:1"
    std::uint64_t units = 0;  ///< work units it ran
    /// GEMM calls it ran them in: one per unit, or one per panel visit when it keeps
    /// the panel resident across units (for panel plans each call uploads its panel
    /// once; square-tile plans upload no panel).
    std::uint64_t runs = 0;
    std::uint64_t bytes_moved = 0;        ///< uploaded + downloaded over its units
    std::uint64_t peak_device_bytes = 0;  ///< the largest peak of its runs
    std::uint64_t budget_bytes = 0;
    /// Wall time inside its GEMM calls (planning included), less the time it waited
    /// there for the other devices' first claims. It includes the waits for its next
    /// unit to be due (its last tiles are still on the device then).
    double busy_seconds = 0;
    /// Its queues' busy times summed over its units (tile::PipelineStats).
    double upload_busy_seconds = 0, compute_busy_seconds = 0, download_busy_seconds = 0;
    /// Transfer time hidden behind compute, as a fraction of upload + download busy time.
    double hidden_transfer_fraction = 1.0;

    /// Adds one run's report (GemmReport or FilterReport) that covered `unit_count` units.
    template <typename Report>
    void add(const Report& r, std::uint64_t unit_count = 1) {
        const double transfer = r.upload_busy_seconds + r.download_busy_seconds;
        const double before = upload_busy_seconds + download_busy_seconds;
        hidden_transfer_fraction =
            before + transfer > 0
                ? (hidden_transfer_fraction * before + r.hidden_transfer_fraction * transfer) /
                      (before + transfer)
                : 1.0;
        units += unit_count;
        runs += 1;
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

/// Each device's pinned staging, slot memory and queues (cuBLAS handles and workspaces
/// on CUDA), which gemm_on_devices keeps across a device's units. Passed to it, they
/// are kept across calls too (a benchmark's repetitions), as GemmOptions::staging_cache,
/// device_cache and queue_cache are for one device. Made for one list of devices, in
/// order; used by one call at a time.
class DeviceCaches {
public:
    explicit DeviceCaches(std::span<Device* const> devices);
    DeviceCaches(const DeviceCaches&) = delete;
    DeviceCaches& operator=(const DeviceCaches&) = delete;

    struct Caches {
        explicit Caches(Device& d) : device(&d), staging(d), slots(d), queues(d) {}
        Device* device;
        tile::StagingCache staging;
        alloc::BlockCache slots;
        tile::QueueCache queues;
        /// Points `o`'s staging_cache, device_cache and queue_cache at these.
        void use_in(GemmOptions& o) noexcept {
            o.staging_cache = &staging;
            o.device_cache = &slots;
            o.queue_cache = &queues;
        }
    };
    /// The caches of devices[i].
    [[nodiscard]] Caches& at(std::size_t i) { return *caches_.at(i); }
    [[nodiscard]] std::size_t size() const noexcept { return caches_.size(); }

private:
    std::vector<std::unique_ptr<Caches>> caches_;
};

/// C = α·op(A)·op(B) + β·C over `devices` (at least one; a device listed twice is a
/// UsageError). Options as for ops::gemm (next_tiles and tile_written are not used);
/// `progress` is called once per unit, after every C tile of it is written, with the
/// fraction of units done: on the thread of the device that ran the unit (at its next
/// claim or when its GEMM returns), never concurrently with itself; a throw from it
/// fails the call as a device failure does. Does not commit() the sink.
/// `caches`: kept across calls (made for these devices, in this order; UsageError
/// otherwise); null: made for this call.
MultiGemmReport gemm_on_devices(std::span<Device* const> devices, const io::MatrixSource& a,
                                const io::MatrixSource& b, io::MatrixSink& c, const GemmOptions& options,
                                DeviceCaches* caches = nullptr);

}  // namespace outcore::ops
