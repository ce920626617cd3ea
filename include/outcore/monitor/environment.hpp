// outcore/monitor/environment.hpp — the monitors a user turns on without code, through
// the environment: OUTCORE_TRACE=FILE (timeline trace written at exit),
// OUTCORE_LEAK_CHECK=1|stacks (leak report at exit, exit code 8 on a leak),
// OUTCORE_REPORT_MS=N [OUTCORE_REPORT_JSON=1] (periodic report on stderr),
// OUTCORE_METRICS=ADDR:PORT (Prometheus endpoint).
//
//   OUTCORE_TRACE=run.json ./my_program      # any program using outcore
//
// The first Device to be constructed calls start_from_environment(); the CLI calls it
// before running a command (its flags --trace, --report-every and --metrics-listen take
// precedence over the variables). Calling it again does nothing.
#pragma once

namespace outcore::monitor {

/// Starts what the variables ask for, once per process. A bad value is logged (level
/// error) and that monitor stays off; never throws.
void start_from_environment() noexcept;

}  // namespace outcore::monitor
