// vulkan_queue.hpp — the Vulkan backend's queues (private to the backend).
//
// A VulkanQueue is a detail::WorkerQueue whose worker records copies, fills and
// dispatches into one command buffer after another: consecutive device work goes
// into one command buffer and one vkQueueSubmit when the FIFO runs dry, before a
// wait, or every kMaxCommands commands; host work (host tasks, records, the host side
// of downloads) first waits for the queue's timeline semaphore to reach the last
// submit's value (below; no fences). Every command is preceded
// by a full memory barrier, which gives Vulkan commands the in-order semantics of a
// queue.
//
// Every submit signals the queue's timeline semaphore with the next value. An event
// record does not stop the worker: it submits what was recorded, publishes (semaphore,
// value) on the record's HostSignal and hands the signal to a watcher thread, which
// completes it once vkWaitSemaphores says the value is reached. A Vulkan queue of the
// same logical device that waits for such a record adds the semaphore to its next
// submit's waits, so dependent work follows on the GPU with no host round trip; other
// queues (another device, the CPU backend) wait for the HostSignal. Before this, a
// record drained the queue (the GPU idled until the host saw the fence and submitted
// more); OUTCORE_VULKAN_EVENTS=host still selects that (docs/backends.md), which on
// the H200 measured the same for the out-of-core GEMM.
//
// While a monitor observes, commands that a layer claimed (monitor::OpNameScope: the
// tile Pipeline's copies and kernels) are timed on the device where the device can
// (Context::device_timestamps): a timestamp query before and after each, reported
// through a DeviceOpLog anchored by VK_EXT_calibrated_timestamps (vulkan_timing.hpp).
//
// Copies from and to this device's own coherent host-visible memory (HostPinned
// Blocks) are DMA between that block's buffer and the device buffer: the GPU reads or
// writes the host bytes when the batch runs. 2-D copies whose runs are short (under
// 256 KiB, packed on the device side) are the exception: NVIDIA's driver spends ~3 µs
// per VkBufferCopy region, so they are packed on the host by the queue's pool into
// 32 MiB staging bands and copied one region per band (docs/backends.md). Copies with other (pageable) host
// memory go through the device's staging memory (host-visible, coherent): uploads are copied into it on the
// worker when it reaches them, downloads out of it once their batch has finished.
#pragma once

#include <vulkan/vulkan.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "device/thread_pool.hpp"
#include "device/worker_queue.hpp"
#include "outcore/monitor/device_time.hpp"
#include "vulkan_context.hpp"
#include "vulkan_timing.hpp"

namespace outcore::vulkan {

class VulkanDevice;

class VulkanQueue final : public detail::WorkerQueue {
public:
    VulkanQueue(VulkanDevice& device, QueueRole role);
    ~VulkanQueue() override;

    [[nodiscard]] VulkanDevice& vulkan_device() const noexcept { return *device_; }
    /// On the worker, inside a batched task: the command buffer being recorded, with
    /// a barrier after everything recorded or submitted before on this queue.
    [[nodiscard]] VkCommandBuffer commands();
    /// On the worker: keeps `owner` alive until the current batch has finished.
    void keep(std::shared_ptr<void> owner);
    /// The buffer and byte offset a view lives at.
    [[nodiscard]] VkBuffer buffer_of(const BufferView& view) const;
    /// Enqueues `record` as batched work that records one command through commands().
    /// When this thread's work is claimed for a trace (monitor::OpNameScope) and the
    /// device has timestamps, the command is timed on the device and reported as `kind`
    /// named `name` (a literal) with `bytes` on this queue's track.
    void enqueue_command(monitor::OpKind kind, std::string_view name, std::uint64_t bytes,
                         std::function<void()> record);
    /// Waits for other queues' records that this queue made on the device (tests).
    [[nodiscard]] std::uint64_t device_waits() const noexcept { return device_waits_.load(); }
    /// Staged uploads that waited for earlier work because a pending download writes
    /// their host bytes (tests).
    [[nodiscard]] std::uint64_t host_read_waits() const noexcept { return host_read_waits_.load(); }
    /// vkQueueSubmit calls made (tests).
    [[nodiscard]] std::uint64_t submits() const noexcept { return submits_.load(); }

private:
    struct Batch {
        VkCommandBuffer commands = VK_NULL_HANDLE;
        /// The timeline value its submit signals (0 until submitted): it has run once
        /// the queue's semaphore reaches it. No fences: on NVIDIA's driver each
        /// vkDestroyFence took 0.3-0.45 ms, 27-53 ms a pipeline (docs/backends.md).
        std::uint64_t value = 0;
        std::vector<std::shared_ptr<void>> keep;
        /// Records of other queues this batch waited for on the device: reached once
        /// the batch has finished, so recycling it completes them.
        std::vector<std::shared_ptr<detail::HostSignal>> reached;
    };

    void do_copy(const BufferView& src, const BufferView& dst, HostRange host, std::uint64_t bytes) override;
    void do_copy_2d(const BufferView& buffer, HostRange host, const Copy2D& shape) override;
    void do_fill(const BufferView& dst, std::byte value) override;
    void flush() override;
    void flush_before_wait() override;
    void drain() override;
    bool defer_record(const std::shared_ptr<detail::HostSignal>& signal) override;
    bool wait_on_device(const std::shared_ptr<detail::HostSignal>& signal,
                        const detail::DevicePoint& point) override;
    /// The watcher thread: completes handed-over records in order as the timeline
    /// reaches their values.
    void watch() noexcept;
    void stop_watcher() noexcept;
    /// Blocks until this queue's timeline semaphore reaches `value`; BackendError.
    void wait_for_timeline(std::uint64_t value) const;

    void recycle(Batch& batch);
    /// Enqueues `shape` through staging in bands of at most 32 MiB, each packed (or
    /// unpacked) on the host by the pack pool and copied as one region where the buffer
    /// side is packed.
    /// An upload band is packed when the worker reaches it, once no download into its
    /// bytes is pending (VulkanDevice::host_writes). A band is one row where a row is
    /// over 32 MiB.
    void staged_copy_2d(const BufferView& buffer, HostRange host, const Copy2D& shape);
    /// For a direct download into host memory `host` (null for an upload): the pending
    /// write's token, for the batch to keep; null for an upload.
    [[nodiscard]] std::shared_ptr<void> note_write(void* host, std::uint64_t bytes);
    /// On the worker: the pool that packs staged 2-D copies (made on first use, half the
    /// machine's cores, the worker included).
    [[nodiscard]] detail::ThreadPool& pack_pool();
    /// On the worker: `rows` runs of `width` bytes, from_pitch apart, to to_pitch apart,
    /// copied by the pack pool.
    void copy_rows(const std::byte* from, std::uint64_t from_pitch, std::byte* to, std::uint64_t to_pitch,
                   std::uint64_t width, std::uint64_t rows);

    /// A command being timed: its op in the log and its two queries. Abandons the op
    /// if it dies before the command was recorded (a failed queue skipped it).
    struct TimedCommand {
        std::shared_ptr<monitor::TimedOp> op;
        monitor::StampSource::Stamp begin = 0, end = 0;
        bool begun = false;  ///< the begin query is recorded (worker)
        TimedCommand() = default;
        TimedCommand(const TimedCommand&) = delete;
        TimedCommand& operator=(const TimedCommand&) = delete;
        ~TimedCommand() {
            if (op) op->abandon();
        }
    };
    /// On the caller's thread: a timed command for work being enqueued, or null.
    [[nodiscard]] std::shared_ptr<TimedCommand> timed(monitor::OpKind kind, std::string_view name,
                                                      std::uint64_t bytes);
    /// The log and its anchor (re-read every second); under timing_mutex_.
    void prepare_timing();
    /// On the worker, after the command's recording: its end query, and it is issued.
    void finish_timing(TimedCommand& t) noexcept;
    /// Logs (debug) host work on the worker since `t0` that took long enough to matter.
    static void note_slow(const char* what, std::string_view name, std::uint64_t bytes,
                          std::chrono::steady_clock::time_point t0) noexcept;
    /// Staging memory for `bytes`, released with the current batch.
    [[nodiscard]] std::shared_ptr<Block> stage(std::uint64_t bytes);

    VulkanDevice* device_;
    SharedQueue* target_;
    VkCommandPool pool_ = VK_NULL_HANDLE;
    // Worker-only state.
    Batch current_;
    std::uint32_t recorded_ = 0;
    std::uint64_t staged_bytes_ = 0;  ///< staging memory the current batch holds
    std::deque<Batch> in_flight_;
    std::vector<VkCommandBuffer> free_commands_;
    /// Waits for the next submit, with the records they stand for.
    std::vector<std::pair<detail::DevicePoint, std::shared_ptr<detail::HostSignal>>> waits_;
    std::uint64_t submitted_ = 0;  ///< the timeline value of the last submit
    std::atomic<std::uint64_t> device_waits_{0};
    std::atomic<std::uint64_t> host_read_waits_{0};
    std::atomic<std::uint64_t> submits_{0};
    TimedCommand* timing_ = nullptr;  ///< worker: the command whose begin query commands() writes
    std::unique_ptr<detail::ThreadPool> pack_pool_;  ///< worker only

    // Device timing (callers' threads, under timing_mutex_; the log is thread-safe and
    // polled through published_log_ by drain()).
    std::mutex timing_mutex_;
    bool timing_failed_ = false;
    std::unique_ptr<QueryStamps> stamps_;
    std::unique_ptr<monitor::DeviceOpLog> op_log_;  // after stamps_: releases into it
    std::atomic<monitor::DeviceOpLog*> published_log_{nullptr};

    // The timeline semaphore, shared with DevicePoints handed to waiters (destroyed when
    // the last of them lets go, never before the queue's own submits are done).
    VkSemaphore timeline_ = VK_NULL_HANDLE;
    std::shared_ptr<void> timeline_owner_;
    // Watcher state.
    std::mutex watch_mutex_;
    std::condition_variable watch_cv_;
    std::deque<std::pair<std::uint64_t, std::shared_ptr<detail::HostSignal>>> watched_;
    bool watch_stop_ = false;
    std::thread watcher_;
};

/// The queue as a VulkanQueue, or UsageError (a queue of another backend).
[[nodiscard]] VulkanQueue& vulkan_queue(Queue& queue, const char* what);

}  // namespace outcore::vulkan
