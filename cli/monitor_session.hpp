// cli/monitor_session.hpp — the monitors one CLI run turns on: --trace FILE,
// --report-every MS [--report-json], --metrics-listen ADDR:PORT, and whatever the
// OUTCORE_* variables ask for (outcore/monitor/environment.hpp; a flag wins over its
// variable). main() makes one after parsing and before the command runs:
//
//   MonitorSession session(globals);
//   int code = command.run();
//   return session.finish(code);   // writes the trace; OUTCORE_LEAK_CHECK → 8 on a leak
#pragma once

#include <memory>

#include "commands.hpp"

namespace outcore::monitor {
class Reporter;
class MetricsServer;
}  // namespace outcore::monitor

namespace outcore::cli {

class MonitorSession {
public:
    /// Starts the monitors. UsageError for a bad flag value (a trace file that cannot
    /// be created, --metrics-listen without prometheus-cpp, a bad address).
    explicit MonitorSession(const GlobalOptions& globals);
    /// Stops what finish() did not (a command that threw): the trace is still written.
    ~MonitorSession();
    MonitorSession(const MonitorSession&) = delete;
    MonitorSession& operator=(const MonitorSession&) = delete;

    /// Stops the reporter and the endpoint, writes the trace (saying where on stderr),
    /// and returns the exit code: `code`, or 8 when OUTCORE_LEAK_CHECK found a leak.
    [[nodiscard]] int finish(int code);

private:
    bool tracing_ = false;
    std::unique_ptr<monitor::Reporter> reporter_;
    std::unique_ptr<monitor::MetricsServer> metrics_;
};

}  // namespace outcore::cli
