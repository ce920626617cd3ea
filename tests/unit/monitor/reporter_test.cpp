// Reporter: format_line and format_json on known snapshots (rates, budgets, no previous
// record, a counter that went down, escaping); a Reporter with a 10 ms period writing
// records from a registered Source, its growth warning in the JSON record, prompt stop,
// and the environment switches' errors (ReporterThreads run under TSan too).
#include "outcore/monitor/reporter.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "monitor/environment.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/monitor/metrics.hpp"

namespace outcore::monitor {
namespace {

using namespace std::chrono_literals;
constexpr std::int64_t kSecondNs = 1'000'000'000;

Snapshot known_snapshot() {
    Snapshot s;
    s.time_ns = 10 * kSecondNs;
    s.device = {.resident_bytes = kGiB, .peak_bytes = 3 * kGiB / 2, .budget_bytes = 2 * kGiB};
    s.host = {.resident_bytes = 3 * kGiB, .peak_bytes = 4 * kGiB, .budget_bytes = 8 * kGiB};
    s.disk = {.resident_bytes = 10 * kGiB, .peak_bytes = 12 * kGiB, .budget_bytes = 0};
    s.live_allocations = 42;
    s.swap_in_bytes = 300 * kMiB;
    s.swap_in_count = 30;
    s.swap_out_bytes = 500 * kMiB;
    s.swap_out_count = 50;
    s.evictions = 7;
    s.thrash_count = 3;
    s.oom_retries = 2;
    s.checksum_failures = 1;
    return s;
}

TEST(Reporter, FormatLineShowsTiersAgainstBudgetsAndRates) {
    const Snapshot now = known_snapshot();
    Snapshot before = now;
    before.time_ns = now.time_ns - 2 * kSecondNs;
    before.swap_in_bytes = now.swap_in_bytes - 200 * kMiB;    // 100 MiB/s over 2 s
    before.swap_out_bytes = now.swap_out_bytes - 100 * kMiB;  // 50 MiB/s
    const std::string line = Reporter::format_line(now, &before);
    SCOPED_TRACE(line);
    EXPECT_EQ(line.rfind("outcore: report: ", 0), 0U);
    EXPECT_NE(line.find(fmt::format("device {} / {} (50.0%), peak {}", format_size(kGiB),
                                    format_size(2 * kGiB), format_size(3 * kGiB / 2))),
              std::string::npos);
    EXPECT_NE(line.find(fmt::format("host {} / {} (37.5%), peak {}", format_size(3 * kGiB),
                                    format_size(8 * kGiB), format_size(4 * kGiB))),
              std::string::npos);
    // No budget: no fraction.
    EXPECT_NE(line.find(fmt::format("disk {}, peak {}", format_size(10 * kGiB), format_size(12 * kGiB))),
              std::string::npos);
    EXPECT_NE(
        line.find(fmt::format("swap in {}/s, out {}/s", format_size(100 * kMiB), format_size(50 * kMiB))),
        std::string::npos);
    EXPECT_NE(line.find("42 live allocations"), std::string::npos);
    EXPECT_NE(line.find("evictions 7, thrash 3, OOM retries 2, checksum failures 1"), std::string::npos);
    EXPECT_EQ(line.find('\n'), std::string::npos);
}

TEST(Reporter, FormatLineWithoutPreviousShowsTotals) {
    const Snapshot now = known_snapshot();
    const std::string line = Reporter::format_line(now, nullptr);
    EXPECT_NE(
        line.find(fmt::format("swapped in {}, out {}", format_size(300 * kMiB), format_size(500 * kMiB))),
        std::string::npos)
        << line;
}

TEST(Reporter, FormatJsonHasEveryFieldAndRates) {
    const Snapshot now = known_snapshot();
    Snapshot before = now;
    before.time_ns = now.time_ns - kSecondNs / 2;
    before.swap_in_bytes = now.swap_in_bytes - kMiB;  // 2 MiB/s
    before.swap_out_bytes = now.swap_out_bytes + 1;   // went down: 0, not a wrap
    const std::vector<WatchdogWarning> warnings = {{"growth", "grew \"fast\"\n\tand\x01 on"}};
    const std::string text = Reporter::format_json(now, &before, warnings);
    EXPECT_EQ(text.find('\n'), std::string::npos);
    const nlohmann::json j = nlohmann::json::parse(text);
    EXPECT_EQ(j["time_ns"], now.time_ns);
    EXPECT_EQ(j["device"]["resident_bytes"], kGiB);
    EXPECT_EQ(j["device"]["peak_bytes"], 3 * kGiB / 2);
    EXPECT_EQ(j["device"]["budget_bytes"], 2 * kGiB);
    EXPECT_EQ(j["host"]["budget_bytes"], 8 * kGiB);
    EXPECT_EQ(j["disk"]["resident_bytes"], 10 * kGiB);
    EXPECT_EQ(j["live_allocations"], 42);
    EXPECT_EQ(j["swap_in_bytes"], 300 * kMiB);
    EXPECT_EQ(j["swap_in_count"], 30);
    EXPECT_EQ(j["swap_out_bytes"], 500 * kMiB);
    EXPECT_EQ(j["swap_out_count"], 50);
    EXPECT_EQ(j["evictions"], 7);
    EXPECT_EQ(j["thrash_count"], 3);
    EXPECT_EQ(j["oom_retries"], 2);
    EXPECT_EQ(j["checksum_failures"], 1);
    EXPECT_DOUBLE_EQ(j["interval_s"].get<double>(), 0.5);
    EXPECT_DOUBLE_EQ(j["swap_in_bytes_per_s"].get<double>(), 2.0 * kMiB);
    EXPECT_DOUBLE_EQ(j["swap_out_bytes_per_s"].get<double>(), 0.0);
    ASSERT_EQ(j["warnings"].size(), 1U);
    EXPECT_EQ(j["warnings"][0]["kind"], "growth");
    EXPECT_EQ(j["warnings"][0]["message"], warnings[0].message);  // escaped and back

    const nlohmann::json first = nlohmann::json::parse(Reporter::format_json(now, nullptr));
    EXPECT_TRUE(first["interval_s"].is_null());
    EXPECT_TRUE(first["swap_in_bytes_per_s"].is_null());
    EXPECT_TRUE(first["warnings"].empty());
}

/// A temporary file the Reporter writes to; its text read back.
struct TempFile {
    std::FILE* file = std::tmpfile();
    ~TempFile() {
        if (file != nullptr) std::fclose(file);
    }
    std::vector<std::string> lines() const {
        std::fflush(file);
        std::rewind(file);
        std::string text;
        char buffer[4096];
        std::size_t n = 0;
        while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, n);
        std::vector<std::string> out;
        std::istringstream in(text);
        for (std::string line; std::getline(in, line);) out.push_back(line);
        return out;
    }
};

/// Waits (bounded) until `reporter` wrote `n` records.
bool wait_records(const Reporter& reporter, std::uint64_t n) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (reporter.records() < n) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(5ms);
    }
    return true;
}

TEST(ReporterThreads, WritesLinesEveryPeriodFromTheSources) {
    constexpr std::uint64_t kDisk = 123 * kMiB;
    const Source source([](Snapshot& s) { s.disk.resident_bytes += kDisk; });
    TempFile tmp;
    ASSERT_NE(tmp.file, nullptr);
    constexpr std::uint64_t kRecords = 5;
    {
        ReporterOptions o;
        o.period = 10ms;
        o.out = tmp.file;
        Reporter reporter(o);
        ASSERT_TRUE(wait_records(reporter, kRecords)) << "only " << reporter.records() << " records in 20 s";
    }
    const std::vector<std::string> lines = tmp.lines();
    ASSERT_GE(lines.size(), kRecords);
    for (const std::string& line : lines) {
        EXPECT_EQ(line.rfind("outcore: report: ", 0), 0U) << line;
        EXPECT_NE(line.find(fmt::format("disk {},", format_size(kDisk))), std::string::npos) << line;
    }
    EXPECT_NE(lines.front().find("swapped in"), std::string::npos) << "the first record has no rates";
    EXPECT_NE(lines.back().find("swap in "), std::string::npos) << "later records have rates";
}

TEST(ReporterThreads, JsonRecordsCarryGrowthWarnings) {
    // A source whose host memory grows by 1 MiB at every snapshot: a leak.
    std::atomic<std::uint64_t> fills{0};
    const Source source([&](Snapshot& s) { s.host.resident_bytes += kMiB * (1 + fills.fetch_add(1)); });
    TempFile tmp;
    ASSERT_NE(tmp.file, nullptr);
    ReporterOptions o;
    o.period = 10ms;
    o.json = true;
    o.out = tmp.file;
    o.growth.window_samples = 3;
    o.growth.min_growth_bytes = kMiB;
    // Timer jitter spreads the samples unevenly in time; any rising series of 3 fits a
    // line with R² ≥ 0.75, so this threshold checks the plumbing, not the fit.
    o.growth.min_r_squared = 0.5;
    {
        Reporter reporter(o);
        ASSERT_TRUE(wait_records(reporter, 5));
    }
    const std::vector<std::string> lines = tmp.lines();
    ASSERT_GE(lines.size(), 5U);
    int warnings = 0;
    std::int64_t last_time = 0;
    for (std::size_t i = 0; i < lines.size(); ++i) {
        const nlohmann::json j = nlohmann::json::parse(lines[i]);
        EXPECT_GT(j["time_ns"].get<std::int64_t>(), last_time);
        last_time = j["time_ns"].get<std::int64_t>();
        EXPECT_EQ(j["interval_s"].is_null(), i == 0) << lines[i];
        for (const auto& w : j["warnings"]) {
            EXPECT_EQ(w["kind"], "growth");
            ++warnings;
        }
    }
    // The third record completes the first window; the leak never stops: one episode.
    EXPECT_EQ(warnings, 1);
}

TEST(ReporterThreads, StopsPromptlyWithoutWaitingOutThePeriod) {
    TempFile tmp;
    ASSERT_NE(tmp.file, nullptr);
    ReporterOptions o;
    o.period = std::chrono::hours(1);
    o.out = tmp.file;
    const auto start = std::chrono::steady_clock::now();
    {
        Reporter reporter(o);
        std::this_thread::sleep_for(20ms);  // let the thread reach its wait
        EXPECT_EQ(reporter.records(), 0U);
    }
    const auto elapsed = std::chrono::steady_clock::now() - start;
    // Generous for a loaded machine and sanitizers; a sleeping thread would take an hour.
    EXPECT_LT(elapsed, 5s);
    EXPECT_TRUE(tmp.lines().empty());
}

TEST(Reporter, RejectsBadOptions) {
    ReporterOptions o;
    o.period = 0ms;
    EXPECT_THROW(Reporter{o}, UsageError);
    o.period = 10ms;
    o.out = nullptr;
    EXPECT_THROW(Reporter{o}, UsageError);
    o.out = stderr;
    o.growth.window_samples = 1;
    EXPECT_THROW(Reporter{o}, UsageError);
}

/// Sets an environment variable for a scope.
struct ScopedEnv {
    ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
    ~ScopedEnv() { ::unsetenv(name_); }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;
    const char* name_;
};

TEST(Reporter, EnvironmentRejectsBadSettings) {
    for (const char* bad : {"abc", "0", "-5", "10ms", "99999999999999999999"}) {
        const ScopedEnv env("OUTCORE_REPORT_MS", bad);
        EXPECT_THROW(detail::start_reporting_from_environment(), UsageError) << bad;
    }
    const ScopedEnv env("OUTCORE_METRICS", "no-port");
    EXPECT_THROW(detail::start_reporting_from_environment(), UsageError);
    // Nothing set: nothing started, nothing thrown.
    ::unsetenv("OUTCORE_METRICS");
    EXPECT_NO_THROW(detail::start_reporting_from_environment());
}

TEST(ReporterThreads, EnvironmentStartsAReporterThatLivesUntilExit) {
    // In a child process, whose stderr is a pipe: the reporter lives until exit() and
    // must then stop cleanly (statics die in order, no crash, exit status 0).
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::dup2(fds[1], STDERR_FILENO);
        ::close(fds[0]);
        ::setenv("OUTCORE_REPORT_MS", "10", 1);
        ::setenv("OUTCORE_REPORT_JSON", "1", 1);
        if (metrics_supported()) ::setenv("OUTCORE_METRICS", "127.0.0.1:0", 1);
        try {
            detail::start_reporting_from_environment();
        } catch (...) {
            ::_exit(3);
        }
        std::this_thread::sleep_for(200ms);
        std::exit(0);
    }
    ::close(fds[1]);
    std::string text;
    char buffer[4096];
    ssize_t n = 0;
    while ((n = ::read(fds[0], buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(n));
    ::close(fds[0]);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status) << "; its stderr:\n"
                                   << text;
    EXPECT_EQ(WEXITSTATUS(status), 0) << text;
    std::istringstream in(text);
    int records = 0;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("{", 0) != 0) continue;  // log lines
        const nlohmann::json j = nlohmann::json::parse(line);
        EXPECT_TRUE(j.contains("device")) << line;
        ++records;
    }
    // 200 ms at 10 ms: about 20; a loaded machine may run late, but not 100 ms late.
    EXPECT_GE(records, 2) << text;
}

}  // namespace
}  // namespace outcore::monitor
