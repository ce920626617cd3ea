#include "vulkan_queue.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>
#include <utility>

#include "device/thread_pool.hpp"
#include "device/traced_ops.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/monitor/hooks.hpp"
#include "vulkan_check.hpp"
#include "vulkan_device.hpp"

namespace outcore::vulkan {

namespace {

/// How long a queue being destroyed waits for timestamp queries that read as not yet
/// available although their batches have finished (lavapipe), before their reports go.
constexpr std::chrono::seconds kLateQueriesSeconds{2};
/// Commands per command buffer before it is submitted anyway: bounds the latency of
/// a long stream of work submitted faster than the worker drains it.
constexpr std::uint32_t kMaxCommands = 256;
/// Row length of a staged 1-D copy, seen as a 2-D one (do_copy).
constexpr std::uint64_t kStagedRowBytes = std::uint64_t{1} << 20;
/// Staging bytes a batch may hold before it is submitted (see stage()).
constexpr std::uint64_t kMaxStagedBytes = std::uint64_t{256} << 20;
/// How often a traced queue re-reads the device's counter against the host clock, so
/// drift between the two clocks stays far below a microsecond.
constexpr std::int64_t kReanchorNs = 1'000'000'000;
/// Host work on a queue's worker that note_slow() logs (at debug level).
constexpr double kSlowHostMs = 0.5;

void full_barrier(VkCommandBuffer cmd, VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
    const VkMemoryBarrier b{.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                            .pNext = nullptr,
                            .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                            .dstAccessMask = dst_access};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, dst_stage, 0, 1, &b, 0, nullptr, 0,
                         nullptr);
}

/// OUTCORE_VULKAN_EVENTS: "device" (default) — records deferred to the watcher, waits
/// on the GPU; "deferred" — records deferred, waits on the host; "host" — records drain
/// the queue and waits block on the host (the first design). For comparing them on a
/// GPU (docs/backends.md); anything else is the default.
enum class EventMode : unsigned char { Device, Deferred, Host };
EventMode event_mode() {
    const char* v = std::getenv("OUTCORE_VULKAN_EVENTS");
    const std::string_view mode = v == nullptr ? "" : v;
    if (mode == "host") return EventMode::Host;
    if (mode == "deferred") return EventMode::Deferred;
    return EventMode::Device;
}

}  // namespace

VulkanQueue& vulkan_queue(Queue& queue, const char* what) {
    auto* q = dynamic_cast<VulkanQueue*>(&queue);
    if (q == nullptr) throw UsageError(kComponent, fmt::format("{}: the queue is not a Vulkan queue", what));
    return *q;
}

VulkanQueue::VulkanQueue(VulkanDevice& device, QueueRole role)
    : WorkerQueue(device, role, kComponent), device_(&device) {
    Context& cx = device.context();
    target_ = role == QueueRole::Upload     ? &cx.transfer_queue()
              : role == QueueRole::Download ? &cx.download_queue()
              : role == QueueRole::Compute  ? &cx.compute_queue(device.next_compute_lane())
                                            : &cx.compute_queue();
    const VkCommandPoolCreateInfo info{.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                       .pNext = nullptr,
                                       .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                       .queueFamilyIndex = target_->family};
    OUTCORE_VK_CHECK(vkCreateCommandPool(cx.device(), &info, nullptr, &pool_));
    try {
        const VkSemaphoreTypeCreateInfo type{.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                             .pNext = nullptr,
                                             .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
                                             .initialValue = 0};
        const VkSemaphoreCreateInfo sem{
            .sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &type, .flags = 0};
        OUTCORE_VK_CHECK(vkCreateSemaphore(cx.device(), &sem, nullptr, &timeline_));
        timeline_owner_ = std::shared_ptr<void>(
            timeline_, [&cx](void* t) { cx.destroy_semaphore(static_cast<VkSemaphore>(t)); });
        watcher_ = std::thread([this] { watch(); });
        start();
        // This device's queues report their claimed commands with device times while a
        // monitor observes: layers that time queue work on the host skip it.
        if (cx.device_timestamps()) monitor::set_device_timed(device.id());
    } catch (...) {
        stop_watcher();
        timeline_owner_.reset();
        vkDestroyCommandPool(cx.device(), pool_, nullptr);
        throw;
    }
}

VulkanQueue::~VulkanQueue() {
    const auto t0 = std::chrono::steady_clock::now();
    stop();          // drains: every batch has finished
    stop_watcher();  // so every handed-over record is complete
    if (op_log_) {
        // Every timed command has run: all are reported. But Mesa's lavapipe can reach a
        // batch's timeline value before the batch's timestamp queries read as available
        // (the queries then report VK_NOT_READY for a moment); the log reports in order, so
        // one late query held back every report after it, and they were dropped here (the
        // quarantined VulkanTraceTest.ATracedGemmReportsEachCopyOnce lost 12 uploads this
        // way). Every batch has finished, so the queries will become available: wait for
        // them, up to a bound only a broken driver reaches (50 ms was not enough on a 2-core
        // machine running the whole test suite: 1 of 3 such runs still lost reports).
        const auto until = std::chrono::steady_clock::now() + kLateQueriesSeconds;
        while ((op_log_->poll(), op_log_->pending() > 0) && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        published_log_.store(nullptr, std::memory_order_release);
        op_log_.reset();
    }
    pack_pool_.reset();
    vkDestroyCommandPool(device_->context().device(), pool_, nullptr);  // frees the command buffers
    timeline_owner_.reset();  // destroys the semaphore unless a waiter still holds it
    // How long a queue's end takes (OUTCORE_LOG=debug): with a fence per batch in
    // flight, pipelines on the H100 spent 28 ms destroying them after their last operation.
    log::debug_if_slow(kComponent, t0, kSlowHostMs, "destroying the {} queue", detail::queue_track(role()));
}

VkBuffer VulkanQueue::buffer_of(const BufferView& view) const { return device_->buffer_of(view.block); }

VkCommandBuffer VulkanQueue::commands() {
    if (current_.commands != VK_NULL_HANDLE && recorded_ >= kMaxCommands) flush();
    if (current_.commands == VK_NULL_HANDLE) {
        if (free_commands_.empty()) {
            const VkCommandBufferAllocateInfo info{.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                                   .pNext = nullptr,
                                                   .commandPool = pool_,
                                                   .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                                   .commandBufferCount = 1};
            VkCommandBuffer cmd = VK_NULL_HANDLE;
            OUTCORE_VK_CHECK(vkAllocateCommandBuffers(device_->context().device(), &info, &cmd));
            free_commands_.push_back(cmd);
        }
        current_.commands = free_commands_.back();
        free_commands_.pop_back();
        const VkCommandBufferBeginInfo begin{.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                             .pNext = nullptr,
                                             .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
                                             .pInheritanceInfo = nullptr};
        OUTCORE_VK_CHECK(vkBeginCommandBuffer(current_.commands, &begin));
        recorded_ = 0;
    }
    // Queue order: this command sees everything before it on this VkQueue (the
    // barrier's first scope covers earlier submissions too).
    full_barrier(current_.commands, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                 VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT);
    if (timing_ != nullptr && !timing_->begun) {
        // After the barrier: written once everything before this command has finished.
        stamps_->write(current_.commands, timing_->begin, submitted_ + 1);
        timing_->begun = true;
    }
    ++recorded_;
    return current_.commands;
}

void VulkanQueue::enqueue_command(monitor::OpKind kind, std::string_view name, std::uint64_t bytes,
                                  std::function<void()> record) {
    std::shared_ptr<TimedCommand> t = timed(kind, name, bytes);
    enqueue_batched([this, t = std::move(t), record = std::move(record), name, bytes] {
        const auto t0 = std::chrono::steady_clock::now();
        timing_ = t.get();
        try {
            record();
        } catch (...) {
            timing_ = nullptr;  // not issued: the op is abandoned when `t` dies
            throw;
        }
        if (t) finish_timing(*t);
        timing_ = nullptr;
        note_slow("recording", name, bytes, t0);
    });
}

void VulkanQueue::note_slow(const char* what, std::string_view name, std::uint64_t bytes,
                            std::chrono::steady_clock::time_point t0) noexcept {
    // Host time the GPU may be waiting for (a driver that builds many copy regions one by
    // one); OUTCORE_LOG=debug shows it.
    log::debug_if_slow(kComponent, t0, kSlowHostMs, "{}{}{} ({} bytes) on the host", what,
                       name.empty() ? "" : " ", name, bytes);
}

void VulkanQueue::finish_timing(TimedCommand& t) noexcept {
    // Nothing flushes between a command's commands() and the end of its recording, so
    // the end query goes into the same command buffer as the begin query.
    if (!t.begun || current_.commands == VK_NULL_HANDLE) return;  // abandoned when t dies
    stamps_->write(current_.commands, t.end, submitted_ + 1);     // the current batch's value
    t.op->issued();
}

std::shared_ptr<VulkanQueue::TimedCommand> VulkanQueue::timed(monitor::OpKind kind, std::string_view name,
                                                              std::uint64_t bytes) {
    // Only what a layer claimed (monitor::OpNameScope: Pipeline's work) is traced;
    // General queues are not queue tracks (the swap store reports its own moves).
    if (!monitor::observed() || !monitor::op_scope_open() || role() == QueueRole::General ||
        !device_->context().device_timestamps())
        return nullptr;
    std::lock_guard lock(timing_mutex_);
    if (timing_failed_) return nullptr;
    try {
        prepare_timing();
        (void)op_log_->poll();  // reports what has finished since the last command
        auto t = std::make_shared<TimedCommand>();
        t->begin = stamps_->acquire();
        try {
            t->end = stamps_->acquire();
        } catch (...) {
            stamps_->release(t->begin);
            throw;
        }
        t->op = op_log_->add(monitor::OpEvent{.kind = kind,
                                              .queue = detail::queue_track(role()),
                                              .name = name,
                                              .bytes = bytes,
                                              .device_id = device_->id()},
                             t->begin, t->end);
        return t;
    } catch (const std::exception& e) {
        timing_failed_ = true;
        // Pipelines then stamp this device's work on the host again, rather than lose it.
        monitor::clear_device_timed(device_->id());
        log::warn(kComponent,
                  "tracing: cannot time this queue's commands with timestamps ({}); host times from now on",
                  e.what());
        return nullptr;
    }
}

void VulkanQueue::prepare_timing() {
    const Context& cx = device_->context();
    if (!op_log_) {
        const VkDevice dev = cx.device();
        stamps_ = std::make_unique<QueryStamps>(cx, target_->timestamp_bits, [dev, timeline = timeline_] {
            std::uint64_t value = 0;
            // On failure (a lost device) nothing counts as finished: no query is reused.
            if (vkGetSemaphoreCounterValue(dev, timeline, &value) != VK_SUCCESS) return std::uint64_t{0};
            return value;
        });
        op_log_ = std::make_unique<monitor::DeviceOpLog>(*stamps_);
        published_log_.store(op_log_.get(), std::memory_order_release);
    }
    if (op_log_->has_anchor() && monitor::now_ns() - op_log_->anchor_ns() < kReanchorNs) return;
    const Calibration c = cx.calibrate();
    op_log_->set_anchor(stamps_->fixed(c.ticks), QueryStamps::anchor_of(c));
}

void VulkanQueue::keep(std::shared_ptr<void> owner) { current_.keep.push_back(std::move(owner)); }

std::shared_ptr<Block> VulkanQueue::stage(std::uint64_t bytes) {
    // Back-pressure: a batch holding much staging memory goes to the device now, and
    // when staging runs out, finished batches give theirs back before one retry.
    if (staged_bytes_ + bytes > kMaxStagedBytes && current_.commands != VK_NULL_HANDLE) flush();
    const AllocationRequest request{.bytes = bytes, .kind = MemoryKind::HostPinned, .tag = "vulkan.staging"};
    std::shared_ptr<Block> block;
    try {
        block = std::make_shared<Block>(device_->staging().allocate(request));
    } catch (const OutOfMemory&) {
        const auto t0 = std::chrono::steady_clock::now();
        drain();
        note_slow("draining for staging memory", "", bytes, t0);
        block = std::make_shared<Block>(device_->staging().allocate(request));
    }
    staged_bytes_ += bytes;
    return block;
}

void VulkanQueue::flush() {
    // Reclaim finished batches first (cheap, keeps staging memory short-lived).
    if (!in_flight_.empty()) {
        std::uint64_t reached = 0;
        check(vkGetSemaphoreCounterValue(device_->context().device(), timeline_, &reached),
              "vkGetSemaphoreCounterValue");
        while (!in_flight_.empty() && in_flight_.front().value <= reached) {
            recycle(in_flight_.front());
            in_flight_.pop_front();
        }
    }
    // Waits alone are submitted too: a record after them must come after what they wait for.
    if (current_.commands == VK_NULL_HANDLE && waits_.empty()) return;
    Batch batch = std::exchange(current_, Batch{});
    staged_bytes_ = 0;
    if (batch.commands != VK_NULL_HANDLE) {
        // Make the batch's writes visible to the host (downloads read staging afterwards).
        // Not what separates GEMMs on an H100: leaving it out of compute batches changed
        // nothing (0.812 against 0.813 of in-core, BENCHMARKS.md); waits-only
        // submissions did (flush_before_wait).
        full_barrier(batch.commands, VK_PIPELINE_STAGE_HOST_BIT,
                     VK_ACCESS_HOST_READ_BIT | VK_ACCESS_HOST_WRITE_BIT);
        OUTCORE_VK_CHECK(vkEndCommandBuffer(batch.commands));
    }
    // One wait per timeline: reaching the highest value waited for reaches the others.
    std::vector<VkSemaphore> wait_semaphores;
    std::vector<std::uint64_t> wait_values;
    for (auto& [point, signal] : waits_) {
        const auto semaphore = reinterpret_cast<VkSemaphore>(point.handle);  // NOLINT: as stored
        const auto same = std::find(wait_semaphores.begin(), wait_semaphores.end(), semaphore);
        if (same == wait_semaphores.end()) {
            wait_semaphores.push_back(semaphore);
            wait_values.push_back(point.value);
        } else {
            std::uint64_t& value = wait_values[static_cast<std::size_t>(same - wait_semaphores.begin())];
            value = std::max(value, point.value);
        }
        batch.keep.push_back(std::move(point.owner));  // the semaphore outlives this submit
        batch.reached.push_back(std::move(signal));
    }
    const std::vector<VkPipelineStageFlags> wait_stages(wait_semaphores.size(),
                                                        VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
    const std::uint64_t value = submitted_ + 1;
    const VkTimelineSemaphoreSubmitInfo timeline{
        .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
        .pNext = nullptr,
        .waitSemaphoreValueCount = static_cast<std::uint32_t>(wait_values.size()),
        .pWaitSemaphoreValues = wait_values.data(),
        .signalSemaphoreValueCount = 1,
        .pSignalSemaphoreValues = &value};
    const bool has_commands = batch.commands != VK_NULL_HANDLE;
    const VkSubmitInfo submit{.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                              .pNext = &timeline,
                              .waitSemaphoreCount = static_cast<std::uint32_t>(wait_semaphores.size()),
                              .pWaitSemaphores = wait_semaphores.data(),
                              .pWaitDstStageMask = wait_stages.data(),
                              .commandBufferCount = has_commands ? 1U : 0U,
                              .pCommandBuffers = has_commands ? &batch.commands : nullptr,
                              .signalSemaphoreCount = 1,
                              .pSignalSemaphores = &timeline_};
    waits_.clear();
    VkResult rc = VK_SUCCESS;
    {
        const auto t0 = std::chrono::steady_clock::now();
        std::lock_guard lock(target_->mutex);
        rc = vkQueueSubmit(target_->queue, 1, &submit, VK_NULL_HANDLE);
        note_slow("vkQueueSubmit", has_commands ? "a batch" : "waits", 0, t0);
    }
    if (rc != VK_SUCCESS) {
        if (has_commands) free_commands_.push_back(batch.commands);
        check(rc, "vkQueueSubmit");
    }
    submits_.fetch_add(1);
    submitted_ = value;
    batch.value = value;
    in_flight_.push_back(std::move(batch));
}

void VulkanQueue::flush_before_wait() {
    // Waits with no command between them go in one submission: a GEMM that reads four
    // A pieces, its B chunk and its C slot waited in six submissions, five with no
    // commands, and on an H100 each cost the compute queue ~0.04 ms before the GEMM
    // could start (BENCHMARKS.md, second H100 session).
    if (current_.commands != VK_NULL_HANDLE) flush();
}

bool VulkanQueue::defer_record(const std::shared_ptr<detail::HostSignal>& signal) {
    static const EventMode mode = event_mode();
    if (mode == EventMode::Host) return false;
    flush();
    if (in_flight_.empty()) return false;  // the device has finished everything: complete now
    signal->publish({.domain = &device_->context(),
                     .owner = timeline_owner_,
                     .handle = reinterpret_cast<std::uint64_t>(timeline_),  // NOLINT: stored as an integer
                     .value = submitted_});
    {
        std::lock_guard lock(watch_mutex_);
        watched_.emplace_back(submitted_, signal);
    }
    watch_cv_.notify_one();
    return true;
}

bool VulkanQueue::wait_on_device(const std::shared_ptr<detail::HostSignal>& signal,
                                 const detail::DevicePoint& point) {
    static const EventMode mode = event_mode();
    if (mode != EventMode::Device || point.domain != &device_->context()) return false;
    waits_.emplace_back(point, signal);
    device_waits_.fetch_add(1);
    return true;
}

void VulkanQueue::watch() noexcept {
    std::unique_lock lock(watch_mutex_);
    for (;;) {
        watch_cv_.wait(lock, [this] { return watch_stop_ || !watched_.empty(); });
        if (watched_.empty()) return;  // stopping, and every record is complete
        const auto [value, signal] = watched_.front();
        lock.unlock();
        std::exception_ptr failure;
        try {
            wait_for_timeline(value);
        } catch (...) {
            failure = std::current_exception();  // a lost device: the record carries it
        }
        signal->complete(failure);
        lock.lock();
        watched_.pop_front();
        if (watched_.empty()) watch_cv_.notify_all();  // drain() waits for this
    }
}

void VulkanQueue::wait_for_timeline(std::uint64_t value) const {
    const VkSemaphoreWaitInfo info{.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                                   .pNext = nullptr,
                                   .flags = 0,
                                   .semaphoreCount = 1,
                                   .pSemaphores = &timeline_,
                                   .pValues = &value};
    check(vkWaitSemaphores(device_->context().device(), &info, UINT64_MAX), "vkWaitSemaphores");
}

void VulkanQueue::stop_watcher() noexcept {
    {
        std::lock_guard lock(watch_mutex_);
        watch_stop_ = true;
    }
    watch_cv_.notify_all();
    if (watcher_.joinable()) watcher_.join();
}

void VulkanQueue::drain() {
    flush();
    if (!in_flight_.empty()) {
        // The timeline reaches a batch's value once it has run (every submit signals
        // the next value): one wait covers every batch in flight.
        wait_for_timeline(in_flight_.back().value);
        for (Batch& b : in_flight_) recycle(b);
        in_flight_.clear();
    }
    // Records handed to the watcher are reached now; a drained queue has them complete
    // (synchronize() returning means every earlier record queries done).
    {
        std::unique_lock lock(watch_mutex_);
        watch_cv_.wait(lock, [this] { return watched_.empty(); });
    }
    // Every timed command so far has run: report them before synchronize() returns.
    if (monitor::DeviceOpLog* log = published_log_.load(std::memory_order_acquire); log != nullptr)
        (void)log->poll();
}

void VulkanQueue::recycle(Batch& batch) {
    for (const auto& signal : batch.reached) signal->complete(nullptr);
    if (batch.commands != VK_NULL_HANDLE) free_commands_.push_back(batch.commands);
    batch = Batch{};
}

namespace {

/// Whether the host side (in a host-visible buffer) and the device side of a copy
/// share bytes of one buffer.
bool overlaps(const NativeMemory::HostBuffer& host, VkBuffer buffer, std::uint64_t at,
              std::uint64_t host_bytes, std::uint64_t buffer_bytes) {
    return host.buffer == buffer && host.offset < at + buffer_bytes && at < host.offset + host_bytes;
}

}  // namespace

void VulkanQueue::do_copy(const BufferView& src, const BufferView& dst, HostRange host, std::uint64_t bytes) {
    if (bytes == 0) return;
    // Host memory inside this device's coherent host-visible blocks (HostPinned Blocks,
    // a StagingCache's) is copied by the device straight from or into its buffer.
    const void* host_side = host.src != nullptr ? host.src : host.dst;
    if (host_side != nullptr) {
        const auto hb = device_->host_buffer(host_side, bytes);
        const bool up = host.src != nullptr;
        const VkBuffer buffer = up ? buffer_of(dst) : buffer_of(src);
        const std::uint64_t at = up ? dst.native_offset() : src.native_offset();
        // A copy within one buffer must not overlap itself (Vulkan leaves that
        // undefined): such a copy takes the staging path below.
        if (hb && !overlaps(*hb, buffer, at, bytes, bytes)) {
            const monitor::OpKind kind = up ? monitor::OpKind::Upload : monitor::OpKind::Download;
            enqueue_command(kind, detail::copy_name(kind), bytes,
                            [this, hb = *hb, buffer, at, bytes, up, written = note_write(host.dst, bytes)] {
                                const VkBufferCopy r{.srcOffset = up ? hb.offset : at,
                                                     .dstOffset = up ? at : hb.offset,
                                                     .size = bytes};
                                const VkCommandBuffer cmd = commands();  // may flush: keep after it
                                if (written) keep(written);              // pending until the batch has run
                                vkCmdCopyBuffer(cmd, up ? hb.buffer : buffer, up ? buffer : hb.buffer, 1, &r);
                            });
            return;
        }
    }
    if (host_side != nullptr) {
        // Through staging, as a 2-D copy of 1 MiB rows (and a last short one), so large
        // copies go in bands of reused staging memory packed by the pack pool.
        const bool up = host.src != nullptr;
        const BufferView view = up ? dst : src;
        const std::uint64_t width = std::min(bytes, kStagedRowBytes);
        const std::uint64_t rows = bytes / width;
        staged_copy_2d(
            view, host,
            Copy2D{
                .width_bytes = width, .rows = rows, .host_pitch_bytes = width, .buffer_pitch_bytes = width});
        const std::uint64_t done = rows * width;
        if (done < bytes) {
            const std::uint64_t rest = bytes - done;
            const HostRange tail{.src = up ? static_cast<const std::byte*>(host.src) + done : nullptr,
                                 .dst = up ? nullptr : static_cast<std::byte*>(host.dst) + done};
            staged_copy_2d(
                view.sub(done, rest), tail,
                Copy2D{.width_bytes = rest, .rows = 1, .host_pitch_bytes = rest, .buffer_pitch_bytes = rest});
        }
        return;
    }
    const monitor::OpKind kind =
        detail::copy_kind(src.block.kind != MemoryKind::Device, dst.block.kind != MemoryKind::Device);
    enqueue_command(kind, detail::copy_name(kind), bytes, [this, src, dst, bytes] {
        const VkBufferCopy r{
            .srcOffset = src.native_offset(), .dstOffset = dst.native_offset(), .size = bytes};
        vkCmdCopyBuffer(commands(), buffer_of(src), buffer_of(dst), 1, &r);
    });
}

namespace {

/// VkBufferCopy regions of a 2-D copy: row i of the host side at host_offset + i ·
/// host_pitch, row i of the buffer side at buffer_offset + i · buffer_pitch. Rows that
/// continue the previous one on both sides merge into one region: NVIDIA's driver
/// spends about 3 µs per region (bench vulkan: 32 KiB runs move 8.6 GB/s, one region
/// 46.6), so a packed band is one region.
std::vector<VkBufferCopy> copy_regions(const Copy2D& shape, std::uint64_t host_offset,
                                       std::uint64_t host_pitch, std::uint64_t buffer_offset, bool up) {
    std::vector<VkBufferCopy> r;
    for (std::uint64_t i = 0; i < shape.rows; ++i) {
        const std::uint64_t h = host_offset + i * host_pitch;
        const std::uint64_t b = buffer_offset + i * shape.buffer_pitch_bytes;
        const std::uint64_t src = up ? h : b;
        const std::uint64_t dst = up ? b : h;
        if (!r.empty() && r.back().srcOffset + r.back().size == src &&
            r.back().dstOffset + r.back().size == dst) {
            r.back().size += shape.width_bytes;
            continue;
        }
        r.push_back({.srcOffset = src, .dstOffset = dst, .size = shape.width_bytes});
    }
    return r;
}

/// Runs shorter than this, packed on the device side, are packed on the host (by the
/// queue's pack pool) into staging and copied as one region per band, rather than as
/// one region each straight from host-visible memory.
constexpr std::uint64_t kPackRunBytes = std::uint64_t{256} << 10;
/// Staging bytes per band of a staged 2-D copy: bands fit the staging heap's 64 MiB
/// blocks, so no band needs a dedicated (freshly pinned) block — unless one row is
/// longer than this (a band is at least a row; 1-D copies use 1 MiB rows).
constexpr std::uint64_t kBandBytes = std::uint64_t{32} << 20;
/// Rows one pack-pool participant copies at least.
constexpr std::uint64_t kPackGrainBytes = std::uint64_t{1} << 20;

}  // namespace

detail::ThreadPool& VulkanQueue::pack_pool() {
    if (!pack_pool_) {
        const unsigned cores = std::max(1U, std::thread::hardware_concurrency());
        // Half the cores, at most 8 (8 packed 18–21 GB/s on the H200's host): each queue
        // has its own, so uploads and downloads pack at once, and many pipelines' queues
        // must not oversubscribe a large host.
        pack_pool_ = std::make_unique<detail::ThreadPool>(std::clamp(cores / 2, 1U, 8U));
    }
    return *pack_pool_;
}

void VulkanQueue::copy_rows(const std::byte* from, std::uint64_t from_pitch, std::byte* to,
                            std::uint64_t to_pitch, std::uint64_t width, std::uint64_t rows) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::uint64_t grain =
        std::max<std::uint64_t>(1, kPackGrainBytes / std::max<std::uint64_t>(width, 1));
    pack_pool().parallel_for(rows, grain, [=](std::uint64_t begin, std::uint64_t end) {
        for (std::uint64_t i = begin; i < end; ++i)
            std::memcpy(to + i * to_pitch, from + i * from_pitch, static_cast<std::size_t>(width));
    });
    note_slow("packing rows", "", rows * width, t0);
}

void VulkanQueue::do_copy_2d(const BufferView& buffer, HostRange host, const Copy2D& shape) {
    const bool up = host.src != nullptr;
    const monitor::OpKind kind = up ? monitor::OpKind::Upload : monitor::OpKind::Download;
    const auto* host_first = static_cast<const std::byte*>(up ? host.src : host.dst);
    const std::uint64_t host_span =
        shape.rows == 0 ? 0 : (shape.rows - 1) * shape.host_pitch_bytes + shape.width_bytes;
    const auto hb = device_->host_buffer(host_first, host_span);
    const std::uint64_t buffer_span =
        shape.rows == 0 ? 0 : (shape.rows - 1) * shape.buffer_pitch_bytes + shape.width_bytes;
    // Rows contiguous on both sides merge into one region: not "many".
    const bool many_short_runs = shape.rows > 1 && shape.width_bytes < kPackRunBytes &&
                                 shape.buffer_pitch_bytes == shape.width_bytes &&
                                 shape.host_pitch_bytes != shape.width_bytes;
    if (hb && !many_short_runs &&
        !overlaps(*hb, buffer_of(buffer), buffer.native_offset(), host_span, buffer_span)) {  // see do_copy
        enqueue_command(
            kind, detail::copy_name(kind), shape.rows * shape.width_bytes,
            [this, hb = *hb, buffer, shape, up, written = note_write(host.dst, host_span)] {
                const std::vector<VkBufferCopy> r =
                    copy_regions(shape, hb.offset, shape.host_pitch_bytes, buffer.native_offset(), up);
                const VkBuffer device_buffer = buffer_of(buffer);
                const VkCommandBuffer cmd = commands();  // may flush: keep after it
                if (written) keep(written);              // pending until the batch has run
                vkCmdCopyBuffer(cmd, up ? hb.buffer : device_buffer, up ? device_buffer : hb.buffer,
                                static_cast<std::uint32_t>(r.size()), r.data());
            });
        return;
    }
    staged_copy_2d(buffer, host, shape);
}

std::shared_ptr<void> VulkanQueue::note_write(void* host, std::uint64_t bytes) {
    return host == nullptr ? nullptr : device_->host_writes().note(host, bytes);
}

void VulkanQueue::staged_copy_2d(const BufferView& buffer, HostRange host, const Copy2D& shape) {
    // Through staging, in bands of whole rows packed (or unpacked) on the host by the
    // queue's pack pool: pageable memory, and host-visible memory in short runs.
    const bool up = host.src != nullptr;
    const monitor::OpKind kind = up ? monitor::OpKind::Upload : monitor::OpKind::Download;
    const std::uint64_t band_rows =
        std::max<std::uint64_t>(1, kBandBytes / std::max<std::uint64_t>(shape.width_bytes, 1));
    for (std::uint64_t r0 = 0; r0 < shape.rows; r0 += band_rows) {
        Copy2D band = shape;
        band.rows = std::min(band_rows, shape.rows - r0);
        const std::uint64_t packed = band.rows * band.width_bytes;
        const std::uint64_t at = buffer.native_offset() + r0 * shape.buffer_pitch_bytes;
        const std::uint64_t host_at = r0 * shape.host_pitch_bytes;
        if (up) {
            enqueue_command(
                kind, "upload", packed,
                [this, buffer, band, packed, at, from = static_cast<const std::byte*>(host.src) + host_at] {
                    // The host reads the bytes now, not when the copy runs: where a
                    // download into them (on this queue or one waited for) has not
                    // run yet, that work finishes first. Only then: waiting for all
                    // earlier work held every pack behind unrelated copies.
                    const std::uint64_t span = (band.rows - 1) * band.host_pitch_bytes + band.width_bytes;
                    if (device_->host_writes().overlaps(from, span) &&
                        (current_.commands != VK_NULL_HANDLE || !in_flight_.empty() || !waits_.empty())) {
                        host_read_waits_.fetch_add(1);
                        drain();
                    }
                    std::shared_ptr<Block> s = stage(packed);
                    copy_rows(from, band.host_pitch_bytes, s->host(), band.width_bytes, band.width_bytes,
                              band.rows);
                    const std::vector<VkBufferCopy> r =
                        copy_regions(band, s->raw().offset, band.width_bytes, at, true);
                    const VkBuffer staging = device_->buffer_of(s->raw());
                    const VkBuffer target = buffer_of(buffer);
                    // commands() may flush the batch so far: the staging goes with
                    // the batch the copy is recorded in, else it could be reused
                    // before the copy has read it.
                    const VkCommandBuffer cmd = commands();
                    keep(std::move(s));
                    vkCmdCopyBuffer(cmd, staging, target, static_cast<std::uint32_t>(r.size()), r.data());
                });
            continue;
        }
        auto holder = std::make_shared<std::shared_ptr<Block>>();
        enqueue_command(kind, "download", packed, [this, buffer, band, packed, at, holder] {
            *holder = stage(packed);
            const std::vector<VkBufferCopy> r =
                copy_regions(band, (*holder)->raw().offset, band.width_bytes, at, false);
            const VkBuffer source = buffer_of(buffer);
            const VkBuffer staging = device_->buffer_of((*holder)->raw());
            const VkCommandBuffer cmd = commands();  // may flush: keep after it
            keep(holder);
            vkCmdCopyBuffer(cmd, source, staging, static_cast<std::uint32_t>(r.size()), r.data());
        });
        enqueue([this, holder, band, to = static_cast<std::byte*>(host.dst) + host_at] {
            copy_rows((*holder)->host(), band.width_bytes, to, band.host_pitch_bytes, band.width_bytes,
                      band.rows);
            holder->reset();
        });
    }
}

void VulkanQueue::do_fill(const BufferView& dst, std::byte value) {
    if (dst.bytes == 0) return;
    enqueue_command(monitor::OpKind::Kernel, "fill", 0, [this, dst, value] {
        if (dst.native_offset() % 4 == 0 && dst.bytes % 4 == 0) {
            const auto b = static_cast<std::uint32_t>(std::to_integer<unsigned>(value));
            vkCmdFillBuffer(commands(), buffer_of(dst), dst.native_offset(), dst.bytes, b * 0x01010101U);
            return;
        }
        // vkCmdFillBuffer takes whole words only: copy from a filled staging range.
        std::shared_ptr<Block> s = stage(dst.bytes);
        std::memset(s->host(), std::to_integer<int>(value), static_cast<std::size_t>(dst.bytes));
        const VkBufferCopy r{
            .srcOffset = s->raw().offset, .dstOffset = dst.native_offset(), .size = dst.bytes};
        vkCmdCopyBuffer(commands(), device_->buffer_of(s->raw()), buffer_of(dst), 1, &r);
        keep(std::move(s));
    });
}

}  // namespace outcore::vulkan
