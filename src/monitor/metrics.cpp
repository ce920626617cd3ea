// The Prometheus endpoint of outcore/monitor/metrics.hpp. The address parsing and the
// checks are always built; the server itself only with OUTCORE_WITH_PROMETHEUS=1
// (src/CMakeLists.txt defines it for this file alone and links prometheus-cpp::pull),
// else the constructor throws UsageError.
#include "outcore/monitor/metrics.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <string_view>

#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/monitor/snapshot.hpp"

#ifndef OUTCORE_WITH_PROMETHEUS
#define OUTCORE_WITH_PROMETHEUS 0
#endif

#if OUTCORE_WITH_PROMETHEUS
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>
#endif

namespace outcore::monitor {

namespace {
constexpr const char* kComponent = "metrics";

struct Endpoint {
    std::string host;  ///< numeric, without brackets
    bool ipv6 = false;
    std::uint16_t port = 0;
    bool loopback = false;
    /// What civetweb's listening_ports takes: "127.0.0.1:9464", "[::1]:9464".
    [[nodiscard]] std::string civetweb() const {
        return ipv6 ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
    }
};

[[noreturn]] void bad_listen(std::string_view listen, std::string_view why) {
    throw UsageError(kComponent,
                     fmt::format("listen address '{}': {} (expected HOST:PORT, e.g. 127.0.0.1:9464 "
                                 "or [::1]:9464; port 0 picks a free one)",
                                 listen, why));
}

Endpoint parse_listen(std::string_view listen) {
    Endpoint e;
    std::string_view host;
    std::string_view port;
    if (listen.starts_with('[')) {
        const std::size_t close = listen.find(']');
        if (close == std::string_view::npos || close + 1 >= listen.size() || listen[close + 1] != ':')
            bad_listen(listen, "an IPv6 address needs [ADDRESS]:PORT");
        host = listen.substr(1, close - 1);
        port = listen.substr(close + 2);
        e.ipv6 = true;
    } else {
        const std::size_t colon = listen.rfind(':');
        if (colon == std::string_view::npos) bad_listen(listen, "no port");
        host = listen.substr(0, colon);
        port = listen.substr(colon + 1);
    }
    if (host.empty())
        bad_listen(listen, "no host (write 127.0.0.1 for this machine only, 0.0.0.0 for every interface)");
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535)
        bad_listen(listen, "the port is not a number from 0 to 65535");
    e.port = static_cast<std::uint16_t>(value);
    if (host == "localhost") host = "127.0.0.1";
    e.host = std::string(host);
    if (e.ipv6) {
        in6_addr a{};
        if (::inet_pton(AF_INET6, e.host.c_str(), &a) != 1) bad_listen(listen, "not a numeric IPv6 address");
        e.loopback = IN6_IS_ADDR_LOOPBACK(&a);
    } else {
        in_addr a{};
        if (::inet_pton(AF_INET, e.host.c_str(), &a) != 1)
            bad_listen(listen, "not a numeric IPv4 address (or localhost)");
        e.loopback = (ntohl(a.s_addr) >> 24) == 127;
    }
    return e;
}

#if OUTCORE_WITH_PROMETHEUS
/// The socket address of `e` at `port`; with `reachable`, an any-address (0.0.0.0, ::)
/// becomes loopback, for connecting rather than binding.
socklen_t socket_address(const Endpoint& e, std::uint16_t port, bool reachable,
                         sockaddr_storage& out) noexcept {
    out = {};
    if (e.ipv6) {
        auto& a = reinterpret_cast<sockaddr_in6&>(out);
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(port);
        ::inet_pton(AF_INET6, e.host.c_str(), &a.sin6_addr);
        if (reachable && IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr)) a.sin6_addr = in6addr_loopback;
        return sizeof(sockaddr_in6);
    }
    auto& a = reinterpret_cast<sockaddr_in&>(out);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    ::inet_pton(AF_INET, e.host.c_str(), &a.sin_addr);
    if (reachable && a.sin_addr.s_addr == htonl(INADDR_ANY)) a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return sizeof(sockaddr_in);
}

/// errno of binding `e` ourselves: why the server could not (EADDRINUSE, EADDRNOTAVAIL...).
int probe_bind_errno(const Endpoint& e) noexcept {
    const int fd = ::socket(e.ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return errno;
    sockaddr_storage addr{};
    const socklen_t len = socket_address(e, e.port, false, addr);
    const int err = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), len) != 0 ? errno : 0;
    ::close(fd);
    return err != 0 ? err : EADDRINUSE;  // we could bind it now: it was busy a moment ago
}

/// Connects to the server and hangs up at once.
void knock(const Endpoint& e, std::uint16_t port) noexcept {
    const int fd = ::socket(e.ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) return;
    sockaddr_storage addr{};
    const socklen_t len = socket_address(e, port, true, addr);
    (void)::connect(fd, reinterpret_cast<const sockaddr*>(&addr), len);  // in progress is enough
    ::close(fd);
}

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily family(std::string name, std::string help, MetricType type) {
    return MetricFamily{.name = std::move(name), .help = std::move(help), .type = type, .metric = {}};
}

void add(MetricFamily& f, std::vector<ClientMetric::Label> labels, std::uint64_t value) {
    ClientMetric m;
    m.label = std::move(labels);
    if (f.type == MetricType::Counter) {
        m.counter.value = static_cast<double>(value);
    } else {
        m.gauge.value = static_cast<double>(value);
    }
    f.metric.push_back(std::move(m));
}

/// Reads monitor::snapshot() at every scrape.
class SnapshotCollectable final : public prometheus::Collectable {
public:
    std::vector<MetricFamily> Collect() const override {
        const Snapshot s = snapshot();
        std::vector<MetricFamily> out;
        const auto per_tier = [&](std::string name, std::string help, std::uint64_t TierGauge::*field) {
            MetricFamily f = family(std::move(name), std::move(help), MetricType::Gauge);
            add(f, {{"tier", "device"}}, s.device.*field);
            add(f, {{"tier", "host"}}, s.host.*field);
            add(f, {{"tier", "disk"}}, s.disk.*field);
            out.push_back(std::move(f));
        };
        per_tier("outcore_bytes_resident", "Bytes resident in the tier now", &TierGauge::resident_bytes);
        per_tier("outcore_bytes_budget", "The tier's budget in bytes (0: none known)",
                 &TierGauge::budget_bytes);
        per_tier("outcore_bytes_peak", "Most bytes resident in the tier at once (sum of each source's peak)",
                 &TierGauge::peak_bytes);
        MetricFamily live =
            family("outcore_live_allocations", "Live device allocations, every kind", MetricType::Gauge);
        add(live, {}, s.live_allocations);
        out.push_back(std::move(live));
        const auto in_out = [&](std::string name, std::string help, std::uint64_t in,
                                std::uint64_t out_value) {
            MetricFamily f = family(std::move(name), std::move(help), MetricType::Counter);
            add(f, {{"direction", "in"}}, in);
            add(f, {{"direction", "out"}}, out_value);
            out.push_back(std::move(f));
        };
        in_out("outcore_swap_bytes_total",
               "Bytes swapped into a faster tier (in) or down to a slower one (out)", s.swap_in_bytes,
               s.swap_out_bytes);
        in_out("outcore_swap_total", "Swap moves of one unit, into a faster tier (in) or down (out)",
               s.swap_in_count, s.swap_out_count);
        const auto counter = [&](std::string name, std::string help, std::uint64_t value) {
            MetricFamily f = family(std::move(name), std::move(help), MetricType::Counter);
            add(f, {}, value);
            out.push_back(std::move(f));
        };
        counter("outcore_evictions_total", "Units evicted from the device or host tier", s.evictions);
        counter("outcore_thrash_total", "Swap-ins of units evicted shortly before", s.thrash_count);
        counter("outcore_oom_retries_total", "Backend out-of-memory answered by eviction and a retry",
                s.oom_retries);
        counter("outcore_checksum_failures_total", "Spill-file reads that failed their checksum",
                s.checksum_failures);
        return out;
    }
};
#endif
}  // namespace

#if OUTCORE_WITH_PROMETHEUS

bool metrics_supported() noexcept { return true; }

struct MetricsServer::Impl {
    std::shared_ptr<SnapshotCollectable> collectable = std::make_shared<SnapshotCollectable>();
    std::unique_ptr<prometheus::Exposer> exposer;
    Endpoint endpoint;
    std::uint16_t port = 0;
};

MetricsServer::MetricsServer(const std::string& listen) : impl_(std::make_unique<Impl>()) {
    const Endpoint e = parse_listen(listen);
    if (!e.loopback) {
        log::warn(kComponent,
                  "serving metrics on {}, not a loopback address: whoever reaches that interface can read "
                  "them (memory sizes and rates, no data)",
                  listen);
    }
    try {
        // One thread: scrapes come every few seconds and each reads one snapshot.
        impl_->exposer = std::make_unique<prometheus::Exposer>(e.civetweb(), 1);
    } catch (const std::exception& ex) {
        throw IoError(kComponent, fmt::format("cannot serve metrics ({})", ex.what()), probe_bind_errno(e),
                      listen, "bind");
    }
    impl_->exposer->RegisterCollectable(impl_->collectable);
    const std::vector<int> ports = impl_->exposer->GetListeningPorts();
    if (ports.empty() || ports.front() <= 0 || ports.front() > 65535) {
        throw InternalError(kComponent, fmt::format("the server on {} reports no listening port", listen));
    }
    impl_->port = static_cast<std::uint16_t>(ports.front());
    impl_->endpoint = e;
}

MetricsServer::~MetricsServer() {
    // civetweb's listener polls its sockets in 2 s quanta and looks at its stop flag only
    // between them, so stopping takes up to 2 s. Knocking on the port while it stops
    // ends the poll at once. Without a thread for it, it is just slower.
    std::atomic<bool> stopped{false};
    std::thread knocker;
    try {
        knocker = std::thread([&] {
            while (!stopped.load()) {
                knock(impl_->endpoint, impl_->port);
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
        });
    } catch (...) {}
    impl_->exposer.reset();
    stopped.store(true);
    if (knocker.joinable()) knocker.join();
}

std::uint16_t MetricsServer::port() const { return impl_->port; }

#else

bool metrics_supported() noexcept { return false; }

struct MetricsServer::Impl {};

MetricsServer::MetricsServer(const std::string& listen) {
    (void)parse_listen(listen);  // a malformed address is still reported as such
    throw UsageError(kComponent,
                     fmt::format("cannot serve metrics on {}: outcore was built without prometheus-cpp "
                                 "(install prometheus-cpp-dev and rebuild with "
                                 "-DOUTCORE_WITH_PROMETHEUS=ON)",
                                 listen));
}

MetricsServer::~MetricsServer() = default;

std::uint16_t MetricsServer::port() const { return 0; }

#endif

}  // namespace outcore::monitor
