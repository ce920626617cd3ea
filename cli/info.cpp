// cli/info.cpp — `outcore info [--json]`: every compiled-in backend, what it found,
// and the budget that would be in effect on each device.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/registry.hpp"
#include "outcore/io/tiff.hpp"

namespace outcore::cli {
namespace {

/// Optional parts of the build: whether this outcore has them.
struct Features {
    bool tiff = io::tiff_supported();  ///< TIFF images (libtiff)
#if defined(OUTCORE_WITH_SWAP) && OUTCORE_WITH_SWAP
    bool swap = true;  ///< the tiered swap store (xxhash)
#else
    bool swap = false;
#endif
};

struct InfoReport {
    Config config;
    std::vector<BackendProbe> probes;
    std::string default_device;  ///< id of the device `open_device` picks, or ""
    std::string default_error;   ///< why none could be opened
};

InfoReport gather(const GlobalOptions& globals) {
    InfoReport report{make_config(globals), {}, {}, {}};
    report.probes = probe_backends(report.config);
    // Opening shows which device the other commands would use. A backend that is
    // present but fails to open is reported, not fatal: info is the diagnostic tool.
    try {
        auto device = open_device(device_selector(globals), report.config);
        report.default_device = device->info().id();
    } catch (const BackendError& e) {
        report.default_error = e.what();
    }
    return report;
}

std::uint64_t budget_for(const Config& config, const DeviceInfo& info) {
    return config.device_budget.resolve(info.total_memory_bytes, info.recommended_working_set_bytes);
}

nlohmann::json device_json(const Config& config, const DeviceInfo& info, const std::string& default_id) {
    const std::uint64_t budget = budget_for(config, info);
    return {
        {"id", info.id()},
        {"backend", info.backend},
        {"index", info.index},
        {"name", info.name},
        {"default", info.id() == default_id},
        {"total_memory_bytes", info.total_memory_bytes},
        {"total_memory", format_size(info.total_memory_bytes)},
        {"recommended_working_set_bytes", info.recommended_working_set_bytes},
        {"recommended_working_set", format_size(info.recommended_working_set_bytes)},
        {"budget_bytes", budget},
        {"budget", format_size(budget)},
        {"min_offset_alignment_bytes", info.min_offset_alignment},
        {"max_inline_bytes", info.max_inline_bytes},
        {"max_buffer_bytes", info.max_buffer_bytes},
        {"max_allocation_bytes", info.max_allocation_bytes},
        {"unified_memory", info.unified_memory},
        {"compute_lanes", info.compute_lanes},
    };
}

void print_json(const InfoReport& report) {
    nlohmann::json backends = nlohmann::json::array();
    for (const auto& probe : report.probes) {
        nlohmann::json devices = nlohmann::json::array();
        for (const auto& info : probe.devices) {
            devices.push_back(device_json(report.config, info, report.default_device));
        }
        nlohmann::json entry = {
            {"backend", probe.backend}, {"available", probe.available}, {"devices", devices}};
        if (!probe.available) entry["reason"] = probe.reason;
        backends.push_back(std::move(entry));
    }
    nlohmann::json out = {
        {"version", OUTCORE_VERSION_STRING},
        {"config",
         {{"device_budget", report.config.device_budget.to_string()},
          {"host_budget", report.config.host_budget.to_string()},
          {"spill_dir", report.config.spill_dir},
          {"block_bytes", report.config.block_bytes},
          {"backend", report.config.backend}}},
        {"default_device",
         report.default_device.empty() ? nlohmann::json(nullptr) : nlohmann::json(report.default_device)},
        {"backends", backends},
        {"features", {{"tiff", Features{}.tiff}, {"swap", Features{}.swap}}},
    };
    if (!report.default_error.empty()) out["default_device_error"] = report.default_error;
    fmt::print("{}\n", out.dump(2));
}

/// "16 EiB" for the "no limit" sentinel reads as a real limit; say so instead.
std::string limit_text(std::uint64_t bytes) { return bytes == UINT64_MAX ? "no limit" : format_size(bytes); }

void print_text(const InfoReport& report) {
    fmt::print("outcore {}\n", OUTCORE_VERSION_STRING);
    const Features features;
    fmt::print("features: TIFF {}, swap store {}\n", features.tiff ? "yes" : "no (built without libtiff)",
               features.swap ? "yes" : "no (built without xxhash.h)");
    fmt::print("device budget: {} (host budget: {})\n", report.config.device_budget.to_string(),
               report.config.host_budget.to_string());
    for (const auto& probe : report.probes) {
        if (!probe.available) {
            fmt::print("\n{}: unavailable: {}\n", probe.backend, probe.reason);
            continue;
        }
        fmt::print("\n{}: {} device{}\n", probe.backend, probe.devices.size(),
                   probe.devices.size() == 1 ? "" : "s");
        for (const auto& info : probe.devices) {
            const bool is_default = info.id() == report.default_device;
            fmt::print("  {}{}  {}\n", info.id(), is_default ? " (default)" : "", info.name);
            fmt::print("    total memory             {}\n", format_size(info.total_memory_bytes));
            fmt::print("    recommended working set  {}\n", format_size(info.recommended_working_set_bytes));
            fmt::print("    budget in effect         {}\n", format_size(budget_for(report.config, info)));
            fmt::print("    offset alignment         {} B\n", info.min_offset_alignment);
            fmt::print("    inline parameters        up to {} B\n", info.max_inline_bytes);
            fmt::print("    largest buffer binding   {}\n", limit_text(info.max_buffer_bytes));
            fmt::print("    largest allocation       {}\n", limit_text(info.max_allocation_bytes));
            fmt::print("    unified memory           {}\n", info.unified_memory ? "yes" : "no");
            fmt::print("    compute lanes            {}\n", info.compute_lanes);
        }
    }
    if (!report.default_error.empty()) fmt::print("\nno default device: {}\n", report.default_error);
}

}  // namespace

void add_info_command(CLI::App& app, const GlobalOptions& globals, CommandList& commands) {
    auto* sub = app.add_subcommand("info", "List every backend and device, with budgets and limits");
    auto json = std::make_shared<bool>(false);
    sub->add_flag("--json", *json, "Print JSON instead of text");
    commands.push_back({sub, [&globals, json] {
                            const InfoReport report = gather(globals);
                            if (*json) {
                                print_json(report);
                            } else {
                                print_text(report);
                            }
                            return 0;
                        }});
}

}  // namespace outcore::cli
