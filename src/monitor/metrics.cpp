// The Prometheus endpoint of outcore/monitor/metrics.hpp. The address parsing and the
// checks are always built; the server itself only with OUTCORE_WITH_PROMETHEUS=1
// (src/CMakeLists.txt defines it for this file alone and links prometheus-cpp::core),
// else the constructor throws UsageError.
//
// The HTTP side is this file's own (one thread, one connection at a time, HTTP/1.0
// answers), not prometheus-cpp's Exposer: civetweb, under the Exposer, starts its
// threads with a fixed 100 KiB stack (Debian's build: pthread_attr_setstacksize
// 0x19000), and glibc carves the process's static TLS out of that stack. OpenBLAS
// alone has 60 KiB of TLS; libcudart adds 4 KiB aligned to 4 KiB, which left civetweb
// about 20 KiB, and its first vsnprintf at a scrape overflowed it (SIGSEGV in any
// process that loaded libcudart; docs/observability.md). A std::thread gets the
// default stack (8 MiB), TLS or not. prometheus-cpp still writes the text format.
#include "outcore/monitor/metrics.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
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
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include <cstring>
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

/// Every series, from one monitor::snapshot() (read at every scrape).
std::vector<MetricFamily> collect() {
    {
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
}

/// Sends all of `data`; false when the peer went away or timed out.
bool send_all(int fd, std::string_view data) noexcept {
    while (!data.empty()) {
        const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

/// "HTTP/1.0 <status>" with `body`, then the server closes (no keep-alive).
std::string http_response(std::string_view status, std::string_view type, std::string_view body, bool head) {
    std::string r =
        fmt::format("HTTP/1.0 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    status, type, body.size());
    if (!head) r.append(body);
    return r;
}
#endif
}  // namespace

#if OUTCORE_WITH_PROMETHEUS

bool metrics_supported() noexcept { return true; }

namespace {

/// A request's header block may not exceed this (a scrape sends a few hundred bytes).
constexpr std::size_t kMaxRequestBytes = 16 * 1024;
/// A client that sends nothing for this long is dropped.
constexpr int kReadTimeoutMs = 5000;
/// The pause after accept() failed for want of descriptors or memory.
constexpr int kBackoffMs = 100;

}  // namespace

struct MetricsServer::Impl {
    int listen_fd = -1;
    int wake_fd = -1;  ///< eventfd: written by the destructor to stop the thread
    std::uint16_t port = 0;
    std::thread thread;

    ~Impl() {
        if (listen_fd >= 0) ::close(listen_fd);
        if (wake_fd >= 0) ::close(wake_fd);
    }

    /// Waits for `fd` to be readable; false when stopping or after `timeout_ms` (-1: none).
    [[nodiscard]] bool wait_readable(int fd, int timeout_ms) const noexcept {
        pollfd p[2] = {{.fd = fd, .events = POLLIN, .revents = 0},
                       {.fd = wake_fd, .events = POLLIN, .revents = 0}};
        for (;;) {
            const int n = ::poll(p, 2, timeout_ms);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0 || (p[1].revents & POLLIN) != 0) return false;
            return true;
        }
    }

    void serve() noexcept {
        while (wait_readable(listen_fd, -1)) {
            const int client = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
            if (client < 0) {
                // Out of descriptors or memory: the listener stays readable, so wait a
                // little rather than spin. Anything else (EAGAIN: the peer gave up): next.
                if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                    (void)wait_readable(wake_fd, kBackoffMs);
                continue;
            }
            try {
                answer(client);
            } catch (const std::exception& e) {
                try {
                    log::warn(kComponent, "a scrape failed: {}", e.what());
                } catch (...) {}
            } catch (...) {}
            ::close(client);
        }
    }

    /// Reads one request and answers it.
    void answer(int client) const {
        const timeval timeout{.tv_sec = kReadTimeoutMs / 1000, .tv_usec = 0};
        (void)::setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
        std::string request;
        char buffer[4096];
        while (request.find("\r\n\r\n") == std::string::npos && request.find("\n\n") == std::string::npos) {
            if (request.size() > kMaxRequestBytes || !wait_readable(client, kReadTimeoutMs)) return;
            const ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return;
            request.append(buffer, static_cast<std::size_t>(n));
        }
        // "GET /metrics?x HTTP/1.1"
        const std::string_view line(request.data(), request.find_first_of("\r\n"));
        const std::size_t sp1 = line.find(' ');
        const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
        const std::string_view method = line.substr(0, sp1);
        std::string_view path =
            sp1 == std::string_view::npos ? std::string_view() : line.substr(sp1 + 1, sp2 - sp1 - 1);
        path = path.substr(0, path.find('?'));
        const bool head = method == "HEAD";
        std::string response;
        if (method != "GET" && !head) {
            response = http_response("405 Method Not Allowed", "text/plain", "only GET and HEAD\n", false);
        } else if (path != "/metrics") {
            response = http_response("404 Not Found", "text/plain",
                                     "not found: the metrics are at /metrics\n", head);
        } else {
            const std::string body = prometheus::TextSerializer().Serialize(collect());
            response = http_response("200 OK", "text/plain; version=0.0.4; charset=utf-8", body, head);
        }
        (void)send_all(client, response);
        (void)::shutdown(client, SHUT_WR);
    }
};

MetricsServer::MetricsServer(const std::string& listen) : impl_(std::make_unique<Impl>()) {
    const Endpoint e = parse_listen(listen);
    if (!e.loopback) {
        log::warn(kComponent,
                  "serving metrics on {}, not a loopback address: whoever reaches that interface can read "
                  "them (memory sizes and rates, no data)",
                  listen);
    }
    const auto fail = [&](const char* operation) {
        const int err = errno;
        throw IoError(
            kComponent,
            fmt::format("cannot serve metrics on {}: {} failed: {}", listen, operation, std::strerror(err)),
            err, listen, operation);
    };
    impl_->listen_fd = ::socket(e.ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (impl_->listen_fd < 0) fail("socket");
    const int on = 1;
    // A restarted process may rebind while old connections linger in TIME_WAIT; a port
    // another socket listens on stays busy (Linux).
    (void)::setsockopt(impl_->listen_fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (e.ipv6) (void)::setsockopt(impl_->listen_fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
    sockaddr_storage addr{};
    socklen_t len = socket_address(e, e.port, false, addr);
    if (::bind(impl_->listen_fd, reinterpret_cast<const sockaddr*>(&addr), len) != 0) fail("bind");
    if (::listen(impl_->listen_fd, 16) != 0) fail("listen");
    len = sizeof addr;
    if (::getsockname(impl_->listen_fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) fail("getsockname");
    impl_->port = ntohs(e.ipv6 ? reinterpret_cast<const sockaddr_in6&>(addr).sin6_port
                               : reinterpret_cast<const sockaddr_in&>(addr).sin_port);
    impl_->wake_fd = ::eventfd(0, EFD_CLOEXEC);
    if (impl_->wake_fd < 0) fail("eventfd");
    // One thread: scrapes come every few seconds and each reads one snapshot. Its stack
    // is the default (the reason for this server: see the top of this file).
    impl_->thread = std::thread([impl = impl_.get()] { impl->serve(); });
}

MetricsServer::~MetricsServer() {
    // Wakes the thread out of poll at once; a scrape in progress finishes first.
    const std::uint64_t one = 1;
    if (::write(impl_->wake_fd, &one, sizeof one) < 0) {
        // cannot happen for an eventfd below its maximum; the thread would then stay in poll
    }
    if (impl_->thread.joinable()) impl_->thread.join();
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
