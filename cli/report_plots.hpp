// cli/report_plots.hpp — the plots of `outcore report`, drawn by gnuplot as SVG:
// memory per tier with its budget (memory.svg), transfer bandwidth per direction
// (bandwidth.svg) and queue occupancy, one row per track (occupancy.svg).
//
//   PlotResult r = render_plots(summary, out_dir, find_gnuplot(std::nullopt));
//   if (!r.done) fmt::print("plots skipped: {}\n", r.reason);
//
// gnuplot runs as a child process on a script written, with its data files, to a
// temporary directory inside `out_dir` that is removed afterwards.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "outcore/monitor/trace_summary.hpp"

namespace outcore::cli {

/// Where gnuplot is: `explicit_path` when given (must be executable), else the first
/// "gnuplot" on PATH; nullopt when there is none.
[[nodiscard]] std::optional<std::filesystem::path> find_gnuplot(
    const std::optional<std::string>& explicit_path);

/// Writes `text` to `path` (replacing it) or throws IoError.
void write_file(const std::filesystem::path& path, const std::string& text);

struct PlotResult {
    bool done = false;
    std::string reason;                        ///< why not, when !done
    std::vector<std::filesystem::path> files;  ///< the SVGs written
};

/// Writes memory.svg, bandwidth.svg and occupancy.svg into `out_dir` (which must
/// exist). A missing gnuplot or a gnuplot failure is a result (!done, reason), not an
/// exception; failing to write the temporary files throws IoError.
[[nodiscard]] PlotResult render_plots(const monitor::TraceSummary& summary,
                                      const std::filesystem::path& out_dir,
                                      const std::optional<std::filesystem::path>& gnuplot);

}  // namespace outcore::cli
