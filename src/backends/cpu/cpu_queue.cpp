#include "cpu_queue.hpp"

#include <cstring>
#include <exception>
#include <utility>

#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"

namespace outcore::cpu {

// --- Signal / CpuEvent -----------------------------------------------------------

void Signal::complete(std::exception_ptr failure) noexcept {
    {
        std::lock_guard lock(mutex_);
        done_ = true;
        failure_ = std::move(failure);
    }
    cv_.notify_all();
}

std::exception_ptr Signal::wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return done_; });
    return failure_;
}

bool Signal::done() {
    std::lock_guard lock(mutex_);
    return done_;
}

void CpuEvent::do_wait() {
    const std::shared_ptr<Signal> signal = last();
    if (!signal) return;
    if (std::exception_ptr failure = signal->wait()) std::rethrow_exception(failure);
}

bool CpuEvent::do_query() {
    const std::shared_ptr<Signal> signal = last();
    return !signal || signal->done();
}

// --- CpuQueue --------------------------------------------------------------------

CpuQueue::CpuQueue(Device& device, QueueRole role) : Queue(device, role), worker_([this] { run_worker(); }) {}

CpuQueue::~CpuQueue() {
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
    if (failure_) {
        try {
            std::rethrow_exception(failure_);
        } catch (const std::exception& e) {
            log::warn("cpu", "queue destroyed with an unreported failure: {}", e.what());
        } catch (...) {
            log::warn("cpu", "queue destroyed with an unreported failure (not a std::exception)");
        }
    }
}

void CpuQueue::push(Work work) {
    {
        std::lock_guard lock(mutex_);
        work_.push_back(std::move(work));
    }
    work_cv_.notify_one();
}

void CpuQueue::enqueue(std::function<void()> task) {
    push(Work{.kind = WorkKind::Task, .task = std::move(task), .signal = nullptr});
}

void CpuQueue::do_copy(const BufferView& src, const BufferView& dst, HostRange host, std::uint64_t bytes) {
    if (bytes == 0) return;
    // Resolve addresses now (they are plain numbers); touch the bytes only when the
    // worker gets here, as a GPU copy engine would.
    const std::byte* from = host.src != nullptr ? static_cast<const std::byte*>(host.src) : address_of(src);
    std::byte* to = host.dst != nullptr ? static_cast<std::byte*>(host.dst) : address_of(dst);
    const auto n = static_cast<std::size_t>(bytes);
    enqueue([from, to, n] { std::memcpy(to, from, n); });
}

void CpuQueue::do_copy_2d(const BufferView& buffer, HostRange host, const Copy2D& shape) {
    // One task for the whole region: the runs are copied back to back by the worker.
    std::byte* dev = address_of(buffer);
    const bool up = host.src != nullptr;
    const std::byte* from = up ? static_cast<const std::byte*>(host.src) : dev;
    std::byte* to = up ? dev : static_cast<std::byte*>(host.dst);
    const std::uint64_t from_pitch = up ? shape.host_pitch_bytes : shape.buffer_pitch_bytes;
    const std::uint64_t to_pitch = up ? shape.buffer_pitch_bytes : shape.host_pitch_bytes;
    enqueue([from, to, from_pitch, to_pitch, shape] {
        for (std::uint64_t r = 0; r < shape.rows; ++r) {
            std::memcpy(to + r * to_pitch, from + r * from_pitch, static_cast<std::size_t>(shape.width_bytes));
        }
    });
}

void CpuQueue::do_fill(const BufferView& dst, std::byte value) {
    if (dst.bytes == 0) return;
    std::byte* to = address_of(dst);
    const auto n = static_cast<std::size_t>(dst.bytes);
    enqueue([to, value, n] { std::memset(to, std::to_integer<int>(value), n); });
}

void CpuQueue::do_record(Event& event) {
    auto* cpu_event = dynamic_cast<CpuEvent*>(&event);
    if (cpu_event == nullptr) throw UsageError("cpu", "record: the event was not made by a CPU device");
    push(Work{.kind = WorkKind::Mark, .task = {}, .signal = cpu_event->arm()});
}

void CpuQueue::do_wait(const Event& event) {
    const auto* cpu_event = dynamic_cast<const CpuEvent*>(&event);
    if (cpu_event == nullptr) throw UsageError("cpu", "wait: the event was not made by a CPU device");
    // Capture the record current now: later records do not move this wait's target.
    std::shared_ptr<Signal> signal = cpu_event->last();
    if (!signal) return;
    push(Work{.kind = WorkKind::Wait, .task = {}, .signal = std::move(signal)});
}

void CpuQueue::do_host_task(std::function<void()> task) { enqueue(std::move(task)); }

void CpuQueue::do_synchronize() {
    std::exception_ptr failure;
    {
        std::unique_lock lock(mutex_);
        idle_cv_.wait(lock, [this] { return work_.empty() && !busy_; });
        failure = std::exchange(failure_, nullptr);
    }
    if (failure) std::rethrow_exception(failure);
}

void CpuQueue::run_worker() noexcept {
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
        busy_ = false;
        if (work_.empty()) idle_cv_.notify_all();
    }
}

void CpuQueue::execute(Work& work) noexcept {
    // failure_ is only written on this thread and by synchronize(), which runs only
    // while the queue is idle; reading it under the lock keeps TSan and the rules happy.
    std::exception_ptr failure;
    {
        std::lock_guard lock(mutex_);
        failure = failure_;
    }
    std::exception_ptr new_failure;
    switch (work.kind) {
        case WorkKind::Task:
            if (failure) return;
            try {
                work.task();
            } catch (...) {
                new_failure = std::current_exception();
            }
            break;
        case WorkKind::Mark: work.signal->complete(failure); return;
        case WorkKind::Wait:
            if (failure) return;
            new_failure = work.signal->wait();
            break;
    }
    if (new_failure) {
        std::lock_guard lock(mutex_);
        if (!failure_) failure_ = std::move(new_failure);
    }
}

}  // namespace outcore::cpu
