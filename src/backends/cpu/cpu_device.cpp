#include "cpu_device.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "cpu_queue.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"

namespace outcore::cpu {

namespace {
constexpr const char* kComponent = "cpu";
/// Every CPU allocation is at least cache-line aligned, whatever the request says.
constexpr std::uint64_t kMinAllocationAlignment = 64;
}  // namespace

std::uint64_t physical_memory_bytes() noexcept {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page_bytes = ::sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page_bytes <= 0) return 0;
    return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_bytes);
}

DeviceInfo make_device_info(const CpuDeviceOptions& options) {
    if (!(options.working_set_fraction > 0.0 && options.working_set_fraction <= 1.0)) {
        throw UsageError(kComponent, fmt::format("working_set_fraction {} is outside (0, 1]",
                                                 options.working_set_fraction));
    }
    if (!is_power_of_two(options.min_offset_alignment)) {
        throw UsageError(kComponent, fmt::format("min_offset_alignment {} is not a power of two",
                                                 options.min_offset_alignment));
    }
    const std::uint64_t total =
        options.total_memory_bytes != 0 ? options.total_memory_bytes : physical_memory_bytes();
    if (total == 0) throw BackendError(kComponent, "cannot read the machine's memory size", 0, "sysconf");
    const unsigned threads = std::max(1U, std::thread::hardware_concurrency());

    DeviceInfo info;
    info.name = fmt::format("CPU ({} threads)", threads);
    info.backend = "cpu";
    info.index = options.index;
    info.total_memory_bytes = total;
    // long double keeps totals near 2^64 from rounding above the total.
    info.recommended_working_set_bytes =
        std::min<std::uint64_t>(total, static_cast<std::uint64_t>(std::floor(static_cast<long double>(total) *
                                                                             options.working_set_fraction)));
    // It IS host memory. The device still behaves like a discrete GPU (Device blocks
    // have no host pointer, copies go through queues), but consumers may skip staging.
    info.unified_memory = true;
    info.min_offset_alignment = options.min_offset_alignment;
    info.max_inline_bytes = options.max_inline_bytes;
    info.max_buffer_bytes = total;
    info.max_allocation_bytes = total;
    return info;
}

CpuDevice::CpuDevice(const CpuDeviceOptions& options)
    : Device(make_device_info(options)), capacity_bytes_(info().total_memory_bytes), kernels_(*this) {}

void CpuDevice::reserve_device_bytes(std::uint64_t bytes) {
    std::uint64_t in_use = device_bytes_.load(std::memory_order_relaxed);
    do {
        if (bytes > capacity_bytes_ - in_use) {
            throw OutOfMemory(kComponent, "device memory full",
                              OutOfMemoryInfo{.requested_bytes = bytes,
                                              .tier = Tier::Device,
                                              .budget_bytes = capacity_bytes_,
                                              .in_use_bytes = in_use,
                                              .largest_free_bytes = capacity_bytes_ - in_use});
        }
    } while (!device_bytes_.compare_exchange_weak(in_use, in_use + bytes, std::memory_order_relaxed));
}

RawBlock CpuDevice::do_allocate_native(const AllocationRequest& request) {
    const bool counted = request.kind == MemoryKind::Device;
    if (counted) reserve_device_bytes(request.bytes);

    const std::uint64_t alignment =
        std::max({kMinAllocationAlignment, info().min_offset_alignment, request.alignment});
    void* memory = nullptr;
    const int rc = request.bytes > SIZE_MAX ? ENOMEM
                                            : ::posix_memalign(&memory, static_cast<std::size_t>(alignment),
                                                               static_cast<std::size_t>(request.bytes));
    if (rc != 0) {
        if (counted) device_bytes_.fetch_sub(request.bytes, std::memory_order_relaxed);
        const Tier tier = counted ? Tier::Device : Tier::HostPinned;
        throw OutOfMemory(
            kComponent, fmt::format("posix_memalign failed (errno {})", rc),
            OutOfMemoryInfo{.requested_bytes = request.bytes,
                            .tier = tier,
                            .budget_bytes = counted ? capacity_bytes_ : 0,
                            .in_use_bytes = counted ? device_bytes_.load(std::memory_order_relaxed)
                                                    : allocated_bytes(request.kind)});
    }

    RawBlock block;
    block.kind = request.kind;
    block.bytes = request.bytes;
    block.native = reinterpret_cast<std::uintptr_t>(memory);
    block.offset = 0;
    // Device memory gets no host pointer, as on a GPU: host code that touches it by
    // mistake dereferences null in tests instead of silently working on the CPU.
    block.host = counted ? nullptr : static_cast<std::byte*>(memory);
    return block;
}

void CpuDevice::do_deallocate_native(const RawBlock& block) noexcept {
    // NOLINTNEXTLINE(cppcoreguidelines-no-malloc): pairs with posix_memalign above
    std::free(reinterpret_cast<void*>(block.native));
    if (block.kind == MemoryKind::Device) device_bytes_.fetch_sub(block.bytes, std::memory_order_relaxed);
}

std::unique_ptr<Queue> CpuDevice::do_create_queue(QueueRole role) {
    try {
        return std::make_unique<CpuQueue>(*this, role);
    } catch (const std::system_error& e) {
        throw BackendError(kComponent, fmt::format("cannot start a queue worker thread: {}", e.what()),
                           e.code().value(), "std::thread");
    }
}

std::unique_ptr<Event> CpuDevice::do_create_event() { return std::make_unique<CpuEvent>(); }

std::unique_ptr<Device> make_cpu_device(const CpuDeviceOptions& options) {
    return std::make_unique<CpuDevice>(options);
}

}  // namespace outcore::cpu
