// outcore/monitor/metrics.hpp — a Prometheus endpoint: a small HTTP server (one thread;
// prometheus-cpp writes the text format) whose /metrics reads monitor::snapshot() at
// every scrape, so the numbers are as fresh as the scrape and cost nothing between.
//
//   monitor::MetricsServer server("127.0.0.1:0");      // port 0: a free port
//   fmt::print("scrape http://127.0.0.1:{}/metrics\n", server.port());
//
// Series (tier = device | host | disk; see docs/observability.md):
//   gauges   outcore_bytes_resident{tier}, outcore_bytes_budget{tier},
//            outcore_bytes_peak{tier}, outcore_live_allocations
//   counters outcore_swap_bytes_total{direction="in|out"}, outcore_swap_total{direction},
//            outcore_evictions_total, outcore_thrash_total, outcore_oom_retries_total,
//            outcore_checksum_failures_total
//
// Optional: built only where CMake found prometheus-cpp (OUTCORE_WITH_PROMETHEUS;
// Debian: prometheus-cpp-dev). Without it metrics_supported() is false and the
// constructor throws UsageError saying so; everything else works the same.
//
// Users usually start it without code: OUTCORE_METRICS=ADDR:PORT, or the CLI's
// --metrics-listen ADDR:PORT.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace outcore::monitor {

/// Whether this build serves metrics (it was built with prometheus-cpp).
[[nodiscard]] bool metrics_supported() noexcept;

/// Serves /metrics for its lifetime (RAII; one thread of its own).
class MetricsServer {
public:
    /// Listens on `listen`, "HOST:PORT": an IPv4 address, "localhost", or an IPv6 one
    /// in brackets ("[::1]:9464"); port 0 picks a free port (see port()). Loopback is
    /// the safe default; any other address is allowed — the metrics then reach whoever
    /// reaches that interface — and logs a warning. UsageError for a malformed address,
    /// or when built without prometheus-cpp; IoError when the address cannot be bound.
    explicit MetricsServer(const std::string& listen = "127.0.0.1:9464");
    /// Stops serving, promptly (it waits for a scrape in progress). noexcept.
    ~MetricsServer();
    MetricsServer(const MetricsServer&) = delete;
    MetricsServer& operator=(const MetricsServer&) = delete;

    /// The port it listens on (the one picked, for port 0).
    [[nodiscard]] std::uint16_t port() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace outcore::monitor
