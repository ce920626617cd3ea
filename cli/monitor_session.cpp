#include "monitor_session.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/monitor/environment.hpp"
#include "outcore/monitor/leak_check.hpp"
#include "outcore/monitor/metrics.hpp"
#include "outcore/monitor/reporter.hpp"
#include "outcore/monitor/trace.hpp"

namespace outcore::cli {

MonitorSession::MonitorSession(const GlobalOptions& globals) {
    // A flag wins over its variable: the variable is dropped before the environment
    // is read (here, and by the first Device).
    if (globals.trace) ::unsetenv("OUTCORE_TRACE");
    if (globals.report_every) ::unsetenv("OUTCORE_REPORT_MS");
    if (globals.metrics_listen) ::unsetenv("OUTCORE_METRICS");
    if (globals.trace) {
        if (globals.trace->empty()) throw UsageError("trace", "--trace needs a file name");
        monitor::start_trace(*globals.trace);
        tracing_ = true;
    }
    if (globals.report_every) {
        if (*globals.report_every == 0)
            throw UsageError("report", "--report-every needs a period above 0 ms");
        monitor::ReporterOptions options;
        options.period = std::chrono::milliseconds(*globals.report_every);
        options.json = globals.report_json;
        reporter_ = std::make_unique<monitor::Reporter>(options);
    } else if (globals.report_json) {
        throw UsageError("report", "--report-json needs --report-every MS");
    }
    if (globals.metrics_listen) metrics_ = std::make_unique<monitor::MetricsServer>(*globals.metrics_listen);
    monitor::start_from_environment();
}

MonitorSession::~MonitorSession() {
    if (!tracing_) return;
    try {
        (void)monitor::stop_trace();
    } catch (const std::exception& e) {
        log::write(log::Level::Error, "trace", e.what());
    }
}

int MonitorSession::finish(int code) {
    reporter_.reset();
    metrics_.reset();
    if (tracing_) {
        tracing_ = false;
        const std::uint64_t events = monitor::stop_trace();  // IoError → main's catch
        log::info("trace", "{} events written", events);
    }
    return monitor::leak_check_exit_code(code);
}

}  // namespace outcore::cli
