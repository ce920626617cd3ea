// environment.hpp (private) — starts the monitors a user asked for through the
// environment: OUTCORE_TRACE=FILE, OUTCORE_LEAK_CHECK=1, OUTCORE_METRICS=ADDR:PORT,
// OUTCORE_REPORT_MS=N. Each part implements its own start_*_from_environment();
// monitor::start_from_environment() (public: outcore/monitor/environment.hpp;
// environment.cpp) calls them once per process, logging (never throwing) a bad setting.
#pragma once

namespace outcore::monitor::detail {

/// OUTCORE_TRACE=FILE: record a trace, written to FILE at exit (trace.cpp).
void start_trace_from_environment();
/// OUTCORE_LEAK_CHECK=1: report live allocations at exit, exit code 8 if any (leak_check.cpp).
void start_leak_check_from_environment();
/// OUTCORE_REPORT_MS=N and OUTCORE_METRICS=ADDR:PORT: periodic reporter and the
/// Prometheus endpoint (reporter.cpp, metrics.cpp).
void start_reporting_from_environment();

}  // namespace outcore::monitor::detail
