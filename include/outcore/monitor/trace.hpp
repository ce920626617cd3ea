// outcore/monitor/trace.hpp — the timeline trace: every allocation, queue operation
// (upload, kernel, download) and swap move of the process, with memory counters,
// written as Chrome Trace Event JSON for ui.perfetto.dev and chrome://tracing
// (docs/tracing.md has the format and what each event means).
//
//   monitor::start_trace("run.trace.json");      // or OUTCORE_TRACE=run.trace.json
//   ops::gemm(device, a, b, c, {});
//   std::uint64_t n = monitor::stop_trace();     // writes the file; else written at exit
//
//   // or a recorder of one's own, in memory:
//   monitor::TraceRecorder rec;
//   monitor::ObserverRegistration reg(rec);
//   ...
//   std::string json = rec.to_json();
//
// The recorder keeps compact records in memory (56 bytes an event) up to
// TraceOptions::max_events; later events are dropped and counted (otherData.
// dropped_events). Memory counters ("resident bytes", "budget bytes") come from
// monitor::snapshot(), read by a sampler thread of the recorder after allocations,
// frees and swap moves, at most once per 50 µs (the last value is always written).
// Each queue name gets its own track; events of one track never overlap (a begin
// before the previous end of its track is moved to that end).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "outcore/monitor/hooks.hpp"

namespace outcore::monitor {

struct TraceOptions {
    /// Events kept in memory (counters included); later ones are dropped and counted.
    std::size_t max_events = 4'000'000;
};

/// Records the hooks it observes; register it (ObserverRegistration) to start.
/// Thread-safe: events may arrive from any thread while another thread writes.
class TraceRecorder final : public Observer {
public:
    explicit TraceRecorder(TraceOptions options = {});
    /// Stops the sampler thread. Unregister the recorder first. Never throws.
    ~TraceRecorder() override;
    TraceRecorder(const TraceRecorder&) = delete;
    TraceRecorder& operator=(const TraceRecorder&) = delete;

    void on_allocate(const AllocationEvent& event) noexcept override;
    void on_free(const AllocationEvent& event) noexcept override;
    void on_op(const OpEvent& event) noexcept override;
    void on_swap(const SwapEvent& event) noexcept override;

    /// Waits for the sampler to take a pending counter reading (tests; write does it too).
    void flush_counters() const noexcept;

    /// Events kept so far (counters included, metadata not).
    [[nodiscard]] std::uint64_t event_count() const noexcept;
    /// Events dropped because max_events was reached.
    [[nodiscard]] std::uint64_t dropped_events() const noexcept;

    /// The whole trace as one JSON string (small traces, tests).
    [[nodiscard]] std::string to_json() const;
    /// Streams the trace to `file` through a temporary file in the same folder, renamed
    /// over `file` once complete. Returns the events written (metadata not counted).
    /// Throws IoError.
    std::uint64_t write(const std::filesystem::path& file) const;

private:
    enum class Type : unsigned char { Op, Swap, Allocate, Free, Resident, Budget };
    /// One event; field meaning depends on type (see trace.cpp).
    struct Record {
        std::int64_t begin_ns = 0;
        std::int64_t end_ns = 0;
        std::uint64_t a = 0;      // bytes; resident device; budget device
        std::uint64_t b = 0;      // resident host; budget host
        std::uint64_t c = 0;      // resident disk
        std::uint32_t name = 0;   // interned: kernel name, allocation tag
        std::uint32_t track = 0;  // index into tracks_
        Type type = Type::Op;
        unsigned char kind = 0;  // OpKind, SwapKind, MemoryKind
        unsigned char from = 0;  // Tier
        unsigned char to = 0;    // Tier; swap: dirty in bit 7
    };
    struct TrackKey {
        std::uint64_t device_id = 0;
        std::string queue;
    };
    class Sink;

    bool push_locked(const Record& record) noexcept;
    /// Takes the lock; drops (and counts) the event when the recorder is full, else
    /// records make() — built only then, as it interns names and finds tracks.
    template <class Make>
    void record(const Make& make) noexcept;
    std::uint32_t intern_locked(std::string_view text);
    std::uint32_t track_locked(std::uint64_t device_id, std::string_view queue);
    void want_counters() noexcept;
    void sample_loop() noexcept;
    void sample_now() noexcept;
    std::uint64_t write_to(Sink& sink) const;

    TraceOptions options_;
    std::int64_t start_ns_;

    mutable std::mutex mutex_;
    std::deque<Record> records_;
    std::vector<std::string> names_;  // interned strings; names_[0] == ""
    std::map<std::string, std::uint32_t, std::less<>> name_ids_;
    std::vector<TrackKey> tracks_;  // tid = index + 1
    std::uint64_t dropped_ = 0;
    // Last counter values written, to skip repeats.
    Record last_resident_{};
    Record last_budget_{};

    // The sampler: reads snapshot() when `pending_` is set, at most once per 50 µs.
    mutable std::mutex sample_mutex_;
    mutable std::condition_variable sample_cv_;
    bool pending_ = false;
    bool sampling_ = false;
    bool stopping_ = false;
    bool stopped_ = false;
    std::thread sampler_;  // last: starts once everything above exists
};

/// Starts the process-wide trace, written to `file` by stop_trace() or at exit.
/// Throws UsageError when a trace is already running and IoError when `file` cannot
/// be created.
void start_trace(const std::filesystem::path& file, TraceOptions options = {});
/// Stops the process-wide trace and writes its file; returns the events written, 0
/// when no trace was running. Throws IoError (the trace is stopped either way).
std::uint64_t stop_trace();
/// True while the process-wide trace runs.
[[nodiscard]] bool tracing() noexcept;

}  // namespace outcore::monitor
