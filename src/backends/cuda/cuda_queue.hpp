// cuda_queue.hpp — the CUDA backend's queues and events (private to the backend).
//
// A CudaQueue is a non-blocking CUDA stream plus a small host-side FIFO with one
// worker thread. Work goes straight onto the stream from the submitting thread
// whenever it can ("direct"); it is deferred to the FIFO, in order, when
//   - a host task is outstanding: the worker drains the stream, runs the task on
//     its own thread, and submits what follows only if the task did not throw, so a
//     failure really skips later work (as the conformance suite requires; a plain
//     cudaLaunchHostFunc cannot un-enqueue GPU work that already follows it, and the
//     runtime may run host functions of all streams on one thread);
//   - the work itself would block the submitting thread: copies to or from pageable
//     memory (the runtime stages those synchronously), host-side fills and copies
//     between two host memories (plain memset/memcpy once the stream has drained);
//   - it waits for an event whose record is itself still deferred on another queue.
// While anything is deferred, everything after it is deferred too, so submission
// order is queue order; once the FIFO is empty the queue goes direct again.
//
// Failures follow the CPU backend: a failure inside deferred work (a host task that
// throws, a CUDA call that fails on the worker, a wait on a failed record) is kept;
// later work is skipped and records complete carrying it, until synchronize()
// rethrows and clears it. An error returned by a CUDA call made directly on the
// submitting thread is thrown there as BackendError and enqueues nothing. Errors of
// work already running on the GPU (an illegal address in a kernel) are sticky in CUDA
// and surface as BackendError from synchronize() or Event::wait().
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>

#include "cuda_timing.hpp"
#include "device/last_record.hpp"
#include "outcore/device/block.hpp"
#include "outcore/device/event.hpp"
#include "outcore/device/queue.hpp"
#include "outcore/monitor/device_time.hpp"

namespace outcore::cuda {

class CudaDevice;
class EventPool;

/// One record of a CudaEvent, with its own native event. Pending while the record is
/// deferred on its queue; Recorded once cudaEventRecord was issued (the GPU completes
/// it later); Failed when the queue had failed before reaching it. Thread-safe.
class RecordSlot {
public:
    enum class State : unsigned char { Pending, Recorded, Failed };

    /// Takes a native event from `pool`. Throws BackendError.
    explicit RecordSlot(EventPool& pool);
    RecordSlot(const RecordSlot&) = delete;
    RecordSlot& operator=(const RecordSlot&) = delete;
    /// Gives the native event back to the pool.
    ~RecordSlot();

    [[nodiscard]] cudaEvent_t native() const noexcept { return native_; }
    [[nodiscard]] State state() const;
    void mark_recorded() noexcept;
    void mark_failed(std::exception_ptr failure) noexcept;
    /// Blocks while Pending; returns the failure (null once recorded).
    [[nodiscard]] std::exception_ptr await();

private:
    EventPool* pool_;
    cudaEvent_t native_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    State state_ = State::Pending;
    std::exception_ptr failure_;
};

/// CUDA semantics: a wait targets the record current when the wait is issued (each
/// record is a new RecordSlot, so a later record never moves an earlier wait);
/// never recorded counts as complete.
class CudaEvent final : public Event {
public:
    explicit CudaEvent(CudaDevice& device) noexcept : device_(&device) {}

    /// Starts a new record and returns its slot (the recording queue resolves it).
    [[nodiscard]] std::shared_ptr<RecordSlot> arm();
    /// The most recent record, or null if never recorded.
    [[nodiscard]] std::shared_ptr<RecordSlot> last() const { return records_.last(); }
    [[nodiscard]] const CudaDevice& device() const noexcept { return *device_; }

private:
    void do_wait() override;
    bool do_query() override;

    CudaDevice* device_;
    detail::LastRecord<RecordSlot> records_;
};

class CudaQueue final : public Queue {
public:
    /// GPU work: enqueues itself on the stream it is given; throws BackendError.
    using GpuOp = std::function<void(cudaStream_t)>;

    /// Creates the stream and starts the worker. Throws BackendError.
    CudaQueue(CudaDevice& device, QueueRole role);
    /// Runs what is deferred, waits for the stream, frees it; logs an unreported failure.
    ~CudaQueue() override;

    /// Submits GPU work in queue order: at once on the calling thread when nothing is
    /// deferred, else after what is. Kernels use this. One submitting thread at a time.
    /// While a monitor observes and the submitting thread has a monitor::OpNameScope
    /// open, the work is timed with CUDA events and reported as a kernel of that name.
    void submit(GpuOp op);
    /// The queue's cuBLAS handle, bound to its stream with its own workspace, made on
    /// first use. Call from the submitting thread only. Throws BackendError/OutOfMemory.
    [[nodiscard]] cublasHandle_t cublas();
    [[nodiscard]] CudaDevice& cuda_device() const noexcept { return *cuda_device_; }

private:
    enum class ItemKind : unsigned char {
        Gpu,       ///< op(stream); may run directly
        Blocking,  ///< op(stream) that blocks the calling thread: always on the worker
        Host,      ///< task() on the worker once the stream has drained
        Record,    ///< cudaEventRecord of slot
        Wait,      ///< cudaStreamWaitEvent on slot, once it is recorded
    };
    struct Item {
        ItemKind kind = ItemKind::Gpu;
        GpuOp op;
        std::function<void()> task;
        std::shared_ptr<RecordSlot> slot;
    };

    void do_copy(const BufferView& src, const BufferView& dst, HostRange host, std::uint64_t bytes) override;
    void do_copy_2d(const BufferView& buffer, HostRange host, const Copy2D& shape) override;
    void do_fill(const BufferView& dst, std::byte value) override;
    void do_record(Event& event) override;
    void do_wait(const Event& event) override;
    void do_host_task(std::function<void()> task) override;
    void do_synchronize() override;

    /// `op` between two timing events, reported to the monitors once the GPU has run it,
    /// when a monitor observes and an OpNameScope is open (not on General queues); else
    /// `op` itself. Never throws for the timing: without
    /// events it logs and returns `op`.
    [[nodiscard]] GpuOp timed(GpuOp op, monitor::OpKind kind, std::string_view name, std::uint64_t bytes);
    /// Makes the event pool, the op log and the anchor on first use; re-anchors every second.
    void prepare_timing();

    /// Runs `item` directly if it may and nothing is deferred, else defers it.
    void push(Item item);
    /// Runs an item on the submitting thread (mutex_ held, nothing deferred). Throws.
    void run_direct(Item& item);
    void run_worker() noexcept;
    /// Runs an item on the worker; returns the failure it caused (or null).
    [[nodiscard]] std::exception_ptr execute(Item& item, const std::exception_ptr& failure) noexcept;

    CudaDevice* cuda_device_;
    cudaStream_t stream_ = nullptr;
    cublasHandle_t cublas_ = nullptr;
    Block cublas_workspace_;

    // Device timing of copies and kernels, made at the first traced op (submitting
    // thread). op_log_ gives its events back to timing_, so it is destroyed first.
    std::unique_ptr<TimingEvents> timing_;
    std::unique_ptr<monitor::DeviceOpLog> op_log_;
    std::atomic<monitor::DeviceOpLog*> published_log_{nullptr};  ///< op_log_, for synchronize()
    cudaStream_t anchor_stream_ = nullptr;                       ///< idle: anchors are recorded here
    bool timing_failed_ = false;                                 ///< warned once; ops run untimed

    std::mutex mutex_;
    std::condition_variable work_cv_;  ///< the worker waits here for work or stop
    std::condition_variable idle_cv_;  ///< synchronize waits here for an empty, idle FIFO
    std::deque<Item> deferred_;
    bool busy_ = false;
    bool stopping_ = false;
    std::exception_ptr failure_;
    std::thread worker_;  // last: starts once every other member exists
};

}  // namespace outcore::cuda
