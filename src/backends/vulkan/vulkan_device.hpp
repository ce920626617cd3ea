// vulkan_device.hpp — the Vulkan backend's Device and its native memory (private).
//
// Memory: NativeMemory makes one VkDeviceMemory with one VkBuffer over all of it per
// request (vkAllocateMemory, bind, persistent map for host-visible kinds); a Heap per
// kind sits on it, so user allocations are ranges of large blocks, never one
// vkAllocateMemory each. RawBlock::native is the VkDeviceMemory; buffer_of() finds
// the VkBuffer that copies and bindings use, at RawBlock::offset + view offset.
// NativeMemory also enforces every heap's size in software.
#pragma once

#include <vulkan/vulkan.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "device/host_writes.hpp"
#include "outcore/alloc/heap.hpp"
#include "outcore/backends/vulkan.hpp"
#include "outcore/device/device.hpp"
#include "outcore/device/registry.hpp"
#include "vulkan_context.hpp"

namespace outcore::vulkan {

[[nodiscard]] BackendEntry backend_entry();

class VulkanKernels;

/// vkAllocateMemory + one VkBuffer per block. Thread-safe.
class NativeMemory final : public Allocator {
public:
    explicit NativeMemory(Context& context);
    ~NativeMemory() override;

    /// The buffer spanning the native block `memory` (RawBlock::native).
    [[nodiscard]] VkBuffer buffer_of(std::uintptr_t memory) const;
    /// Live native blocks (against maxMemoryAllocationCount).
    [[nodiscard]] std::uint64_t block_count() const;

    /// Where host memory lies inside a coherent host-visible block of this memory (a
    /// HostPinned Block, staging included, or HostCached where its type is coherent):
    /// its buffer and the offset there. Copies
    /// from and to such memory need no staging. Empty for any other memory.
    struct HostBuffer {
        VkBuffer buffer = VK_NULL_HANDLE;
        std::uint64_t offset = 0;
    };
    [[nodiscard]] std::optional<HostBuffer> host_buffer(const void* host, std::uint64_t bytes) const;

private:
    struct Entry {
        VkBuffer buffer = VK_NULL_HANDLE;
        std::uint64_t bytes = 0;
        std::uint32_t heap = 0;
    };
    RawBlock do_allocate(const AllocationRequest& request) override;
    void do_deallocate(const RawBlock& block) noexcept override;

    Context& context_;
    std::vector<std::uint32_t> families_;  ///< queue families that share every buffer
    mutable std::mutex mutex_;
    std::unordered_map<std::uintptr_t, Entry> entries_;
    /// Coherent mapped blocks by the address of their first byte: one past the last, buffer.
    std::map<const std::byte*, std::pair<const std::byte*, VkBuffer>> mapped_;
    std::vector<std::uint64_t> heap_used_;
};

class VulkanDevice final : public Device {
public:
    VulkanDevice(std::unique_ptr<Context> context, const GemmTile& gemm_tile);
    ~VulkanDevice() override;

    [[nodiscard]] Context& context() noexcept { return *context_; }
    [[nodiscard]] const Context& context() const noexcept { return *context_; }
    [[nodiscard]] VkBuffer buffer_of(const RawBlock& block) const { return memory_.buffer_of(block.native); }
    [[nodiscard]] std::optional<NativeMemory::HostBuffer> host_buffer(const void* host,
                                                                      std::uint64_t bytes) const {
        return memory_.host_buffer(host, bytes);
    }
    /// Host-visible scratch memory for copies to and from pageable host memory; not
    /// counted in the device's accounting (the backend's own, like a driver's).
    [[nodiscard]] Allocator& staging() noexcept { return *staging_; }
    /// Host ranges the device will write (direct downloads into host-visible memory,
    /// any queue) in work not finished: a staged upload packs its bytes only once no
    /// such write overlaps them (detail::PendingHostWrites).
    [[nodiscard]] detail::PendingHostWrites& host_writes() noexcept { return host_writes_; }
    /// The lane of the next compute queue made: 0, 1, 0, ... so a pipeline's two
    /// compute queues, made one after the other, land on the two compute VkQueues
    /// (Context::compute_queue(lane)). Should another thread make one in between, both
    /// may share a VkQueue: still correct, only without the overlap.
    [[nodiscard]] unsigned next_compute_lane() noexcept { return compute_queues_made_.fetch_add(1) % 2; }

private:
    RawBlock do_allocate_native(const AllocationRequest& request) override;
    void do_deallocate_native(const RawBlock& block) noexcept override;
    std::unique_ptr<Queue> do_create_queue(QueueRole role) override;
    std::unique_ptr<Event> do_create_event() override;
    Kernels& do_kernels() override;
    void do_flush(const BufferView& range) override;
    void do_invalidate(const BufferView& range) override;
    [[nodiscard]] VkMappedMemoryRange mapped_range(const BufferView& range) const noexcept;

    std::unique_ptr<Context> context_;
    NativeMemory memory_;
    std::array<std::unique_ptr<alloc::Heap>, kMemoryKindCount> heaps_;
    std::unique_ptr<alloc::Heap> staging_;
    std::unique_ptr<VulkanKernels> kernels_;
    std::atomic<unsigned> compute_queues_made_{0};
    detail::PendingHostWrites host_writes_;
};

}  // namespace outcore::vulkan
