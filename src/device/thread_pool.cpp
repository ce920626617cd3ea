#include "device/thread_pool.hpp"

#include <algorithm>
#include <utility>

namespace outcore::detail {

ThreadPool::ThreadPool(unsigned threads) {
    const unsigned workers = threads > 1 ? threads - 1 : 0;
    workers_.reserve(workers);
    try {
        for (unsigned i = 0; i < workers; ++i) workers_.emplace_back([this] { run_worker(); });
    } catch (...) {
        // Stop the workers already started before the exception leaves the constructor.
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        work_cv_.notify_all();
        for (std::thread& t : workers_) t.join();
        throw;
    }
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    work_cv_.notify_all();
    for (std::thread& t : workers_) {
        try {
            if (t.joinable()) t.join();
        } catch (...) {
            // join throws only for a thread that is not joinable: nothing to undo.
        }
    }
}

ThreadPool& ThreadPool::shared() {
    static ThreadPool pool(std::max(1U, std::thread::hardware_concurrency()));
    return pool;
}

void ThreadPool::parallel_for(std::uint64_t count, std::uint64_t grain,
                              const std::function<void(std::uint64_t, std::uint64_t)>& fn) {
    if (count == 0) return;
    grain = std::max<std::uint64_t>(grain, 1);
    std::unique_lock call(call_mutex_, std::try_to_lock);
    // Serial when there is nothing to share, or when another caller holds the pool.
    if (workers_.empty() || count <= grain || !call.owns_lock()) {
        fn(0, count);
        return;
    }
    // About four chunks per participant balances uneven rows without many handovers.
    const std::uint64_t target_chunks = std::uint64_t{threads()} * 4;
    const std::uint64_t chunk = std::max(grain, (count + target_chunks - 1) / target_chunks);
    {
        std::lock_guard lock(mutex_);
        fn_ = &fn;
        count_ = count;
        chunk_ = chunk;
        next_ = 0;
        failure_ = nullptr;
        job_open_ = true;
        ++generation_;
    }
    work_cv_.notify_all();
    run_chunks();
    std::exception_ptr failure;
    {
        std::unique_lock lock(mutex_);
        // Workers that joined may still be inside a chunk; the job's state (and fn)
        // must outlive them.
        done_cv_.wait(lock, [this] { return active_ == 0; });
        job_open_ = false;
        fn_ = nullptr;
        failure = std::exchange(failure_, nullptr);
    }
    if (failure) std::rethrow_exception(failure);
}

void ThreadPool::run_chunks() noexcept {
    for (;;) {
        std::uint64_t begin = 0;
        std::uint64_t end = 0;
        const std::function<void(std::uint64_t, std::uint64_t)>* fn = nullptr;
        {
            std::lock_guard lock(mutex_);
            if (next_ >= count_) return;
            begin = next_;
            end = std::min(count_, begin + chunk_);
            next_ = end;
            fn = fn_;
        }
        try {
            (*fn)(begin, end);
        } catch (...) {
            std::lock_guard lock(mutex_);
            if (!failure_) failure_ = std::current_exception();
        }
    }
}

void ThreadPool::run_worker() noexcept {
    std::uint64_t seen = 0;
    for (;;) {
        {
            std::unique_lock lock(mutex_);
            work_cv_.wait(lock, [&] { return stopping_ || (job_open_ && generation_ != seen); });
            if (stopping_) return;
            seen = generation_;
            ++active_;
        }
        run_chunks();
        {
            std::lock_guard lock(mutex_);
            --active_;
        }
        done_cv_.notify_all();
    }
}

}  // namespace outcore::detail
