#include "device/worker_queue.hpp"

#include <chrono>
#include <utility>

#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"

namespace outcore::detail {

// --- HostSignal / WorkerEvent ------------------------------------------------------

void HostSignal::complete(std::exception_ptr failure) noexcept {
    std::optional<DevicePoint> point;  // released outside the lock
    {
        std::lock_guard lock(mutex_);
        if (done_) return;
        done_ = true;
        failure_ = std::move(failure);
        point = std::exchange(point_, std::nullopt);
    }
    cv_.notify_all();
}

void HostSignal::publish(DevicePoint point) noexcept {
    {
        std::lock_guard lock(mutex_);
        if (done_) return;
        point_ = std::move(point);
    }
    cv_.notify_all();
}

std::optional<DevicePoint> HostSignal::wait_point() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return done_ || point_.has_value(); });
    if (done_) return std::nullopt;
    return point_;
}

std::exception_ptr HostSignal::wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return done_; });
    return failure_;
}

bool HostSignal::done() {
    std::lock_guard lock(mutex_);
    return done_;
}

void WorkerEvent::do_wait() {
    const std::shared_ptr<HostSignal> signal = last();
    if (!signal) return;
    if (std::exception_ptr failure = signal->wait()) std::rethrow_exception(failure);
}

bool WorkerEvent::do_query() {
    const std::shared_ptr<HostSignal> signal = last();
    return !signal || signal->done();
}

// --- WorkerQueue -------------------------------------------------------------------

WorkerQueue::WorkerQueue(Device& device, QueueRole role, const char* backend)
    : Queue(device, role), backend_(backend) {}

WorkerQueue::~WorkerQueue() { stop(); }

void WorkerQueue::start() {
    worker_ = std::thread([this] { run_worker(); });
}

void WorkerQueue::stop() noexcept {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    work_cv_.notify_all();
    try {
        if (worker_.joinable()) worker_.join();
    } catch (...) {
        // join only throws for a thread that is not joinable; nothing left to undo.
    }
    std::exception_ptr failure;
    {
        std::lock_guard lock(mutex_);
        failure = std::exchange(failure_, nullptr);
    }
    if (failure) {
        try {
            std::rethrow_exception(failure);
        } catch (const std::exception& e) {
            log::warn(backend_, "queue destroyed with an unreported failure: {}", e.what());
        } catch (...) {
            log::warn(backend_, "queue destroyed with an unreported failure (not a std::exception)");
        }
    }
}

void WorkerQueue::push(Work work) {
    {
        std::lock_guard lock(mutex_);
        work_.push_back(std::move(work));
    }
    work_cv_.notify_one();
}

void WorkerQueue::enqueue(std::function<void()> task) {
    push(Work{.kind = WorkKind::Task, .task = std::move(task), .signal = nullptr});
}

void WorkerQueue::enqueue_batched(std::function<void()> task) {
    push(Work{.kind = WorkKind::Batched, .task = std::move(task), .signal = nullptr});
}

void WorkerQueue::do_record(Event& event) {
    auto* worker_event = dynamic_cast<WorkerEvent*>(&event);
    if (worker_event == nullptr) {
        throw UsageError(backend_, "record: the event was not made by a device of this backend");
    }
    std::shared_ptr<HostSignal> signal = worker_event->arm();
    try {
        push(Work{.kind = WorkKind::Mark, .task = {}, .signal = signal, .deferrable = true});
    } catch (...) {  // never leave the event's current record uncompletable
        signal->complete(std::current_exception());
        throw;
    }
}

void WorkerQueue::do_wait(const Event& event) {
    const auto* worker_event = dynamic_cast<const WorkerEvent*>(&event);
    if (worker_event == nullptr) {
        throw UsageError(backend_, "wait: the event was not made by a device of this backend");
    }
    // Capture the record current now: later records do not move this wait's target.
    std::shared_ptr<HostSignal> signal = worker_event->last();
    if (!signal) return;
    push(Work{.kind = WorkKind::Wait, .task = {}, .signal = std::move(signal)});
}

void WorkerQueue::do_host_task(std::function<void()> task) { enqueue(std::move(task)); }

void WorkerQueue::do_synchronize() {
    // A record of our own: the worker completes it once the device has finished
    // everything before it (drain), which an empty FIFO alone does not say.
    auto done = std::make_shared<HostSignal>();
    push(Work{.kind = WorkKind::Mark, .task = {}, .signal = done});
    (void)done->wait();
    std::exception_ptr failure;
    {
        std::unique_lock lock(mutex_);
        idle_cv_.wait(lock, [this] { return work_.empty() && !busy_; });
        failure = std::exchange(failure_, nullptr);
    }
    if (failure) std::rethrow_exception(failure);
}

void WorkerQueue::run_worker() noexcept {
    std::unique_lock lock(mutex_);
    for (;;) {
        work_cv_.wait(lock, [this] { return stopping_ || !work_.empty(); });
        if (work_.empty()) break;  // stopping, and everything submitted has run
        Work work = std::move(work_.front());
        work_.pop_front();
        busy_ = true;
        lock.unlock();
        execute(work);
        work = Work{};  // release captured state outside the lock
        lock.lock();
        if (work_.empty()) {
            lock.unlock();
            run_hook(&WorkerQueue::flush);  // nothing queued behind: submit what was recorded
            lock.lock();
        }
        busy_ = false;
        if (work_.empty()) idle_cv_.notify_all();
    }
    lock.unlock();
    run_hook(&WorkerQueue::drain);  // the device must be done before the queue goes away
}

void WorkerQueue::fail(std::exception_ptr failure) noexcept {
    std::lock_guard lock(mutex_);
    if (!failure_) failure_ = std::move(failure);
}

namespace {
const char* role_name(QueueRole role) noexcept {
    switch (role) {
        case QueueRole::Upload: return "upload";
        case QueueRole::Compute: return "compute";
        case QueueRole::Download: return "download";
        default: return "general";
    }
}
}  // namespace

void WorkerQueue::note_slow(const char* what, std::chrono::steady_clock::time_point t0) const noexcept {
    // Time a device may idle for: OUTCORE_LOG=debug shows it (tuning a backend's waits).
    log::debug_if_slow(backend_, t0, 0.5, "{} queue: {}", role_name(role()), what);
}

void WorkerQueue::run_hook(void (WorkerQueue::*hook)()) noexcept {
    try {
        (this->*hook)();
    } catch (...) {
        fail(std::current_exception());
    }
}

void WorkerQueue::execute(Work& work) noexcept {
    // failure_ is only written on this thread and by synchronize(), which runs only
    // while the queue is idle; reading it under the lock keeps TSan and the rules happy.
    std::exception_ptr failure;
    {
        std::lock_guard lock(mutex_);
        failure = failure_;
    }
    switch (work.kind) {
        case WorkKind::Task:
        case WorkKind::Batched:
            if (failure) return;
            try {
                const auto t0 = std::chrono::steady_clock::now();
                if (work.kind == WorkKind::Task) {
                    drain();
                    note_slow("draining for a host task", t0);
                }
                const auto t1 = std::chrono::steady_clock::now();
                work.task();
                if (work.kind == WorkKind::Task) note_slow("a host task", t1);
            } catch (...) {
                fail(std::current_exception());
            }
            return;
        case WorkKind::Mark: {
            if (work.deferrable && !failure) {
                try {
                    if (defer_record(work.signal)) return;
                } catch (...) {
                    fail(std::current_exception());
                }
            }
            // Drain even after a failure: what was submitted before it may still be
            // running on the device, and a completed record (or synchronize) must
            // mean that it no longer is, so its memory can be freed.
            run_hook(&WorkerQueue::drain);
            std::lock_guard lock(mutex_);
            work.signal->complete(failure_);
            return;
        }
        case WorkKind::Wait: {
            if (failure) return;
            run_hook(&WorkerQueue::flush_before_wait);
            // A record its queue has submitted but the device not yet finished can be
            // waited for on the device, where this queue's backend can.
            const auto t0 = std::chrono::steady_clock::now();
            const std::optional<DevicePoint> point = work.signal->wait_point();
            note_slow("waiting for another queue's record to be submitted", t0);
            if (point) {
                try {
                    if (wait_on_device(work.signal, *point)) return;
                } catch (...) {
                    fail(std::current_exception());
                    return;
                }
            }
            const auto t1 = std::chrono::steady_clock::now();
            std::exception_ptr theirs = work.signal->wait();
            note_slow("waiting on the host for another queue's record", t1);
            if (theirs) fail(std::move(theirs));
            return;
        }
    }
}

}  // namespace outcore::detail
