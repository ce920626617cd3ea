// start_from_environment(): each monitor's own start_*_from_environment(), once.
#include "outcore/monitor/environment.hpp"

#include <exception>
#include <mutex>

#include "monitor/environment.hpp"
#include "outcore/core/log.hpp"
#include "outcore/monitor/trace.hpp"

namespace outcore::monitor {

namespace {

template <class Start>
void start_logged(const char* what, Start&& start) noexcept {
    try {
        try {
            start();
        } catch (const std::exception& e) {
            log::error("monitor", "{} not started: {}", what, e.what());
        }
    } catch (...) {
        log::write(log::Level::Error, "monitor", "a monitor from the environment was not started");
    }
}

}  // namespace

void start_from_environment() noexcept {
    static std::once_flag once;
    try {
        std::call_once(once, [] {
            start_logged("OUTCORE_TRACE", [] {
                if (!tracing()) detail::start_trace_from_environment();
            });
            start_logged("OUTCORE_LEAK_CHECK", [] { detail::start_leak_check_from_environment(); });
            start_logged("OUTCORE_REPORT_MS / OUTCORE_METRICS",
                         [] { detail::start_reporting_from_environment(); });
        });
    } catch (...) {
        // call_once itself failed (std::system_error): nothing was started.
    }
}

}  // namespace outcore::monitor
