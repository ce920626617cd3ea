// outcore/tile/pipeline.hpp — the streaming machinery every tiled operation runs on:
// three queues, rings of device slots under a hard budget, a ring of pinned staging
// buffers, host threads for file I/O and packing, and the events that order them.
//
//   tile::Pipeline p(device, {.budget_bytes = plan_budget,
//                             .slots = {{a_bytes, "gemm.a"}, {a_bytes, "gemm.a"}, {c_bytes, "gemm.c"}},
//                             .upload_staging = {.bytes = a_bytes, .count = 4},
//                             .download_staging = {.bytes = c_bytes, .count = 2}});
//   for (tile i ...) {
//       p.upload(a[i % 2], 0, bytes, [&](std::span<std::byte> s) { source.read(..., s.data(), ld); });
//       p.compute({tile::reads(a[i % 2]), tile::writes(c)}, [&](Queue& q) { kernels.gemm(q, args); });
//       p.download(c, 0, c_bytes, [&](std::span<const std::byte> s) { sink.write(..., s.data(), ld); });
//   }
//   tile::PipelineStats stats = p.finish();   // waits; rethrows the first failure
//
// The caller describes the work in program order, as if it ran step by step; the
// pipeline makes it overlap. upload() returns at once: a reader thread fills a free
// staging buffer while earlier tiles still compute, and the copy to the device is
// submitted, in program order, as soon as its fill is done (at the caller's next
// call into the pipeline, or while it waits for a staging buffer), or at the latest
// when a compute() or download() needs it. Every device access
// is tracked per slot, so the pipeline inserts exactly the event waits that make
// the overlap safe: tile i+1 uploads and tile i−1 downloads while tile i computes,
// and a slot is overwritten only after the work that read it has finished. Nothing
// synchronizes per tile; the host only blocks when a staging buffer is not yet free
// (back-pressure), so at most `upload_staging.count` fills run ahead of the device.
//
// Memory: every device slot is carved once, at construction, from an alloc::Heap
// that sits on an alloc::Budget of budget_bytes over the device, so the pipeline can
// never hold more device memory than the budget: the adaptor refuses (OutOfMemory)
// rather than trusting the caller's arithmetic. Staging buffers are HostPinned, made
// once and reused for every tile (and across pipelines, with a StagingCache).
// Nothing is allocated per tile but small host-side bookkeeping.
//
// Lifetimes: fill and drain functions run on the pipeline's threads until finish()
// returns or, after a failure, until the pipeline is destroyed; whatever they refer to
// must outlive the Pipeline object (declare it before the pipeline).
//
// Errors: the first failure anywhere (a fill or drain function, a kernel, a copy)
// stops the run: later calls and finish() rethrow that first exception. Destroying a
// pipeline that failed or was never finished waits for its in-flight device work,
// stops its threads (dropping fills and drains not yet started) and frees everything.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "outcore/alloc/block_cache.hpp"
#include "outcore/alloc/budget.hpp"
#include "outcore/alloc/heap.hpp"
#include "outcore/alloc/statistics.hpp"
#include "outcore/device/block.hpp"
#include "outcore/device/device.hpp"
#include "outcore/monitor/hooks.hpp"
#include "outcore/tile/queue_cache.hpp"
#include "outcore/tile/staging_cache.hpp"

namespace outcore::tile {

/// A device buffer the pipeline tracks: one of the slots it carved, or a region or
/// alias of one. Cheap to copy; only meaningful for the pipeline that made it.
struct SlotId {
    std::uint32_t index = UINT32_MAX;
    friend bool operator==(SlotId, SlotId) = default;
};

/// How a compute step touches a slot.
enum class Access : unsigned char { Read, Write, ReadWrite };

struct SlotAccess {
    SlotId slot{};
    Access access = Access::Read;
};
[[nodiscard]] constexpr SlotAccess reads(SlotId s) noexcept { return {s, Access::Read}; }
[[nodiscard]] constexpr SlotAccess writes(SlotId s) noexcept { return {s, Access::Write}; }
/// Read and written (a GEMM C tile accumulating over k).
[[nodiscard]] constexpr SlotAccess updates(SlotId s) noexcept { return {s, Access::ReadWrite}; }

/// One device slot to carve at construction.
struct SlotSpec {
    std::uint64_t bytes = 0;
    /// What it holds, for statistics and leak reports; a string literal.
    std::string_view tag = "pipeline.slot";
};

/// A ring of equal pinned staging buffers for one direction (count 0: none; then
/// only upload_from / download_to may be used in that direction).
struct StagingSpec {
    std::uint64_t bytes = 0;
    std::uint32_t count = 0;
};

struct PipelineOptions {
    /// Hard limit on the device bytes the pipeline holds (slots, plus anything made
    /// through device_allocator()). Required (> 0).
    std::uint64_t budget_bytes = 0;
    /// The device slots, carved once; SlotId{i} names slots[i].
    std::vector<SlotSpec> slots;
    StagingSpec upload_staging{};
    StagingSpec download_staging{};
    /// Threads running fill functions (reading sources, packing tiles).
    std::uint32_t reader_threads = 2;
    /// Threads running drain functions (writing sinks). With more than one, drains of
    /// different downloads may run concurrently and out of order.
    std::uint32_t writer_threads = 1;
    /// Compute queues, 1 or 2. With 2, compute() steps given lane 1 run on a second
    /// queue, so kernels of the two lanes may run at once on the device (the tail of
    /// one GEMM filled by the next one's first blocks); steps of different lanes are
    /// ordered only through the slots they touch, like steps of different queues.
    std::uint32_t compute_lanes = 1;
    /// Time every queue operation with host-side stamps (see PipelineStats). Costs two
    /// host tasks per operation; off, the busy times and hidden fraction read 0.
    bool measure_busy = true;
    /// Where the staging rings come from and go back to (pinned memory kept across
    /// pipelines); null: the pipeline allocates its own and frees them at the end.
    /// Must outlive the pipeline.
    StagingCache* staging_cache = nullptr;
    /// Where the slots' device memory comes from and goes back to (kept across
    /// pipelines: alloc/block_cache.hpp); null: the device, freed at the end. It sits
    /// under the pipeline's budget, which still counts every byte the slots hold.
    /// Must outlive the pipeline.
    alloc::BlockCache* device_cache = nullptr;
    /// Where the queues come from and go back to (tile/queue_cache.hpp); null: made
    /// here and destroyed at the end. Must be of this pipeline's device and outlive it.
    QueueCache* queue_cache = nullptr;
};

/// What a run did. Times are seconds.
///
/// Busy time is measured on the host: each queue operation is bracketed by two
/// Queue::host_task stamps, issued after the event waits that gate it, so a stamp
/// runs when the queue reaches it (the CPU backend's worker; CUDA's host-function
/// thread). An operation's interval is [begin stamp, end stamp]; waiting on another
/// queue is therefore not busy time. Reader and writer busy time is measured inside
/// the fill and drain functions.
///
/// The hidden-transfer fraction: with U and D the sets of busy intervals of the
/// upload and download queues and C those of the compute queue,
///     transfer = |U| + |D|,   exposed = |U \ C| + |D \ C|,
///     hidden_transfer_fraction = 1 − exposed / transfer   (1 when transfer = 0),
/// i.e. the share of link time during which the device was also computing. 1 means
/// every copy overlapped compute; 0 means none did.
struct PipelineStats {
    double wall_seconds = 0;  ///< construction-ready to finish() returning
    double upload_busy_seconds = 0;
    double compute_busy_seconds = 0;
    double download_busy_seconds = 0;
    double read_busy_seconds = 0;   ///< summed over reader threads
    double write_busy_seconds = 0;  ///< summed over writer threads
    double transfer_seconds = 0;    ///< upload + download busy
    double exposed_transfer_seconds = 0;
    double hidden_transfer_fraction = 1.0;
    std::uint64_t bytes_uploaded = 0;
    std::uint64_t bytes_downloaded = 0;
    std::uint64_t upload_count = 0;
    std::uint64_t download_count = 0;
    std::uint64_t compute_count = 0;
    /// Highest device bytes held at once, from the Statistics adaptor under the budget.
    std::uint64_t peak_device_bytes = 0;
    std::uint64_t budget_bytes = 0;
    std::uint64_t slot_bytes = 0;     ///< device bytes carved for slots
    std::uint64_t staging_bytes = 0;  ///< pinned host bytes of the staging rings
};

/// Fills a staging buffer with the bytes to upload; runs on a reader thread.
using FillFunction = std::function<void(std::span<std::byte> staging)>;
/// Consumes the downloaded bytes; runs on a writer thread.
using DrainFunction = std::function<void(std::span<const std::byte> staging)>;
/// Enqueues kernels on the compute queue; runs on the calling thread.
using ComputeFunction = std::function<void(Queue& compute)>;

class Pipeline {
public:
    /// Makes the queues and threads, carves every slot and staging buffer. Throws
    /// UsageError for bad options (no budget, a zero-byte slot, a staging ring with
    /// count but no bytes) and OutOfMemory when the slots exceed the budget (raised by
    /// the Budget adaptor) or the device refuses. `device` must outlive the pipeline.
    Pipeline(Device& device, PipelineOptions options);
    /// Abandons unfinished work: waits for in-flight device work, stops the threads,
    /// frees every slot and staging buffer. Never throws.
    ~Pipeline();
    Pipeline(const Pipeline&) = delete;
    Pipeline& operator=(const Pipeline&) = delete;

    /// A tracked sub-range of `parent` with its own dependency tracking (disjoint
    /// regions of one slot overlap with each other freely). The parent may no longer
    /// be accessed (UsageError). Regions must not overlap. Only before the first op.
    [[nodiscard]] SlotId region(SlotId parent, std::uint64_t offset, std::uint64_t bytes);
    /// A view of part of `parent` that shares its dependency tracking: any access to
    /// either is ordered with any access to the other. For buffers aliased by lifetime
    /// (a separable filter's intermediate in a slot that is otherwise idle).
    [[nodiscard]] SlotId alias(SlotId parent, std::uint64_t offset, std::uint64_t bytes);
    /// The device memory of a slot (for kernel arguments).
    [[nodiscard]] BufferView view(SlotId slot) const;

    /// Uploads `bytes` into `dst` at `offset`, after `fill` has written them into a
    /// staging buffer (span of exactly `bytes`). Returns once the fill is queued;
    /// blocks only while every staging buffer is busy. `fill` must be callable from
    /// another thread; it may throw (the run then fails with that exception).
    void upload(SlotId dst, std::uint64_t offset, std::uint64_t bytes, FillFunction fill);
    /// upload() into a pitched place: `fill` writes `place.rows` runs of
    /// `place.width_bytes` packed (place.host_pitch_bytes must equal the width), which
    /// land `place.buffer_pitch_bytes` apart in `dst` from `offset` (a matrix with a
    /// larger leading dimension on the device than in the staging buffer).
    void upload(SlotId dst, std::uint64_t offset, const Copy2D& place, FillFunction fill);
    /// Uploads straight from host memory, no staging (memory the device reads
    /// directly: pinned, or any host memory on unified-memory devices). `host` must
    /// stay valid and unchanged until finish() returns.
    void upload_from(SlotId dst, std::uint64_t offset, const void* host, std::uint64_t bytes);
    /// upload_from for a 2-D region (Queue::upload_2d): `shape.rows` runs of host
    /// memory `shape.host_pitch_bytes` apart land `shape.buffer_pitch_bytes` apart in
    /// `dst` from `offset` — a sub-matrix of a pinned host matrix goes up with no
    /// packing on the host and one DMA. `host` must stay valid until finish().
    void upload_2d_from(SlotId dst, std::uint64_t offset, const void* host, const Copy2D& shape);
    /// Runs `enqueue` with the compute queue of `lane` (0, or 1 when compute_lanes is
    /// 2; taken modulo compute_lanes) once every access in `accesses` is safe (earlier
    /// writers finished; for writes, earlier readers too). `enqueue` may only touch the
    /// slots it lists. `name` names the kernel in traces ("gemm"); a literal.
    void compute(std::initializer_list<SlotAccess> accesses, const ComputeFunction& enqueue,
                 std::string_view name = "compute", unsigned lane = 0);
    void compute(std::span<const SlotAccess> accesses, const ComputeFunction& enqueue,
                 std::string_view name = "compute", unsigned lane = 0);
    /// Downloads `bytes` of `src` at `offset` into a staging buffer, then runs `drain`
    /// on it on a writer thread. Blocks while every download staging buffer is busy.
    void download(SlotId src, std::uint64_t offset, std::uint64_t bytes, DrainFunction drain);
    /// Downloads straight into host memory, no staging; `host` holds the bytes once
    /// finish() returns.
    void download_to(SlotId src, std::uint64_t offset, void* host, std::uint64_t bytes);

    /// download_to for a 2-D region (Queue::download_2d); `done`, if set, runs on the
    /// download queue's host thread once the bytes have landed (progress reports).
    void download_2d_to(SlotId src, std::uint64_t offset, void* host, const Copy2D& shape,
                        std::function<void()> done = {});

    /// Makes every later download wait, on the device, for the writes to `slot` issued
    /// so far, without accessing `slot`: paces downloads behind compute they do not
    /// otherwise depend on (ops::gemm spreads a C tile's download over the next tile's
    /// GEMMs so that it does not take the link from their uploads).
    void downloads_wait_for(SlotId slot);

    /// Records `event` on the download queue after every download issued so far: its
    /// wait() returns once they have landed and rethrows a failure of the device work
    /// they depend on. Lets a caller pace itself against the device even when nothing
    /// on the host would see such a failure (direct transfers only: a failed queue
    /// skips a download_2d_to's `done`, but still completes its records).
    void record_downloads(Event& event);

    /// Waits for everything, rethrows the first failure, and returns the statistics.
    /// After it, the pipeline only answers stats(). Throws UsageError when called twice.
    PipelineStats finish();
    /// The statistics of a finished run (zeros before finish()).
    [[nodiscard]] const PipelineStats& stats() const noexcept { return stats_; }

    /// The budgeted device allocator (Statistics over Budget over the device): extra
    /// device buffers made through it count against the same budget (kernel params).
    /// They must be freed before the pipeline is destroyed.
    [[nodiscard]] Allocator& device_allocator() noexcept { return statistics_; }
    [[nodiscard]] Device& device() const noexcept { return *device_; }
    /// True once any failure was recorded.
    [[nodiscard]] bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }

private:
    // kCompute2: the second compute lane (PipelineOptions::compute_lanes = 2), else null.
    enum QueueIndex : unsigned { kUpload = 0, kCompute = 1, kDownload = 2, kCompute2 = 3, kQueueCount = 4 };

    // Dependency state of one tracked buffer (a slot, or a region of one).
    struct Track {
        std::array<std::unique_ptr<Event>, kQueueCount> event{};  // recorded after each access on that queue
        std::array<std::uint64_t, kQueueCount> access_seq{};      // last access per queue (0: none)
        std::array<std::uint64_t, kQueueCount> write_seq{};       // last write per queue
        // seen[q][p]: the access_seq of queue p that queue q has already waited for.
        std::array<std::array<std::uint64_t, kQueueCount>, kQueueCount> seen{};
        bool split = false;  // regions were made: the whole may not be accessed
    };
    struct Slot {
        BufferView view;
        std::uint32_t track = 0;
        std::uint32_t parent = UINT32_MAX;  // the slot a region was cut from
    };
    struct Interval {
        std::int64_t begin_ns = 0;
        std::int64_t end_ns = 0;
    };
    // An upload whose fill is queued or running; issued to the device in FIFO order.
    struct PendingUpload {
        SlotId dst;
        std::uint64_t offset = 0;
        std::uint64_t bytes = 0;
        std::uint32_t staging = 0;   // index into up_staging_, or kDirect
        const void* host = nullptr;  // for upload_from
        Copy2D shape{};              // rows > 0: a 2-D upload (from host, or a pitched staged one)
    };
    static constexpr std::uint32_t kDirect = UINT32_MAX;

    class HostStage;  // a few threads running tasks in FIFO order

    void check_usable(const char* what) const;
    [[noreturn]] void rethrow_first_error() const;
    void record_error(std::exception_ptr error) noexcept;
    const Slot& slot_of(SlotId id, const char* what) const;
    BufferView checked_range(SlotId id, std::uint64_t offset, std::uint64_t bytes, const char* what) const;

    void flush_uploads_for(std::span<const SlotAccess> accesses);
    void issue_front_upload();
    void issue_ready_uploads();
    [[nodiscard]] bool front_upload_ready_locked() const;
    void wait_hazards(unsigned queue, std::uint32_t track, Access access);
    void note_access(unsigned queue, std::uint32_t track, Access access);
    Interval* begin_busy(unsigned queue);
    // Also reports the operation to the monitors (monitor::report) when observed.
    void end_busy(unsigned queue, Interval* interval, std::uint64_t bytes, std::string_view name = {});
    std::uint32_t acquire_download_staging();
    void wait_drains_idle();

    [[nodiscard]] std::int64_t now_ns() const noexcept;
    /// A now_ns() time on the monitors' clock (steady-clock nanoseconds since its epoch).
    [[nodiscard]] std::int64_t epoch_ns(std::int64_t t) const noexcept;
    /// Reports a reader's fill or a writer's drain [begin_ns, end_ns) (now_ns() times) to
    /// the monitors, on the calling HostStage thread's track.
    void report_host(monitor::OpKind kind, std::uint64_t bytes, std::int64_t begin_ns,
                     std::int64_t end_ns) const noexcept;
    void compute_stats();

    Device* device_;
    PipelineOptions options_;
    std::chrono::steady_clock::time_point start_;

    // Memory: Heap over Statistics over Budget over the device. Destroyed in reverse:
    // blocks first, then the heap, the counters, the budget.
    alloc::Budget budget_;
    alloc::Statistics statistics_;
    std::optional<alloc::Heap> heap_;
    std::vector<Block> slot_blocks_;
    std::vector<Block> up_staging_;  // HostPinned, from the cache or statistics_
    std::vector<Block> down_staging_;

    std::array<std::unique_ptr<Queue>, kQueueCount> queues_{};
    std::vector<Slot> slots_;
    std::vector<Track> tracks_;
    std::uint64_t seq_ = 0;
    bool started_ = false;
    bool finished_ = false;

    // Upload staging: an event per buffer recorded after the upload that read it; the
    // next fill of that buffer waits for it on the reader thread.
    std::vector<std::unique_ptr<Event>> up_events_;
    std::deque<std::uint32_t> up_free_;  // orchestrator only
    std::deque<PendingUpload> pending_;  // orchestrator only
    // Download staging: an event per buffer recorded after the download into it; the
    // drain waits for it, then frees the buffer.
    std::vector<std::unique_ptr<Event>> down_events_;

    // Shared with the host threads, under host_mutex_.
    mutable std::mutex host_mutex_;
    std::condition_variable host_cv_;
    std::vector<unsigned char> up_ready_;  // fill of this staging buffer finished
    std::deque<std::uint32_t> down_free_;
    std::uint64_t drains_outstanding_ = 0;
    std::exception_ptr first_error_;
    std::atomic<bool> failed_{false};
    std::atomic<std::int64_t> read_busy_ns_{0};
    std::atomic<std::int64_t> write_busy_ns_{0};

    std::array<std::deque<Interval>, kQueueCount> intervals_{};  // each written by its queue only
    // Intervals timed only for the monitors (measure_busy off): not in the statistics.
    std::array<std::deque<Interval>, kQueueCount> traced_{};
    PipelineStats stats_{};

    // Last: the threads start once everything they touch exists, and stop first.
    std::unique_ptr<HostStage> readers_;
    std::unique_ptr<HostStage> writers_;
};

}  // namespace outcore::tile
