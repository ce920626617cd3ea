// cli/report_plots.cpp — gnuplot scripts and data for `outcore report`, and running
// gnuplot as a child process (posix_spawn, stdout/stderr to files, a deadline).
#include "report_plots.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "outcore/core/error.hpp"

extern char** environ;  // NOLINT(readability-identifier-naming): POSIX

namespace outcore::cli {
namespace {

constexpr std::string_view kComponent = "report";
constexpr std::size_t kMaxSeriesPoints = 4000;  // per memory series; more is invisible at 1000 px
constexpr auto kGnuplotDeadline = std::chrono::seconds(60);
constexpr std::string_view kTerminal = "set terminal svg size 1000,600 dynamic enhanced font 'sans,12'";

namespace fs = std::filesystem;

/// A path as a gnuplot single-quoted string (a quote is written twice).
std::string quote_path(const fs::path& p) {
    std::string out = "'";
    for (char c : p.string()) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
}

/// Text as a gnuplot double-quoted string; used with `noenhanced`, so only \ and " matter.
std::string quote_text(std::string_view text) {
    std::string out = "\"";
    for (char c : text) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') c = ' ';
        out += c;
    }
    return out + "\"";
}

struct Unit {
    double divisor = 1;
    std::string_view name;
};

Unit bytes_unit(double max_bytes) {
    if (max_bytes >= 1024.0 * 1024 * 1024) return {1024.0 * 1024 * 1024, "GiB"};
    if (max_bytes >= 1024.0 * 1024) return {1024.0 * 1024, "MiB"};
    return {1024.0, "KiB"};
}

Unit rate_unit(double max_bytes_per_second) {
    if (max_bytes_per_second >= 1e9) return {1e9, "GB/s"};
    return {1e6, "MB/s"};
}

/// A step series ending at `end`: points thinned to at most kMaxSeriesPoints, each
/// kept point the largest of its run so peaks survive; repeats of a value dropped.
std::string series_data(const std::vector<monitor::CounterPoint>& points, double begin, double end,
                        double divisor) {
    std::ostringstream out;
    const std::size_t stride =
        std::max<std::size_t>(1, (points.size() + kMaxSeriesPoints - 1) / kMaxSeriesPoints);
    double last = 0;
    for (std::size_t i = 0; i < points.size(); i += stride) {
        double value = points[i].value;
        for (std::size_t j = i; j < std::min(points.size(), i + stride); ++j)
            value = std::max(value, points[j].value);
        if (i > 0 && value == last) continue;  // a step plot needs only the changes
        last = value;
        out << fmt::format("{:.9f} {:.9g}\n", points[i].time_seconds - begin, value / divisor);
    }
    if (!points.empty()) out << fmt::format("{:.9f} {:.9g}\n", end - begin, points.back().value / divisor);
    return out.str();
}

std::string header(const fs::path& svg, std::string_view title, std::string_view xlabel,
                   std::string_view ylabel) {
    return fmt::format(
        "{}\nset output {}\nset encoding utf8\nset title {} noenhanced\nset xlabel {}\nset ylabel {}\n"
        "set grid\n",
        kTerminal, quote_path(svg), quote_text(title), quote_text(xlabel), quote_text(ylabel));
}

/// An empty plot with a note in the middle (gnuplot refuses to plot nothing).
std::string empty_plot(std::string_view note, double wall) {
    return fmt::format(
        "set label 1 {} at graph 0.5, graph 0.5 center noenhanced\nset xrange [0:{}]\n"
        "set yrange [0:1]\nplot NaN notitle\nunset label 1\n",
        quote_text(note), wall > 0 ? wall : 1.0);
}

std::string memory_script(const monitor::TraceSummary& s, const fs::path& out, const fs::path& data) {
    double max_bytes = 0;
    for (const monitor::TierSummary& t : s.tiers) {
        max_bytes =
            std::max({max_bytes, static_cast<double>(t.peak_bytes), static_cast<double>(t.budget_bytes)});
    }
    const Unit unit = bytes_unit(max_bytes);
    std::string script = header(out / "memory.svg", "Memory per tier (resident bytes; dashed: budget)",
                                "time since trace start (s)", fmt::format("resident ({})", unit.name));
    std::vector<std::string> plots;
    for (std::size_t i = 0; i < s.tiers.size(); ++i) {
        const monitor::TierSummary& t = s.tiers[i];
        const int color = static_cast<int>(i) + 1;
        if (!t.resident.empty()) {
            const fs::path file = data / fmt::format("memory_{}.dat", i);
            write_file(file, series_data(t.resident, s.begin_seconds, s.end_seconds, unit.divisor));
            plots.push_back(fmt::format("{} using 1:2 with steps lw 2 lc {} title {} noenhanced",
                                        quote_path(file), color, quote_text(t.tier)));
        }
        if (!t.budget.empty()) {
            const fs::path file = data / fmt::format("budget_{}.dat", i);
            write_file(file, series_data(t.budget, s.begin_seconds, s.end_seconds, unit.divisor));
            plots.push_back(fmt::format("{} using 1:2 with steps lw 2 dt 2 lc {} title {} noenhanced",
                                        quote_path(file), color, quote_text(t.tier + " budget")));
        }
    }
    if (plots.empty()) return script + empty_plot("no memory counters in this trace", s.wall_seconds);
    script +=
        fmt::format("set key outside bottom center horizontal\nset xrange [0:{}]\nset yrange [0:*]\nplot ",
                    s.wall_seconds > 0 ? s.wall_seconds : 1.0);
    for (std::size_t i = 0; i < plots.size(); ++i) script += (i > 0 ? ", \\\n     " : "") + plots[i];
    return script + "\n";
}

std::string bandwidth_script(const monitor::TraceSummary& s, const fs::path& out, const fs::path& data) {
    double max_rate = 0;
    for (const monitor::DirectionSummary& d : s.directions) {
        for (double r : d.bytes_per_second_bins) max_rate = std::max(max_rate, r);
    }
    const Unit unit = rate_unit(max_rate);
    std::string script = header(out / "bandwidth.svg",
                                fmt::format("Transfer bandwidth per direction ({} bins of {:.3g} ms)",
                                            s.bin_count, s.bin_seconds * 1e3),
                                "time since trace start (s)", fmt::format("bandwidth ({})", unit.name));
    std::vector<std::string> plots;
    for (std::size_t i = 0; i < s.directions.size(); ++i) {
        const monitor::DirectionSummary& d = s.directions[i];
        if (d.count == 0 || s.bin_count == 0) continue;
        std::string text;
        for (std::size_t b = 0; b < d.bytes_per_second_bins.size(); ++b) {
            text += fmt::format("{:.9f} {:.9g}\n", static_cast<double>(b) * s.bin_seconds,
                                d.bytes_per_second_bins[b] / unit.divisor);
        }
        text += fmt::format("{:.9f} {:.9g}\n", s.wall_seconds, d.bytes_per_second_bins.back() / unit.divisor);
        const fs::path file = data / fmt::format("bandwidth_{}.dat", i);
        write_file(file, text);
        plots.push_back(fmt::format("{} using 1:2 with steps lw 2 lc {} title {} noenhanced",
                                    quote_path(file), i + 1, quote_text(d.direction)));
    }
    if (plots.empty()) return script + empty_plot("no copy events in this trace", s.wall_seconds);
    script +=
        fmt::format("set key outside bottom center horizontal\nset xrange [0:{}]\nset yrange [0:*]\nplot ",
                    s.wall_seconds);
    for (std::size_t i = 0; i < plots.size(); ++i) script += (i > 0 ? ", \\\n     " : "") + plots[i];
    return script + "\n";
}

std::string occupancy_script(const monitor::TraceSummary& s, const fs::path& out, const fs::path& data) {
    std::string script = header(out / "occupancy.svg",
                                fmt::format("Queue occupancy (busy share of each of {} bins)", s.bin_count),
                                "time since trace start (s)", "track");
    if (s.tracks.empty() || s.bin_count == 0)
        return script + empty_plot("no tracks in this trace", s.wall_seconds);
    std::string text;
    std::string tics;
    for (std::size_t row = 0; row < s.tracks.size(); ++row) {
        const monitor::TrackSummary& t = s.tracks[row];
        for (std::size_t b = 0; b < t.busy_fraction_bins.size(); ++b) {
            text +=
                fmt::format("{:.9f} {} {:.9f} 0.4 {:.4f}\n", (static_cast<double>(b) + 0.5) * s.bin_seconds,
                            row, s.bin_seconds / 2, 100 * t.busy_fraction_bins[b]);
        }
        tics += fmt::format("{}{} {}", row > 0 ? ", " : "", quote_text(t.name), row);
    }
    const fs::path file = data / "occupancy.dat";
    write_file(file, text);
    script += fmt::format(
        "unset grid\nset key off\nset palette defined (0 '#ffffff', 1 '#1f4e9c')\nset cbrange [0:100]\n"
        "set cblabel \"busy (%)\"\nset xrange [0:{}]\nset yrange [-0.5:{}]\nset ytics noenhanced ({})\n"
        "plot {} using 1:2:3:4:5 with boxxyerror fs solid 1.0 noborder lc palette notitle\n",
        s.wall_seconds, static_cast<double>(s.tracks.size()) - 0.5, tics, quote_path(file));
    return script;
}

/// Runs `gnuplot script` with output to files in `dir`; "" on success, else why not.
std::string run_gnuplot(const fs::path& gnuplot, const fs::path& script, const fs::path& dir) {
    const std::string log = (dir / "gnuplot.log").string();
    std::vector<std::string> args{gnuplot.string(), script.string()};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return fmt::format("cannot run {}: {}", gnuplot.string(), std::strerror(rc));
    const auto until = std::chrono::steady_clock::now() + kGnuplotDeadline;
    int status = 0;
    while (true) {
        const pid_t w = ::waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR)
            return fmt::format("waiting for gnuplot failed: {}", std::strerror(errno));
        if (std::chrono::steady_clock::now() > until) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            return fmt::format("gnuplot did not finish within {} s", kGnuplotDeadline.count());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
    std::ifstream in(log);
    std::string line;
    std::string message;
    while (std::getline(in, line)) {
        if (!line.empty()) message = line;  // gnuplot's last line says what went wrong
    }
    return fmt::format("gnuplot failed ({} {}): {}", WIFEXITED(status) ? "exit" : "signal",
                       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), message);
}

/// A temporary directory inside `parent`, removed with its contents on destruction.
class TempDir {
public:
    explicit TempDir(const fs::path& parent) {
        std::string pattern = (parent / ".outcore-report-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) {
            const int err = errno;
            throw IoError(kComponent,
                          fmt::format("cannot create a temporary directory in {}: {}", parent.string(),
                                      std::strerror(err)),
                          err, parent.string(), "mkdtemp");
        }
        path_ = pattern;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    [[nodiscard]] const fs::path& path() const noexcept { return path_; }

private:
    fs::path path_;
};

}  // namespace

void write_file(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
        const int err = errno != 0 ? errno : EIO;
        throw IoError(kComponent, fmt::format("cannot write {}: {}", path.string(), std::strerror(err)), err,
                      path.string(), "write");
    }
}

std::optional<fs::path> find_gnuplot(const std::optional<std::string>& explicit_path) {
    if (explicit_path) {
        if (::access(explicit_path->c_str(), X_OK) == 0 && !fs::is_directory(*explicit_path))
            return *explicit_path;
        return std::nullopt;
    }
    const char* path = std::getenv("PATH");
    std::string_view dirs = path != nullptr ? path : "/usr/bin:/bin";
    while (!dirs.empty()) {
        const std::size_t colon = dirs.find(':');
        const std::string_view dir = dirs.substr(0, colon);
        const fs::path candidate = fs::path(dir.empty() ? "." : std::string(dir)) / "gnuplot";
        if (::access(candidate.c_str(), X_OK) == 0 && !fs::is_directory(candidate)) return candidate;
        if (colon == std::string_view::npos) break;
        dirs.remove_prefix(colon + 1);
    }
    return std::nullopt;
}

PlotResult render_plots(const monitor::TraceSummary& summary, const fs::path& out_dir,
                        const std::optional<fs::path>& gnuplot) {
    PlotResult result;
    if (!gnuplot) {
        result.reason =
            "gnuplot not found (install it, e.g. apt-get install gnuplot-nox, or pass --gnuplot PATH)";
        return result;
    }
    const TempDir temp(out_dir);
    std::string script = memory_script(summary, out_dir, temp.path());
    script += "reset\n" + bandwidth_script(summary, out_dir, temp.path());
    script += "reset\n" + occupancy_script(summary, out_dir, temp.path());
    const fs::path script_path = temp.path() / "report.gp";
    write_file(script_path, script);
    result.reason = run_gnuplot(*gnuplot, script_path, temp.path());
    result.done = result.reason.empty();
    if (result.done) {
        for (const char* name : {"memory.svg", "bandwidth.svg", "occupancy.svg"})
            result.files.push_back(out_dir / name);
    }
    return result;
}

}  // namespace outcore::cli
