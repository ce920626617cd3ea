// vulkan_context.hpp — instance, physical device and logical device of one outcore
// Vulkan device, and what it learned about them (private to the backend).
//
// Made once per VulkanDevice; queues, memory and kernels borrow it. The instance has
// the validation layer when OUTCORE_VULKAN_VALIDATION=1, with a messenger that prints
// each message and aborts: a validation message is a bug, and a test must fail on it.
#pragma once

#include <vulkan/vulkan.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "outcore/device/device_info.hpp"
#include "outcore/device/memory_kind.hpp"

namespace outcore::vulkan {

/// An instance (with the validation layer if asked) and its messenger. Move-free.
class Instance {
public:
    Instance();
    ~Instance();
    Instance(const Instance&) = delete;
    Instance& operator=(const Instance&) = delete;

    [[nodiscard]] VkInstance handle() const noexcept { return instance_; }
    /// Physical devices, discrete first, then integrated, virtual, CPU, other; filtered
    /// by OUTCORE_VULKAN_DEVICE.
    [[nodiscard]] std::vector<VkPhysicalDevice> devices() const;

private:
    VkInstance instance_ = VK_NULL_HANDLE;
    VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
};

/// DeviceInfo of a physical device (index = its place in Instance::devices()).
[[nodiscard]] DeviceInfo describe(VkPhysicalDevice device, std::uint32_t index);

/// One VkQueue and the lock vkQueueSubmit needs (queues are shared by outcore queues).
struct SharedQueue {
    VkQueue queue = VK_NULL_HANDLE;
    std::uint32_t family = 0;
    std::uint32_t timestamp_bits = 0;  ///< the family's timestampValidBits (0: no timestamps)
    std::mutex mutex;
};

/// One reading of the device's timestamp counter and of CLOCK_MONOTONIC taken together
/// (VK_EXT_calibrated_timestamps): the host time is off by at most `deviation_ns`.
struct Calibration {
    std::uint64_t ticks = 0;
    std::int64_t monotonic_ns = 0;
    std::uint64_t deviation_ns = 0;
};

/// The logical device and what outcore uses of it.
class Context {
public:
    explicit Context(std::uint32_t index);
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    [[nodiscard]] VkDevice device() const noexcept { return device_; }
    [[nodiscard]] VkPhysicalDevice physical() const noexcept { return physical_; }
    [[nodiscard]] const DeviceInfo& info() const noexcept { return info_; }
    [[nodiscard]] const VkPhysicalDeviceLimits& limits() const noexcept { return limits_; }
    /// The compute queue; the transfer queue is the same object where the device has
    /// no separate transfer family.
    [[nodiscard]] SharedQueue& compute_queue() noexcept { return compute_; }
    /// The compute queue of `lane` (0 or 1): a second VkQueue of the compute family for
    /// lane 1 where the family has one (DeviceInfo::compute_lanes is then 2), so
    /// kernels of the two lanes can run at once; else compute_queue().
    [[nodiscard]] SharedQueue& compute_queue(unsigned lane) noexcept {
        return lane % 2 == 1 && has_compute2_ ? compute2_ : compute_;
    }
    [[nodiscard]] SharedQueue& transfer_queue() noexcept { return has_transfer_ ? transfer_ : compute_; }
    /// The queue downloads go to: a second queue (of the transfer family, else of the
    /// compute family) where the device has one, else transfer_queue(). Uploads and
    /// downloads on one VkQueue serialize: every command starts with a barrier whose
    /// first scope is all earlier work on that VkQueue, so an upload waits behind a
    /// download that waits for the GEMM before it (measured on the H200: transfers
    /// hid behind compute 6–48% of the time, docs/backends.md).
    [[nodiscard]] SharedQueue& download_queue() noexcept {
        return has_download_ ? download_ : transfer_queue();
    }
    /// Memory type index for a kind (always found: the spec guarantees host-visible
    /// coherent and device-local types).
    [[nodiscard]] std::uint32_t memory_type(MemoryKind kind) const noexcept {
        return memory_types_[static_cast<int>(kind)];
    }
    [[nodiscard]] const VkPhysicalDeviceMemoryProperties& memory() const noexcept { return memory_; }
    [[nodiscard]] bool coherent(MemoryKind kind) const noexcept;
    [[nodiscard]] PFN_vkCmdPushDescriptorSetKHR push_descriptor() const noexcept { return push_descriptor_; }
    /// 8- and 16-bit storage buffers are on (the filter shader needs them).
    [[nodiscard]] bool small_storage() const noexcept { return small_storage_; }
    /// shaderFloat64 is on (the f64 GEMM needs it).
    [[nodiscard]] bool float64() const noexcept { return float64_; }
    /// Whether queues can time their commands on the device (docs/tracing.md): every
    /// queue family outcore uses writes timestamps, queries reset from the host
    /// (hostQueryReset), and VK_EXT_calibrated_timestamps relates the device's counter
    /// to CLOCK_MONOTONIC. OUTCORE_VULKAN_TIMESTAMPS=0 turns it off.
    [[nodiscard]] bool device_timestamps() const noexcept { return calibrate_ != nullptr; }
    /// Nanoseconds per timestamp tick (limits.timestampPeriod).
    [[nodiscard]] double timestamp_period_ns() const noexcept { return limits_.timestampPeriod; }
    /// Reads the counter and the host clock together; only with device_timestamps().
    /// Throws BackendError.
    [[nodiscard]] Calibration calibrate() const;
    /// Destroys a semaphore that no pending submission refers to any more (every
    /// submission that signals or waits on it has been seen to finish). On lavapipe it
    /// first waits for every queue to go idle: that driver's queue thread still touches
    /// the semaphore after it reports such a submission finished (vulkan_context.cpp).
    void destroy_semaphore(VkSemaphore semaphore) noexcept;

private:
    Instance instance_;
    VkPhysicalDevice physical_ = VK_NULL_HANDLE;
    VkDevice device_ = VK_NULL_HANDLE;
    DeviceInfo info_;
    VkPhysicalDeviceLimits limits_{};
    VkPhysicalDeviceMemoryProperties memory_{};
    std::array<std::uint32_t, kMemoryKindCount> memory_types_{};
    SharedQueue compute_;
    SharedQueue compute2_;  // the second compute lane's
    SharedQueue transfer_;
    SharedQueue download_;
    bool has_transfer_ = false;
    bool has_download_ = false;
    bool has_compute2_ = false;
    bool small_storage_ = false;
    bool float64_ = false;
    bool settle_before_destroy_ = false;  ///< lavapipe: destroy_semaphore waits for idle queues
    PFN_vkCmdPushDescriptorSetKHR push_descriptor_ = nullptr;
    PFN_vkGetCalibratedTimestampsEXT calibrate_ = nullptr;
};

}  // namespace outcore::vulkan
