#include "vulkan_context.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "vulkan_check.hpp"

namespace outcore::vulkan {

namespace {

bool validation_requested() {
    const char* v = std::getenv("OUTCORE_VULKAN_VALIDATION");
    return v != nullptr && std::string_view(v) != "" && std::string_view(v) != "0";
}

VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT /*severity*/,
                                          VkDebugUtilsMessageTypeFlagsEXT /*types*/,
                                          const VkDebugUtilsMessengerCallbackDataEXT* data, void* /*user*/) {
    std::fprintf(stderr, "outcore: Vulkan validation: %s\n",
                 data != nullptr && data->pMessage != nullptr ? data->pMessage : "(no message)");
    std::fflush(stderr);
    std::abort();  // a validation message is a bug: fail loudly (tests run with validation on)
}

bool has_layer(const char* name) {
    std::uint32_t count = 0;
    if (vkEnumerateInstanceLayerProperties(&count, nullptr) != VK_SUCCESS) return false;
    std::vector<VkLayerProperties> layers(count);
    if (vkEnumerateInstanceLayerProperties(&count, layers.data()) != VK_SUCCESS) return false;
    return std::any_of(layers.begin(), layers.end(),
                       [name](const VkLayerProperties& l) { return std::strcmp(l.layerName, name) == 0; });
}

bool has_instance_extension(const char* name) {
    std::uint32_t count = 0;
    if (vkEnumerateInstanceExtensionProperties(nullptr, &count, nullptr) != VK_SUCCESS) return false;
    std::vector<VkExtensionProperties> ext(count);
    if (vkEnumerateInstanceExtensionProperties(nullptr, &count, ext.data()) != VK_SUCCESS) return false;
    return std::any_of(ext.begin(), ext.end(), [name](const VkExtensionProperties& e) {
        return std::strcmp(e.extensionName, name) == 0;
    });
}

bool has_device_extension(VkPhysicalDevice device, const char* name) {
    std::uint32_t count = 0;
    if (vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr) != VK_SUCCESS) return false;
    std::vector<VkExtensionProperties> ext(count);
    if (vkEnumerateDeviceExtensionProperties(device, nullptr, &count, ext.data()) != VK_SUCCESS) return false;
    return std::any_of(ext.begin(), ext.end(), [name](const VkExtensionProperties& e) {
        return std::strcmp(e.extensionName, name) == 0;
    });
}

/// Whether queues may time their commands (Context::device_timestamps): the families
/// used write timestamps and the device's counter and CLOCK_MONOTONIC calibrate together.
bool wants_timestamps(VkInstance instance, VkPhysicalDevice device,
                      const std::vector<VkQueueFamilyProperties>& families,
                      std::initializer_list<std::uint32_t> used) {
    const char* env = std::getenv("OUTCORE_VULKAN_TIMESTAMPS");
    if (env != nullptr && std::string_view(env) == "0") return false;
    if (!has_device_extension(device, VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME)) return false;
    for (const std::uint32_t f : used) {
        if (f != UINT32_MAX && families[f].timestampValidBits == 0) return false;
    }
    auto domains_of = reinterpret_cast<PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT>(
        vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCalibrateableTimeDomainsEXT"));
    if (domains_of == nullptr) return false;
    std::uint32_t count = 0;
    if (domains_of(device, &count, nullptr) != VK_SUCCESS) return false;
    std::vector<VkTimeDomainEXT> domains(count);
    if (domains_of(device, &count, domains.data()) != VK_SUCCESS) return false;
    const auto has = [&](VkTimeDomainEXT d) {
        return std::find(domains.begin(), domains.end(), d) != domains.end();
    };
    return has(VK_TIME_DOMAIN_DEVICE_EXT) && has(VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT);
}

int type_rank(VkPhysicalDeviceType t) {
    switch (t) {
        case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
        case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
        case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
        case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
        default: return 4;
    }
}

/// The largest DEVICE_LOCAL heap.
std::uint32_t device_heap(const VkPhysicalDeviceMemoryProperties& m) {
    std::uint32_t best = 0;
    for (std::uint32_t h = 0; h < m.memoryHeapCount; ++h) {
        const bool local = (m.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0;
        const bool best_local = (m.memoryHeaps[best].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0;
        if ((local && !best_local) ||
            (local == best_local && m.memoryHeaps[h].size > m.memoryHeaps[best].size))
            best = h;
    }
    return best;
}

/// The memory type for a kind: the required flags, then the fewest unwanted ones.
std::uint32_t pick_type(const VkPhysicalDeviceMemoryProperties& m, MemoryKind kind) {
    VkMemoryPropertyFlags need = 0;
    VkMemoryPropertyFlags avoid = 0;
    switch (kind) {
        case MemoryKind::Device:
            need = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
            avoid = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
            break;
        case MemoryKind::HostPinned:
            need = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
            avoid = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
            break;
        case MemoryKind::HostCached:
            need = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
            avoid = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
            break;
    }
    const VkMemoryPropertyFlags never =
        VK_MEMORY_PROPERTY_PROTECTED_BIT | VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT;
    std::uint32_t best = UINT32_MAX;
    int best_score = 1 << 30;
    for (int pass = 0; pass < 2 && best == UINT32_MAX; ++pass) {
        for (std::uint32_t t = 0; t < m.memoryTypeCount; ++t) {
            const VkMemoryPropertyFlags f = m.memoryTypes[t].propertyFlags;
            if ((f & need) != need || (f & never) != 0) continue;
            const int score = __builtin_popcount(f & avoid);
            if (score < best_score) {
                best = t;
                best_score = score;
            }
        }
        // No HOST_CACHED type: HostCached falls back to coherent host memory.
        need = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    }
    return best;
}

/// "memory types 0 device-local (heap 0), 1 host-visible|host-coherent (heap 1), …;
/// device → 0, host-pinned → 1, host-cached → 2": what OUTCORE_LOG=info shows.
template <typename Types>
std::string describe_memory(const VkPhysicalDeviceMemoryProperties& m, const Types& picked) {
    std::string types;
    for (std::uint32_t t = 0; t < m.memoryTypeCount; ++t) {
        const VkMemoryPropertyFlags f = m.memoryTypes[t].propertyFlags;
        std::string flags;
        for (const auto& [bit, name] : {std::pair{VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, "device-local"},
                                        std::pair{VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, "host-visible"},
                                        std::pair{VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, "host-coherent"},
                                        std::pair{VK_MEMORY_PROPERTY_HOST_CACHED_BIT, "host-cached"}}) {
            if ((f & bit) != 0) {
                if (!flags.empty()) flags += '|';
                flags += name;
            }
        }
        types += fmt::format("{}{} {} (heap {})", t == 0 ? "" : ", ", t, flags.empty() ? "none" : flags,
                             m.memoryTypes[t].heapIndex);
    }
    std::string kinds;
    for (int k = 0; k < kMemoryKindCount; ++k)
        kinds +=
            fmt::format("{}{} → {}", k == 0 ? "" : ", ", to_string(static_cast<MemoryKind>(k)), picked[k]);
    return fmt::format("memory types {}; {}", types, kinds);
}

}  // namespace

// --- Instance ---------------------------------------------------------------------

Instance::Instance() {
    const bool validate = validation_requested();
    std::vector<const char*> layers;
    std::vector<const char*> extensions;
    if (validate) {
        if (has_layer("VK_LAYER_KHRONOS_validation")) {
            layers.push_back("VK_LAYER_KHRONOS_validation");
            extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
        } else {
            log::warn(kComponent,
                      "OUTCORE_VULKAN_VALIDATION is set but the validation layer is not installed");
        }
    }
    VkInstanceCreateFlags flags = 0;
    if (has_instance_extension(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {  // MoltenVK
        extensions.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
        flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
    }
    const VkApplicationInfo app{.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                                .pNext = nullptr,
                                .pApplicationName = "outcore",
                                .applicationVersion = 1,
                                .pEngineName = "outcore",
                                .engineVersion = 1,
                                .apiVersion = VK_API_VERSION_1_2};
    const VkInstanceCreateInfo info{.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                    .pNext = nullptr,
                                    .flags = flags,
                                    .pApplicationInfo = &app,
                                    .enabledLayerCount = static_cast<std::uint32_t>(layers.size()),
                                    .ppEnabledLayerNames = layers.data(),
                                    .enabledExtensionCount = static_cast<std::uint32_t>(extensions.size()),
                                    .ppEnabledExtensionNames = extensions.data()};
    OUTCORE_VK_CHECK(vkCreateInstance(&info, nullptr, &instance_));
    if (!layers.empty()) {
        auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
            vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
        const VkDebugUtilsMessengerCreateInfoEXT m{
            .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
            .pNext = nullptr,
            .flags = 0,
            .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
            .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
            .pfnUserCallback = on_message,
            .pUserData = nullptr};
        if (create == nullptr || create(instance_, &m, nullptr, &messenger_) != VK_SUCCESS) {
            vkDestroyInstance(instance_, nullptr);
            throw BackendError(kComponent, "cannot create the validation messenger", 0, "VK_ERROR_UNKNOWN");
        }
    }
}

Instance::~Instance() {
    if (messenger_ != VK_NULL_HANDLE) {
        auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
            vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
        if (destroy != nullptr) destroy(instance_, messenger_, nullptr);
    }
    vkDestroyInstance(instance_, nullptr);
}

std::vector<VkPhysicalDevice> Instance::devices() const {
    std::uint32_t count = 0;
    OUTCORE_VK_CHECK(vkEnumeratePhysicalDevices(instance_, &count, nullptr));
    std::vector<VkPhysicalDevice> all(count);
    if (count > 0) {
        const VkResult rc = vkEnumeratePhysicalDevices(instance_, &count, all.data());
        if (rc != VK_INCOMPLETE) check(rc, "vkEnumeratePhysicalDevices");
        all.resize(count);
    }
    // The backend uses Vulkan 1.2 structures and features: older devices cannot run it.
    std::erase_if(all, [](VkPhysicalDevice d) {
        VkPhysicalDeviceProperties p{};
        vkGetPhysicalDeviceProperties(d, &p);
        return p.apiVersion < VK_API_VERSION_1_2;
    });
    std::stable_sort(all.begin(), all.end(), [](VkPhysicalDevice a, VkPhysicalDevice b) {
        VkPhysicalDeviceProperties pa{}, pb{};
        vkGetPhysicalDeviceProperties(a, &pa);
        vkGetPhysicalDeviceProperties(b, &pb);
        return type_rank(pa.deviceType) < type_rank(pb.deviceType);
    });
    const char* pick = std::getenv("OUTCORE_VULKAN_DEVICE");
    if (pick == nullptr || *pick == '\0') return all;
    const std::string_view want(pick);
    std::vector<VkPhysicalDevice> kept;
    for (std::size_t i = 0; i < all.size(); ++i) {
        VkPhysicalDeviceProperties p{};
        vkGetPhysicalDeviceProperties(all[i], &p);
        if (want == std::to_string(i) ||
            std::string_view(p.deviceName).find(want) != std::string_view::npos) {
            kept.push_back(all[i]);
            break;
        }
    }
    return kept;
}

// --- queues -------------------------------------------------------------------------

/// Which queue families and VkQueues a Context uses: the first compute family; the
/// first transfer-only family; downloads on a VkQueue of their own where a family has
/// a second one (the transfer family's, else the compute family's, see
/// Context::download_queue()); a second compute lane (Pipeline compute_lanes) on the
/// compute family's next queue where there is one, since kernels on separate VkQueues
/// may run at once while two dispatches on one queue are ordered by the barrier
/// between them. describe() reports the lanes from the same choice.
namespace {

struct QueueChoice {
    std::vector<VkQueueFamilyProperties> families;
    std::uint32_t compute = UINT32_MAX;  // UINT32_MAX: none
    std::uint32_t transfer = UINT32_MAX;
    std::uint32_t download = UINT32_MAX;
    std::uint32_t download_index = 0;
    std::uint32_t compute_used = 1;  // VkQueues of the compute family before the second lane's
    bool has_compute2 = false;
};

/// A decimal index, the whole text; UINT32_MAX otherwise.
std::uint32_t parse_index(std::string_view text) {
    std::uint32_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    return ec == std::errc{} && end == text.data() + text.size() && !text.empty() ? v : UINT32_MAX;
}

QueueChoice choose_queues(VkPhysicalDevice physical) {
    QueueChoice c;
    std::uint32_t family_count = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &family_count, nullptr);
    c.families.resize(family_count);
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &family_count, c.families.data());
    for (std::uint32_t f = 0; f < family_count; ++f) {
        const VkQueueFlags q = c.families[f].queueFlags;
        if ((q & VK_QUEUE_COMPUTE_BIT) != 0 && c.compute == UINT32_MAX) c.compute = f;
        if ((q & VK_QUEUE_TRANSFER_BIT) != 0 && (q & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT)) == 0 &&
            c.transfer == UINT32_MAX)
            c.transfer = f;
    }
    if (c.compute == UINT32_MAX) return c;
    if (c.transfer != UINT32_MAX && c.families[c.transfer].queueCount >= 2) {
        c.download = c.transfer;
        c.download_index = 1;
    } else if (c.families[c.compute].queueCount >= 2) {
        c.download = c.compute;
        c.download_index = 1;
    }
    // OUTCORE_VULKAN_DOWNLOAD_QUEUE=F.I puts downloads on queue I of family F instead (an
    // experiment: which VkQueue's copies slow the GEMMs beside them; backends.md).
    // Not a VkQueue another role submits to (each role's queue has its own submit lock).
    if (const char* env = std::getenv("OUTCORE_VULKAN_DOWNLOAD_QUEUE"); env != nullptr && *env != '\0') {
        const std::string_view text(env);
        const std::size_t dot = text.find('.');
        const std::uint32_t f = dot == std::string_view::npos ? UINT32_MAX : parse_index(text.substr(0, dot));
        const std::uint32_t i =
            dot == std::string_view::npos ? UINT32_MAX : parse_index(text.substr(dot + 1));
        if (f >= family_count || i >= c.families[f].queueCount ||
            (c.families[f].queueFlags & (VK_QUEUE_TRANSFER_BIT | VK_QUEUE_COMPUTE_BIT)) == 0 ||
            ((f == c.compute || f == c.transfer) && i == 0)) {
            throw UsageError(kComponent,
                             fmt::format("OUTCORE_VULKAN_DOWNLOAD_QUEUE={}: not FAMILY.INDEX of a "
                                         "queue that copies and no other role uses",
                                         env));
        }
        c.download = f;
        c.download_index = i;
    }
    c.compute_used = c.download == c.compute ? std::max(2U, c.download_index + 1) : 1U;
    c.has_compute2 = c.families[c.compute].queueCount > c.compute_used;
    return c;
}

std::string describe_queues(const QueueChoice& c) {
    std::string families;
    for (std::size_t f = 0; f < c.families.size(); ++f) {
        const VkQueueFlags q = c.families[f].queueFlags;
        std::string flags;
        for (const auto& [bit, name] :
             {std::pair{VK_QUEUE_GRAPHICS_BIT, "graphics"}, std::pair{VK_QUEUE_COMPUTE_BIT, "compute"},
              std::pair{VK_QUEUE_TRANSFER_BIT, "transfer"}})
            if ((q & bit) != 0) {
                if (!flags.empty()) flags += '|';
                flags += name;
            }
        families += fmt::format("{}{} {} x{}", f == 0 ? "" : ", ", f, flags.empty() ? "other" : flags,
                                c.families[f].queueCount);
    }
    auto at = [](std::uint32_t f, std::uint32_t i) {
        return f == UINT32_MAX ? std::string("none") : fmt::format("{}.{}", f, i);
    };
    return fmt::format("queue families {}; compute {}{}, uploads {}, downloads {}", families,
                       at(c.compute, 0),
                       c.has_compute2 ? fmt::format(" and {}.{}", c.compute, c.compute_used) : "",
                       at(c.transfer, 0), at(c.download, c.download_index));
}

}  // namespace

// --- describe -----------------------------------------------------------------------

DeviceInfo describe(VkPhysicalDevice device, std::uint32_t index) {
    VkPhysicalDeviceMaintenance3Properties m3{
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES,
        .pNext = nullptr,
        .maxPerSetDescriptors = 0,
        .maxMemoryAllocationSize = 0};
    VkPhysicalDeviceProperties2 props{
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &m3, .properties = {}};
    vkGetPhysicalDeviceProperties2(device, &props);
    const VkPhysicalDeviceLimits& l = props.properties.limits;

    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT,
        .pNext = nullptr,
        .heapBudget = {},
        .heapUsage = {}};
    const bool has_budget = has_device_extension(device, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    VkPhysicalDeviceMemoryProperties2 mem{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
                                          .pNext = has_budget ? &budget : nullptr,
                                          .memoryProperties = {}};
    vkGetPhysicalDeviceMemoryProperties2(device, &mem);
    const std::uint32_t heap = device_heap(mem.memoryProperties);
    const std::uint64_t heap_bytes = mem.memoryProperties.memoryHeaps[heap].size;

    DeviceInfo info;
    info.name = props.properties.deviceName;
    info.backend = "vulkan";
    info.index = index;
    info.total_memory_bytes = heap_bytes;
    const std::uint64_t fallback = heap_bytes / 5 * 4;
    info.recommended_working_set_bytes =
        has_budget && budget.heapBudget[heap] > 0 ? std::min(budget.heapBudget[heap], heap_bytes) : fallback;
    const VkPhysicalDeviceType t = props.properties.deviceType;
    info.unified_memory = t == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU || t == VK_PHYSICAL_DEVICE_TYPE_CPU;
    info.min_offset_alignment =
        std::max<std::uint64_t>({l.minStorageBufferOffsetAlignment, l.minUniformBufferOffsetAlignment,
                                 l.nonCoherentAtomSize, l.minMemoryMapAlignment, 16});
    info.max_inline_bytes = l.maxPushConstantsSize;
    info.max_buffer_bytes = l.maxStorageBufferRange;
    info.max_allocation_bytes =
        m3.maxMemoryAllocationSize > 0 ? std::min(m3.maxMemoryAllocationSize, heap_bytes) : heap_bytes;
    // One lane unless asked for two: on an H100 NVIDIA's driver ran a tile's last GEMM
    // beside the next tile's first on the other VkQueue at about half speed each, and the
    // ring's next upload waited for both (square-c 16384×2816×2048: 0.887 of in-core on
    // two lanes, 0.908 on one; 16384×4096×1536: 0.899 and 0.910; BENCHMARKS.md).
    const char* lanes = std::getenv("OUTCORE_VULKAN_COMPUTE_LANES");
    const bool two = lanes != nullptr && std::string_view(lanes) == "2";
    info.compute_lanes = two && choose_queues(device).has_compute2 ? 2U : 1U;
    return info;
}

// --- Context ------------------------------------------------------------------------

Context::Context(std::uint32_t index) {
    const std::vector<VkPhysicalDevice> devices = instance_.devices();
    if (index >= devices.size()) {
        throw UsageError(kComponent, fmt::format("no device vulkan:{} ({} found)", index, devices.size()));
    }
    physical_ = devices[index];
    info_ = describe(physical_, index);
    VkPhysicalDeviceDriverProperties driver{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES,
                                            .pNext = nullptr,
                                            .driverID = {},
                                            .driverName = {},
                                            .driverInfo = {},
                                            .conformanceVersion = {}};
    VkPhysicalDeviceProperties2 props2{
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &driver, .properties = {}};
    vkGetPhysicalDeviceProperties2(physical_, &props2);
    const VkPhysicalDeviceProperties& props = props2.properties;
    limits_ = props.limits;
    // Mesa's lavapipe (22.3, Debian 12) reports a submission finished before its queue
    // thread is done with the timeline semaphores the submission signals and waits on:
    // a semaphore destroyed right after is still being touched by that thread
    // (ThreadSanitizer: cnd_broadcast racing vkDestroySemaphore's cnd_destroy; a test
    // hung once on the freed mutex). destroy_semaphore() settles the queues first.
    settle_before_destroy_ = driver.driverID == VK_DRIVER_ID_MESA_LLVMPIPE;
    vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);
    for (int k = 0; k < kMemoryKindCount; ++k) {
        memory_types_[k] = pick_type(memory_, static_cast<MemoryKind>(k));
        // OUTCORE_VULKAN_DEVICE_MEMORY_TYPE=T: Device blocks from memory type T, which must
        // be DEVICE_LOCAL (an experiment: does a host-visible type change what copies beside
        // the GEMMs cost them; backends.md).
        const char* env = std::getenv("OUTCORE_VULKAN_DEVICE_MEMORY_TYPE");
        if (env != nullptr && *env != '\0' && static_cast<MemoryKind>(k) == MemoryKind::Device) {
            // On the heap the budget is read from, so that the budget still holds.
            const std::uint32_t t = parse_index(env);
            if (t >= memory_.memoryTypeCount ||
                (memory_.memoryTypes[t].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) == 0 ||
                memory_.memoryTypes[t].heapIndex != device_heap(memory_)) {
                throw UsageError(kComponent, fmt::format("OUTCORE_VULKAN_DEVICE_MEMORY_TYPE={}: not a "
                                                         "DEVICE_LOCAL type of the device's largest heap",
                                                         env));
            }
            memory_types_[k] = t;
        }
        if (memory_types_[k] == UINT32_MAX) {
            throw BackendError(kComponent,
                               fmt::format("{} has no memory type for {}", info_.name,
                                           to_string(static_cast<MemoryKind>(k))),
                               0, "VK_ERROR_FEATURE_NOT_PRESENT");
        }
    }
    log::info(kComponent, "vulkan:{}: {}", index, describe_memory(memory_, memory_types_));
    if (!has_device_extension(physical_, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME)) {
        throw BackendError(kComponent, fmt::format("{} lacks VK_KHR_push_descriptor", info_.name),
                           static_cast<std::int64_t>(VK_ERROR_EXTENSION_NOT_PRESENT),
                           "VK_ERROR_EXTENSION_NOT_PRESENT");
    }

    const QueueChoice qc = choose_queues(physical_);
    log::info(kComponent, "vulkan:{}: {}", index, describe_queues(qc));
    const std::vector<VkQueueFamilyProperties>& families = qc.families;
    const std::uint32_t compute = qc.compute;
    const std::uint32_t transfer = qc.transfer;
    const std::uint32_t download = qc.download;
    const std::uint32_t download_index = qc.download_index;
    const std::uint32_t compute_used = qc.compute_used;
    if (compute == UINT32_MAX) {
        throw BackendError(kComponent, fmt::format("{} has no compute queue", info_.name), 0,
                           "VK_ERROR_FEATURE_NOT_PRESENT");
    }
    has_transfer_ = transfer != UINT32_MAX;
    has_download_ = download != UINT32_MAX;
    has_compute2_ = qc.has_compute2;
    std::uint32_t most = 1;  // VkQueues of the largest family: one priority each
    for (const VkQueueFamilyProperties& f : families) most = std::max(most, f.queueCount);
    const std::vector<float> priority(most, 1.0F);
    std::vector<VkDeviceQueueCreateInfo> queues;
    std::vector<std::uint32_t> used;  // each family once
    for (const std::uint32_t f : {compute, transfer, download})
        if (f != UINT32_MAX && std::find(used.begin(), used.end(), f) == used.end()) used.push_back(f);
    for (const std::uint32_t f : used) {
        std::uint32_t count = f == compute ? compute_used + (has_compute2_ ? 1U : 0U) : 1U;
        if (f == download) count = std::max(count, download_index + 1);
        queues.push_back({.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                          .pNext = nullptr,
                          .flags = 0,
                          .queueFamilyIndex = f,
                          .queueCount = count,
                          .pQueuePriorities = priority.data()});
    }
    std::vector<const char*> extensions{VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
    const bool timestamps =
        wants_timestamps(instance_.handle(), physical_, families, {compute, transfer, download});
    if (timestamps) extensions.push_back(VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME);
    if (has_device_extension(physical_, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME))
        extensions.push_back(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    if (has_device_extension(physical_, "VK_KHR_portability_subset"))  // MoltenVK requires it when present
        extensions.push_back("VK_KHR_portability_subset");
    // 8- and 16-bit storage: the filter shader reads and writes u8 and u16 pixels.
    VkPhysicalDeviceVulkan12Features f12{};
    f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    VkPhysicalDeviceVulkan11Features f11{};
    f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    f11.pNext = &f12;
    VkPhysicalDeviceFeatures2 features{};
    features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    features.pNext = &f11;
    vkGetPhysicalDeviceFeatures2(physical_, &features);
    small_storage_ = f12.storageBuffer8BitAccess == VK_TRUE && f11.storageBuffer16BitAccess == VK_TRUE;
    float64_ = features.features.shaderFloat64 == VK_TRUE;
    VkPhysicalDeviceVulkan12Features want12{};
    want12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    want12.storageBuffer8BitAccess = small_storage_ ? VK_TRUE : VK_FALSE;
    // Events complete through per-queue timeline semaphores (vulkan_queue.hpp); a
    // required feature of Vulkan 1.2, checked anyway.
    if (f12.timelineSemaphore != VK_TRUE) {
        throw BackendError(kComponent, "the device has no timeline semaphores (Vulkan 1.2 requires them)", 0,
                           "VK_ERROR_FEATURE_NOT_PRESENT");
    }
    want12.timelineSemaphore = VK_TRUE;
    want12.hostQueryReset = timestamps && f12.hostQueryReset == VK_TRUE ? VK_TRUE : VK_FALSE;
    VkPhysicalDeviceVulkan11Features want11{};
    want11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    want11.pNext = &want12;
    want11.storageBuffer16BitAccess = small_storage_ ? VK_TRUE : VK_FALSE;
    VkPhysicalDeviceFeatures want{};
    want.shaderFloat64 = float64_ ? VK_TRUE : VK_FALSE;  // the f64 GEMM
    const VkDeviceCreateInfo info{.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                                  .pNext = &want11,
                                  .flags = 0,
                                  .queueCreateInfoCount = static_cast<std::uint32_t>(queues.size()),
                                  .pQueueCreateInfos = queues.data(),
                                  .enabledLayerCount = 0,
                                  .ppEnabledLayerNames = nullptr,
                                  .enabledExtensionCount = static_cast<std::uint32_t>(extensions.size()),
                                  .ppEnabledExtensionNames = extensions.data(),
                                  .pEnabledFeatures = &want};
    OUTCORE_VK_CHECK(vkCreateDevice(physical_, &info, nullptr, &device_));
    vkGetDeviceQueue(device_, compute, 0, &compute_.queue);
    compute_.family = compute;
    compute_.timestamp_bits = families[compute].timestampValidBits;
    if (has_compute2_) {
        vkGetDeviceQueue(device_, compute, compute_used, &compute2_.queue);
        compute2_.family = compute;
        compute2_.timestamp_bits = compute_.timestamp_bits;
    }
    if (has_transfer_) {
        vkGetDeviceQueue(device_, transfer, 0, &transfer_.queue);
        transfer_.family = transfer;
        transfer_.timestamp_bits = families[transfer].timestampValidBits;
    }
    if (has_download_) {
        vkGetDeviceQueue(device_, download, download_index, &download_.queue);
        download_.family = download;
        download_.timestamp_bits = families[download].timestampValidBits;
    }
    if (timestamps && want12.hostQueryReset == VK_TRUE) {
        calibrate_ = reinterpret_cast<PFN_vkGetCalibratedTimestampsEXT>(
            vkGetDeviceProcAddr(device_, "vkGetCalibratedTimestampsEXT"));
    }
    push_descriptor_ = reinterpret_cast<PFN_vkCmdPushDescriptorSetKHR>(
        vkGetDeviceProcAddr(device_, "vkCmdPushDescriptorSetKHR"));
    if (push_descriptor_ == nullptr) {
        vkDestroyDevice(device_, nullptr);
        throw BackendError(kComponent, "vkCmdPushDescriptorSetKHR is missing", 0,
                           "VK_ERROR_EXTENSION_NOT_PRESENT");
    }
}

void Context::destroy_semaphore(VkSemaphore semaphore) noexcept {
    if (semaphore == VK_NULL_HANDLE) return;
    if (settle_before_destroy_) {
        // A queue thread handles submissions in order: once an empty one submitted
        // after them has completed (vkQueueWaitIdle), it has finished every earlier one.
        for (SharedQueue* q : {&compute_, &compute2_, &transfer_, &download_}) {
            if (q->queue == VK_NULL_HANDLE) continue;
            std::lock_guard lock(q->mutex);
            (void)vkQueueWaitIdle(q->queue);  // a lost device: nothing runs any more
        }
    }
    vkDestroySemaphore(device_, semaphore, nullptr);
}

Context::~Context() {
    if (device_ != VK_NULL_HANDLE) {
        (void)vkDeviceWaitIdle(device_);
        vkDestroyDevice(device_, nullptr);
    }
}

Calibration Context::calibrate() const {
    if (calibrate_ == nullptr) throw UsageError(kComponent, "calibrate() without device timestamps");
    const std::array<VkCalibratedTimestampInfoEXT, 2> domains{
        VkCalibratedTimestampInfoEXT{.sType = VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT,
                                     .pNext = nullptr,
                                     .timeDomain = VK_TIME_DOMAIN_DEVICE_EXT},
        VkCalibratedTimestampInfoEXT{.sType = VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT,
                                     .pNext = nullptr,
                                     .timeDomain = VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT}};
    std::array<std::uint64_t, 2> values{};
    std::uint64_t deviation = 0;
    OUTCORE_VK_CHECK(calibrate_(device_, 2, domains.data(), values.data(), &deviation));
    return {
        .ticks = values[0], .monotonic_ns = static_cast<std::int64_t>(values[1]), .deviation_ns = deviation};
}

bool Context::coherent(MemoryKind kind) const noexcept {
    return (memory_.memoryTypes[memory_type(kind)].propertyFlags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) != 0;
}

}  // namespace outcore::vulkan
