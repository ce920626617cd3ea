#include "device_shares.hpp"

#include <fmt/format.h>

#include "outcore/core/size.hpp"
#include "run_support.hpp"

namespace outcore::cli {

void print_shares(std::uint64_t units, std::span<const ops::DeviceShare> shares, std::FILE* out) {
    fmt::print(out, "devices: {} work units over {} devices\n", units, shares.size());
    for (const ops::DeviceShare& s : shares) {
        fmt::print(out,
                   "  {}: {} units in {} runs, busy {} (queues: up {}, compute {}, down {}; {} of transfers "
                   "hidden), moved {}, peak {} of {}\n",
                   s.device, s.units, s.runs, format_seconds(s.busy_seconds),
                   format_seconds(s.upload_busy_seconds), format_seconds(s.compute_busy_seconds),
                   format_seconds(s.download_busy_seconds), format_percent(s.hidden_transfer_fraction),
                   format_size(s.bytes_moved), format_size(s.peak_device_bytes), format_size(s.budget_bytes));
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
                        {"busy_seconds", s.busy_seconds},
                        {"runs", s.runs},
                        {"busy_s",
                         {{"upload", s.upload_busy_seconds},
                          {"compute", s.compute_busy_seconds},
                          {"download", s.download_busy_seconds}}},
                        {"hidden_transfer_fraction", s.hidden_transfer_fraction}});
    }
    return list;
}

}  // namespace outcore::cli
