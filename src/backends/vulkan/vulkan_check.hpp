// vulkan_check.hpp — the one place VkResult codes become exceptions (private to the
// Vulkan backend).
//
//   OUTCORE_VK_CHECK(vkCreateFence(device, &info, nullptr, &fence));
//
// A failure throws BackendError("vulkan", "<call> failed: <name>", code, "<name>");
// VK_ERROR_OUT_OF_DEVICE_MEMORY and VK_ERROR_OUT_OF_HOST_MEMORY throw OutOfMemory
// instead, so the on-OOM adaptor can free memory and retry.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <string_view>

namespace outcore::vulkan {

/// Component name in every error the backend throws.
inline constexpr const char* kComponent = "vulkan";

/// Throws for anything but VK_SUCCESS (and the non-error codes VK_INCOMPLETE,
/// VK_NOT_READY, VK_TIMEOUT, which callers that expect them test first).
/// `requested_bytes` goes into OutOfMemory's numbers.
void check(VkResult result, std::string_view what, std::uint64_t requested_bytes = 0);

/// "VK_ERROR_DEVICE_LOST".
[[nodiscard]] std::string_view result_name(VkResult result) noexcept;

}  // namespace outcore::vulkan

#define OUTCORE_VK_CHECK(call) ::outcore::vulkan::check((call), #call)
