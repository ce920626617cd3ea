// cuda_backend.cpp — the CUDA backend's registry entry (see outcore/device/registry.hpp).
// Without a driver or a GPU the probe reports the backend unavailable with the
// runtime's own reason, and nothing else in the process is affected.
#include <fmt/format.h>

#include <exception>
#include <string>

#include "cuda_check.hpp"
#include "cuda_device.hpp"
#include "outcore/backends/cuda.hpp"
#include "outcore/core/config.hpp"
#include "outcore/device/registry.hpp"

namespace outcore::cuda {

namespace {

/// cudaErrorInsufficientDriver reads as "driver too old" even where there is no
/// driver at all: say which it is.
std::string driver_hint(cudaError_t rc) {
    if (rc != cudaErrorInsufficientDriver) return {};
    int driver = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess) (void)cudaGetLastError();
    int runtime = 0;
    if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) (void)cudaGetLastError();
    if (driver == 0) return "; no NVIDIA driver is loaded";
    return fmt::format("; the driver supports CUDA {}.{}, this build needs {}.{}", driver / 1000,
                       driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
}

BackendProbe probe(const Config& /*config*/) {
    BackendProbe result;
    result.backend = "cuda";
    int count = 0;
    const cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
        (void)cudaGetLastError();
        const char* text = cudaGetErrorString(rc);
        result.reason = fmt::format("no CUDA device: {} ({}{})", text != nullptr ? text : "?", error_name(rc),
                                    driver_hint(rc));
        return result;
    }
    if (count == 0) {
        result.reason = "no CUDA device: the runtime found none";
        return result;
    }
    try {
        for (int i = 0; i < count; ++i) {
            result.devices.push_back(
                make_device_info({.ordinal = static_cast<std::uint32_t>(i), .reserve_bytes = 0}));
        }
        result.available = true;
    } catch (const std::exception& e) {
        result.devices.clear();
        result.reason = e.what();
    }
    return result;
}

std::unique_ptr<Device> open(std::uint32_t index, const Config& /*config*/) {
    return make_cuda_device({.ordinal = index, .reserve_bytes = 0});
}

}  // namespace

BackendEntry backend_entry() {
    return BackendEntry{.name = "cuda", .is_gpu = true, .probe = probe, .open = open};
}

}  // namespace outcore::cuda
