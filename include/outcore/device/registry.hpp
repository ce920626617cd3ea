// outcore/device/registry.hpp — which backends were compiled in, which found
// hardware, and how to open a device.
//
//   for (const auto& b : outcore::probe_backends())          // every compiled-in backend
//       fmt::print("{}: {}\n", b.backend, b.available ? "ok" : b.reason);
//   auto dev = outcore::open_device();            // OUTCORE_BACKEND, else first GPU, else CPU
//   auto cpu = outcore::open_device("cpu:0");
//
// Backends register through CMake (a generated list in the outcore::core target),
// never through #ifdef in core code. Defined in outcore::core.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "outcore/device/device.hpp"

namespace outcore {

struct Config;

/// What one backend found.
struct BackendProbe {
    std::string backend;              ///< "cpu", "cuda", "vulkan"
    bool available = false;           ///< found usable hardware
    std::string reason;               ///< when not available: why ("no CUDA driver")
    std::vector<DeviceInfo> devices;  ///< what it found (budget fields as detected)
    /// Its devices emulate a GPU on the CPU (Vulkan on Mesa's lavapipe): usable when
    /// named, never the default device.
    bool software = false;
};

/// A compiled-in backend: a probe and an opener. `is_gpu` orders the default choice.
struct BackendEntry {
    std::string name;
    bool is_gpu = false;
    std::function<BackendProbe(const Config&)> probe;
    std::function<std::unique_ptr<Device>(std::uint32_t index, const Config&)> open;
};

/// The compiled-in backends, GPU backends first.
[[nodiscard]] const std::vector<BackendEntry>& registered_backends();
/// Probes every compiled-in backend. Never throws: a failing probe is reported as
/// unavailable with its reason.
[[nodiscard]] std::vector<BackendProbe> probe_backends(const Config& config);
[[nodiscard]] std::vector<BackendProbe> probe_backends();

/// Opens a device. `selector` is "", "cpu", "cuda", "cuda:1", ...; "" means
/// OUTCORE_BACKEND if set, else config.backend, else the first available GPU, else
/// the CPU. Throws UsageError for an unknown backend or index, BackendError when the
/// named backend is present but failed to open.
[[nodiscard]] std::unique_ptr<Device> open_device(std::string_view selector, const Config& config);
[[nodiscard]] std::unique_ptr<Device> open_device(std::string_view selector = {});

}  // namespace outcore
