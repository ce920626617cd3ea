// tests/unit/cli/report_cli_test.cpp — `outcore report` run as a process on a trace
// written here (seeded: random tile sizes, durations, counters): the table, --json
// against totals computed while writing the trace, summary.txt, the three SVGs (when
// gnuplot is installed), the run without gnuplot, and the exit code and one-line
// message of bad input.
#include <gtest/gtest.h>

#ifdef OUTCORE_CLI_PATH

#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "cli_support.hpp"
#include "support/test_seed.hpp"

namespace outcore::cli::test {
namespace {

namespace fs = std::filesystem;

/// What the generated trace holds, for the checks.
struct Expected {
    std::uint64_t h2d_bytes = 0;
    std::uint64_t d2h_bytes = 0;
    std::uint64_t allocations = 0;
    std::uint64_t device_peak = 0;
    std::uint64_t device_budget = 0;
    std::uint64_t swap_out_count = 0;
};

/// A pipeline of `tiles` tiles: upload → gemm → download on three tracks, an
/// allocation and a counter pair every tile, a swap_out every fourth.
Expected write_trace(const std::string& path, std::uint64_t seed, int tiles) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::uint64_t> tile_bytes(1 << 20, 8 << 20);
    std::uniform_real_distribution<double> us(5, 50);
    Expected x;
    x.device_budget = 64ULL << 20;
    nlohmann::json events = nlohmann::json::array();
    const char* names[] = {"upload", "compute", "download", "allocations", "swap"};
    for (int tid = 1; tid <= 5; ++tid) {
        events.push_back({{"ph", "M"},
                          {"name", "thread_name"},
                          {"pid", 1},
                          {"tid", tid},
                          {"ts", 0},
                          {"args", {{"name", names[tid - 1]}}}});
    }
    double up = 0, compute = 0, down = 0;
    std::uint64_t device = 0;
    for (int i = 0; i < tiles; ++i) {
        const std::uint64_t bytes = tile_bytes(rng);
        const double up_dur = us(rng);
        events.push_back({{"ph", "X"},
                          {"cat", "copy"},
                          {"name", "upload"},
                          {"pid", 1},
                          {"tid", 1},
                          {"ts", up},
                          {"dur", up_dur},
                          {"args", {{"bytes", bytes}, {"direction", "h2d"}}}});
        x.h2d_bytes += bytes;
        up += up_dur;
        const double c_begin = std::max(compute, up);
        const double c_dur = us(rng);
        events.push_back({{"ph", "X"},
                          {"cat", "kernel"},
                          {"name", "gemm"},
                          {"pid", 1},
                          {"tid", 2},
                          {"ts", c_begin},
                          {"dur", c_dur},
                          {"args", nlohmann::json::object()}});
        compute = c_begin + c_dur;
        const double d_begin = std::max(down, compute);
        const double d_dur = us(rng);
        events.push_back({{"ph", "X"},
                          {"cat", "copy"},
                          {"name", "download"},
                          {"pid", 1},
                          {"tid", 3},
                          {"ts", d_begin},
                          {"dur", d_dur},
                          {"args", {{"bytes", bytes / 2}, {"direction", "d2h"}}}});
        x.d2h_bytes += bytes / 2;
        down = d_begin + d_dur;
        device += bytes;
        ++x.allocations;
        events.push_back({{"ph", "i"},
                          {"s", "t"},
                          {"cat", "alloc"},
                          {"name", "allocate"},
                          {"pid", 1},
                          {"tid", 4},
                          {"ts", up},
                          {"args", {{"kind", "device"}, {"bytes", bytes}, {"tag", "tile"}}}});
        if (i % 4 == 3) {
            events.push_back(
                {{"ph", "X"},
                 {"cat", "swap"},
                 {"name", "swap_out"},
                 {"pid", 1},
                 {"tid", 5},
                 {"ts", up},
                 {"dur", 3.5},
                 {"args", {{"from", "device"}, {"to", "host"}, {"bytes", device / 2}, {"dirty", true}}}});
            ++x.swap_out_count;
            device -= device / 2;
        }
        x.device_peak = std::max(x.device_peak, device);
        events.push_back({{"ph", "C"},
                          {"name", "resident bytes"},
                          {"pid", 1},
                          {"tid", 0},
                          {"ts", up},
                          {"args", {{"device", device}, {"host", 0}, {"disk", 0}}}});
        events.push_back({{"ph", "C"},
                          {"name", "budget bytes"},
                          {"pid", 1},
                          {"tid", 0},
                          {"ts", up},
                          {"args", {{"device", x.device_budget}}}});
    }
    const nlohmann::json trace = {
        {"displayTimeUnit", "ns"},
        {"otherData",
         {{"producer", "outcore"}, {"version", "test"}, {"trace_format", 1}, {"dropped_events", 0}}},
        {"traceEvents", events}};
    std::ofstream(path) << trace.dump();
    return x;
}

bool have_gnuplot() {
    const char* path = std::getenv("PATH");
    std::string dirs = path != nullptr ? path : "";
    std::size_t start = 0;
    while (start <= dirs.size()) {
        const std::size_t end = std::min(dirs.find(':', start), dirs.size());
        if (::access((dirs.substr(start, end - start) + "/gnuplot").c_str(), X_OK) == 0) return true;
        start = end + 1;
    }
    return false;
}

/// Well-formed enough: an XML/SVG start, one closing </svg> at the end, each title.
void expect_svg(const fs::path& file, const std::vector<std::string>& titles) {
    SCOPED_TRACE(file.string());
    ASSERT_TRUE(fs::exists(file));
    const std::string svg = read_all(file.string());
    EXPECT_TRUE(svg.rfind("<?xml", 0) == 0 || svg.rfind("<svg", 0) == 0) << svg.substr(0, 80);
    const std::size_t close = svg.rfind("</svg>");
    ASSERT_NE(close, std::string::npos);
    EXPECT_EQ(svg.find_first_not_of(" \r\n", close + 6), std::string::npos);
    for (const std::string& t : titles) EXPECT_NE(svg.find(t), std::string::npos) << "missing " << t;
}

TEST(ReportCli, TableSummaryAndPlots) {
    Scratch s;
    const Expected x = write_trace(s.file("run.json"), outcore::test::seed(), 40);
    const CliRun r = run_cli(s, {"report", s.file("run.json"), "-o", s.file("out")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    for (const char* row : {"transfers", "  h2d", "  d2h", "  d2d", "overlap", "hidden", "memory", "  device",
                            "tracks", "  upload", "  compute", "  download", "swap_out"}) {
        EXPECT_NE(r.out.find(row), std::string::npos) << "no '" << row << "' in\n" << r.out;
    }
    EXPECT_NE(r.out.find("allocations " + std::to_string(x.allocations) + " allocate"), std::string::npos);
    // summary.txt is the table, which stdout starts with.
    const std::string summary = read_all(s.file("out/summary.txt"));
    ASSERT_FALSE(summary.empty());
    EXPECT_EQ(r.out.rfind(summary, 0), 0U);
    // No temporary files are left in the output directory.
    for (const auto& e : fs::directory_iterator(s.path() / "out")) {
        EXPECT_NE(e.path().filename().string().front(), '.') << e.path();
    }
    if (!have_gnuplot()) {
        EXPECT_NE(r.out.find("plots: skipped: gnuplot not found"), std::string::npos) << r.out;
        GTEST_SKIP() << "gnuplot is not installed (apt-get install gnuplot-nox): SVG checks skipped";
    }
    EXPECT_NE(r.out.find("plots: "), std::string::npos);
    expect_svg(s.path() / "out/memory.svg",
               {"<title>device</title>", "device budget", "resident (MiB)", "time"});
    expect_svg(s.path() / "out/bandwidth.svg", {"<title>h2d</title>", "<title>d2h</title>", "GB/s"});
    expect_svg(s.path() / "out/occupancy.svg", {"upload", "compute", "download", "swap", "busy (%)"});
}

TEST(ReportCli, JsonMatchesTheTrace) {
    Scratch s;
    const Expected x = write_trace(s.file("run.json"), outcore::test::seed(), 25);
    const CliRun r = run_cli(s, {"report", s.file("run.json"), "-o", s.file("o"), "--json", "--no-plots"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["command"], "report");
    EXPECT_EQ(j["producer"], "outcore");
    EXPECT_EQ(j["directions"][0]["direction"], "h2d");
    EXPECT_EQ(j["directions"][0]["bytes"].get<std::uint64_t>(), x.h2d_bytes);
    EXPECT_EQ(j["directions"][1]["bytes"].get<std::uint64_t>(), x.d2h_bytes);
    EXPECT_EQ(j["directions"][2]["bytes"].get<std::uint64_t>(), 0U);
    EXPECT_EQ(j["allocation_count"].get<std::uint64_t>(), x.allocations);
    EXPECT_EQ(j["tiers"][0]["tier"], "device");
    EXPECT_EQ(j["tiers"][0]["peak_bytes"].get<std::uint64_t>(), x.device_peak);
    EXPECT_EQ(j["tiers"][0]["budget_bytes"].get<std::uint64_t>(), x.device_budget);
    EXPECT_EQ(j["swaps"][0]["name"], "swap_out");
    EXPECT_EQ(j["swaps"][0]["count"].get<std::uint64_t>(), x.swap_out_count);
    const double hidden = j["hidden_transfer_fraction"].get<double>();
    EXPECT_GE(hidden, 0.0);
    EXPECT_LE(hidden, 1.0);
    EXPECT_EQ(j["tracks"].size(), 5U);
    for (const auto& t : j["tracks"]) EXPECT_TRUE(t.contains("bytes") && t.contains("busy_bytes_per_second"));
    EXPECT_EQ(j["directions"][0]["bytes_per_second_bins"].size(), 100U);
    EXPECT_TRUE(fs::exists(s.path() / "o/summary.txt"));
    EXPECT_FALSE(fs::exists(s.path() / "o/memory.svg"));
}

TEST(ReportCli, DefaultDirectoryIsNextToTheTrace) {
    Scratch s;
    (void)write_trace(s.file("gemm.trace.json"), outcore::test::seed(), 3);
    const CliRun r = run_cli(s, {"report", s.file("gemm.trace.json"), "--no-plots"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(s.path() / "gemm.trace-report/summary.txt"));
    EXPECT_NE(r.out.find("plots: skipped (--no-plots)"), std::string::npos);
}

TEST(ReportCli, WithoutGnuplotTheTableIsStillPrinted) {
    Scratch s;
    (void)write_trace(s.file("run.json"), outcore::test::seed(), 3);
    // The CLI finds gnuplot on PATH; an empty directory as PATH hides it.
    const char* old = std::getenv("PATH");
    const std::string saved = old != nullptr ? old : "";
    ::setenv("PATH", s.path().c_str(), 1);
    const CliRun r = run_cli(s, {"report", s.file("run.json"), "-o", s.file("out")});
    ::setenv("PATH", saved.c_str(), 1);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("transfers"), std::string::npos);
    EXPECT_NE(r.out.find("plots: skipped: gnuplot not found"), std::string::npos) << r.out;
    EXPECT_TRUE(fs::exists(s.path() / "out/summary.txt"));
    EXPECT_FALSE(fs::exists(s.path() / "out/memory.svg"));
}

TEST(ReportCli, BadInputIsOneLineAndTheDocumentedCode) {
    Scratch s;
    (void)write_trace(s.file("run.json"), outcore::test::seed(), 5);
    const std::string full = read_all(s.file("run.json"));
    std::ofstream(s.file("cut.json")) << full.substr(0, full.size() * 2 / 3);
    std::ofstream(s.file("notes.txt")) << "these are not the events you are looking for\n";
    std::ofstream(s.file("other.json")) << R"({"rows": [1, 2, 3]})";
    struct Case {
        std::vector<std::string> args;
        int code;
        std::string needle;
    };
    const std::vector<Case> cases = {
        {{"report", s.file("missing.json")}, 4, "cannot open"},
        {{"report", s.file("notes.txt")}, 2, "is not a trace"},
        {{"report", s.file("other.json")}, 2, "traceEvents"},
        {{"report", s.file("cut.json")}, 5, "truncated"},
        {{"report", s.path().string()}, 2, "is a directory"},
        {{"report", s.file("run.json"), "--bins", "0"}, 2, "--bins"},
        {{"report", s.file("run.json"), "--bins", "-1"}, 2, "--bins"},
        {{"report", s.file("run.json"), "--gnuplot", s.file("nope")}, 2, "--gnuplot"},
        {{"report"}, 2, "trace"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.args.back());
        const CliRun r = run_cli(s, c.args);
        EXPECT_EQ(r.exit_code, c.code) << r.err;
        EXPECT_TRUE(is_one_line_error(r));
        EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
    }
    // A bad trace leaves no report directory behind.
    EXPECT_FALSE(fs::exists(s.path() / "cut-report"));
    EXPECT_FALSE(fs::exists(s.path() / "notes-report"));
}

}  // namespace
}  // namespace outcore::cli::test

#else

TEST(ReportCli, Skipped) { GTEST_SKIP() << "built without the outcore CLI"; }

#endif
