// outcore/monitor/reporter.hpp — the periodic reporter: a background thread that, every
// period, takes monitor::snapshot() and writes one line (or one JSON record) saying
// where the bytes are: device usage against its budget and peak, the host and disk
// tiers, swap rates since the previous record, evictions, thrash and OOM retries. It
// feeds the growth and thrash watchdogs (watchdog.hpp) and logs their warnings through
// outcore/core/log.hpp (JSON records carry them too).
//
//   monitor::ReporterOptions options;
//   options.period = std::chrono::seconds(5);          // to stderr, as lines
//   {
//       monitor::Reporter reporter(options);
//       run_the_work();
//   }   // stopped at once, without waiting out the period
//
//   // outcore: report: device 1.2 GiB / 2 GiB (60.0%), peak 1.5 GiB | host 3 GiB / 8 GiB
//   //   (37.5%), peak 3.3 GiB | disk 10 GiB, peak 10 GiB | swap in 120 MiB/s, out 80 MiB/s |
//   //   42 live allocations | evictions 10, thrash 0, OOM retries 0, checksum failures 0
//
// The first record comes one period after construction. Rates are the difference of
// two snapshots over the time between them; a counter that went down (its source was
// destroyed) gives a rate of 0 rather than a wrap.
//
// Users usually start it without code: OUTCORE_REPORT_MS=N (every N ms, to stderr),
// OUTCORE_REPORT_JSON=1 (JSON lines instead), or the CLI's --report-every MS and
// --report-json. docs/observability.md describes both formats.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "outcore/monitor/snapshot.hpp"
#include "outcore/monitor/watchdog.hpp"

namespace outcore::monitor {

struct ReporterOptions {
    std::chrono::milliseconds period{1000};
    /// One JSON object per line (format_json) instead of a line for people.
    bool json = false;
    /// Where records go; not owned, must stay open while the Reporter lives.
    std::FILE* out = stderr;
    GrowthWatchdogOptions growth;
    ThrashWatchdogOptions thrash;
};

/// Writes a record every period on its own thread (RAII). Not copyable or movable.
class Reporter {
public:
    /// Starts the thread. UsageError for a period ≤ 0, a null `out`, or bad watchdog
    /// options; std::system_error if no thread can be started.
    explicit Reporter(ReporterOptions options = {});
    /// Stops the thread promptly (wakes it; does not wait out the period). noexcept.
    ~Reporter();
    Reporter(const Reporter&) = delete;
    Reporter& operator=(const Reporter&) = delete;

    /// Records written so far (a failed write or fflush does not count). Thread-safe.
    [[nodiscard]] std::uint64_t records() const;

    /// The line for `now` (no trailing newline); `previous` (may be null: totals
    /// instead of rates) is the snapshot of the record before. Pure.
    [[nodiscard]] static std::string format_line(const Snapshot& now, const Snapshot* previous);
    /// The JSON record for `now` (one line, no trailing newline): every Snapshot field,
    /// "interval_s" and the rates "swap_in_bytes_per_s" / "swap_out_bytes_per_s" (null
    /// without `previous`), and "warnings": [{"kind", "message"}...]. Pure.
    [[nodiscard]] static std::string format_json(const Snapshot& now, const Snapshot* previous,
                                                 std::span<const WatchdogWarning> warnings = {});

private:
    void run() noexcept;

    const ReporterOptions options_;
    GrowthWatchdog growth_;
    ThrashWatchdog thrash_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;      // guarded by mutex_
    std::uint64_t records_ = 0;  // guarded by mutex_
    std::thread thread_;         // last: started once everything above exists
};

}  // namespace outcore::monitor
