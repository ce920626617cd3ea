#include "support/faulty_device.hpp"

#include <fmt/format.h>

#include <functional>
#include <utility>

#include "outcore/core/error.hpp"
#include "outcore/device/event.hpp"
#include "outcore/device/queue.hpp"

namespace outcore::test {

namespace {

constexpr const char* kComponent = "faulty";

/// Forwards to a queue of the wrapped device, failing the copies the device says to.
class FaultyQueue final : public Queue {
public:
    FaultyQueue(FaultyDevice& device, QueueRole role)
        : Queue(device, role), device_(device), inner_(device.inner().create_queue(role)) {}

    [[nodiscard]] Queue& inner() noexcept { return *inner_; }

private:
    /// Replaces one copy by work that fails (or throws now, at submission).
    void fail(bool at_submit, const char* what) {
        const std::string message = fmt::format("injected {} failure", what);
        if (at_submit) throw BackendError(kComponent, message, -1, "injected");
        inner_->host_task([message] { throw BackendError(kComponent, message, -1, "injected"); });
    }

    void do_copy(const BufferView& src, const BufferView& dst, HostRange host,
                 std::uint64_t /*bytes*/) override {
        bool at_submit = false;
        if (device_.next_copy_fails(at_submit)) {
            fail(at_submit, "copy");
            return;
        }
        if (host.src != nullptr) {
            inner_->upload(host.src, device_.to_inner(dst));
        } else if (host.dst != nullptr) {
            inner_->download(device_.to_inner(src), host.dst);
        } else {
            inner_->copy(device_.to_inner(src), device_.to_inner(dst));
        }
    }
    void do_fill(const BufferView& dst, std::byte value) override {
        bool at_submit = false;
        if (device_.next_copy_fails(at_submit)) {
            fail(at_submit, "fill");
            return;
        }
        inner_->fill(device_.to_inner(dst), value);
    }
    void do_record(Event& event) override { inner_->record(event); }
    void do_wait(const Event& event) override { inner_->wait(event); }
    void do_host_task(std::function<void()> task) override { inner_->host_task(std::move(task)); }
    void do_synchronize() override { inner_->synchronize(); }

    FaultyDevice& device_;
    std::unique_ptr<Queue> inner_;
};

/// The wrapped device's kernels, run on the wrapped queue with the wrapped views, so
/// operations that compute (GEMM, filters) run on a FaultyDevice too.
class FaultyKernels final : public Kernels {
public:
    explicit FaultyKernels(FaultyDevice& device) : device_(device) {}

private:
    FaultyQueue& own(Queue& queue) {
        auto* q = dynamic_cast<FaultyQueue*>(&queue);
        if (q == nullptr) throw UsageError(kComponent, "a queue of another device");
        return *q;
    }
    void do_gemm(Queue& queue, const GemmTileArgs& args) override {
        GemmTileArgs a = args;
        a.a = device_.to_inner(a.a);
        a.b = device_.to_inner(a.b);
        a.c = device_.to_inner(a.c);
        device_.inner().kernels().gemm(own(queue).inner(), a);
    }
    void do_filter(Queue& queue, const FilterTileArgs& args) override {
        FilterTileArgs a = args;
        a.in = device_.to_inner(a.in);
        a.out = device_.to_inner(a.out);
        device_.inner().kernels().filter(own(queue).inner(), a);
    }
    void do_pad_edges(Queue& queue, const PadEdgesArgs& args) override {
        PadEdgesArgs a = args;
        a.buffer = device_.to_inner(a.buffer);
        device_.inner().kernels().pad_edges(own(queue).inner(), a);
    }
    bool do_supports_gemm(DType type, GemmCompute compute) const noexcept override {
        return device_.inner().kernels().supports_gemm(type, compute);
    }
    bool do_supports_narrow_c(DType type) const noexcept override {
        return device_.inner().kernels().supports_narrow_c(type);
    }

    FaultyDevice& device_;
};

}  // namespace

FaultyDevice::FaultyDevice(std::unique_ptr<Device> inner)
    : Device(inner->info()), inner_(std::move(inner)), kernels_(std::make_unique<FaultyKernels>(*this)) {}

FaultyDevice::~FaultyDevice() = default;

std::unique_ptr<FaultyDevice> FaultyDevice::cpu(const cpu::CpuDeviceOptions& options) {
    return std::make_unique<FaultyDevice>(cpu::make_cpu_device(options));
}

void FaultyDevice::fail_allocation(MemoryKind kind, std::uint64_t nth, bool persistent) {
    std::lock_guard lock(mutex_);
    allocations_ = {};
    injected_ = 0;
    alloc_armed_ = true;
    alloc_kind_ = kind;
    alloc_nth_ = nth;
    alloc_persistent_ = persistent;
}

void FaultyDevice::fail_copy(std::uint64_t nth, CopyFault mode) {
    std::lock_guard lock(mutex_);
    copies_ = 0;
    injected_ = 0;
    copy_armed_ = true;
    copy_nth_ = nth;
    copy_mode_ = mode;
}

void FaultyDevice::disarm() {
    std::lock_guard lock(mutex_);
    alloc_armed_ = false;
    copy_armed_ = false;
}

std::uint64_t FaultyDevice::allocations(MemoryKind kind) const {
    std::lock_guard lock(mutex_);
    return allocations_[static_cast<std::size_t>(kind)];
}

std::uint64_t FaultyDevice::copies() const {
    std::lock_guard lock(mutex_);
    return copies_;
}

std::uint64_t FaultyDevice::injected() const {
    std::lock_guard lock(mutex_);
    return injected_;
}

bool FaultyDevice::next_copy_fails(bool& at_submit) {
    std::lock_guard lock(mutex_);
    const std::uint64_t n = ++copies_;
    const bool fails = copy_armed_ && (n == copy_nth_ || (copy_mode_.persistent && n > copy_nth_));
    if (fails) ++injected_;
    at_submit = copy_mode_.at_submit;
    return fails;
}

BufferView FaultyDevice::to_inner(BufferView view) const noexcept {
    view.block.device_id = inner_->id();
    return view;
}

RawBlock FaultyDevice::do_allocate_native(const AllocationRequest& request) {
    {
        std::lock_guard lock(mutex_);
        const std::uint64_t n = ++allocations_[static_cast<std::size_t>(request.kind)];
        if (alloc_armed_ && request.kind == alloc_kind_ &&
            (n == alloc_nth_ || (alloc_persistent_ && n > alloc_nth_))) {
            ++injected_;
            throw OutOfMemory(kComponent,
                              fmt::format("injected failure of {} allocation {}", to_string(request.kind), n),
                              OutOfMemoryInfo{.requested_bytes = request.bytes,
                                              .tier = tier_of(request.kind),
                                              .in_use_bytes = allocated_bytes(request.kind)});
        }
    }
    return inner_->allocate_raw(request);
}

void FaultyDevice::do_deallocate_native(const RawBlock& block) noexcept {
    RawBlock own = block;
    own.device_id = inner_->id();
    inner_->deallocate_raw(own);
}

std::unique_ptr<Queue> FaultyDevice::do_create_queue(QueueRole role) {
    return std::make_unique<FaultyQueue>(*this, role);
}

std::unique_ptr<Event> FaultyDevice::do_create_event() { return inner_->create_event(); }

Kernels& FaultyDevice::do_kernels() { return *kernels_; }

void FaultyDevice::do_flush(const BufferView& range) { inner_->flush(to_inner(range)); }

void FaultyDevice::do_invalidate(const BufferView& range) { inner_->invalidate(to_inner(range)); }

}  // namespace outcore::test
