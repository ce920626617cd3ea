// outcore/monitor/trace_summary.hpp — what a recorded trace says, in numbers: bytes
// and achieved bandwidth per copy direction, the fraction of transfer time hidden
// behind compute, memory peaks per tier against the budget, busy time per track,
// swap traffic and allocation counts; plus binned series for plots. `outcore report`
// prints and plots it.
//
//   monitor::TraceSummary s = monitor::summarize_trace("run.trace.json");
//   fmt::print("h2d {:.1f} GB/s, hidden {:.0f} %\n",
//              s.direction("h2d").busy_bytes_per_second * 1e-9, 100 * s.hidden_transfer_fraction);
//
// The input is the Chrome trace JSON that outcore's recorder writes (docs/observability.md
// has the format): "X" copy events (cat "copy", args bytes and direction), "X" kernel
// events (cat "kernel"), "X" host events (cat "host": a reader's or writer's fill or
// drain, args bytes), swap events (cat "swap"), allocation instants (cat "alloc"),
// "resident bytes" / "budget bytes" counters and thread_name metadata. Anything else
// is counted as unknown and ignored; metadata is optional. The file is parsed once,
// streaming, and only a compact record of each timed event is kept (about 40 bytes per
// event), so traces of hundreds of MB work.
//
// Definitions (the same as tile::PipelineStats, docs/pipeline.md):
//   busy time of a set of events   = length of the union of their intervals
//   transfer = Σ over tracks of the busy time of that track's copy events
//   exposed  = Σ over tracks of |copies of the track \ C|, C = union of all kernels
//   hidden_transfer_fraction = 1 − exposed / transfer   (1 when transfer = 0)
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace outcore::monitor {

/// Copies of one direction ("h2d", "d2h", "d2d", or whatever the trace names).
struct DirectionSummary {
    std::string direction;
    std::uint64_t bytes = 0;
    std::uint64_t count = 0;
    double busy_seconds = 0;                    ///< union of the direction's copy intervals
    double busy_bytes_per_second = 0;           ///< bytes / busy_seconds (0 when never busy)
    double wall_bytes_per_second = 0;           ///< bytes / the trace's wall time
    std::vector<double> bytes_per_second_bins;  ///< per bin; each copy spread evenly over its span
};

/// One track (a queue, a reader or writer thread, "swap", "allocations"), by tid.
struct TrackSummary {
    std::int64_t tid = 0;
    std::string name;                        ///< thread_name metadata, else "tid N"
    std::uint64_t event_count = 0;           ///< X and i events
    double busy_seconds = 0;                 ///< union of its X events
    double busy_fraction = 0;                ///< busy_seconds / wall_seconds
    std::uint64_t bytes = 0;                 ///< args.bytes of its copy and host events
    double busy_bytes_per_second = 0;        ///< bytes / busy_seconds (0 when never busy)
    std::vector<double> busy_fraction_bins;  ///< per bin, in [0, 1]
};

/// A point of a counter series (seconds on the trace's clock).
struct CounterPoint {
    double time_seconds = 0;
    double value = 0;
};

/// Memory of one tier from the "resident bytes" and "budget bytes" counters.
struct TierSummary {
    std::string tier;                ///< "device", "host", "disk", ...
    std::uint64_t peak_bytes = 0;    ///< max of the resident series
    double peak_time_seconds = 0;    ///< when it was first reached
    std::uint64_t budget_bytes = 0;  ///< max of the budget series; 0: none recorded
    std::vector<CounterPoint> resident;
    std::vector<CounterPoint> budget;
};

/// Swap events of one name ("swap_in", "swap_out", "evict", "write_back").
struct SwapSummary {
    std::string name;
    std::uint64_t count = 0;
    std::uint64_t bytes = 0;
};

struct TraceSummary {
    std::string producer;  ///< otherData.producer ("" when absent)
    std::string version;   ///< otherData.version
    std::int64_t trace_format = 0;
    std::uint64_t dropped_events = 0;  ///< otherData.dropped_events: lost by the recorder

    std::uint64_t event_count = 0;          ///< every element of traceEvents
    std::uint64_t unknown_event_count = 0;  ///< ignored: unknown ph or category
    double begin_seconds = 0;               ///< first timed event (metadata excluded)
    double end_seconds = 0;                 ///< last end of a timed event
    double wall_seconds = 0;                ///< end − begin

    std::vector<DirectionSummary> directions;  ///< h2d, d2h, d2d first (even when 0), then others
    std::uint64_t kernel_count = 0;
    double compute_busy_seconds = 0;  ///< union of every kernel event, all tracks
    double transfer_seconds = 0;      ///< see the definitions above
    double exposed_transfer_seconds = 0;
    double hidden_transfer_fraction = 1.0;

    std::vector<TrackSummary> tracks;  ///< by tid
    std::vector<TierSummary> tiers;    ///< device, host, disk first, then others
    std::vector<SwapSummary> swaps;    ///< by name
    std::uint64_t allocation_count = 0;
    std::uint64_t free_count = 0;
    std::uint64_t allocated_bytes = 0;  ///< sum over allocations

    std::size_t bin_count = 0;  ///< bins over [begin, end]; 0 when the trace has no duration
    double bin_seconds = 0;

    /// The summary of `direction`, or an all-zero one.
    [[nodiscard]] DirectionSummary direction(std::string_view direction) const;
    /// The tier named `tier`, or an all-zero one.
    [[nodiscard]] TierSummary tier(std::string_view tier) const;
    /// The swap counts of `name`, or zeros.
    [[nodiscard]] SwapSummary swap(std::string_view name) const;
};

struct SummaryOptions {
    /// Bins for the time series (bandwidth, busy fraction); 0 counts as 1, more than
    /// 1,000,000 is a UsageError.
    std::size_t bins = 100;
};

/// Reads and summarizes a trace file. Throws IoError when it cannot be read, UsageError
/// when it is not a trace (not JSON, no traceEvents), CorruptionError when a trace is
/// truncated or an event it knows has a malformed field (a "dur" that is not a
/// non-negative number); the message names the file and the event index.
[[nodiscard]] TraceSummary summarize_trace(const std::filesystem::path& path,
                                           const SummaryOptions& options = {});

/// The same for trace text in memory (`name` is used in messages).
[[nodiscard]] TraceSummary summarize_trace_text(std::string_view json, const SummaryOptions& options = {},
                                                std::string_view name = "trace");

}  // namespace outcore::monitor
