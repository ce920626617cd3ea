// device/worker_queue.hpp — a Queue run by one worker thread, and its events (private
// to outcore). The CPU backend's queues are this with host copies; the Vulkan
// backend's are this with copies and kernels recorded into command buffers.
//
// Submission only appends to a FIFO; the worker executes in order, so work happens
// when the worker reaches it, never at submission: the asynchrony of a GPU stream.
// An event is a chain of records (LastRecord); each record is a HostSignal the
// recording queue completes when its worker reaches it.
//
// Batched work (enqueue_batched) is for backends that record device commands: the
// worker runs such tasks back to back (they only record), calls drain() before
// anything that needs the device to have finished what came before (host tasks,
// records, synchronize) and flush() before a wait and whenever the FIFO runs dry:
// there the backend submits what it recorded, without waiting.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "device/last_record.hpp"
#include "outcore/device/event.hpp"
#include "outcore/device/queue.hpp"

namespace outcore::detail {

/// Where a record will complete on the device, for queues that can wait there instead
/// of on the host (Vulkan: a timeline semaphore and the value its queue signals after
/// the record's work). `domain` says which queues understand it (their logical
/// device); `owner` keeps the semaphore alive while a waiter holds the point.
struct DevicePoint {
    const void* domain = nullptr;
    std::shared_ptr<void> owner;
    std::uint64_t handle = 0;
    std::uint64_t value = 0;
};

/// One record of an event: completed once by the recording queue's worker (or by a
/// thread watching the device for it), carrying that queue's failure if it had one at
/// that point. Before completing it may publish a DevicePoint. Thread-safe.
class HostSignal {
public:
    /// Marks the record complete and wakes every waiter. `failure` may be null. Drops
    /// the published point (nothing needs to wait for it any more). Only the first call
    /// counts: a queue that waited for the point on the device may complete it too.
    void complete(std::exception_ptr failure) noexcept;
    /// Publishes where the record completes on the device; wakes point waiters.
    void publish(DevicePoint point) noexcept;
    /// Blocks until complete; returns the failure it completed with (or null).
    [[nodiscard]] std::exception_ptr wait();
    /// Blocks until the record is published or complete: the point while it is not yet
    /// complete, nothing once it is (then wait() returns at once).
    [[nodiscard]] std::optional<DevicePoint> wait_point();
    [[nodiscard]] bool done();

private:
    std::mutex mutex_;
    std::condition_variable cv_;
    bool done_ = false;
    std::exception_ptr failure_;
    std::optional<DevicePoint> point_;
};

/// CUDA-style event: a wait targets the most recent record made before the wait was
/// issued (the HostSignal current at that moment); never recorded counts as complete.
/// Holding one HostSignal per record, rather than a single counter, keeps that exact
/// even when records from several queues complete out of order.
class WorkerEvent final : public Event {
public:
    /// Starts a new record and returns its HostSignal (the queue completes it).
    [[nodiscard]] std::shared_ptr<HostSignal> arm() { return records_.arm(); }
    /// The most recent record, or null if never recorded.
    [[nodiscard]] std::shared_ptr<HostSignal> last() const { return records_.last(); }

private:
    void do_wait() override;
    bool do_query() override;

    LastRecord<HostSignal> records_;
};

/// An ordered queue backed by one worker thread. A task that throws makes the queue
/// failed: later tasks and waits are skipped (records still complete, carrying the
/// failure) until synchronize() rethrows and clears it. A queue whose wait reaches a
/// failed record takes over that failure, so work that depended on failed work is
/// never run on bad data. Subclasses implement the copies and fill.
class WorkerQueue : public Queue {
public:
    /// `backend` names the backend in errors ("cpu", "vulkan"). Call start() at the
    /// end of the most derived constructor.
    WorkerQueue(Device& device, QueueRole role, const char* backend);
    /// Stops the worker (stop() must have run in the most derived destructor).
    ~WorkerQueue() override;

    /// Appends a task run on the worker in order (kernels use this). Thread safety:
    /// one submitting thread at a time, as for every Queue function.
    void enqueue(std::function<void()> task);
    /// Appends a task that only records device work (see the header comment).
    void enqueue_batched(std::function<void()> task);

protected:
    /// Starts the worker; the most derived constructor's last step.
    void start();
    /// Drains every submitted item and joins the worker; logs an unreported failure.
    /// The most derived destructor's first step (the hooks must still exist).
    void stop() noexcept;

private:
    /// On the worker: submit recorded work and wait for all of it. A throw becomes
    /// the queue's failure.
    virtual void drain() {}
    /// On the worker: submit recorded work, do not wait. A throw becomes the failure.
    virtual void flush() {}
    /// On the worker, before a wait: submit what was recorded before it, so the wait
    /// holds up only the work after it. A backend that submits waits with its commands
    /// may keep waits that no command separates for one submission.
    virtual void flush_before_wait() { flush(); }
    /// On the worker, for a record on a queue without failure: either take over
    /// completing `signal` once the device has finished everything submitted so far
    /// (and publish its DevicePoint), returning true, or return false and the worker
    /// drains and completes it. A throw becomes the failure (the worker then completes
    /// it with that failure).
    virtual bool defer_record(const std::shared_ptr<HostSignal>& /*signal*/) { return false; }
    /// On the worker, for a wait on `signal`, published at `point`: make the work
    /// recorded after this wait on the device for `point`, returning true, or return
    /// false (the worker waits on the host for the record to complete). A queue that
    /// waits on the device completes `signal` itself once that work has finished, so a
    /// synchronized waiter never sees the event it waited for still pending.
    virtual bool wait_on_device(const std::shared_ptr<HostSignal>& /*signal*/, const DevicePoint& /*point*/) {
        return false;
    }

    enum class WorkKind : unsigned char { Task, Batched, Mark, Wait };
    struct Work {
        WorkKind kind = WorkKind::Task;
        std::function<void()> task;
        std::shared_ptr<HostSignal> signal;
        bool deferrable = false;  ///< a Mark an event recorded (synchronize's drains)
    };

    void do_record(Event& event) override;
    void do_wait(const Event& event) override;
    void do_host_task(std::function<void()> task) override;
    void do_synchronize() override;

    void push(Work work);
    void run_worker() noexcept;
    void execute(Work& work) noexcept;
    /// Logs (debug) worker time since `t0` spent waiting, when long enough to matter.
    void note_slow(const char* what, std::chrono::steady_clock::time_point t0) const noexcept;
    void run_hook(void (WorkerQueue::*hook)()) noexcept;
    void fail(std::exception_ptr failure) noexcept;

    const char* backend_;
    std::mutex mutex_;
    std::condition_variable work_cv_;  ///< the worker waits here for work or stop
    std::condition_variable idle_cv_;  ///< synchronize waits here for an empty, idle queue
    std::deque<Work> work_;
    bool busy_ = false;
    bool stopping_ = false;
    std::exception_ptr failure_;
    std::thread worker_;
};

}  // namespace outcore::detail
