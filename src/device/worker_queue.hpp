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

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "device/last_record.hpp"
#include "outcore/device/event.hpp"
#include "outcore/device/queue.hpp"

namespace outcore::detail {

/// One record of an event: completed once by the recording queue's worker, carrying
/// that queue's failure if it had one at that point. Thread-safe.
class HostSignal {
public:
    /// Marks the record complete and wakes every waiter. `failure` may be null.
    void complete(std::exception_ptr failure) noexcept;
    /// Blocks until complete; returns the failure it completed with (or null).
    [[nodiscard]] std::exception_ptr wait();
    [[nodiscard]] bool done();

private:
    std::mutex mutex_;
    std::condition_variable cv_;
    bool done_ = false;
    std::exception_ptr failure_;
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

    enum class WorkKind : unsigned char { Task, Batched, Mark, Wait };
    struct Work {
        WorkKind kind = WorkKind::Task;
        std::function<void()> task;
        std::shared_ptr<HostSignal> signal;
    };

    void do_record(Event& event) override;
    void do_wait(const Event& event) override;
    void do_host_task(std::function<void()> task) override;
    void do_synchronize() override;

    void push(Work work);
    void run_worker() noexcept;
    void execute(Work& work) noexcept;
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
