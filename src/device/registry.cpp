#include "outcore/device/registry.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <optional>

#include "outcore/core/config.hpp"
#include "outcore/core/error.hpp"

namespace outcore {

std::vector<BackendProbe> probe_backends(const Config& config) {
    std::vector<BackendProbe> out;
    for (const BackendEntry& entry : registered_backends()) {
        try {
            out.push_back(entry.probe(config));
        } catch (const std::exception& e) {
            out.push_back(BackendProbe{entry.name, false, e.what(), {}});
        }
    }
    return out;
}

std::vector<BackendProbe> probe_backends() { return probe_backends(Config::from_environment()); }

namespace {

std::string known_backends() {
    std::string s;
    for (const BackendEntry& e : registered_backends()) s += (s.empty() ? "" : ", ") + e.name;
    return s;
}

std::unique_ptr<Device> open_named(std::string_view name, std::optional<std::uint32_t> index,
                                   const Config& config) {
    for (const BackendEntry& entry : registered_backends()) {
        if (entry.name != name) continue;
        const BackendProbe probe = entry.probe(config);
        if (!probe.available) {
            throw UsageError("device", fmt::format("backend '{}' is not available: {}", name, probe.reason));
        }
        const std::uint32_t i = index.value_or(0);
        if (i >= probe.devices.size()) {
            throw UsageError("device", fmt::format("backend '{}' has {} device(s); index {} does not exist",
                                                   name, probe.devices.size(), i));
        }
        return entry.open(i, config);
    }
    throw UsageError("device", fmt::format("unknown backend '{}' (compiled in: {})", name, known_backends()));
}

}  // namespace

std::unique_ptr<Device> open_device(std::string_view selector, const Config& config) {
    if (selector.empty()) {
        if (const char* env = std::getenv("OUTCORE_BACKEND"); env != nullptr && *env != '\0') {
            selector = env;
        } else {
            selector = config.backend;
        }
    }
    if (!selector.empty()) {
        const std::size_t colon = selector.find(':');
        std::optional<std::uint32_t> index;
        if (colon != std::string_view::npos) {
            const std::string_view digits = selector.substr(colon + 1);
            std::uint32_t i = 0;
            const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), i);
            if (ec != std::errc{} || p != digits.data() + digits.size()) {
                throw UsageError(
                    "device",
                    fmt::format("bad device selector '{}' (expected backend or backend:index)", selector));
            }
            index = i;
        }
        return open_named(selector.substr(0, colon), index, config);
    }
    // Default: the first available GPU backend, else the CPU (registered_backends lists
    // GPUs first); a software GPU (lavapipe) only when named.
    for (const BackendEntry& entry : registered_backends()) {
        BackendProbe probe;
        try {
            probe = entry.probe(config);
        } catch (const std::exception&) {
            continue;
        }
        if (probe.available && !probe.software && !probe.devices.empty()) return entry.open(0, config);
    }
    throw BackendError("device", "no usable device: every backend is unavailable", 0, "none");
}

std::unique_ptr<Device> open_device(std::string_view selector) {
    return open_device(selector, Config::from_environment());
}

}  // namespace outcore
