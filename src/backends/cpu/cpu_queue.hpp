// cpu_queue.hpp — the CPU backend's queues and events (private to the backend).
//
// A CpuQueue owns one worker thread that runs closures in submission order, so a
// copy happens when the worker reaches it, never at submission: the same
// asynchrony a GPU stream has, which is what makes the CPU backend a faithful
// reference. A CpuEvent is a chain of records; each record is a Signal that the
// recording queue completes when its worker reaches it.
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

namespace outcore::cpu {

/// One record of an event: completed once by the recording queue's worker, carrying
/// that queue's failure if it had one at that point. Thread-safe.
class Signal {
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
/// issued (the Signal current at that moment); never recorded counts as complete.
/// Holding one Signal per record, rather than a single counter, keeps that exact even
/// when records from several queues complete out of order.
class CpuEvent final : public Event {
public:
    /// Starts a new record and returns its Signal (the queue completes it).
    [[nodiscard]] std::shared_ptr<Signal> arm() { return records_.arm(); }
    /// The most recent record, or null if never recorded.
    [[nodiscard]] std::shared_ptr<Signal> last() const { return records_.last(); }

private:
    void do_wait() override;
    bool do_query() override;

    detail::LastRecord<Signal> records_;
};

/// An ordered queue backed by one worker thread. Submission (any do_* or enqueue)
/// only appends to the FIFO; the worker executes. A task that throws makes the
/// queue failed: later tasks and waits are skipped (markers still complete, carrying
/// the failure) until synchronize() rethrows and clears it. A queue whose wait
/// reaches a failed record takes over that failure, so work that depended on failed
/// work is never run on bad data.
class CpuQueue final : public Queue {
public:
    CpuQueue(Device& device, QueueRole role);
    /// Drains every submitted item, joins the worker; logs an unreported failure.
    ~CpuQueue() override;

    /// Appends a task run on the worker in order (kernels use this). Thread safety:
    /// one submitting thread at a time, as for every Queue function.
    void enqueue(std::function<void()> task);

private:
    enum class WorkKind : unsigned char { Task, Mark, Wait };
    struct Work {
        WorkKind kind = WorkKind::Task;
        std::function<void()> task;
        std::shared_ptr<Signal> signal;
    };

    void do_copy(const BufferView& src, const BufferView& dst, HostRange host, std::uint64_t bytes) override;
    void do_copy_2d(const BufferView& buffer, HostRange host, const Copy2D& shape) override;
    void do_fill(const BufferView& dst, std::byte value) override;
    void do_record(Event& event) override;
    void do_wait(const Event& event) override;
    void do_host_task(std::function<void()> task) override;
    void do_synchronize() override;

    void push(Work work);
    void run_worker() noexcept;
    void execute(Work& work) noexcept;

    std::mutex mutex_;
    std::condition_variable work_cv_;  ///< the worker waits here for work or stop
    std::condition_variable idle_cv_;  ///< synchronize waits here for an empty, idle queue
    std::deque<Work> work_;
    bool busy_ = false;
    bool stopping_ = false;
    std::exception_ptr failure_;
    std::thread worker_;  // last: starts once every other member exists
};

/// Address of a view's first byte in host memory. Every CPU block, Device kind
/// included, is host memory at RawBlock::native (+ offsets); RawBlock::host stays null
/// for Device memory on purpose, so only the backend takes this path.
[[nodiscard]] inline std::byte* address_of(const BufferView& view) noexcept {
    return reinterpret_cast<std::byte*>(view.block.native + view.native_offset());
}

}  // namespace outcore::cpu
