// device/thread_pool.hpp — a small thread pool with a parallel-for (private to outcore):
// the CPU backend's kernels use the shared one, Vulkan queues one each for packing
// 2-D copies on the host.
//
//   ThreadPool::shared().parallel_for(rows, 8, [&](std::uint64_t begin, std::uint64_t end) {
//       for (std::uint64_t r = begin; r < end; ++r) filter_row(r);
//   });
//
// The shared pool (shared()) is made on first use with hardware_concurrency() − 1
// workers (the calling thread is the last participant) and reused by every call:
// kernels run per tile, and a thread start per tile would cost more than a small
// tile's work. Other pools (a Vulkan queue's) are made with the size they ask for.
// One parallel_for runs at a time; a caller that finds the pool busy (another queue's
// worker is inside a kernel) runs its range serially itself instead of waiting, so
// concurrent queues never block each other. Results must not depend on how the range
// is split: every caller here computes each index independently.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace outcore::detail {

class ThreadPool {
public:
    /// A pool with `threads` participants in all (the caller included), so
    /// `threads − 1` workers; 0 or 1 means no workers (everything runs on the caller).
    /// Throws std::system_error when a worker thread cannot be started.
    explicit ThreadPool(unsigned threads);
    /// Joins the workers; never throws.
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    /// The process-wide pool (hardware_concurrency() participants), made on first use.
    [[nodiscard]] static ThreadPool& shared();

    /// Participants in all, caller included.
    [[nodiscard]] unsigned threads() const noexcept { return static_cast<unsigned>(workers_.size()) + 1; }

    /// Calls fn(begin, end) over disjoint chunks covering [0, count), each of at least
    /// `grain` indices (but the last), on the pool's threads and the caller; returns
    /// when every chunk has run. The first exception a chunk throws is rethrown here
    /// (the remaining chunks still run). Thread-safe.
    void parallel_for(std::uint64_t count, std::uint64_t grain,
                      const std::function<void(std::uint64_t, std::uint64_t)>& fn);

private:
    void run_worker() noexcept;
    /// Takes chunks of the open job until none is left. Called without mutex_ held.
    void run_chunks() noexcept;

    std::mutex call_mutex_;  ///< held by the one caller whose job is open

    std::mutex mutex_;
    std::condition_variable work_cv_;  ///< workers wait for a job or stop
    std::condition_variable done_cv_;  ///< the caller waits for the job to drain
    bool stopping_ = false;
    bool job_open_ = false;         ///< workers may join only while open
    std::uint64_t generation_ = 0;  ///< bumped per job, so a worker joins each once
    unsigned active_ = 0;           ///< workers inside the current job
    // The open job (read by participants; written by the caller while no worker is in it).
    const std::function<void(std::uint64_t, std::uint64_t)>* fn_ = nullptr;
    std::uint64_t count_ = 0;
    std::uint64_t chunk_ = 1;
    std::uint64_t next_ = 0;  ///< next unclaimed index, guarded by mutex_
    std::exception_ptr failure_;

    std::vector<std::thread> workers_;  // last: started once every other member exists
};

}  // namespace outcore::detail
