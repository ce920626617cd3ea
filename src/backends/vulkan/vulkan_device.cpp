#include "vulkan_device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "device/worker_queue.hpp"
#include "outcore/backends/vulkan.hpp"
#include "outcore/core/config.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/core/size.hpp"
#include "vulkan_check.hpp"
#include "vulkan_kernels.hpp"
#include "vulkan_queue.hpp"

namespace outcore::vulkan {

namespace {

/// Native block size of the heaps: large enough that maxMemoryAllocationCount (4096
/// on many drivers) is never near, small enough not to strand much memory.
constexpr std::uint64_t kBlockBytes = std::uint64_t{256} << 20;

std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

// --- NativeMemory -------------------------------------------------------------------

NativeMemory::NativeMemory(Context& context)
    : context_(context), heap_used_(context.memory().memoryHeapCount, 0) {
    // Every family a role submits to shares the buffers (downloads may have a family of
    // their own: OUTCORE_VULKAN_DOWNLOAD_QUEUE).
    for (const std::uint32_t f :
         {context.compute_queue().family, context.transfer_queue().family, context.download_queue().family})
        if (std::find(families_.begin(), families_.end(), f) == families_.end()) families_.push_back(f);
}

NativeMemory::~NativeMemory() {
    for (auto& [memory, entry] : entries_) {
        vkDestroyBuffer(context_.device(), entry.buffer, nullptr);
        vkFreeMemory(context_.device(), reinterpret_cast<VkDeviceMemory>(memory), nullptr);
    }
}

VkBuffer NativeMemory::buffer_of(std::uintptr_t memory) const {
    std::lock_guard lock(mutex_);
    const auto it = entries_.find(memory);
    if (it == entries_.end()) throw UsageError(kComponent, "a view of memory this device did not make");
    return it->second.buffer;
}

std::optional<NativeMemory::HostBuffer> NativeMemory::host_buffer(const void* host,
                                                                  std::uint64_t bytes) const {
    const auto* p = static_cast<const std::byte*>(host);
    std::lock_guard lock(mutex_);
    auto it = mapped_.upper_bound(p);
    if (it == mapped_.begin()) return std::nullopt;
    --it;
    const auto& [end, buffer] = it->second;
    if (p + bytes > end || p < it->first) return std::nullopt;
    return HostBuffer{.buffer = buffer, .offset = static_cast<std::uint64_t>(p - it->first)};
}

std::uint64_t NativeMemory::block_count() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
}

namespace {

/// Logs (debug) a driver call over a millisecond: making and freeing memory is where
/// per-run setup time goes (pinning host pages, clearing device memory).
void log_slow_call(const char* call, std::uint64_t bytes, std::chrono::steady_clock::time_point t0) noexcept {
    log::debug_if_slow(kComponent, t0, 1.0, "{} of {} bytes", call, bytes);
}

}  // namespace

RawBlock NativeMemory::do_allocate(const AllocationRequest& request) {
    const VkDevice device = context_.device();
    const std::uint32_t type = context_.memory_type(request.kind);
    const std::uint32_t heap = context_.memory().memoryTypes[type].heapIndex;
    const std::uint64_t heap_bytes = context_.memory().memoryHeaps[heap].size;
    const DeviceInfo& info = context_.info();
    {
        // Software limits: lavapipe (and others) hand out more than a heap holds and
        // never report VK_ERROR_OUT_OF_DEVICE_MEMORY.
        std::lock_guard lock(mutex_);
        const std::uint64_t used = heap_used_[heap];
        if (request.bytes > heap_bytes - std::min(used, heap_bytes) ||
            request.bytes > info.max_allocation_bytes) {
            throw OutOfMemory(kComponent, fmt::format("{} heap {} is full", to_string(request.kind), heap),
                              OutOfMemoryInfo{.requested_bytes = request.bytes,
                                              .tier = tier_of(request.kind),
                                              .budget_bytes = heap_bytes,
                                              .in_use_bytes = used,
                                              .largest_free_bytes = heap_bytes - std::min(used, heap_bytes)});
        }
        if (entries_.size() >= context_.limits().maxMemoryAllocationCount) {
            throw OutOfMemory(
                kComponent, "maxMemoryAllocationCount reached",
                OutOfMemoryInfo{.requested_bytes = request.bytes, .tier = tier_of(request.kind)});
        }
        heap_used_[heap] += request.bytes;
    }
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    try {
        const VkBufferCreateInfo bi{
            .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
            .pNext = nullptr,
            .flags = 0,
            .size = request.bytes,
            .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT |
                     VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
            .sharingMode = families_.size() > 1 ? VK_SHARING_MODE_CONCURRENT : VK_SHARING_MODE_EXCLUSIVE,
            .queueFamilyIndexCount = static_cast<std::uint32_t>(families_.size()),
            .pQueueFamilyIndices = families_.data()};
        check(vkCreateBuffer(device, &bi, nullptr, &buffer), "vkCreateBuffer", request.bytes);
        VkMemoryRequirements req{};
        vkGetBufferMemoryRequirements(device, buffer, &req);
        if ((req.memoryTypeBits & (1U << type)) == 0) {
            throw BackendError(kComponent, "buffers cannot live in the chosen memory type", 0,
                               "VK_ERROR_FEATURE_NOT_PRESENT");
        }
        const VkMemoryAllocateInfo ai{.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                      .pNext = nullptr,
                                      .allocationSize = req.size,
                                      .memoryTypeIndex = type};
        const auto t0 = std::chrono::steady_clock::now();
        check(vkAllocateMemory(device, &ai, nullptr, &memory), "vkAllocateMemory", request.bytes);
        log_slow_call("vkAllocateMemory", request.bytes, t0);
        check(vkBindBufferMemory(device, buffer, memory, 0), "vkBindBufferMemory");
        void* mapped = nullptr;
        if (host_visible(request.kind))
            check(vkMapMemory(device, memory, 0, VK_WHOLE_SIZE, 0, &mapped), "vkMapMemory");
        RawBlock raw;
        raw.kind = request.kind;
        raw.bytes = request.bytes;
        raw.native = reinterpret_cast<std::uintptr_t>(memory);
        raw.host = static_cast<std::byte*>(mapped);
        std::lock_guard lock(mutex_);
        entries_[raw.native] = Entry{.buffer = buffer, .bytes = request.bytes, .heap = heap};
        if (raw.host != nullptr && context_.coherent(request.kind))
            mapped_[raw.host] = {raw.host + request.bytes, buffer};
        return raw;
    } catch (...) {
        if (buffer != VK_NULL_HANDLE) vkDestroyBuffer(device, buffer, nullptr);
        if (memory != VK_NULL_HANDLE) vkFreeMemory(device, memory, nullptr);
        std::lock_guard lock(mutex_);
        heap_used_[heap] -= request.bytes;
        throw;
    }
}

void NativeMemory::do_deallocate(const RawBlock& block) noexcept {
    Entry entry;
    {
        std::lock_guard lock(mutex_);
        const auto it = entries_.find(block.native);
        if (it == entries_.end()) {
            log::error(kComponent, "freeing memory this device did not make");
            return;
        }
        entry = it->second;
        entries_.erase(it);
        heap_used_[entry.heap] -= entry.bytes;
        if (block.host != nullptr) mapped_.erase(block.host - block.offset);
    }
    vkDestroyBuffer(context_.device(), entry.buffer, nullptr);
    const auto t0 = std::chrono::steady_clock::now();
    vkFreeMemory(context_.device(), reinterpret_cast<VkDeviceMemory>(block.native), nullptr);
    log_slow_call("vkFreeMemory", entry.bytes, t0);
}

// --- VulkanDevice -------------------------------------------------------------------

VulkanDevice::VulkanDevice(std::unique_ptr<Context> context, const GemmTile& gemm_tile)
    : Device(context->info()), context_(std::move(context)), memory_(*context_) {
    const std::uint64_t alignment = info().min_offset_alignment;
    const std::uint64_t block = std::min(kBlockBytes, info().max_allocation_bytes);
    for (int k = 0; k < kMemoryKindCount; ++k) {
        heaps_[k] = std::make_unique<alloc::Heap>(
            memory_, alignment,
            alloc::HeapOptions{
                .kind = static_cast<MemoryKind>(k), .block_bytes = block, .tag = "vulkan.block"});
    }
    staging_ = std::make_unique<alloc::Heap>(
        memory_, alignment,
        alloc::HeapOptions{.kind = MemoryKind::HostPinned,
                           .block_bytes = std::min<std::uint64_t>(block, 64 * kMiB),
                           .tag = "vulkan.staging"});
    kernels_ = std::make_unique<VulkanKernels>(*this, gemm_tile);
}

VulkanDevice::~VulkanDevice() {
    // Every queue is gone by now (the Device contract); wait anyway before the
    // pipelines and memory go.
    (void)vkDeviceWaitIdle(context_->device());
    kernels_.reset();
    staging_.reset();
    for (auto& h : heaps_) h.reset();
}

RawBlock VulkanDevice::do_allocate_native(const AllocationRequest& request) {
    return heaps_[static_cast<int>(request.kind)]->allocate_raw(request);
}

void VulkanDevice::do_deallocate_native(const RawBlock& block) noexcept {
    alloc::Heap& heap = *heaps_[static_cast<int>(block.kind)];
    heap.deallocate_raw(block);
    (void)heap.trim();  // give empty blocks back, so the device's memory tracks its use
}

std::unique_ptr<Queue> VulkanDevice::do_create_queue(QueueRole role) {
    return std::make_unique<VulkanQueue>(*this, role);
}

std::unique_ptr<Event> VulkanDevice::do_create_event() { return std::make_unique<detail::WorkerEvent>(); }

Kernels& VulkanDevice::do_kernels() { return *kernels_; }

VkMappedMemoryRange VulkanDevice::mapped_range(const BufferView& range) const noexcept {
    const std::uint64_t atom = std::max<std::uint64_t>(context_->limits().nonCoherentAtomSize, 1);
    const std::uint64_t begin = range.native_offset() / atom * atom;
    const std::uint64_t end = align_up(range.native_offset() + range.bytes, atom);
    return VkMappedMemoryRange{.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE,
                               .pNext = nullptr,
                               .memory = reinterpret_cast<VkDeviceMemory>(range.block.native),
                               .offset = begin,
                               .size = end - begin};
}

void VulkanDevice::do_flush(const BufferView& range) {
    if (context_->coherent(MemoryKind::HostCached) || range.bytes == 0) return;
    const VkMappedMemoryRange r = mapped_range(range);
    OUTCORE_VK_CHECK(vkFlushMappedMemoryRanges(context_->device(), 1, &r));
}

void VulkanDevice::do_invalidate(const BufferView& range) {
    if (context_->coherent(MemoryKind::HostCached) || range.bytes == 0) return;
    const VkMappedMemoryRange r = mapped_range(range);
    OUTCORE_VK_CHECK(vkInvalidateMappedMemoryRanges(context_->device(), 1, &r));
}

// --- public entry points and the registry -------------------------------------------

VulkanProbe probe_vulkan() {
    VulkanProbe result;
    try {
        const Instance instance;
        const std::vector<VkPhysicalDevice> devices = instance.devices();
        for (std::uint32_t i = 0; i < devices.size(); ++i) result.devices.push_back(describe(devices[i], i));
        if (!devices.empty()) {  // discrete GPUs come first: if the first is the CPU, all are
            VkPhysicalDeviceProperties first{};
            vkGetPhysicalDeviceProperties(devices.front(), &first);
            result.software = first.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
        }
        if (devices.empty()) result.reason = "no Vulkan device (the loader found no driver with one)";
    } catch (const std::exception& e) {
        result.devices.clear();
        result.reason = fmt::format("no Vulkan: {}", e.what());
    }
    return result;
}

std::unique_ptr<Device> make_vulkan_device(const VulkanDeviceOptions& options) {
    return std::make_unique<VulkanDevice>(std::make_unique<Context>(options.index), options.gemm_tile);
}

namespace {

BackendProbe probe(const Config& /*config*/) {
    BackendProbe result;
    result.backend = "vulkan";
    VulkanProbe p = probe_vulkan();
    result.devices = std::move(p.devices);
    result.available = !result.devices.empty();
    result.software = p.software;
    result.reason = std::move(p.reason);
    return result;
}

std::unique_ptr<Device> open(std::uint32_t index, const Config& /*config*/) {
    return make_vulkan_device({.index = index});
}

}  // namespace

BackendEntry backend_entry() {
    return BackendEntry{.name = "vulkan", .is_gpu = true, .probe = probe, .open = open};
}

}  // namespace outcore::vulkan
