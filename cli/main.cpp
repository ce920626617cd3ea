// cli/main.cpp — the outcore command-line tool: global flags, subcommands, and the
// one place where errors become exit codes (documented in README.md).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <string_view>

#include "commands.hpp"
#include "monitor_session.hpp"
#include "outcore/core/error.hpp"

namespace {

/// Writes "outcore: error: <message>" as exactly one line on stderr.
void print_error(std::string_view message) noexcept {
    try {
        std::string line(message);
        for (char& c : line) {
            if (c == '\n' || c == '\r') c = ' ';
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        fmt::print(stderr, "outcore: error: {}\n", line);
    } catch (...) {
        std::fputs("outcore: error: (message could not be formatted)\n", stderr);
    }
}

int run(int argc, char** argv) {
    CLI::App app{"outcore: GPU work whose data do not fit in GPU memory", "outcore"};
    app.set_version_flag("--version", std::string("outcore ") + OUTCORE_VERSION_STRING);
    // Global flags may follow the subcommand too: `outcore info --device-budget 2GiB`.
    app.fallthrough();

    outcore::cli::GlobalOptions globals;
    app.add_option("--device-budget", globals.device_budget,
                   "Device memory budget: bytes, 512MiB, 1.5GB, 75% (of total) or auto; "
                   "overrides OUTCORE_CONF device_budget")
        ->type_name("SIZE");
    app.add_option("--host-budget", globals.host_budget,
                   "Host memory budget (same forms); overrides OUTCORE_CONF host_budget")
        ->type_name("SIZE");
    app.add_option("--backend", globals.backend,
                   "Backend or device to use: cpu, cuda, vulkan, cuda:1; overrides OUTCORE_BACKEND")
        ->type_name("NAME");
    app.add_option("--trace", globals.trace,
                   "Record a timeline trace (Chrome trace JSON, opens in ui.perfetto.dev) into FILE; "
                   "overrides OUTCORE_TRACE")
        ->type_name("FILE");
    app.add_option("--report-every", globals.report_every,
                   "Print memory per tier, budgets and swap rates to stderr every MS milliseconds; "
                   "overrides OUTCORE_REPORT_MS")
        ->type_name("MS");
    app.add_flag("--report-json", globals.report_json, "With --report-every: one JSON record per line");
    app.add_option("--metrics-listen", globals.metrics_listen,
                   "Serve Prometheus metrics on ADDR:PORT (127.0.0.1:9464); overrides OUTCORE_METRICS")
        ->type_name("ADDR:PORT");

    outcore::cli::CommandList commands;
    outcore::cli::add_info_command(app, globals, commands);
    outcore::cli::add_alloc_demo_command(app, globals, commands);
    outcore::cli::add_gemm_command(app, globals, commands);
    outcore::cli::add_filter_command(app, globals, commands);
    outcore::cli::add_make_image_command(app, globals, commands);
    outcore::cli::add_bench_command(app, globals, commands);
    outcore::cli::add_swap_bench_command(app, globals, commands);
    outcore::cli::add_report_command(app, globals, commands);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // --help and --version arrive as "errors" with exit code 0.
        if (e.get_exit_code() == 0) return app.exit(e);
        print_error(fmt::format("{} (see outcore --help)", e.what()));
        return static_cast<int>(outcore::ExitCode::Usage);
    }

    for (const auto& command : commands) {
        if (!command.app->parsed()) continue;
        outcore::cli::MonitorSession monitors(globals);
        return monitors.finish(command.run());
    }
    print_error("no subcommand given (see outcore --help)");
    return static_cast<int>(outcore::ExitCode::Usage);
}

}  // namespace

int main(int argc, char** argv) {
    // The one catch: every failure becomes one line on stderr and a documented code.
    try {
        return run(argc, argv);
    } catch (const std::bad_alloc&) {
        // Sizes are checked against budgets first; this is a host allocation the
        // checks did not foresee, still an out-of-memory and not a crash.
        print_error("[host] out of host memory (std::bad_alloc)");
        return static_cast<int>(outcore::ExitCode::OutOfMemory);
    } catch (const std::exception& e) {
        print_error(e.what());
        return static_cast<int>(outcore::exit_code_for(e));
    } catch (...) {
        print_error("unknown internal error");
        return static_cast<int>(outcore::ExitCode::Internal);
    }
}
