// cli/report.cpp — `outcore report TRACE.json [-o DIR] [--json]`: what a recorded
// trace says — bytes and bandwidth per copy direction, hidden transfer, memory peaks
// against the budget, busy time per track, swap traffic, allocations — as a table on
// stdout and in DIR/summary.txt, with SVG plots drawn by gnuplot in DIR.
//
//   outcore gemm --m 8192 --n 8192 --k 8192 --trace run.json
//   outcore report run.json                # table; SVGs in run-report/
//   outcore report run.json -o out --json  # the summary as JSON on stdout
//
// Without gnuplot the table is still printed and written; the plots are skipped with
// a note saying why, and the exit code is 0. Exit codes: main.cpp.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "commands.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/monitor/trace_summary.hpp"
#include "report_plots.hpp"
#include "run_support.hpp"

namespace outcore::cli {
namespace {

namespace fs = std::filesystem;
constexpr std::string_view kComponent = "report";

struct ReportFlags {
    std::string trace;
    std::optional<std::string> out_dir;
    std::optional<std::string> gnuplot;
    std::string bins = "100";
    bool json = false;
    bool no_plots = false;
};

std::string gbps(double bytes_per_second) { return fmt::format("{:.3f}", bytes_per_second * 1e-9); }

std::string table(const monitor::TraceSummary& s, const std::string& trace) {
    std::string t = fmt::format("trace   {}\n", trace);
    t += fmt::format(
        "        producer {} {} (format {}); {} events, {} unknown (ignored), {} dropped by the "
        "recorder\n",
        s.producer.empty() ? "?" : s.producer, s.version, s.trace_format, s.event_count,
        s.unknown_event_count, s.dropped_events);
    t += fmt::format("        wall time {:.6f} s (trace clock {:.6f} s to {:.6f} s)\n\n", s.wall_seconds,
                     s.begin_seconds, s.end_seconds);

    t += fmt::format("{:<12}{:>14}{:>10}{:>14}{:>13}{:>13}\n", "transfers", "bytes", "copies", "busy (s)",
                     "GB/s busy", "GB/s wall");
    for (const monitor::DirectionSummary& d : s.directions) {
        t += fmt::format("  {:<10}{:>14}{:>10}{:>14.6f}{:>13}{:>13}\n", d.direction, format_size(d.bytes),
                         d.count, d.busy_seconds, gbps(d.busy_bytes_per_second),
                         gbps(d.wall_bytes_per_second));
    }
    t += fmt::format(
        "overlap     compute busy {:.6f} s ({} kernels); transfer busy {:.6f} s, exposed {:.6f} s; "
        "hidden {:.1f} %\n\n",
        s.compute_busy_seconds, s.kernel_count, s.transfer_seconds, s.exposed_transfer_seconds,
        100 * s.hidden_transfer_fraction);

    t += fmt::format("{:<12}{:>14}{:>14}{:>14}{:>13}\n", "memory", "peak", "at (s)", "budget", "peak/budget");
    for (const monitor::TierSummary& m : s.tiers) {
        const bool budget = m.budget_bytes > 0;
        t +=
            fmt::format("  {:<10}{:>14}{:>14}{:>14}{:>13}\n", m.tier, format_size(m.peak_bytes),
                        m.peak_bytes > 0 ? fmt::format("{:.6f}", m.peak_time_seconds - s.begin_seconds) : "-",
                        budget ? format_size(m.budget_bytes) : "-",
                        budget ? fmt::format("{:.1f} %", 100.0 * static_cast<double>(m.peak_bytes) /
                                                             static_cast<double>(m.budget_bytes))
                               : "-");
    }
    t += '\n';

    t += fmt::format("{:<24}{:>10}{:>14}{:>10}{:>14}{:>13}\n", "tracks", "events", "busy (s)", "busy %",
                     "bytes", "GB/s busy");
    for (const monitor::TrackSummary& k : s.tracks) {
        // Bytes only where the track moves some (copies, reader and writer threads).
        t += fmt::format("  {:<22}{:>10}{:>14.6f}{:>10.1f}{:>14}{:>13}\n", k.name, k.event_count,
                         k.busy_seconds, 100 * k.busy_fraction, k.bytes > 0 ? format_size(k.bytes) : "-",
                         k.bytes > 0 ? fmt::format("{:.3f}", k.busy_bytes_per_second * 1e-9) : "-");
    }
    if (s.tracks.empty()) t += "  (none)\n";
    t += '\n';

    t += fmt::format("{:<12}{:>10}{:>14}\n", "swap", "count", "bytes");
    for (const monitor::SwapSummary& w : s.swaps) {
        t += fmt::format("  {:<10}{:>10}{:>14}\n", w.name, w.count, format_size(w.bytes));
    }
    if (s.swaps.empty()) t += "  (none)\n";
    t += fmt::format("\nallocations {} allocate ({} in all), {} free\n", s.allocation_count,
                     format_size(s.allocated_bytes), s.free_count);
    return t;
}

nlohmann::json to_json(const monitor::TraceSummary& s, const std::string& trace) {
    nlohmann::json directions = nlohmann::json::array();
    for (const monitor::DirectionSummary& d : s.directions) {
        directions.push_back({{"direction", d.direction},
                              {"bytes", d.bytes},
                              {"count", d.count},
                              {"busy_seconds", d.busy_seconds},
                              {"busy_bytes_per_second", d.busy_bytes_per_second},
                              {"wall_bytes_per_second", d.wall_bytes_per_second},
                              {"bytes_per_second_bins", d.bytes_per_second_bins}});
    }
    nlohmann::json tiers = nlohmann::json::array();
    for (const monitor::TierSummary& m : s.tiers) {
        tiers.push_back({{"tier", m.tier},
                         {"peak_bytes", m.peak_bytes},
                         {"peak_time_seconds", m.peak_time_seconds},
                         {"budget_bytes", m.budget_bytes}});
    }
    nlohmann::json tracks = nlohmann::json::array();
    for (const monitor::TrackSummary& k : s.tracks) {
        tracks.push_back({{"tid", k.tid},
                          {"name", k.name},
                          {"event_count", k.event_count},
                          {"busy_seconds", k.busy_seconds},
                          {"busy_fraction", k.busy_fraction},
                          {"bytes", k.bytes},
                          {"busy_bytes_per_second", k.busy_bytes_per_second},
                          {"busy_fraction_bins", k.busy_fraction_bins}});
    }
    nlohmann::json swaps = nlohmann::json::array();
    for (const monitor::SwapSummary& w : s.swaps) {
        swaps.push_back({{"name", w.name}, {"count", w.count}, {"bytes", w.bytes}});
    }
    return {{"command", "report"},
            {"trace", trace},
            {"producer", s.producer},
            {"version", s.version},
            {"trace_format", s.trace_format},
            {"dropped_events", s.dropped_events},
            {"event_count", s.event_count},
            {"unknown_event_count", s.unknown_event_count},
            {"begin_seconds", s.begin_seconds},
            {"end_seconds", s.end_seconds},
            {"wall_seconds", s.wall_seconds},
            {"bin_count", s.bin_count},
            {"bin_seconds", s.bin_seconds},
            {"directions", directions},
            {"kernel_count", s.kernel_count},
            {"compute_busy_seconds", s.compute_busy_seconds},
            {"transfer_seconds", s.transfer_seconds},
            {"exposed_transfer_seconds", s.exposed_transfer_seconds},
            {"hidden_transfer_fraction", s.hidden_transfer_fraction},
            {"tiers", tiers},
            {"tracks", tracks},
            {"swaps", swaps},
            {"allocation_count", s.allocation_count},
            {"free_count", s.free_count},
            {"allocated_bytes", s.allocated_bytes}};
}

/// DIR, or "<trace stem>-report" next to the trace; created when missing.
fs::path output_dir(const ReportFlags& f) {
    fs::path dir;
    if (f.out_dir) {
        dir = *f.out_dir;
    } else {
        const fs::path trace(f.trace);
        dir = trace.parent_path() / (trace.stem().string() + "-report");
    }
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir)) {
        const int err = ec ? ec.value() : ENOTDIR;
        throw IoError(
            kComponent,
            fmt::format("cannot create the output directory {}: {}", dir.string(), std::strerror(err)), err,
            dir.string(), "mkdir");
    }
    return dir;
}

int run_report(const ReportFlags& f) {
    const std::uint64_t bins = parse_count("--bins", f.bins);
    if (bins == 0 || bins > 100000) {
        throw UsageError(kComponent, fmt::format("--bins must be 1 to 100000 (got {})", bins));
    }
    const std::optional<fs::path> gnuplot = find_gnuplot(f.gnuplot);
    if (f.gnuplot && !gnuplot) {
        throw UsageError(kComponent, fmt::format("--gnuplot {}: not an executable file", *f.gnuplot));
    }
    // Read before creating anything: a bad trace leaves no directory behind.
    const monitor::TraceSummary summary =
        monitor::summarize_trace(f.trace, {.bins = static_cast<std::size_t>(bins)});
    const fs::path dir = output_dir(f);
    std::string text = table(summary, f.trace);
    std::string note;
    if (f.no_plots) {
        note = "plots: skipped (--no-plots)";
    } else {
        const PlotResult plots = render_plots(summary, dir, gnuplot);
        if (plots.done) {
            note = fmt::format("plots: {}", (dir / "memory.svg").string());
            for (std::size_t i = 1; i < plots.files.size(); ++i) note += ", " + plots.files[i].string();
        } else {
            note = fmt::format("plots: skipped: {}", plots.reason);
        }
    }
    write_file(dir / "summary.txt", text);
    text += fmt::format("\nsummary: {}\n{}\n", (dir / "summary.txt").string(), note);
    if (f.json) {
        nlohmann::json j = to_json(summary, f.trace);
        j["output_dir"] = dir.string();
        j["plots"] = note;
        fmt::print("{}\n", j.dump(2));
    } else {
        fmt::print("{}", text);
    }
    return 0;
}

}  // namespace

void add_report_command(CLI::App& app, const GlobalOptions& /*globals*/, CommandList& commands) {
    auto* sub =
        app.add_subcommand("report", "Summarize and plot a trace written by --trace (Chrome trace JSON)");
    auto f = std::make_shared<ReportFlags>();
    sub->add_option("trace", f->trace, "The trace file (JSON)")->required()->type_name("TRACE.json");
    sub->add_option("-o,--out", f->out_dir,
                    "Directory for summary.txt and the SVG plots (default: <trace stem>-report "
                    "next to the trace)")
        ->type_name("DIR");
    sub->add_option("--bins", f->bins, "Time bins of the bandwidth and occupancy plots (default 100)")
        ->type_name("N");
    sub->add_option("--gnuplot", f->gnuplot, "The gnuplot binary (default: gnuplot on PATH)")
        ->type_name("PATH");
    sub->add_flag("--no-plots", f->no_plots, "Only the table and summary.txt");
    sub->add_flag("--json", f->json, "Print the summary as JSON instead of the table");
    commands.push_back({sub, [f] { return run_report(*f); }});
}

}  // namespace outcore::cli
