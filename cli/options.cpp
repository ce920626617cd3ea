// cli/options.cpp — the global flags applied over OUTCORE_CONF, and the devices a
// command runs on.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <string_view>

#include "commands.hpp"
#include "outcore/core/error.hpp"
#include "outcore/device/registry.hpp"

namespace outcore::cli {

Config make_config(const GlobalOptions& globals) {
    Config config = Config::from_environment();
    if (globals.device_budget) config.set("device_budget", *globals.device_budget);
    if (globals.host_budget) config.set("host_budget", *globals.host_budget);
    if (globals.backend) config.set("backend", *globals.backend);
    return config;
}

std::string device_selector(const GlobalOptions& globals) { return globals.backend.value_or(std::string()); }

std::vector<std::unique_ptr<Device>> open_devices(const std::optional<std::string>& devices,
                                                  const GlobalOptions& globals, Config& config) {
    std::vector<std::unique_ptr<Device>> out;
    out.push_back(open_device(device_selector(globals), config));
    if (!devices) return out;
    const std::string backend = out.front()->info().backend;
    std::vector<std::uint32_t> indices;
    if (*devices == "all") {
        for (const BackendProbe& p : probe_backends(config)) {
            if (p.backend != backend) continue;
            for (std::uint32_t i = 0; i < p.devices.size(); ++i) indices.push_back(i);
        }
    } else {
        std::string_view rest = *devices;
        if (rest.empty() || rest.back() == ',') rest = ",";  // an empty item: the error below
        while (!rest.empty()) {
            const std::size_t comma = rest.find(',');
            const std::string_view item = rest.substr(0, comma);
            std::uint32_t index = 0;
            const auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), index);
            if (item.empty() || ec != std::errc{} || p != item.data() + item.size()) {
                throw UsageError("--devices",
                                 fmt::format("'{}' is not 'all' or a list of device indices like "
                                             "0,1",
                                             *devices));
            }
            indices.push_back(index);
            rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        }
    }
    if (std::set<std::uint32_t>(indices.begin(), indices.end()).size() != indices.size()) {
        throw UsageError("--devices", fmt::format("'{}' names a device twice", *devices));
    }
    if (indices.empty()) throw UsageError("--devices", fmt::format("no {} device found", backend));
    if (backend == "cpu") {
        config.cpu_devices =
            std::max(config.cpu_devices, *std::max_element(indices.begin(), indices.end()) + 1);
    }
    out.clear();
    for (const std::uint32_t i : indices)
        out.push_back(open_device(fmt::format("{}:{}", backend, i), config));
    return out;
}

}  // namespace outcore::cli
