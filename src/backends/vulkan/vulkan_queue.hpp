// vulkan_queue.hpp — the Vulkan backend's queues (private to the backend).
//
// A VulkanQueue is a detail::WorkerQueue whose worker records copies, fills and
// dispatches into one command buffer after another: consecutive device work goes
// into one command buffer and one vkQueueSubmit (with a fence) when the FIFO runs
// dry, before a wait, or every kMaxCommands commands; host work (host tasks, records,
// the host side of downloads) first waits for the fences. Every command is preceded
// by a full memory barrier, which gives Vulkan commands the in-order semantics of a
// queue. Events are host signals (detail::WorkerEvent): fences, not semaphores, order
// queues, at the cost of a host round trip per cross-queue wait (docs/backends.md).
//
// Copies from and to this device's own coherent host-visible memory (HostPinned
// Blocks) are DMA between that block's buffer and the device buffer: the GPU reads or
// writes the host bytes when the batch runs. Copies with other (pageable) host memory
// go through the device's staging memory (host-visible, coherent): uploads are copied
// into it on the worker when it reaches them, downloads out of it once their batch
// has finished.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "device/worker_queue.hpp"
#include "vulkan_context.hpp"

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

private:
    struct Batch {
        VkCommandBuffer commands = VK_NULL_HANDLE;
        VkFence fence = VK_NULL_HANDLE;
        std::vector<std::shared_ptr<void>> keep;
    };

    void do_copy(const BufferView& src, const BufferView& dst, HostRange host, std::uint64_t bytes) override;
    void do_copy_2d(const BufferView& buffer, HostRange host, const Copy2D& shape) override;
    void do_fill(const BufferView& dst, std::byte value) override;
    void flush() override;
    void drain() override;

    void recycle(Batch& batch);
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
    std::vector<VkFence> free_fences_;
};

/// The queue as a VulkanQueue, or UsageError (a queue of another backend).
[[nodiscard]] VulkanQueue& vulkan_queue(Queue& queue, const char* what);

}  // namespace outcore::vulkan
