// cli/commands.hpp — how the outcore CLI's subcommands plug into main.
//
// Each subcommand lives in its own file and has one add_<name>_command function that
// adds a CLI::App subcommand and appends a Command whose run() main calls once the
// command line has parsed:
//
//   void add_info_command(CLI::App& app, const GlobalOptions& globals, CommandList& commands);
//
// run() returns the exit code; failures are thrown as outcore errors and main maps
// them to exit codes once (exit_code_for).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "outcore/core/config.hpp"
#include "outcore/device/device.hpp"

namespace CLI {  // NOLINT(readability-identifier-naming): CLI11's namespace
class App;
}

namespace outcore::cli {

/// Flags every subcommand accepts; each overrides the same key of OUTCORE_CONF.
struct GlobalOptions {
    std::optional<std::string> device_budget;  ///< --device-budget SIZE
    std::optional<std::string> host_budget;    ///< --host-budget SIZE
    std::optional<std::string> backend;        ///< --backend NAME[:INDEX]
    // Monitoring (cli/monitor_session.cpp); each takes precedence over its variable.
    std::optional<std::string> trace;           ///< --trace FILE (OUTCORE_TRACE)
    std::optional<std::uint64_t> report_every;  ///< --report-every MS (OUTCORE_REPORT_MS)
    bool report_json = false;                   ///< --report-json (OUTCORE_REPORT_JSON)
    std::optional<std::string> metrics_listen;  ///< --metrics-listen ADDR:PORT (OUTCORE_METRICS)
};

/// Defaults, then OUTCORE_CONF, then the flags. Throws UsageError on a bad value.
[[nodiscard]] Config make_config(const GlobalOptions& globals);

/// The device selector the flags ask for: --backend if given, else "" (registry default).
[[nodiscard]] std::string device_selector(const GlobalOptions& globals);
/// The devices a command runs on: without `devices`, the one the flags select; with
/// it, "all" or a list of indices ("0,2") of that device's backend, opened in order.
/// For the CPU backend, indices past `cpu_devices` raise it (CPU devices are separate
/// accounting domains over the same memory). UsageError for a bad or repeated index.
[[nodiscard]] std::vector<std::unique_ptr<Device>> open_devices(const std::optional<std::string>& devices,
                                                                const GlobalOptions& globals, Config& config);

struct Command {
    const CLI::App* app = nullptr;  ///< the subcommand; run() is called when it parsed
    std::function<int()> run;
};
using CommandList = std::vector<Command>;

void add_info_command(CLI::App& app, const GlobalOptions& globals, CommandList& commands);
void add_alloc_demo_command(CLI::App& app, const GlobalOptions& globals, CommandList& commands);
void add_gemm_command(CLI::App& app, const GlobalOptions& globals, CommandList& commands);
void add_filter_command(CLI::App& app, const GlobalOptions& globals, CommandList& commands);
void add_make_image_command(CLI::App& app, const GlobalOptions& globals, CommandList& commands);
void add_bench_command(CLI::App& app, const GlobalOptions& globals, CommandList& commands);
/// `outcore bench vulkan` (cli/bench_vulkan.cpp), added under `bench` by add_bench_command.
void add_bench_vulkan_command(CLI::App& bench, const GlobalOptions& globals, CommandList& commands);
/// `outcore bench devices` (cli/bench_devices.cpp), added under `bench` by add_bench_command.
void add_bench_devices_command(CLI::App& bench, const GlobalOptions& globals, CommandList& commands);
void add_swap_bench_command(CLI::App& app, const GlobalOptions& globals, CommandList& commands);
void add_report_command(CLI::App& app, const GlobalOptions& globals, CommandList& commands);

}  // namespace outcore::cli
