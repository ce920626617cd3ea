#include "device_shares.hpp"

#include <fmt/format.h>

#include "outcore/core/size.hpp"
#include "run_support.hpp"

namespace outcore::cli {

void print_shares(std::uint64_t units, std::span<const ops::DeviceShare> shares) {
    fmt::print("devices: {} work units over {} devices\n", units, shares.size());
    for (const ops::DeviceShare& s : shares) {
        fmt::print("  {}: {} units, busy {}, moved {}, peak {} of {}\n", s.device, s.units,
                   format_seconds(s.busy_seconds), format_size(s.bytes_moved),
                   format_size(s.peak_device_bytes), format_size(s.budget_bytes));
    }
}

nlohmann::json shares_json(std::span<const ops::DeviceShare> shares) {
    nlohmann::json list = nlohmann::json::array();
    for (const ops::DeviceShare& s : shares) {
        list.push_back({{"device", s.device},
                        {"units", s.units},
                        {"bytes_moved", s.bytes_moved},
                        {"peak_device_bytes", s.peak_device_bytes},
                        {"budget_bytes", s.budget_bytes},
                        {"busy_seconds", s.busy_seconds}});
    }
    return list;
}

}  // namespace outcore::cli
