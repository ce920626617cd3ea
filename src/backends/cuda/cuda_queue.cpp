#include "cuda_queue.hpp"

#include <cstddef>
#include <cstring>
#include <utility>

#include "cuda_blas.hpp"
#include "cuda_check.hpp"
#include "cuda_device.hpp"
#include "device/traced_ops.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/monitor/hooks.hpp"

namespace outcore::cuda {

namespace {

/// Where the bytes of one side of a copy live, as far as the copy engine cares.
enum class Where : unsigned char { Device, Pinned, Pageable };

Where where_of(MemoryKind kind) noexcept {
    switch (kind) {
        case MemoryKind::Device: return Where::Device;
        case MemoryKind::HostPinned: return Where::Pinned;
        case MemoryKind::HostCached: return Where::Pageable;
    }
    return Where::Pageable;
}

/// A caller's host pointer: pinned (cudaHostAlloc / cudaHostRegister, any allocator),
/// GPU-visible (device or managed memory passed as "host"), or pageable.
Where where_of_host(const void* pointer) noexcept {
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
        (void)cudaGetLastError();
        return Where::Pageable;
    }
    switch (attributes.type) {
        case cudaMemoryTypeHost: return Where::Pinned;
        case cudaMemoryTypeDevice:
        case cudaMemoryTypeManaged: return Where::Device;
        default: return Where::Pageable;
    }
}

/// How a traced copy between `a` and `b` is named (docs/tracing.md).
monitor::OpKind copy_kind(Where a, Where b) noexcept {
    return detail::copy_kind(a != Where::Device, b != Where::Device);
}

/// Anchors older than this are replaced: cudaEventElapsedTime is a float of
/// milliseconds, whose resolution coarsens with the distance from the anchor.
constexpr std::int64_t kReanchorNs = 1'000'000'000;

void warn_noexcept(const char* what, cudaError_t rc) noexcept {
    (void)cudaGetLastError();
    try {
        log::warn(kComponent, "{} failed: {}", what, error_name(rc));
    } catch (...) {
        // nothing more to do in a destructor
    }
}

}  // namespace

// --- RecordSlot / CudaEvent ------------------------------------------------------

RecordSlot::RecordSlot(EventPool& pool) : pool_(&pool), native_(pool.acquire()) {}

RecordSlot::~RecordSlot() { pool_->release(native_); }

RecordSlot::State RecordSlot::state() const {
    std::lock_guard lock(mutex_);
    return state_;
}

void RecordSlot::mark_recorded() noexcept {
    {
        std::lock_guard lock(mutex_);
        state_ = State::Recorded;
    }
    cv_.notify_all();
}

void RecordSlot::mark_failed(std::exception_ptr failure) noexcept {
    {
        std::lock_guard lock(mutex_);
        state_ = State::Failed;
        failure_ = std::move(failure);
    }
    cv_.notify_all();
}

std::exception_ptr RecordSlot::await() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return state_ != State::Pending; });
    return failure_;
}

std::shared_ptr<RecordSlot> CudaEvent::arm() { return records_.arm(device_->events()); }

void CudaEvent::do_wait() {
    const std::shared_ptr<RecordSlot> slot = last();
    if (!slot) return;
    if (std::exception_ptr failure = slot->await()) std::rethrow_exception(failure);
    OUTCORE_CUDA_CHECK(cudaEventSynchronize(slot->native()));
}

bool CudaEvent::do_query() {
    const std::shared_ptr<RecordSlot> slot = last();
    if (!slot) return true;
    switch (slot->state()) {
        case RecordSlot::State::Pending: return false;
        case RecordSlot::State::Failed: return true;
        case RecordSlot::State::Recorded: break;
    }
    const cudaError_t rc = cudaEventQuery(slot->native());
    if (rc == cudaSuccess) return true;
    (void)cudaGetLastError();
    // Any other error is final: the event will not complete, and wait() reports it.
    return rc != cudaErrorNotReady;
}

// --- CudaQueue -------------------------------------------------------------------

CudaQueue::CudaQueue(CudaDevice& device, QueueRole role) : Queue(device, role), cuda_device_(&device) {
    use_device(device.ordinal());
    OUTCORE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    // This backend's queues report their copies and kernels themselves (device-timed)
    // while a monitor observes: layers that time queue work with host tasks skip it.
    monitor::set_device_timed(device.id());
    try {
        worker_ = std::thread([this] { run_worker(); });
    } catch (...) {
        (void)cudaStreamDestroy(stream_);
        throw;
    }
}

CudaQueue::~CudaQueue() {
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
    if (const cudaError_t rc = cudaSetDevice(cuda_device_->ordinal()); rc != cudaSuccess)
        warn_noexcept("cudaSetDevice", rc);
    if (const cudaError_t rc = cudaStreamSynchronize(stream_); rc != cudaSuccess) {
        warn_noexcept("cudaStreamSynchronize in a queue's destructor", rc);
    }
    if (op_log_) {
        (void)op_log_->poll();  // the stream has drained: every timed op is reported
        published_log_.store(nullptr, std::memory_order_release);
        op_log_.reset();
    }
    if (anchor_stream_ != nullptr) {
        if (const cudaError_t rc = cudaStreamDestroy(anchor_stream_); rc != cudaSuccess)
            warn_noexcept("cudaStreamDestroy (anchor stream)", rc);
    }
    if (failure_) {
        try {
            std::rethrow_exception(failure_);
        } catch (const std::exception& e) {
            log::warn(kComponent, "queue destroyed with an unreported failure: {}", e.what());
        } catch (...) {
            log::warn(kComponent, "queue destroyed with an unreported failure (not a std::exception)");
        }
    }
    // cublas_ is only set once cuBLAS was loaded, so loaded_cublas_api() is not null.
    if (const CublasApi* blas = loaded_cublas_api(); cublas_ != nullptr && blas != nullptr) {
        if (const cublasStatus_t rc = blas->destroy(cublas_); rc != CUBLAS_STATUS_SUCCESS) {
            log::warn(kComponent, "cublasDestroy failed: status {}", static_cast<int>(rc));
        }
    }
    cublas_workspace_.reset();
    if (const cudaError_t rc = cudaStreamDestroy(stream_); rc != cudaSuccess)
        warn_noexcept("cudaStreamDestroy", rc);
}

cublasHandle_t CudaQueue::cublas() {
    if (cublas_ != nullptr) return cublas_;
    use_device(cuda_device_->ordinal());
    const std::uint64_t bytes = cuda_device_->cublas_workspace_bytes();
    // Counted like any Device block, so budgets see it; one per queue because queues
    // run GEMMs concurrently and a workspace must not be shared between streams.
    Block workspace =
        cuda_device_->allocate({.bytes = bytes, .kind = MemoryKind::Device, .tag = "cublas.workspace"});
    const CublasApi& blas = cublas_api();
    cublasHandle_t handle = nullptr;
    OUTCORE_CUBLAS_CHECK(blas.create(&handle));
    try {
        OUTCORE_CUBLAS_CHECK(blas.set_stream(handle, stream_));
        OUTCORE_CUBLAS_CHECK(blas.set_workspace(handle, device_address(BufferView(workspace)), bytes));
    } catch (...) {
        (void)blas.destroy(handle);
        throw;
    }
    cublas_workspace_ = std::move(workspace);
    cublas_ = handle;
    return cublas_;
}

void CudaQueue::submit(GpuOp op) {
    if (monitor::observed()) {
        const std::string_view name = monitor::current_op_name();
        op = timed(std::move(op), monitor::OpKind::Kernel, name.empty() ? "compute" : name, 0);
    }
    push(Item{.kind = ItemKind::Gpu, .op = std::move(op), .task = {}, .slot = {}});
}

void CudaQueue::prepare_timing() {
    if (!op_log_) {
        use_device(cuda_device_->ordinal());
        if (anchor_stream_ == nullptr)
            OUTCORE_CUDA_CHECK(cudaStreamCreateWithFlags(&anchor_stream_, cudaStreamNonBlocking));
        if (!timing_) timing_ = std::make_unique<TimingEvents>(cuda_device_->ordinal());
        op_log_ = std::make_unique<monitor::DeviceOpLog>(*timing_);
        published_log_.store(op_log_.get(), std::memory_order_release);
    }
    if (op_log_->has_anchor() && monitor::now_ns() - op_log_->anchor_ns() < kReanchorNs) return;
    use_device(cuda_device_->ordinal());
    cudaEvent_t anchor = timing_->acquire();
    monitor::ClockAnchor at{};
    try {
        at = take_anchor(anchor, anchor_stream_);
    } catch (...) {
        timing_->release(TimingEvents::stamp(anchor));
        throw;
    }
    op_log_->set_anchor(TimingEvents::stamp(anchor), at);
}

CudaQueue::GpuOp CudaQueue::timed(GpuOp op, monitor::OpKind kind, std::string_view name,
                                  std::uint64_t bytes) {
    // General queues (the swap store's, one-off copies) are not queue tracks: the swap
    // store reports its moves on the swap track itself.
    // Only what a layer claimed (monitor::OpNameScope: Pipeline's work) is traced.
    if (!monitor::observed() || !monitor::op_scope_open() || timing_failed_ || role() == QueueRole::General)
        return op;
    try {
        prepare_timing();
        (void)op_log_->poll();  // reports what has finished since the last op
        cudaEvent_t begin = timing_->acquire();
        cudaEvent_t end = nullptr;
        try {
            end = timing_->acquire();
        } catch (...) {
            timing_->release(TimingEvents::stamp(begin));
            throw;
        }
        const std::shared_ptr<monitor::TimedOp> handle =
            op_log_->add(monitor::OpEvent{.kind = kind,
                                          .queue = detail::queue_track(role()),
                                          .name = name,
                                          .bytes = bytes,
                                          .device_id = cuda_device_->id()},
                         TimingEvents::stamp(begin), TimingEvents::stamp(end));
        // Abandons the op when the last copy of the work dies without having run it
        // (a failed queue skips it): the log then drops it instead of waiting.
        const std::shared_ptr<monitor::TimedOp> guard(handle.get(),
                                                      [handle](monitor::TimedOp* t) { t->abandon(); });
        return [op, begin, end, guard](cudaStream_t stream) {
            OUTCORE_CUDA_CHECK(cudaEventRecord(begin, stream));
            op(stream);
            OUTCORE_CUDA_CHECK(cudaEventRecord(end, stream));
            guard->issued();
        };
    } catch (const std::exception& e) {
        timing_failed_ = true;
        log::warn(kComponent, "tracing: cannot time this queue's work with CUDA events ({}); not traced",
                  e.what());
        return op;
    }
}

void CudaQueue::do_copy(const BufferView& src, const BufferView& dst, HostRange host, std::uint64_t bytes) {
    const void* from = host.src != nullptr ? host.src : device_address(src);
    void* to = host.dst != nullptr ? host.dst : device_address(dst);
    const Where a = host.src != nullptr ? where_of_host(from) : where_of(src.block.kind);
    const Where b = host.dst != nullptr ? where_of_host(to) : where_of(dst.block.kind);
    const auto n = static_cast<std::size_t>(bytes);
    if (a != Where::Device && b != Where::Device) {
        // Host to host: whether the runtime orders such a cudaMemcpyAsync after the
        // stream's earlier work is not documented for pageable memory, so it is a plain
        // memcpy once the stream has drained.
        push(Item{.kind = ItemKind::Host,
                  .op = {},
                  .task = [from, to, n] { std::memcpy(to, from, n); },
                  .slot = {}});
        return;
    }
    const ItemKind kind = a == Where::Pageable || b == Where::Pageable ? ItemKind::Blocking : ItemKind::Gpu;
    GpuOp op = [from, to, n](cudaStream_t stream) {
        OUTCORE_CUDA_CHECK(cudaMemcpyAsync(to, from, n, cudaMemcpyDefault, stream));
    };
    if (monitor::observed()) {
        const monitor::OpKind traced = copy_kind(a, b);
        op = timed(std::move(op), traced, detail::copy_name(traced), bytes);
    }
    push(Item{.kind = kind, .op = std::move(op), .task = {}, .slot = {}});
}

void CudaQueue::do_copy_2d(const BufferView& buffer, HostRange host, const Copy2D& shape) {
    const bool up = host.src != nullptr;
    void* dev = device_address(buffer);
    const void* from = up ? host.src : dev;
    void* to = up ? dev : host.dst;
    const std::size_t from_pitch = up ? shape.host_pitch_bytes : shape.buffer_pitch_bytes;
    const std::size_t to_pitch = up ? shape.buffer_pitch_bytes : shape.host_pitch_bytes;
    const auto width = static_cast<std::size_t>(shape.width_bytes);
    const auto rows = static_cast<std::size_t>(shape.rows);
    const Where h = where_of_host(up ? host.src : host.dst);
    const Where d = where_of(buffer.block.kind);
    if (h != Where::Device && d != Where::Device) {
        push(Item{.kind = ItemKind::Host,
                  .op = {},
                  .task =
                      [from, to, from_pitch, to_pitch, width, rows] {
                          for (std::size_t r = 0; r < rows; ++r) {
                              std::memcpy(static_cast<std::byte*>(to) + r * to_pitch,
                                          static_cast<const std::byte*>(from) + r * from_pitch, width);
                          }
                      },
                  .slot = {}});
        return;
    }
    const ItemKind kind = h == Where::Pageable || d == Where::Pageable ? ItemKind::Blocking : ItemKind::Gpu;
    GpuOp op = [from, to, from_pitch, to_pitch, width, rows](cudaStream_t stream) {
        OUTCORE_CUDA_CHECK(
            cudaMemcpy2DAsync(to, to_pitch, from, from_pitch, width, rows, cudaMemcpyDefault, stream));
    };
    if (monitor::observed()) {
        const monitor::OpKind traced = up ? copy_kind(h, d) : copy_kind(d, h);
        op = timed(std::move(op), traced, detail::copy_name(traced), shape.rows * shape.width_bytes);
    }
    push(Item{.kind = kind, .op = std::move(op), .task = {}, .slot = {}});
}

void CudaQueue::do_fill(const BufferView& dst, std::byte value) {
    void* to = device_address(dst);
    const auto n = static_cast<std::size_t>(dst.bytes);
    const int v = std::to_integer<int>(value);
    if (dst.block.kind == MemoryKind::HostCached) {
        push(Item{
            .kind = ItemKind::Host, .op = {}, .task = [to, v, n] { std::memset(to, v, n); }, .slot = {}});
        return;
    }
    GpuOp op = [to, v, n](cudaStream_t stream) { OUTCORE_CUDA_CHECK(cudaMemsetAsync(to, v, n, stream)); };
    if (monitor::observed()) op = timed(std::move(op), monitor::OpKind::Kernel, "fill", 0);
    push(Item{.kind = ItemKind::Gpu, .op = std::move(op), .task = {}, .slot = {}});
}

void CudaQueue::do_record(Event& event) {
    auto* cuda_event = dynamic_cast<CudaEvent*>(&event);
    if (cuda_event == nullptr)
        throw UsageError(kComponent, "record: the event was not made by a CUDA device");
    if (cuda_event->device().ordinal() != cuda_device_->ordinal()) {
        throw UsageError(kComponent,
                         "record: the event belongs to another GPU (record it on that GPU's queues)");
    }
    push(Item{.kind = ItemKind::Record, .op = {}, .task = {}, .slot = cuda_event->arm()});
}

void CudaQueue::do_wait(const Event& event) {
    const auto* cuda_event = dynamic_cast<const CudaEvent*>(&event);
    if (cuda_event == nullptr) throw UsageError(kComponent, "wait: the event was not made by a CUDA device");
    // The record current now: later records do not move this wait's target.
    std::shared_ptr<RecordSlot> slot = cuda_event->last();
    if (!slot) return;
    push(Item{.kind = ItemKind::Wait, .op = {}, .task = {}, .slot = std::move(slot)});
}

void CudaQueue::do_host_task(std::function<void()> task) {
    push(Item{.kind = ItemKind::Host, .op = {}, .task = std::move(task), .slot = {}});
}

void CudaQueue::do_synchronize() {
    std::exception_ptr failure;
    {
        std::unique_lock lock(mutex_);
        idle_cv_.wait(lock, [this] { return deferred_.empty() && !busy_; });
        failure = std::exchange(failure_, nullptr);
    }
    const cudaError_t rc = cudaStreamSynchronize(stream_);
    // Any thread may synchronize: the log is reached through its published pointer.
    if (monitor::DeviceOpLog* timed_ops = published_log_.load(std::memory_order_acquire);
        timed_ops != nullptr && rc == cudaSuccess)
        (void)timed_ops->poll();
    if (failure) {
        if (rc != cudaSuccess) (void)cudaGetLastError();
        std::rethrow_exception(failure);  // the first failure wins
    }
    check(rc, "cudaStreamSynchronize");
}

void CudaQueue::push(Item item) {
    std::unique_lock lock(mutex_);
    const bool direct = deferred_.empty() && !busy_ &&
                        (item.kind == ItemKind::Gpu || item.kind == ItemKind::Record ||
                         (item.kind == ItemKind::Wait && item.slot->state() != RecordSlot::State::Pending));
    if (direct) {
        run_direct(item);
        return;
    }
    deferred_.push_back(std::move(item));
    lock.unlock();
    work_cv_.notify_one();
}

void CudaQueue::run_direct(Item& item) {
    if (failure_) {
        // Skipped, as on the worker, until synchronize() reports the failure.
        if (item.kind == ItemKind::Record) item.slot->mark_failed(failure_);
        return;
    }
    try {
        use_device(cuda_device_->ordinal());
        switch (item.kind) {
            case ItemKind::Record:
                OUTCORE_CUDA_CHECK(cudaEventRecord(item.slot->native(), stream_));
                item.slot->mark_recorded();
                break;
            case ItemKind::Wait:
                // Resolved already (push checked), so await() does not block.
                if (std::exception_ptr failed = item.slot->await()) {
                    failure_ = std::move(failed);  // work after a wait on failed work is skipped
                } else {
                    OUTCORE_CUDA_CHECK(cudaStreamWaitEvent(stream_, item.slot->native(), 0));
                }
                break;
            default: item.op(stream_); break;
        }
    } catch (...) {
        if (item.kind == ItemKind::Record) item.slot->mark_failed(std::current_exception());
        throw;
    }
}

void CudaQueue::run_worker() noexcept {
    std::unique_lock lock(mutex_);
    for (;;) {
        work_cv_.wait(lock, [this] { return stopping_ || !deferred_.empty(); });
        if (deferred_.empty()) break;  // stopping, and everything submitted has run
        Item item = std::move(deferred_.front());
        deferred_.pop_front();
        busy_ = true;
        // failure_ only changes here and in run_direct/synchronize, which wait while busy.
        const std::exception_ptr failure = failure_;
        lock.unlock();
        std::exception_ptr new_failure = execute(item, failure);
        item = Item{};  // release captured state outside the lock
        lock.lock();
        if (new_failure && !failure_) failure_ = std::move(new_failure);
        busy_ = false;
        if (deferred_.empty()) idle_cv_.notify_all();
    }
}

std::exception_ptr CudaQueue::execute(Item& item, const std::exception_ptr& failure) noexcept {
    if (failure) {
        if (item.kind == ItemKind::Record) item.slot->mark_failed(failure);
        return nullptr;
    }
    try {
        use_device(cuda_device_->ordinal());  // per thread; cheap when already current
        switch (item.kind) {
            case ItemKind::Gpu:
            case ItemKind::Blocking: item.op(stream_); break;
            case ItemKind::Host:
                OUTCORE_CUDA_CHECK(cudaStreamSynchronize(stream_));
                item.task();
                break;
            case ItemKind::Record:
                OUTCORE_CUDA_CHECK(cudaEventRecord(item.slot->native(), stream_));
                item.slot->mark_recorded();
                break;
            case ItemKind::Wait:
                if (std::exception_ptr failed = item.slot->await()) return failed;
                OUTCORE_CUDA_CHECK(cudaStreamWaitEvent(stream_, item.slot->native(), 0));
                break;
        }
    } catch (...) {
        std::exception_ptr e = std::current_exception();
        if (item.kind == ItemKind::Record) item.slot->mark_failed(e);
        return e;
    }
    return nullptr;
}

}  // namespace outcore::cuda
