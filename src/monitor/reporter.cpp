// The periodic reporter (outcore/monitor/reporter.hpp) and the environment switches
// that start it and the metrics endpoint (OUTCORE_REPORT_MS, OUTCORE_REPORT_JSON,
// OUTCORE_METRICS; see environment.hpp).
#include "outcore/monitor/reporter.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string_view>
#include <vector>

#include "environment.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/core/size.hpp"
#include "outcore/monitor/metrics.hpp"

namespace outcore::monitor {

namespace {
constexpr const char* kComponent = "monitor";
constexpr double kNsPerSecond = 1e9;
/// The longest OUTCORE_REPORT_MS accepted: one day.
constexpr std::int64_t kMaxPeriodMs = 24LL * 3600 * 1000;

/// a − b, or 0 when the counter went down (a source was destroyed in between).
std::uint64_t rise(std::uint64_t a, std::uint64_t b) noexcept { return a > b ? a - b : 0; }

/// Seconds between two snapshots, or 0 without a previous one (or no time between).
double interval_s(const Snapshot& now, const Snapshot* previous) noexcept {
    if (previous == nullptr || now.time_ns <= previous->time_ns) return 0;
    return static_cast<double>(now.time_ns - previous->time_ns) / kNsPerSecond;
}

std::string format_rate(double bytes_per_s) {
    return fmt::format("{}/s", format_size(static_cast<std::uint64_t>(bytes_per_s + 0.5)));
}

std::string tier_text(std::string_view name, const TierGauge& g) {
    std::string out = fmt::format("{} {}", name, format_size(g.resident_bytes));
    if (g.budget_bytes != 0) {
        out +=
            fmt::format(" / {} ({:.1f}%)", format_size(g.budget_bytes),
                        100.0 * static_cast<double>(g.resident_bytes) / static_cast<double>(g.budget_bytes));
    }
    out += fmt::format(", peak {}", format_size(g.peak_bytes));
    return out;
}

/// `text` as a JSON string literal.
std::string json_string(std::string_view text) {
    std::string out = "\"";
    for (const char c : text) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
                } else {
                    out += c;
                }
        }
    }
    out += '"';
    return out;
}

std::string json_tier(const TierGauge& g) {
    return fmt::format(R"({{"resident_bytes":{},"peak_bytes":{},"budget_bytes":{}}})", g.resident_bytes,
                       g.peak_bytes, g.budget_bytes);
}

/// A rate as JSON: a number, or null without an interval.
std::string json_rate(std::uint64_t now, std::uint64_t before, double seconds) {
    if (seconds <= 0) return "null";
    return fmt::format("{:.1f}", static_cast<double>(rise(now, before)) / seconds);
}
}  // namespace

Reporter::Reporter(ReporterOptions options)
    : options_(std::move(options)), growth_(options_.growth), thrash_(options_.thrash) {
    if (options_.period.count() <= 0) {
        throw UsageError(kComponent,
                         fmt::format("report period of {} ms (must be positive)", options_.period.count()));
    }
    if (options_.out == nullptr) throw UsageError(kComponent, "report output is a null FILE*");
    thread_ = std::thread([this] { run(); });
}

Reporter::~Reporter() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

std::uint64_t Reporter::records() const {
    std::lock_guard lock(mutex_);
    return records_;
}

void Reporter::run() noexcept {
    Snapshot previous;
    bool have_previous = false;
    std::unique_lock lock(mutex_);
    for (;;) {
        if (wake_.wait_for(lock, options_.period, [this] { return stopping_; })) return;
        lock.unlock();
        bool written = false;
        try {
            const Snapshot now = snapshot();
            std::vector<WatchdogWarning> warnings;
            // Live bytes: the device and host tiers (Device allocations, the swap store's
            // pageable host copies).
            if (auto w = growth_.add(now.time_ns, now.device.resident_bytes + now.host.resident_bytes))
                warnings.push_back(std::move(*w));
            if (auto w = thrash_.add(now.time_ns, now.thrash_count)) warnings.push_back(std::move(*w));
            for (const WatchdogWarning& w : warnings) log::warn(kComponent, "{}", w.message);
            const Snapshot* before = have_previous ? &previous : nullptr;
            std::string record =
                options_.json ? format_json(now, before, warnings) : format_line(now, before);
            record += '\n';
            std::fputs(record.c_str(), options_.out);
            written = std::fflush(options_.out) == 0;
            previous = now;
            have_previous = true;
        } catch (const std::exception& e) {
            log::error(kComponent, "periodic report failed: {}", e.what());
        }
        lock.lock();
        if (written) ++records_;
    }
}

std::string Reporter::format_line(const Snapshot& now, const Snapshot* previous) {
    const double seconds = interval_s(now, previous);
    std::string swap;
    if (seconds > 0) {
        swap = fmt::format(
            "swap in {}, out {}",
            format_rate(static_cast<double>(rise(now.swap_in_bytes, previous->swap_in_bytes)) / seconds),
            format_rate(static_cast<double>(rise(now.swap_out_bytes, previous->swap_out_bytes)) / seconds));
    } else {
        swap = fmt::format("swapped in {}, out {}", format_size(now.swap_in_bytes),
                           format_size(now.swap_out_bytes));
    }
    return fmt::format(
        "outcore: report: {} | {} | {} | {} | {} live allocations | evictions {}, thrash {}, "
        "OOM retries {}, checksum failures {}",
        tier_text("device", now.device), tier_text("host", now.host), tier_text("disk", now.disk), swap,
        now.live_allocations, now.evictions, now.thrash_count, now.oom_retries, now.checksum_failures);
}

std::string Reporter::format_json(const Snapshot& now, const Snapshot* previous,
                                  std::span<const WatchdogWarning> warnings) {
    const double seconds = interval_s(now, previous);
    std::string out = fmt::format(
        R"({{"time_ns":{},"device":{},"host":{},"disk":{},"live_allocations":{},"swap_in_bytes":{},)"
        R"("swap_in_count":{},"swap_out_bytes":{},"swap_out_count":{},"evictions":{},"thrash_count":{},)"
        R"("oom_retries":{},"checksum_failures":{},"interval_s":{},"swap_in_bytes_per_s":{},)"
        R"("swap_out_bytes_per_s":{},"warnings":[)",
        now.time_ns, json_tier(now.device), json_tier(now.host), json_tier(now.disk), now.live_allocations,
        now.swap_in_bytes, now.swap_in_count, now.swap_out_bytes, now.swap_out_count, now.evictions,
        now.thrash_count, now.oom_retries, now.checksum_failures,
        seconds > 0 ? fmt::format("{:.6f}", seconds) : std::string("null"),
        json_rate(now.swap_in_bytes, previous != nullptr ? previous->swap_in_bytes : 0, seconds),
        json_rate(now.swap_out_bytes, previous != nullptr ? previous->swap_out_bytes : 0, seconds));
    for (std::size_t i = 0; i < warnings.size(); ++i) {
        out += fmt::format(R"({}{{"kind":{},"message":{}}})", i == 0 ? "" : ",",
                           json_string(warnings[i].kind), json_string(warnings[i].message));
    }
    out += "]}";
    return out;
}

// --- environment --------------------------------------------------------------------------

namespace detail {

namespace {
/// What the environment started, kept for the life of the process. Made on first use,
/// after monitor::snapshot() has run once, so the source registry it reads is
/// destroyed after it at exit (statics die in reverse order of construction).
struct EnvironmentMonitors {
    std::unique_ptr<MetricsServer> metrics;
    std::unique_ptr<Reporter> reporter;
};
EnvironmentMonitors& environment_monitors() {
    (void)snapshot();
    static EnvironmentMonitors m;
    return m;
}

bool env_true(const char* value) {
    if (value == nullptr) return false;
    const std::string_view v(value);
    return v == "1" || v == "true" || v == "yes" || v == "on";
}
}  // namespace

void start_reporting_from_environment() {
    const char* metrics = std::getenv("OUTCORE_METRICS");
    const char* report_ms = std::getenv("OUTCORE_REPORT_MS");
    if ((metrics == nullptr || *metrics == '\0') && (report_ms == nullptr || *report_ms == '\0')) return;
    EnvironmentMonitors& m = environment_monitors();
    // Both are tried; the first failure is rethrown once the other had its chance.
    std::exception_ptr failure;
    if (metrics != nullptr && *metrics != '\0' && !m.metrics) {
        try {
            m.metrics = std::make_unique<MetricsServer>(metrics);
            log::info(kComponent, "serving Prometheus metrics on port {} (OUTCORE_METRICS={})",
                      m.metrics->port(), metrics);
        } catch (...) {
            failure = std::current_exception();
        }
    }
    if (report_ms != nullptr && *report_ms != '\0' && !m.reporter) {
        try {
            const std::string_view text(report_ms);
            std::int64_t ms = 0;
            const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
            if (ec != std::errc() || end != text.data() + text.size() || ms <= 0 || ms > kMaxPeriodMs) {
                throw UsageError(kComponent, fmt::format("OUTCORE_REPORT_MS='{}' is not a period in "
                                                         "milliseconds (1 to {})",
                                                         text, kMaxPeriodMs));
            }
            ReporterOptions options;
            options.period = std::chrono::milliseconds(ms);
            options.json = env_true(std::getenv("OUTCORE_REPORT_JSON"));
            m.reporter = std::make_unique<Reporter>(options);
        } catch (...) {
            if (!failure) failure = std::current_exception();
        }
    }
    if (failure) std::rethrow_exception(failure);
}

}  // namespace detail
}  // namespace outcore::monitor
