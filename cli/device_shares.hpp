// cli/device_shares.hpp — what each device did in a run over several devices
// (--devices), as text and as JSON, for `outcore gemm` and `outcore filter`.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <span>

#include "outcore/ops/gemm_devices.hpp"

namespace outcore::cli {

/// "devices: 6 work units over 3 devices" and a line per device, to `out`.
void print_shares(std::uint64_t units, std::span<const ops::DeviceShare> shares, std::FILE* out = stdout);
/// [{"device": "cuda:0", "units": ..., "bytes_moved": ..., ...}, ...]
[[nodiscard]] nlohmann::json shares_json(std::span<const ops::DeviceShare> shares);

/// Folds the devices' shares into one report (GemmReport or FilterReport): queue busy
/// times summed over the devices, the hidden-transfer fraction weighted by each
/// device's transfer time, device memory of the device that peaked highest.
template <typename Report>
void fold_shares(Report& out, std::span<const ops::DeviceShare> shares) {
    double transfer = 0, hidden = 0;
    for (const ops::DeviceShare& s : shares) {
        out.upload_busy_seconds += s.upload_busy_seconds;
        out.compute_busy_seconds += s.compute_busy_seconds;
        out.download_busy_seconds += s.download_busy_seconds;
        const double t = s.upload_busy_seconds + s.download_busy_seconds;
        transfer += t;
        hidden += s.hidden_transfer_fraction * t;
        if (s.peak_device_bytes >= out.peak_device_bytes) {
            out.peak_device_bytes = s.peak_device_bytes;
            out.budget_bytes = s.budget_bytes;
        }
    }
    out.hidden_transfer_fraction = transfer > 0 ? hidden / transfer : 1.0;
}

}  // namespace outcore::cli
