// src/tile/pipeline.cpp — the Pipeline (outcore/tile/pipeline.hpp). About 850 lines
// on purpose: construction, per-slot dependency tracking, the upload FIFO, compute
// lanes, downloads and the busy-time statistics share one private state and one
// ordering contract, and splitting them would spread that contract over files.
#include "outcore/tile/pipeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <utility>

#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/core/size.hpp"
#include "outcore/monitor/device_time.hpp"
#include "outcore/monitor/hooks.hpp"
#include "outcore/monitor/intervals.hpp"

namespace outcore::tile {

namespace {

constexpr const char* kComponent = "pipeline";
// Staging buffers start on page boundaries: DMA engines and memcpy both like it.
constexpr std::uint64_t kStagingAlignment = 4096;

/// Calls `f` on scope exit; for cleanup that must run on every path of a task.
template <typename F>
class ScopeExit {
public:
    explicit ScopeExit(F f) : f_(std::move(f)) {}
    ScopeExit(const ScopeExit&) = delete;
    ScopeExit& operator=(const ScopeExit&) = delete;
    ~ScopeExit() { f_(); }

private:
    F f_;
};

bool writes_to(Access a) noexcept { return a != Access::Read; }

// The trace track of the HostStage thread running the calling task ("read 0", ...);
// empty outside one.
thread_local std::string_view tls_stage_track;

}  // namespace

// --- HostStage: a few threads running tasks in FIFO order -------------------------

class Pipeline::HostStage {
public:
    /// Threads named "<track> 0", "<track> 1", ... in traces.
    HostStage(Pipeline& owner, std::uint32_t thread_count, std::string_view track) : owner_(owner) {
        threads_.reserve(thread_count);
        tracks_.reserve(thread_count);
        for (std::uint32_t i = 0; i < thread_count; ++i) tracks_.push_back(fmt::format("{} {}", track, i));
        try {
            for (std::uint32_t i = 0; i < thread_count; ++i) threads_.emplace_back([this, i] { run(i); });
        } catch (...) {
            stop();
            join();
            throw;
        }
    }
    HostStage(const HostStage&) = delete;
    HostStage& operator=(const HostStage&) = delete;
    ~HostStage() {
        stop();
        join();
    }

    void submit(std::function<void()> task) {
        {
            std::lock_guard lock(mutex_);
            if (stopping_) return;
            tasks_.push_back(std::move(task));
        }
        cv_.notify_one();
    }

    /// Drops tasks not yet started and wakes every thread; running tasks finish.
    void stop() noexcept {
        std::deque<std::function<void()>> dropped;
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
            dropped.swap(tasks_);
        }
        cv_.notify_all();
    }

private:
    void join() noexcept {
        for (std::thread& t : threads_) {
            if (t.joinable()) t.join();
        }
        threads_.clear();
    }

    void run(std::uint32_t index) noexcept {
        tls_stage_track = tracks_[index];
        for (;;) {
            std::function<void()> task;
            {
                std::unique_lock lock(mutex_);
                cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
                if (stopping_) return;
                task = std::move(tasks_.front());
                tasks_.pop_front();
            }
            try {
                task();
            } catch (...) {
                owner_.record_error(std::current_exception());
            }
        }
    }

    Pipeline& owner_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> tasks_;
    bool stopping_ = false;
    std::vector<std::string> tracks_;  // outlive the threads: events name them
    std::vector<std::thread> threads_;
};

// --- construction ---------------------------------------------------------------

Pipeline::Pipeline(Device& device, PipelineOptions options)
    : device_(&device),
      options_(std::move(options)),
      budget_(options_.device_cache != nullptr ? static_cast<Allocator&>(*options_.device_cache)
                                               : static_cast<Allocator&>(device),
              alloc::BudgetOptions{.limit_bytes = options_.budget_bytes, .kind = MemoryKind::Device}),
      statistics_(budget_) {
    const auto made = std::chrono::steady_clock::now();
    if (options_.budget_bytes == 0) throw UsageError(kComponent, "the device budget must be at least 1 byte");
    if (options_.compute_lanes < 1 || options_.compute_lanes > 2) {
        throw UsageError(kComponent, fmt::format("compute_lanes {} is not 1 or 2", options_.compute_lanes));
    }
    for (const StagingSpec* s : {&options_.upload_staging, &options_.download_staging}) {
        if (s->count > 0 && s->bytes == 0) throw UsageError(kComponent, "a staging ring of 0-byte buffers");
    }
    if (options_.upload_staging.count > 0 && options_.reader_threads == 0) {
        throw UsageError(kComponent, "upload staging needs at least one reader thread");
    }
    if (options_.download_staging.count > 0 && options_.writer_threads == 0) {
        throw UsageError(kComponent, "download staging needs at least one writer thread");
    }
    const DeviceInfo& info = device.info();
    const std::uint64_t align = info.min_offset_alignment;
    std::uint64_t total = 0;
    for (const SlotSpec& s : options_.slots) {
        if (s.bytes == 0) throw UsageError(kComponent, fmt::format("slot '{}' has 0 bytes", s.tag));
        total = checked_add(total, checked_align_up(s.bytes, align, kComponent), kComponent);
    }

    QueueCache fresh(device);  // without a cache: queues made here, not kept
    QueueCache& queues = options_.queue_cache != nullptr ? *options_.queue_cache : fresh;
    if (&queues.device() != &device) throw UsageError(kComponent, "the queue cache is another device's");
    queues_[kUpload] = queues.take(QueueRole::Upload);
    std::vector<std::unique_ptr<Queue>> lanes = queues.take(QueueRole::Compute, options_.compute_lanes);
    queues_[kCompute] = std::move(lanes.front());
    if (lanes.size() == 2) queues_[kCompute2] = std::move(lanes.back());
    queues_[kDownload] = queues.take(QueueRole::Download);

    if (total > 0) {
        // One native block for every slot when the device allows, so the footprint is
        // exactly the sum of the slots; the Budget below the heap refuses it if that
        // is over the budget.
        heap_.emplace(statistics_, align,
                      alloc::HeapOptions{.kind = MemoryKind::Device,
                                         .block_bytes = total,
                                         .never_grow = true,
                                         .tag = "pipeline.slots"});
        if (total <= info.max_allocation_bytes) {
            heap_->reserve(total);
        } else {
            for (const SlotSpec& s : options_.slots)
                heap_->reserve(checked_align_up(s.bytes, align, kComponent));
        }
        // Largest first, so the exact-fit placements are the small ones at the end.
        std::vector<std::size_t> order(options_.slots.size());
        std::iota(order.begin(), order.end(), std::size_t{0});
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
            return options_.slots[a].bytes > options_.slots[b].bytes;
        });
        slot_blocks_.resize(options_.slots.size());
        for (const std::size_t i : order) {
            slot_blocks_[i] = heap_->allocate({.bytes = options_.slots[i].bytes,
                                               .kind = MemoryKind::Device,
                                               .alignment = 0,
                                               .tag = options_.slots[i].tag});
        }
    }
    slots_.reserve(options_.slots.size());
    tracks_.resize(options_.slots.size());
    for (std::size_t i = 0; i < options_.slots.size(); ++i) {
        slots_.push_back(Slot{.view = BufferView(slot_blocks_[i]),
                              .track = static_cast<std::uint32_t>(i),
                              .parent = UINT32_MAX});
    }

    auto make_ring = [&](const StagingSpec& spec, std::vector<Block>& buffers,
                         std::vector<std::unique_ptr<Event>>& events, std::string_view tag) {
        if (spec.count == 0) return;
        if (options_.staging_cache != nullptr) {
            buffers = options_.staging_cache->take(spec.bytes, spec.count);
        } else {
            for (std::uint32_t i = 0; i < spec.count; ++i) {
                buffers.push_back(statistics_.allocate({.bytes = spec.bytes,
                                                        .kind = MemoryKind::HostPinned,
                                                        .alignment = kStagingAlignment,
                                                        .tag = tag}));
            }
        }
        for (std::uint32_t i = 0; i < spec.count; ++i) events.push_back(device.create_event());
    };
    make_ring(options_.upload_staging, up_staging_, up_events_, "pipeline.staging.up");
    make_ring(options_.download_staging, down_staging_, down_events_, "pipeline.staging.down");
    for (std::uint32_t i = 0; i < options_.upload_staging.count; ++i) up_free_.push_back(i);
    up_ready_.assign(options_.upload_staging.count, 0);
    for (std::uint32_t i = 0; i < options_.download_staging.count; ++i) down_free_.push_back(i);

    if (options_.upload_staging.count > 0)
        readers_ = std::make_unique<HostStage>(*this, options_.reader_threads, "read");
    if (options_.download_staging.count > 0) {
        writers_ = std::make_unique<HostStage>(*this, options_.writer_threads, "write");
    }
    start_ = std::chrono::steady_clock::now();
    log::debug(kComponent, "made in {:.2f} ms ({} bytes of slots)",
               std::chrono::duration<double, std::milli>(start_ - made).count(), total);
}

Pipeline::~Pipeline() {
    // Threads first stop taking tasks; in-flight device work then finishes (a task
    // waiting on an event of it can return), and only then are the threads joined
    // and the memory freed, in reverse order of the members.
    if (readers_) readers_->stop();
    if (writers_) writers_->stop();
    bool reusable = !failed();  // every queue synchronized without a failure
    for (const std::unique_ptr<Queue>& q : queues_) {
        if (!q) continue;
        try {
            q->synchronize();
        } catch (...) {
            // Already recorded, or the run is being abandoned: nothing left to report to.
            reusable = false;
        }
    }
    readers_.reset();
    writers_.reset();
    if (options_.staging_cache != nullptr) {
        options_.staging_cache->give_back(up_staging_);
        options_.staging_cache->give_back(down_staging_);
    }
    // None go back after a failure anywhere in the run (a queue that failed skips later
    // work); the compute lanes go back as the set they came as.
    if (options_.queue_cache != nullptr && reusable && !failed()) {
        options_.queue_cache->give_back(std::move(queues_[kUpload]));
        options_.queue_cache->give_back(std::move(queues_[kDownload]));
        std::vector<std::unique_ptr<Queue>> lanes;
        for (const std::size_t i : {kCompute, kCompute2})
            if (queues_[i]) lanes.push_back(std::move(queues_[i]));
        options_.queue_cache->give_back(std::move(lanes));
    }
    if (!finished_ && started_ && !failed()) {
        log::debug(kComponent, "pipeline destroyed before finish(): unfinished work abandoned");
    }
}

// --- slots -----------------------------------------------------------------------

const Pipeline::Slot& Pipeline::slot_of(SlotId id, const char* what) const {
    if (id.index >= slots_.size()) {
        throw UsageError(kComponent,
                         fmt::format("{}: slot {} does not exist ({} slots)", what, id.index, slots_.size()));
    }
    const Slot& s = slots_[id.index];
    if (tracks_[s.track].split) {
        throw UsageError(kComponent,
                         fmt::format("{}: slot {} was split into regions; use the regions", what, id.index));
    }
    return s;
}

BufferView Pipeline::checked_range(SlotId id, std::uint64_t offset, std::uint64_t bytes,
                                   const char* what) const {
    const Slot& s = slot_of(id, what);
    if (bytes == 0 || offset > s.view.bytes || bytes > s.view.bytes - offset) {
        throw UsageError(kComponent, fmt::format("{}: range [{}, +{}) outside slot {} of {} bytes", what,
                                                 offset, bytes, id.index, s.view.bytes));
    }
    return s.view.sub(offset, bytes);
}

SlotId Pipeline::region(SlotId parent, std::uint64_t offset, std::uint64_t bytes) {
    if (started_) throw UsageError(kComponent, "region: slots can only be split before the first operation");
    if (parent.index >= slots_.size()) throw UsageError(kComponent, "region: no such slot");
    const Slot p = slots_[parent.index];
    if (bytes == 0 || offset > p.view.bytes || bytes > p.view.bytes - offset) {
        throw UsageError(kComponent, fmt::format("region: [{}, +{}) outside a slot of {} bytes", offset,
                                                 bytes, p.view.bytes));
    }
    for (const Slot& s : slots_) {
        if (s.parent != parent.index) continue;
        const std::uint64_t s_begin = s.view.offset - p.view.offset;
        if (s_begin < offset + bytes && offset < s_begin + s.view.bytes) {
            throw UsageError(kComponent, fmt::format("region: [{}, +{}) overlaps another region of slot {}",
                                                     offset, bytes, parent.index));
        }
    }
    tracks_[p.track].split = true;
    tracks_.emplace_back();
    slots_.push_back(Slot{.view = p.view.sub(offset, bytes),
                          .track = static_cast<std::uint32_t>(tracks_.size() - 1),
                          .parent = parent.index});
    return SlotId{static_cast<std::uint32_t>(slots_.size() - 1)};
}

SlotId Pipeline::alias(SlotId parent, std::uint64_t offset, std::uint64_t bytes) {
    const Slot p = slot_of(parent, "alias");
    if (bytes == 0 || offset > p.view.bytes || bytes > p.view.bytes - offset) {
        throw UsageError(kComponent, fmt::format("alias: [{}, +{}) outside a slot of {} bytes", offset, bytes,
                                                 p.view.bytes));
    }
    slots_.push_back(Slot{.view = p.view.sub(offset, bytes), .track = p.track, .parent = UINT32_MAX});
    return SlotId{static_cast<std::uint32_t>(slots_.size() - 1)};
}

BufferView Pipeline::view(SlotId slot) const { return slot_of(slot, "view").view; }

// --- errors ----------------------------------------------------------------------

void Pipeline::record_error(std::exception_ptr error) noexcept {
    {
        std::lock_guard lock(host_mutex_);
        if (!first_error_) first_error_ = std::move(error);
        failed_.store(true, std::memory_order_release);
    }
    host_cv_.notify_all();
}

void Pipeline::rethrow_first_error() const {
    std::exception_ptr e;
    {
        std::lock_guard lock(host_mutex_);
        e = first_error_;
    }
    if (!e) throw InternalError(kComponent, "failed without an error");
    std::rethrow_exception(e);
}

void Pipeline::check_usable(const char* what) const {
    if (finished_) throw UsageError(kComponent, fmt::format("{} after finish()", what));
    if (failed()) rethrow_first_error();
}

// --- dependency tracking ---------------------------------------------------------

void Pipeline::wait_hazards(unsigned queue, std::uint32_t track, Access access) {
    Track& t = tracks_[track];
    for (unsigned p = 0; p < kQueueCount; ++p) {
        if (p == queue) continue;  // a queue runs its own work in order
        // Reads wait for other queues' writes; writes also for their reads.
        const std::uint64_t latest = writes_to(access) ? t.access_seq[p] : t.write_seq[p];
        if (latest <= t.seen[queue][p]) continue;
        queues_[queue]->wait(*t.event[p]);
        t.seen[queue][p] = t.access_seq[p];  // the wait covers every access recorded so far
    }
}

void Pipeline::note_access(unsigned queue, std::uint32_t track, Access access) {
    Track& t = tracks_[track];
    if (!t.event[queue]) t.event[queue] = device_->create_event();
    queues_[queue]->record(*t.event[queue]);
    const std::uint64_t seq = ++seq_;
    t.access_seq[queue] = seq;
    if (writes_to(access)) t.write_seq[queue] = seq;
}

std::int64_t Pipeline::now_ns() const noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_)
        .count();
}

std::int64_t Pipeline::epoch_ns(std::int64_t t) const noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(start_.time_since_epoch()).count() + t;
}

void Pipeline::report_host(monitor::OpKind kind, std::uint64_t bytes, std::int64_t begin_ns,
                           std::int64_t end_ns) const noexcept {
    if (!monitor::observed() || tls_stage_track.empty()) return;
    monitor::report(monitor::OpEvent{.kind = kind,
                                     .queue = tls_stage_track,
                                     .name = kind == monitor::OpKind::HostRead ? "read" : "write",
                                     .bytes = bytes,
                                     .device_id = device_->id(),
                                     .begin_ns = epoch_ns(begin_ns),
                                     .end_ns = epoch_ns(end_ns)});
}

Pipeline::Interval* Pipeline::begin_busy(unsigned queue) {
    // Devices whose queues time their own work (CUDA events) report it themselves.
    const bool trace = monitor::observed() && !monitor::device_timed(device_->id());
    std::deque<Interval>* list = options_.measure_busy ? &intervals_[queue]
                                 : trace               ? &traced_[queue]
                                                       : nullptr;
    if (list == nullptr) return nullptr;
    Interval* interval = &list->emplace_back();
    queues_[queue]->host_task([this, interval] { interval->begin_ns = now_ns(); });
    return interval;
}

void Pipeline::end_busy(unsigned queue, Interval* interval, std::uint64_t bytes, std::string_view name) {
    if (interval == nullptr) return;
    queues_[queue]->host_task([this, queue, interval, bytes, name] {
        interval->end_ns = now_ns();
        if (!monitor::observed() || monitor::device_timed(device_->id())) return;
        static constexpr std::array<const char*, kQueueCount> kTrack{"upload", "compute", "download",
                                                                     "compute 2"};
        static constexpr std::array<monitor::OpKind, kQueueCount> kKind{
            monitor::OpKind::Upload, monitor::OpKind::Kernel, monitor::OpKind::Download,
            monitor::OpKind::Kernel};
        monitor::report(monitor::OpEvent{.kind = kKind[queue],
                                         .queue = kTrack[queue],
                                         .name = name.empty() ? std::string_view(kTrack[queue]) : name,
                                         .bytes = bytes,
                                         .device_id = device_->id(),
                                         .begin_ns = epoch_ns(interval->begin_ns),
                                         .end_ns = epoch_ns(interval->end_ns)});
    });
}

// --- uploads ---------------------------------------------------------------------

void Pipeline::upload(SlotId dst, std::uint64_t offset, std::uint64_t bytes, FillFunction fill) {
    upload(dst, offset,
           Copy2D{.width_bytes = bytes, .rows = 1, .host_pitch_bytes = bytes, .buffer_pitch_bytes = bytes},
           std::move(fill));
}

void Pipeline::upload(SlotId dst, std::uint64_t offset, const Copy2D& place, FillFunction fill) {
    check_usable("upload");
    try {
        place.validate("upload");
        if (place.host_pitch_bytes != place.width_bytes)
            throw UsageError(kComponent, "upload: a staged place is packed (host pitch = width)");
        const std::uint64_t bytes = place.width_bytes * place.rows;
        (void)checked_range(dst, offset, place.buffer_span_bytes(), "upload");
        if (options_.upload_staging.count == 0)
            throw UsageError(kComponent, "upload: the pipeline has no upload staging");
        if (bytes > options_.upload_staging.bytes) {
            throw UsageError(kComponent, fmt::format("upload of {} bytes exceeds the {}-byte staging buffers",
                                                     bytes, options_.upload_staging.bytes));
        }
        if (!fill) throw UsageError(kComponent, "upload without a fill function");
        started_ = true;
        issue_ready_uploads();
        // Every busy staging buffer belongs to a pending upload: issuing the oldest
        // one frees its buffer for this fill (back-pressure).
        while (up_free_.empty()) issue_front_upload();
        const std::uint32_t index = up_free_.front();
        up_free_.pop_front();
        {
            std::lock_guard lock(host_mutex_);
            up_ready_[index] = 0;
        }
        // One run (or runs laid back to back) is a plain copy; a pitched place a 2-D one.
        const bool pitched = place.rows > 1 && place.buffer_pitch_bytes != place.width_bytes;
        pending_.push_back(PendingUpload{.dst = dst,
                                         .offset = offset,
                                         .bytes = pitched ? place.buffer_span_bytes() : bytes,
                                         .staging = index,
                                         .host = nullptr,
                                         .shape = pitched ? place : Copy2D{}});
        std::byte* data = up_staging_[index].host();
        readers_->submit([this, index, bytes, data, fill = std::move(fill)] {
            if (failed()) return;
            // The upload that last read this buffer must be done before it is refilled.
            up_events_[index]->wait();
            const std::int64_t t0 = now_ns();
            fill(std::span<std::byte>(data, static_cast<std::size_t>(bytes)));
            const std::int64_t t1 = now_ns();
            read_busy_ns_.fetch_add(t1 - t0, std::memory_order_relaxed);
            report_host(monitor::OpKind::HostRead, bytes, t0, t1);
            {
                std::lock_guard lock(host_mutex_);
                up_ready_[index] = 1;
            }
            host_cv_.notify_all();
        });
    } catch (...) {
        record_error(std::current_exception());
        throw;
    }
}

void Pipeline::upload_from(SlotId dst, std::uint64_t offset, const void* host, std::uint64_t bytes) {
    check_usable("upload_from");
    try {
        (void)checked_range(dst, offset, bytes, "upload_from");
        if (host == nullptr) throw UsageError(kComponent, "upload_from a null host pointer");
        started_ = true;
        issue_ready_uploads();
        pending_.push_back(
            PendingUpload{.dst = dst, .offset = offset, .bytes = bytes, .staging = kDirect, .host = host});
    } catch (...) {
        record_error(std::current_exception());
        throw;
    }
}

void Pipeline::upload_2d_from(SlotId dst, std::uint64_t offset, const void* host, const Copy2D& shape) {
    check_usable("upload_2d_from");
    try {
        if (host == nullptr) throw UsageError(kComponent, "upload_2d_from a null host pointer");
        shape.validate("upload_2d_from");
        if (shape.rows == 0 || shape.width_bytes == 0) return;
        (void)checked_range(dst, offset, shape.buffer_span_bytes(), "upload_2d_from");
        started_ = true;
        issue_ready_uploads();
        pending_.push_back(PendingUpload{.dst = dst,
                                         .offset = offset,
                                         .bytes = shape.buffer_span_bytes(),
                                         .staging = kDirect,
                                         .host = host,
                                         .shape = shape});
    } catch (...) {
        record_error(std::current_exception());
        throw;
    }
}

void Pipeline::issue_front_upload() {
    if (pending_.empty()) throw InternalError(kComponent, "no pending upload to issue");
    const PendingUpload u = pending_.front();
    if (u.staging != kDirect) {
        std::unique_lock lock(host_mutex_);
        host_cv_.wait(lock, [&] { return up_ready_[u.staging] != 0 || failed(); });
        if (failed()) {
            lock.unlock();
            rethrow_first_error();
        }
        up_ready_[u.staging] = 0;
    }
    pending_.pop_front();
    const Slot& s = slots_[u.dst.index];
    const BufferView dst = s.view.sub(u.offset, u.bytes);
    Queue& q = *queues_[kUpload];
    wait_hazards(kUpload, s.track, Access::Write);
    const monitor::OpNameScope traced("upload");  // claims the copy for device-timed traces
    Interval* busy = begin_busy(kUpload);
    if (u.staging == kDirect && u.shape.rows > 0) {
        q.upload_2d(u.host, dst, u.shape);
    } else if (u.staging == kDirect) {
        q.upload(u.host, dst);
    } else if (u.shape.rows > 0) {
        q.upload_2d(up_staging_[u.staging].host(), dst, u.shape);
    } else {
        q.copy(BufferView(up_staging_[u.staging], 0, u.bytes), dst);
    }
    end_busy(kUpload, busy, u.shape.rows > 0 ? u.shape.rows * u.shape.width_bytes : u.bytes);
    if (u.staging != kDirect) {
        q.record(*up_events_[u.staging]);
        up_free_.push_back(u.staging);
    }
    note_access(kUpload, s.track, Access::Write);
    stats_.bytes_uploaded += u.shape.rows > 0 ? u.shape.rows * u.shape.width_bytes : u.bytes;
    ++stats_.upload_count;
}

bool Pipeline::front_upload_ready_locked() const {
    return !pending_.empty() &&
           (pending_.front().staging == kDirect || up_ready_[pending_.front().staging] != 0);
}

void Pipeline::issue_ready_uploads() {
    // Uploads go to the device as soon as their fill is done, not when first needed,
    // so a prefetch (the next GEMM panel) really runs ahead. FIFO order is kept:
    // the upload queue then runs in program order.
    for (;;) {
        {
            std::lock_guard lock(host_mutex_);
            if (!front_upload_ready_locked()) return;
        }
        issue_front_upload();
    }
}

void Pipeline::flush_uploads_for(std::span<const SlotAccess> accesses) {
    // Issue, in order, every pending upload up to the last one this operation
    // depends on; later ones keep filling.
    std::size_t last = 0;
    bool any = false;
    for (std::size_t i = 0; i < pending_.size(); ++i) {
        const std::uint32_t track = slots_[pending_[i].dst.index].track;
        for (const SlotAccess& a : accesses) {
            if (slots_[a.slot.index].track == track) {
                last = i;
                any = true;
            }
        }
    }
    if (!any) return;
    for (std::size_t n = last + 1; n > 0; --n) issue_front_upload();
}

// --- compute ---------------------------------------------------------------------

void Pipeline::compute(std::initializer_list<SlotAccess> accesses, const ComputeFunction& enqueue,
                       std::string_view name, unsigned lane) {
    compute(std::span<const SlotAccess>(accesses.begin(), accesses.size()), enqueue, name, lane);
}

void Pipeline::compute(std::span<const SlotAccess> accesses, const ComputeFunction& enqueue,
                       std::string_view name, unsigned lane) {
    const unsigned queue = lane % options_.compute_lanes == 0 ? kCompute : kCompute2;
    check_usable("compute");
    try {
        for (const SlotAccess& a : accesses) (void)slot_of(a.slot, "compute");
        if (!enqueue) throw UsageError(kComponent, "compute without a function");
        started_ = true;
        flush_uploads_for(accesses);
        issue_ready_uploads();
        for (const SlotAccess& a : accesses) wait_hazards(queue, slots_[a.slot.index].track, a.access);
        Interval* busy = begin_busy(queue);
        {
            const monitor::OpNameScope op_name(name);  // claims and names device-timed kernels
            enqueue(*queues_[queue]);
        }
        end_busy(queue, busy, 0, name);
        for (const SlotAccess& a : accesses) note_access(queue, slots_[a.slot.index].track, a.access);
        ++stats_.compute_count;
    } catch (...) {
        record_error(std::current_exception());
        throw;
    }
}

// --- downloads -------------------------------------------------------------------

std::uint32_t Pipeline::acquire_download_staging() {
    for (;;) {
        bool issue = false;
        {
            std::unique_lock lock(host_mutex_);
            // While every buffer is draining, keep feeding the upload queue.
            host_cv_.wait(lock,
                          [&] { return !down_free_.empty() || failed() || front_upload_ready_locked(); });
            if (failed()) {
                lock.unlock();
                rethrow_first_error();
            }
            if (!down_free_.empty()) {
                const std::uint32_t index = down_free_.front();
                down_free_.pop_front();
                ++drains_outstanding_;
                return index;
            }
            issue = true;
        }
        if (issue) issue_front_upload();
    }
}

void Pipeline::download(SlotId src, std::uint64_t offset, std::uint64_t bytes, DrainFunction drain) {
    check_usable("download");
    try {
        const BufferView from = checked_range(src, offset, bytes, "download");
        if (options_.download_staging.count == 0) {
            throw UsageError(kComponent, "download: the pipeline has no download staging");
        }
        if (bytes > options_.download_staging.bytes) {
            throw UsageError(kComponent,
                             fmt::format("download of {} bytes exceeds the {}-byte staging buffers", bytes,
                                         options_.download_staging.bytes));
        }
        if (!drain) throw UsageError(kComponent, "download without a drain function");
        started_ = true;
        const SlotAccess access = reads(src);
        flush_uploads_for(std::span<const SlotAccess>(&access, 1));
        const std::uint32_t index = acquire_download_staging();
        // From here the buffer is ours: give it back on every path.
        bool submitted = false;
        ScopeExit give_back([&] {
            if (submitted) return;
            {
                std::lock_guard lock(host_mutex_);
                down_free_.push_back(index);
                --drains_outstanding_;
            }
            host_cv_.notify_all();
        });
        const std::uint32_t track = slots_[src.index].track;
        Queue& q = *queues_[kDownload];
        wait_hazards(kDownload, track, Access::Read);
        const monitor::OpNameScope traced("download");  // claims the copy for device-timed traces
        Interval* busy = begin_busy(kDownload);
        q.copy(from, BufferView(down_staging_[index], 0, bytes));
        end_busy(kDownload, busy, bytes);
        q.record(*down_events_[index]);
        note_access(kDownload, track, Access::Read);
        stats_.bytes_downloaded += bytes;
        ++stats_.download_count;
        const std::byte* data = down_staging_[index].host();
        writers_->submit([this, index, bytes, data, drain = std::move(drain)] {
            ScopeExit release([&] {
                {
                    std::lock_guard lock(host_mutex_);
                    down_free_.push_back(index);
                    --drains_outstanding_;
                }
                host_cv_.notify_all();
            });
            if (failed()) return;
            // Recorded before the buffer is released, so finish() cannot see the
            // drains idle without seeing this failure.
            try {
                down_events_[index]->wait();
                const std::int64_t t0 = now_ns();
                drain(std::span<const std::byte>(data, static_cast<std::size_t>(bytes)));
                const std::int64_t t1 = now_ns();
                write_busy_ns_.fetch_add(t1 - t0, std::memory_order_relaxed);
                report_host(monitor::OpKind::HostWrite, bytes, t0, t1);
            } catch (...) {
                record_error(std::current_exception());
            }
        });
        submitted = true;
    } catch (...) {
        record_error(std::current_exception());
        throw;
    }
}

void Pipeline::download_to(SlotId src, std::uint64_t offset, void* host, std::uint64_t bytes) {
    check_usable("download_to");
    try {
        const BufferView from = checked_range(src, offset, bytes, "download_to");
        if (host == nullptr) throw UsageError(kComponent, "download_to a null host pointer");
        started_ = true;
        const SlotAccess access = reads(src);
        flush_uploads_for(std::span<const SlotAccess>(&access, 1));
        const std::uint32_t track = slots_[src.index].track;
        Queue& q = *queues_[kDownload];
        wait_hazards(kDownload, track, Access::Read);
        const monitor::OpNameScope traced("download");  // claims the copy for device-timed traces
        Interval* busy = begin_busy(kDownload);
        q.download(from, host);
        end_busy(kDownload, busy, bytes);
        note_access(kDownload, track, Access::Read);
        stats_.bytes_downloaded += bytes;
        ++stats_.download_count;
    } catch (...) {
        record_error(std::current_exception());
        throw;
    }
}

void Pipeline::download_2d_to(SlotId src, std::uint64_t offset, void* host, const Copy2D& shape,
                              std::function<void()> done) {
    check_usable("download_2d_to");
    try {
        if (host == nullptr) throw UsageError(kComponent, "download_2d_to a null host pointer");
        shape.validate("download_2d_to");
        if (shape.rows == 0 || shape.width_bytes == 0) return;
        const BufferView from = checked_range(src, offset, shape.buffer_span_bytes(), "download_2d_to");
        started_ = true;
        const SlotAccess access = reads(src);
        flush_uploads_for(std::span<const SlotAccess>(&access, 1));
        const std::uint32_t track = slots_[src.index].track;
        Queue& q = *queues_[kDownload];
        wait_hazards(kDownload, track, Access::Read);
        const monitor::OpNameScope traced("download");  // claims the copy for device-timed traces
        Interval* busy = begin_busy(kDownload);
        q.download_2d(from, host, shape);
        end_busy(kDownload, busy, shape.rows * shape.width_bytes);
        if (done) q.host_task(std::move(done));
        note_access(kDownload, track, Access::Read);
        stats_.bytes_downloaded += shape.rows * shape.width_bytes;
        ++stats_.download_count;
    } catch (...) {
        record_error(std::current_exception());
        throw;
    }
}

void Pipeline::downloads_wait_for(SlotId slot) {
    check_usable("downloads_wait_for");
    try {
        wait_hazards(kDownload, slot_of(slot, "downloads_wait_for").track, Access::Read);
    } catch (...) {
        record_error(std::current_exception());
        throw;
    }
}

void Pipeline::record_downloads(Event& event) {
    check_usable("record_downloads");
    try {
        queues_[kDownload]->record(event);
    } catch (...) {
        record_error(std::current_exception());
        throw;
    }
}

// --- finish ----------------------------------------------------------------------

void Pipeline::wait_drains_idle() {
    std::unique_lock lock(host_mutex_);
    host_cv_.wait(lock, [&] { return drains_outstanding_ == 0 || failed(); });
}

PipelineStats Pipeline::finish() {
    if (finished_) throw UsageError(kComponent, "finish() called twice");
    if (!failed()) {
        try {
            while (!pending_.empty()) issue_front_upload();
            wait_drains_idle();
        } catch (...) {
            record_error(std::current_exception());
        }
    }
    // Every queue is drained even after a failure, so what is in flight ends here.
    for (const std::unique_ptr<Queue>& q : queues_) {
        if (!q) continue;
        try {
            q->synchronize();
        } catch (...) {
            record_error(std::current_exception());
        }
    }
    if (!failed()) wait_drains_idle();
    finished_ = true;
    if (failed()) rethrow_first_error();
    compute_stats();
    return stats_;
}

void Pipeline::compute_stats() {
    PipelineStats& s = stats_;
    s.wall_seconds = static_cast<double>(now_ns()) * 1e-9;
    // Shared with the trace summary (outcore report): one definition of busy and hidden.
    // Both compute lanes are the compute queue's busy time: their union (the lanes'
    // kernels overlap, so it is merged, not summed).
    std::vector<monitor::Interval> compute;
    for (const unsigned q : {kCompute, kCompute2}) {
        for (const Interval& i : intervals_[q]) compute.push_back({i.begin_ns, i.end_ns});
    }
    monitor::merge_intervals(compute);
    auto busy = [&](unsigned q) {
        return q == kCompute ? monitor::busy_ns(compute) : monitor::busy_ns(intervals_[q]);
    };
    auto overlap_with_compute = [&](unsigned q) { return monitor::overlap_ns(intervals_[q], compute); };
    const std::int64_t up = busy(kUpload);
    const std::int64_t down = busy(kDownload);
    const std::int64_t transfer = up + down;
    const std::int64_t hidden = overlap_with_compute(kUpload) + overlap_with_compute(kDownload);
    s.upload_busy_seconds = static_cast<double>(up) * 1e-9;
    s.compute_busy_seconds = static_cast<double>(busy(kCompute)) * 1e-9;
    s.download_busy_seconds = static_cast<double>(down) * 1e-9;
    s.read_busy_seconds = static_cast<double>(read_busy_ns_.load()) * 1e-9;
    s.write_busy_seconds = static_cast<double>(write_busy_ns_.load()) * 1e-9;
    s.transfer_seconds = static_cast<double>(transfer) * 1e-9;
    s.exposed_transfer_seconds = static_cast<double>(transfer - hidden) * 1e-9;
    s.hidden_transfer_fraction = monitor::hidden_fraction(hidden, transfer);
    const alloc::StatisticsSnapshot snap = statistics_.snapshot();
    s.peak_device_bytes = snap.of(MemoryKind::Device).peak_bytes;
    s.budget_bytes = options_.budget_bytes;
    s.slot_bytes = heap_ ? heap_->statistics().bytes_reserved : 0;
    s.staging_bytes = 0;
    for (const std::vector<Block>* ring : {&up_staging_, &down_staging_}) {
        for (const Block& b : *ring) s.staging_bytes += b.bytes();
    }
}

}  // namespace outcore::tile
