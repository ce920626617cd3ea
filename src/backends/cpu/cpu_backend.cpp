// cpu_backend.cpp — the CPU backend's registry entry (see outcore/device/registry.hpp).
// The CPU is always available; Config::cpu_devices says how many devices it presents.
// Each presents the full machine (the whole RAM as its capacity): they are separate
// accounting domains over the same memory, which is what multi-device code needs to
// be exercised without GPUs.
#include <fmt/format.h>

#include <exception>

#include "cpu_device.hpp"
#include "outcore/backends/cpu.hpp"
#include "outcore/core/config.hpp"
#include "outcore/core/error.hpp"
#include "outcore/device/registry.hpp"

namespace outcore::cpu {

namespace {

CpuDeviceOptions options_for(std::uint32_t index) {
    CpuDeviceOptions options;
    options.index = index;
    return options;
}

BackendProbe probe(const Config& config) {
    BackendProbe result;
    result.backend = "cpu";
    if (config.cpu_devices == 0) {
        result.reason = "cpu_devices is 0";
        return result;
    }
    try {
        for (std::uint32_t i = 0; i < config.cpu_devices; ++i)
            result.devices.push_back(make_device_info(options_for(i)));
        result.available = true;
    } catch (const std::exception& e) {
        result.devices.clear();
        result.reason = e.what();
    }
    return result;
}

std::unique_ptr<Device> open(std::uint32_t index, const Config& config) {
    if (index >= config.cpu_devices) {
        throw UsageError("cpu",
                         fmt::format("no device cpu:{} (cpu_devices = {})", index, config.cpu_devices));
    }
    return make_cpu_device(options_for(index));
}

}  // namespace

BackendEntry backend_entry() {
    return BackendEntry{.name = "cpu", .is_gpu = false, .probe = probe, .open = open};
}

}  // namespace outcore::cpu
