// The trace recorder behind outcore/monitor/trace.hpp: recording (observer callbacks,
// the counter sampler) and the process-wide trace (start_trace, stop_trace, OUTCORE_TRACE,
// the write at exit). Writing the JSON is in trace_writer.cpp.
#include "outcore/monitor/trace.hpp"

#include <fmt/format.h>
#include <fmt/std.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <system_error>
#include <utility>

#include "environment.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/monitor/snapshot.hpp"
#include "trace_internal.hpp"

namespace outcore::monitor {

namespace {

constexpr const char* kComponent = "trace";
/// The sampler reads snapshot() at most this often.
constexpr auto kCounterInterval = std::chrono::microseconds(50);

}  // namespace

// --- recording ----------------------------------------------------------------------------

TraceRecorder::TraceRecorder(TraceOptions options) : options_(options), start_ns_(now_ns()) {
    names_.emplace_back();
    name_ids_.emplace("", 0);
    sampler_ = std::thread([this] { sample_loop(); });
}

TraceRecorder::~TraceRecorder() {
    {
        std::lock_guard lock(sample_mutex_);
        stopping_ = true;
    }
    sample_cv_.notify_all();
    if (sampler_.joinable()) sampler_.join();
}

bool TraceRecorder::push_locked(const Record& record) noexcept {
    if (records_.size() >= options_.max_events) {
        ++dropped_;
        return false;
    }
    try {
        records_.push_back(record);
    } catch (...) {  // out of host memory: drop, never throw into the layer that reported
        ++dropped_;
        return false;
    }
    return true;
}

std::uint32_t TraceRecorder::intern_locked(std::string_view text) {
    if (const auto it = name_ids_.find(text); it != name_ids_.end()) return it->second;
    const auto id = static_cast<std::uint32_t>(names_.size());
    names_.emplace_back(text);
    name_ids_.emplace(std::string(text), id);
    return id;
}

std::uint32_t TraceRecorder::track_locked(std::uint64_t device_id, std::string_view queue) {
    // A handful of tracks: a scan beats building a key.
    for (std::size_t i = 0; i < tracks_.size(); ++i) {
        if (tracks_[i].device_id == device_id && tracks_[i].queue == queue)
            return static_cast<std::uint32_t>(i);
    }
    tracks_.push_back(TrackKey{device_id, std::string(queue)});
    return static_cast<std::uint32_t>(tracks_.size() - 1);
}

template <class Make>
void TraceRecorder::record(const Make& make) noexcept {
    try {
        std::lock_guard lock(mutex_);
        if (records_.size() >= options_.max_events) {
            ++dropped_;
            return;
        }
        (void)push_locked(make());
    } catch (...) {
        // interning ran out of memory: the event is lost, the run is not
    }
}

void TraceRecorder::on_allocate(const AllocationEvent& event) noexcept {
    record([&] {
        return Record{.begin_ns = event.time_ns,
                      .end_ns = event.time_ns,
                      .a = event.bytes,
                      .name = intern_locked(event.tag),
                      .track = track_locked(detail::kOwnTrack, detail::kAllocationTrack),
                      .type = Type::Allocate,
                      .kind = static_cast<unsigned char>(event.kind)};
    });
    want_counters();
}

void TraceRecorder::on_free(const AllocationEvent& event) noexcept {
    record([&] {
        return Record{.begin_ns = event.time_ns,
                      .end_ns = event.time_ns,
                      .a = event.bytes,
                      .track = track_locked(detail::kOwnTrack, detail::kAllocationTrack),
                      .type = Type::Free,
                      .kind = static_cast<unsigned char>(event.kind)};
    });
    want_counters();
}

void TraceRecorder::on_op(const OpEvent& event) noexcept {
    record([&] {
        return Record{.begin_ns = event.begin_ns,
                      .end_ns = std::max(event.end_ns, event.begin_ns),
                      .a = event.bytes,
                      .name = intern_locked(event.name),
                      .track = track_locked(event.device_id, event.queue),
                      .type = Type::Op,
                      .kind = static_cast<unsigned char>(event.kind)};
    });
}

void TraceRecorder::on_swap(const SwapEvent& event) noexcept {
    record([&] {
        return Record{.begin_ns = event.begin_ns,
                      .end_ns = std::max(event.end_ns, event.begin_ns),
                      .a = event.bytes,
                      .track = track_locked(detail::kOwnTrack, detail::kSwapTrack),
                      .type = Type::Swap,
                      .kind = static_cast<unsigned char>(event.kind),
                      .from = static_cast<unsigned char>(event.from),
                      .to = static_cast<unsigned char>(static_cast<unsigned>(event.to) |
                                                       (event.dirty ? detail::kDirtyBit : 0U))};
    });
    want_counters();
}

std::uint64_t TraceRecorder::event_count() const noexcept {
    std::lock_guard lock(mutex_);
    return records_.size();
}

std::uint64_t TraceRecorder::dropped_events() const noexcept {
    std::lock_guard lock(mutex_);
    return dropped_;
}

// --- counters -----------------------------------------------------------------------------

void TraceRecorder::want_counters() noexcept {
    {
        std::lock_guard lock(sample_mutex_);
        if (pending_) return;
        pending_ = true;
    }
    sample_cv_.notify_all();
}

void TraceRecorder::flush_counters() const noexcept {
    std::unique_lock lock(sample_mutex_);
    sample_cv_.wait(lock, [this] { return (!pending_ && !sampling_) || stopped_; });
}

void TraceRecorder::sample_loop() noexcept {
    std::unique_lock lock(sample_mutex_);
    for (;;) {
        sample_cv_.wait(lock, [this] { return pending_ || stopping_; });
        if (!pending_) break;  // stopping, nothing left to read
        pending_ = false;
        sampling_ = true;
        lock.unlock();
        sample_now();
        lock.lock();
        sampling_ = false;
        sample_cv_.notify_all();
        if (stopping_) continue;  // one last reading if something is pending, then out
        // Throttle: what happens meanwhile is read once, after the pause.
        lock.unlock();
        std::this_thread::sleep_for(kCounterInterval);
        lock.lock();
    }
    stopped_ = true;
    sample_cv_.notify_all();
}

void TraceRecorder::sample_now() noexcept {
    try {
        const Snapshot s = snapshot();
        std::lock_guard lock(mutex_);
        const Record resident{.begin_ns = s.time_ns,
                              .end_ns = s.time_ns,
                              .a = s.device.resident_bytes,
                              .b = s.host.resident_bytes,
                              .c = s.disk.resident_bytes,
                              .type = Type::Resident};
        if (resident.a != last_resident_.a || resident.b != last_resident_.b ||
            resident.c != last_resident_.c || last_resident_.type != Type::Resident) {
            if (push_locked(resident)) last_resident_ = resident;
        }
        const Record budget{.begin_ns = s.time_ns,
                            .end_ns = s.time_ns,
                            .a = s.device.budget_bytes,
                            .b = s.host.budget_bytes,
                            .type = Type::Budget};
        const bool known = budget.a > 0 || budget.b > 0;
        if (known && (budget.a != last_budget_.a || budget.b != last_budget_.b)) {
            if (push_locked(budget)) last_budget_ = budget;
        }
    } catch (...) {
        // a snapshot that cannot be taken is a reading lost, nothing more
    }
}

// --- the process-wide trace -------------------------------------------------------------------

namespace {

struct GlobalTrace {
    std::mutex mutex;
    std::unique_ptr<TraceRecorder> recorder;
    std::unique_ptr<ObserverRegistration> registration;
    std::filesystem::path file;
    std::atomic<bool> active{false};
    bool exit_hook = false;
};

GlobalTrace& global_trace() {
    static GlobalTrace g;
    return g;
}

void write_at_exit() noexcept {
    try {
        if (!tracing()) return;
        const std::filesystem::path file = global_trace().file;
        const std::uint64_t events = stop_trace();
        log::info(kComponent, "wrote {} events to {}", events, file.string());
    } catch (const std::exception& e) {
        log::error(kComponent, "could not write the trace at exit: {}", e.what());
    } catch (...) {
        log::error(kComponent, "could not write the trace at exit");
    }
}

}  // namespace

void start_trace(const std::filesystem::path& file, TraceOptions options) {
    GlobalTrace& g = global_trace();
    std::lock_guard lock(g.mutex);
    if (g.recorder) {
        throw UsageError(kComponent, fmt::format("a trace is already being recorded (to {}); stop it first",
                                                 g.file.string()));
    }
    if (file.empty()) throw UsageError(kComponent, "start_trace: empty file name");
    if (options.max_events == 0) throw UsageError(kComponent, "start_trace: max_events must be > 0");
    detail::check_writable(file);  // IoError now rather than at exit
    if (!g.exit_hook) {
        // The registries the exit hook uses must outlive it: statics made before an
        // atexit registration are destroyed after its handler runs.
        (void)detail::observed();
        (void)snapshot();
        if (std::atexit(write_at_exit) != 0) {
            throw InternalError(kComponent, "std::atexit refused the trace's exit hook");
        }
        g.exit_hook = true;
    }
    g.recorder = std::make_unique<TraceRecorder>(options);
    try {
        g.registration = std::make_unique<ObserverRegistration>(*g.recorder);
    } catch (...) {
        g.recorder.reset();
        throw;
    }
    g.file = file;
    g.active.store(true, std::memory_order_release);
}

std::uint64_t stop_trace() {
    GlobalTrace& g = global_trace();
    std::unique_ptr<TraceRecorder> recorder;
    std::filesystem::path file;
    {
        std::lock_guard lock(g.mutex);
        if (!g.recorder) return 0;
        g.registration.reset();  // no callback runs after this
        recorder = std::move(g.recorder);
        file = std::move(g.file);
        g.file.clear();
        g.active.store(false, std::memory_order_release);
    }
    return recorder->write(file);
}

bool tracing() noexcept { return global_trace().active.load(std::memory_order_acquire); }

namespace detail {

void start_trace_from_environment() {
    const char* file = std::getenv("OUTCORE_TRACE");
    if (file == nullptr || *file == '\0') return;
    start_trace(file);
}

}  // namespace detail
}  // namespace outcore::monitor
