#include "cuda_device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <exception>
#include <optional>
#include <system_error>

#include "cuda_check.hpp"
#include "cuda_filters.hpp"
#include "cuda_queue.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/core/size.hpp"

namespace outcore::cuda {

namespace {

/// cudaMalloc returns addresses aligned to at least this (CUDA Programming Guide).
constexpr std::uint64_t kDeviceAlignment = 256;
/// cudaHostAlloc returns whole pages.
constexpr std::uint64_t kPinnedAlignment = 4096;
/// Hopper's cuBLAS wants a 32 MiB workspace for its fastest kernels; older GPUs 4 MiB
/// (cuBLAS documentation, "cublasSetWorkspace").
constexpr std::uint64_t kHopperWorkspaceBytes = 32ULL << 20;
constexpr std::uint64_t kWorkspaceBytes = 4ULL << 20;

int checked_ordinal(std::uint32_t ordinal) {
    int count = 0;
    OUTCORE_CUDA_CHECK(cudaGetDeviceCount(&count));
    if (ordinal >= static_cast<std::uint32_t>(count)) {
        throw UsageError(kComponent, fmt::format("no device cuda:{} ({} CUDA device(s))", ordinal, count));
    }
    return static_cast<int>(ordinal);
}

/// Bytes to ask for so that an `alignment`-aligned range of `bytes` fits in an
/// allocation the API aligns to `natural`; nullopt on overflow.
std::optional<std::uint64_t> padded_bytes(std::uint64_t bytes, std::uint64_t alignment,
                                          std::uint64_t natural) {
    const std::uint64_t pad = alignment > natural ? alignment - natural : 0;
    if (bytes > UINT64_MAX - pad) return std::nullopt;
    return bytes + pad;
}

std::uintptr_t align_up(std::uintptr_t address, std::uint64_t alignment) {
    return (address + alignment - 1) & ~static_cast<std::uintptr_t>(alignment - 1);
}

}  // namespace

std::uint64_t default_reserve_bytes(std::uint64_t total_memory_bytes) noexcept {
    return std::max<std::uint64_t>(512ULL << 20, total_memory_bytes / 20);
}

CurrentDeviceScope::CurrentDeviceScope() noexcept {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
        (void)cudaGetLastError();
        previous_ = -1;
    }
}

CurrentDeviceScope::~CurrentDeviceScope() {
    if (previous_ >= 0 && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
}

DeviceInfo make_device_info(const CudaDeviceOptions& options) {
    const int ordinal = checked_ordinal(options.ordinal);
    const CurrentDeviceScope scope;
    use_device(ordinal);
    cudaDeviceProp props{};
    OUTCORE_CUDA_CHECK(cudaGetDeviceProperties(&props, ordinal));
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    OUTCORE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));

    DeviceInfo info;
    info.name = props.name;
    info.backend = "cuda";
    info.index = options.ordinal;
    info.total_memory_bytes = total_bytes;
    const std::uint64_t reserve =
        options.reserve_bytes != 0 ? options.reserve_bytes : default_reserve_bytes(total_bytes);
    // Another process may hold most of the card: then half of what is free, never 0.
    info.recommended_working_set_bytes =
        free_bytes > reserve ? free_bytes - reserve : std::max<std::uint64_t>(free_bytes / 2, 1);
    info.unified_memory = props.integrated != 0;
    info.min_offset_alignment = kDeviceAlignment;
    // The filter kernels take up to this many bytes of taps by value in their launch
    // parameters (cuda_filters.hpp): 4 KiB of taps plus the tile description stays
    // well inside the 32 KiB parameter limit of CUDA 12.1+ (the classic limit was 4 KiB
    // for everything, which is why the taps do not simply grow to 32 KiB).
    info.max_inline_bytes = static_cast<std::uint64_t>(kMaxInlineTaps) * sizeof(float);
    info.max_buffer_bytes = total_bytes;
    info.max_allocation_bytes = total_bytes;
    info.gemm_workspace_bytes = props.major >= 9 ? kHopperWorkspaceBytes : kWorkspaceBytes;
    info.compute_lanes = 2;
    return info;
}

// --- EventPool -------------------------------------------------------------------

EventPool::~EventPool() {
    for (cudaEvent_t e : free_) {
        if (cudaEventDestroy(e) != cudaSuccess) (void)cudaGetLastError();
    }
}

cudaEvent_t EventPool::acquire() {
    {
        std::lock_guard lock(mutex_);
        if (!free_.empty()) {
            cudaEvent_t e = free_.back();
            free_.pop_back();
            return e;
        }
    }
    use_device(ordinal_);
    cudaEvent_t e = nullptr;
    OUTCORE_CUDA_CHECK(cudaEventCreateWithFlags(&e, flags_));
    return e;
}

void EventPool::release(cudaEvent_t event) noexcept {
    try {
        std::lock_guard lock(mutex_);
        free_.push_back(event);
    } catch (...) {
        if (cudaEventDestroy(event) != cudaSuccess) (void)cudaGetLastError();
    }
}

// --- CudaDevice ------------------------------------------------------------------

CudaDevice::CudaDevice(const CudaDeviceOptions& options)
    : Device(make_device_info(options)),
      ordinal_(static_cast<int>(options.ordinal)),
      events_(ordinal_),
      kernels_(*this) {
    use_device(ordinal_);
    int optin = 0;
    OUTCORE_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ordinal_));
    max_shared_bytes_ = std::max(optin, max_shared_bytes_);
    OUTCORE_CUDA_CHECK(prepare_filter_kernels(max_shared_bytes_));
    cublas_workspace_bytes_ = info().gemm_workspace_bytes;
}

CudaDevice::~CudaDevice() = default;

void CudaDevice::throw_out_of_memory(const AllocationRequest& request, const char* call) const {
    std::uint64_t free_now = 0;
    if (request.kind == MemoryKind::Device) {
        std::size_t free_bytes = 0;
        std::size_t total_bytes = 0;
        if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
            free_now = free_bytes;
        } else {
            (void)cudaGetLastError();
        }
    }
    throw OutOfMemory(
        kComponent, fmt::format("{} failed", call),
        OutOfMemoryInfo{.requested_bytes = request.bytes,
                        .tier = tier_of(request.kind),
                        .budget_bytes = request.kind == MemoryKind::Device ? info().total_memory_bytes : 0,
                        .in_use_bytes = allocated_bytes(request.kind),
                        // CUDA maps pages anywhere in its address space, so
                        // any request up to the free bytes can succeed.
                        .largest_free_bytes = free_now});
}

RawBlock CudaDevice::do_allocate_native(const AllocationRequest& request) {
    RawBlock block;
    block.kind = request.kind;
    block.bytes = request.bytes;
    if (request.kind == MemoryKind::HostCached) {
        // Pageable host memory: never registered, so the OS may page it; copies
        // through it are staged by the CUDA runtime.
        const std::uint64_t alignment =
            std::max<std::uint64_t>(request.alignment, info().min_offset_alignment);
        void* memory = nullptr;
        const int rc = request.bytes > SIZE_MAX
                           ? ENOMEM
                           : ::posix_memalign(&memory, static_cast<std::size_t>(alignment),
                                              static_cast<std::size_t>(request.bytes));
        if (rc != 0) throw_out_of_memory(request, "posix_memalign");
        block.native = reinterpret_cast<std::uintptr_t>(memory);
        block.cookie = block.native;
        block.host = static_cast<std::byte*>(memory);
        return block;
    }

    const bool on_device = request.kind == MemoryKind::Device;
    const std::uint64_t natural = on_device ? kDeviceAlignment : kPinnedAlignment;
    const std::optional<std::uint64_t> bytes = padded_bytes(request.bytes, request.alignment, natural);
    if (!bytes || *bytes > SIZE_MAX) throw_out_of_memory(request, on_device ? "cudaMalloc" : "cudaHostAlloc");
    use_device(ordinal_);
    void* base = nullptr;
    const cudaError_t rc =
        on_device ? cudaMalloc(&base, static_cast<std::size_t>(*bytes))
                  // Portable: pinned for every device's context, as
                  // multi-GPU staging needs.
                  : cudaHostAlloc(&base, static_cast<std::size_t>(*bytes), cudaHostAllocPortable);
    if (rc == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();  // not sticky: the device stays usable
        throw_out_of_memory(request, on_device ? "cudaMalloc" : "cudaHostAlloc");
    }
    check(rc, on_device ? "cudaMalloc" : "cudaHostAlloc");
    const std::uintptr_t address =
        align_up(reinterpret_cast<std::uintptr_t>(base), std::max<std::uint64_t>(request.alignment, 1));
    block.native = address;
    block.cookie = reinterpret_cast<std::uintptr_t>(base);
    block.host = on_device ? nullptr : reinterpret_cast<std::byte*>(address);
    return block;
}

void CudaDevice::do_deallocate_native(const RawBlock& block) noexcept {
    if (block.kind == MemoryKind::HostCached) {
        // NOLINTNEXTLINE(cppcoreguidelines-no-malloc): pairs with posix_memalign above
        std::free(reinterpret_cast<void*>(block.cookie));
        return;
    }
    if (cudaSetDevice(ordinal_) != cudaSuccess) (void)cudaGetLastError();
    void* base = reinterpret_cast<void*>(block.cookie);
    const cudaError_t rc = block.kind == MemoryKind::Device ? cudaFree(base) : cudaFreeHost(base);
    if (rc != cudaSuccess) {
        (void)cudaGetLastError();
        try {
            log::warn(kComponent, "freeing {} bytes of {} memory failed: {}", block.bytes,
                      to_string(block.kind), error_name(rc));
        } catch (...) {
            // Logging must not turn a failed free into a crash.
        }
    }
}

std::unique_ptr<Queue> CudaDevice::do_create_queue(QueueRole role) {
    try {
        return std::make_unique<CudaQueue>(*this, role);
    } catch (const std::system_error& e) {
        throw BackendError(kComponent, fmt::format("cannot start a queue worker thread: {}", e.what()),
                           e.code().value(), "std::thread");
    }
}

std::unique_ptr<Event> CudaDevice::do_create_event() { return std::make_unique<CudaEvent>(*this); }

std::unique_ptr<Device> make_cuda_device(const CudaDeviceOptions& options) {
    return std::make_unique<CudaDevice>(options);
}

}  // namespace outcore::cuda
