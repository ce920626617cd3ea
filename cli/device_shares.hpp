// cli/device_shares.hpp — what each device did in a run over several devices
// (--devices), as text and as JSON, for `outcore gemm` and `outcore filter`.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>

#include "outcore/ops/gemm_devices.hpp"

namespace outcore::cli {

/// "devices: 6 work units over 3 devices" and a line per device.
void print_shares(std::uint64_t units, std::span<const ops::DeviceShare> shares);
/// [{"device": "cuda:0", "units": ..., "bytes_moved": ..., ...}, ...]
[[nodiscard]] nlohmann::json shares_json(std::span<const ops::DeviceShare> shares);

}  // namespace outcore::cli
