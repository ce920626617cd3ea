// MetricsServer: address checks (always), and where outcore was built with
// prometheus-cpp: /metrics over a loopback socket shows every series with the values a
// registered Source put in; an ephemeral port; a busy port is an IoError; a
// non-loopback address logs a warning; other paths are 404s; a silent client delays
// nothing; a process with libcudart loaded serves (the civetweb stack overflow); and
// the real Prometheus server (Debian's /usr/bin/prometheus) scrapes it and answers a
// query for outcore_bytes_resident.
#include "outcore/monitor/metrics.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/monitor/snapshot.hpp"

namespace outcore::monitor {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr const char* kPrometheus = "/usr/bin/prometheus";

/// Whether `response` holds its headers and as many body bytes as Content-Length says
/// (false without a Content-Length: read until the server closes).
bool complete(const std::string& response) {
    const std::size_t body = response.find("\r\n\r\n");
    if (body == std::string::npos) return false;
    std::string headers = response.substr(0, body);
    for (char& c : headers) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const std::size_t at = headers.find("\r\ncontent-length:");
    if (at == std::string::npos) return false;
    const std::size_t length = std::stoul(headers.substr(at + 17));
    return response.size() - (body + 4) >= length;
}

/// The body of `GET path` from 127.0.0.1:port (HTTP/1.0: the server closes when done),
/// or nullopt when the connection fails or no full response comes within 5 s.
std::optional<std::string> http_get(std::uint16_t port, const std::string& path) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return std::nullopt;
    const timeval timeout{.tv_sec = 5, .tv_usec = 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string response;
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
        const std::string request = fmt::format("GET {} HTTP/1.0\r\nHost: 127.0.0.1:{}\r\n\r\n", path, port);
        if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(request.size())) {
            char buffer[16384];
            // Until the server closes, or the body reaches its Content-Length (a server
            // may linger before closing).
            while (!complete(response)) {
                const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
                if (n <= 0) {
                    if (n < 0) response.clear();  // timeout or error: not a whole response
                    break;
                }
                response.append(buffer, static_cast<std::size_t>(n));
            }
        }
    }
    ::close(fd);
    const std::size_t body = response.find("\r\n\r\n");
    if (response.rfind("HTTP/1.", 0) != 0 || body == std::string::npos) return std::nullopt;
    if (response.find(" 200 ") == std::string::npos || response.find(" 200 ") > body) return std::nullopt;
    return response.substr(body + 4);
}

/// The value of the sample line `series` ("name{labels}") in a /metrics text.
std::optional<double> sample_value(const std::string& text, const std::string& series) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
    }
    return std::nullopt;
}

/// A free loopback TCP port (bound, read back, closed: free unless taken meanwhile).
std::uint16_t free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd < 0 || ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        if (fd >= 0) ::close(fd);
        return 0;
    }
    ::close(fd);
    return ntohs(addr.sin_port);
}

TEST(Metrics, RejectsMalformedAddresses) {
    for (const char* bad :
         {"", "9464", "127.0.0.1", "127.0.0.1:", ":9464", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:94x",
          "[::1", "[::1]9464", "[nonsense]:1", "example.com:80", "1.2.3:80"}) {
        EXPECT_THROW(MetricsServer{bad}, UsageError) << "'" << bad << "'";
    }
}

TEST(Metrics, WithoutPrometheusCppTheServerSaysSo) {
    if (metrics_supported()) GTEST_SKIP() << "built with prometheus-cpp";
    try {
        MetricsServer server("127.0.0.1:0");
        FAIL() << "constructed without prometheus-cpp";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("without prometheus-cpp"), std::string::npos) << e.what();
    }
}

#define SKIP_WITHOUT_PROMETHEUS_CPP()                                                                     \
    do {                                                                                                  \
        if (!metrics_supported())                                                                         \
            GTEST_SKIP() << "outcore was built without prometheus-cpp (Debian: prometheus-cpp-dev, then " \
                            "-DOUTCORE_WITH_PROMETHEUS=ON)";                                              \
    } while (false)

/// Known numbers in every field of the snapshot, added for the test's lifetime.
Source known_source() {
    return Source([](Snapshot& s) {
        s.device.resident_bytes += 11 * kMiB;
        s.device.budget_bytes += 12 * kMiB;
        s.device.peak_bytes += 13 * kMiB;
        s.host.resident_bytes += 21 * kMiB;
        s.host.budget_bytes += 22 * kMiB;
        s.host.peak_bytes += 23 * kMiB;
        s.disk.resident_bytes += 31 * kMiB;
        s.disk.budget_bytes += 32 * kMiB;
        s.disk.peak_bytes += 33 * kMiB;
        s.live_allocations += 41;
        s.swap_in_bytes += 51 * kMiB;
        s.swap_out_bytes += 52 * kMiB;
        s.swap_in_count += 53;
        s.swap_out_count += 54;
        s.evictions += 61;
        s.thrash_count += 62;
        s.oom_retries += 63;
        s.checksum_failures += 64;
    });
}

TEST(MetricsThreads, ServesEverySeriesFromTheSnapshot) {
    SKIP_WITHOUT_PROMETHEUS_CPP();
    const Source source = known_source();
    MetricsServer server("127.0.0.1:0");
    ASSERT_NE(server.port(), 0) << "port 0 must pick a free port and report it";
    const std::optional<std::string> text = http_get(server.port(), "/metrics");
    ASSERT_TRUE(text) << "no answer from 127.0.0.1:" << server.port() << "/metrics";
    SCOPED_TRACE(*text);
    // Other sources in this process (none, normally) would add to these: compare with
    // a snapshot, which holds exactly what a scrape reads.
    const Snapshot s = snapshot();
    const auto expect = [&](const std::string& series, std::uint64_t value) {
        const std::optional<double> got = sample_value(*text, series);
        ASSERT_TRUE(got) << series << " missing";
        EXPECT_EQ(*got, static_cast<double>(value)) << series;
    };
    expect(R"(outcore_bytes_resident{tier="device"})", s.device.resident_bytes);
    expect(R"(outcore_bytes_resident{tier="host"})", s.host.resident_bytes);
    expect(R"(outcore_bytes_resident{tier="disk"})", s.disk.resident_bytes);
    expect(R"(outcore_bytes_budget{tier="device"})", s.device.budget_bytes);
    expect(R"(outcore_bytes_budget{tier="host"})", s.host.budget_bytes);
    expect(R"(outcore_bytes_budget{tier="disk"})", s.disk.budget_bytes);
    expect(R"(outcore_bytes_peak{tier="device"})", s.device.peak_bytes);
    expect(R"(outcore_bytes_peak{tier="host"})", s.host.peak_bytes);
    expect(R"(outcore_bytes_peak{tier="disk"})", s.disk.peak_bytes);
    expect("outcore_live_allocations", s.live_allocations);
    expect(R"(outcore_swap_bytes_total{direction="in"})", s.swap_in_bytes);
    expect(R"(outcore_swap_bytes_total{direction="out"})", s.swap_out_bytes);
    expect(R"(outcore_swap_total{direction="in"})", s.swap_in_count);
    expect(R"(outcore_swap_total{direction="out"})", s.swap_out_count);
    expect("outcore_evictions_total", s.evictions);
    expect("outcore_thrash_total", s.thrash_count);
    expect("outcore_oom_retries_total", s.oom_retries);
    expect("outcore_checksum_failures_total", s.checksum_failures);
    // And they are our numbers, at least (the source is registered).
    EXPECT_GE(s.disk.resident_bytes, 31 * kMiB);
    EXPECT_GE(s.checksum_failures, 64U);
    EXPECT_NE(text->find("# TYPE outcore_bytes_resident gauge"), std::string::npos);
    EXPECT_NE(text->find("# TYPE outcore_swap_bytes_total counter"), std::string::npos);
    EXPECT_NE(text->find("# TYPE outcore_thrash_total counter"), std::string::npos);
}

TEST(MetricsThreads, EachScrapeReadsAFreshSnapshot) {
    SKIP_WITHOUT_PROMETHEUS_CPP();
    std::atomic<std::uint64_t> evictions{5};
    const Source source([&](Snapshot& s) { s.evictions += evictions.load(); });
    MetricsServer server("127.0.0.1:0");
    const auto read = [&] {
        const std::optional<std::string> text = http_get(server.port(), "/metrics");
        return text ? sample_value(*text, "outcore_evictions_total") : std::nullopt;
    };
    const std::optional<double> before = read();
    evictions += 1000;
    const std::optional<double> after = read();
    ASSERT_TRUE(before && after);
    EXPECT_EQ(*after - *before, 1000.0);
}

TEST(MetricsThreads, StopsPromptlyAfterAScrape) {
    SKIP_WITHOUT_PROMETHEUS_CPP();
    auto server = std::make_unique<MetricsServer>("127.0.0.1:0");
    ASSERT_TRUE(http_get(server->port(), "/metrics"));
    std::this_thread::sleep_for(50ms);  // the listener is back in its poll
    const auto start = std::chrono::steady_clock::now();
    server.reset();
    // Generous for a loaded machine and sanitizers.
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1500ms);
}

TEST(MetricsThreads, AClientThatSendsNothingDelaysNeitherStopNorLaterScrapes) {
    SKIP_WITHOUT_PROMETHEUS_CPP();
    auto server = std::make_unique<MetricsServer>("127.0.0.1:0");
    const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(silent, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(server->port());
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(silent, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
    std::this_thread::sleep_for(50ms);  // the server now waits for this client's request
    const auto start = std::chrono::steady_clock::now();
    server.reset();
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1500ms) << "stop waits for no request";
    ::close(silent);
}

TEST(MetricsThreads, OtherPathsAre404AndAQueryStringIsIgnored) {
    SKIP_WITHOUT_PROMETHEUS_CPP();
    MetricsServer server("127.0.0.1:0");
    EXPECT_FALSE(http_get(server.port(), "/")) << "only /metrics answers 200";
    EXPECT_FALSE(http_get(server.port(), "/metricsx"));
    const std::optional<std::string> query = http_get(server.port(), "/metrics?name[]=x");
    ASSERT_TRUE(query) << "a query string is ignored";
    EXPECT_NE(query->find("outcore_bytes_resident"), std::string::npos);
    // Still serving after the 404s.
    EXPECT_TRUE(http_get(server.port(), "/metrics"));
}

// The endpoint once died at the first scrape in any process that loaded libcudart:
// civetweb's 100 KiB thread stacks, minus the static TLS of OpenBLAS and libcudart
// (docs/observability.md). This runs the first scrape test again in a child with
// libcudart preloaded, where the CUDA toolkit is installed.
TEST(MetricsThreads, ScrapesWithLibcudartLoaded) {
    SKIP_WITHOUT_PROMETHEUS_CPP();
    std::string cudart;
    std::error_code ec;
    for (const char* dir : {"/usr/local/cuda/lib64", "/usr/lib/x86_64-linux-gnu"}) {
        for (const auto& entry : fs::directory_iterator(dir, ec)) {
            const std::string name = entry.path().filename().string();
            if (name.rfind("libcudart.so.", 0) == 0 && cudart.empty()) cudart = entry.path().string();
        }
    }
    if (cudart.empty()) GTEST_SKIP() << "no libcudart.so.N installed";
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    ASSERT_FALSE(ec);
    // ASan wants its runtime first in the library list; the preload comes before it.
    const std::string command = fmt::format(
        "ASAN_OPTIONS=\"${{ASAN_OPTIONS:+$ASAN_OPTIONS:}}verify_asan_link_order=0\" LD_PRELOAD={} {} "
        "--gtest_filter=MetricsThreads.ServesEverySeriesFromTheSnapshot > /dev/null 2>&1",
        cudart, self.string());
    const int status = std::system(command.c_str());
    ASSERT_TRUE(WIFEXITED(status)) << "the child died (signal " << WTERMSIG(status) << ") with " << cudart;
    EXPECT_EQ(WEXITSTATUS(status), 0) << command;
}

TEST(MetricsThreads, ABusyPortIsAnIoError) {
    SKIP_WITHOUT_PROMETHEUS_CPP();
    MetricsServer first("127.0.0.1:0");
    const std::string same = fmt::format("127.0.0.1:{}", first.port());
    EXPECT_THROW(MetricsServer{same}, IoError);
}

TEST(MetricsThreads, ANonLoopbackAddressWorksWithAWarning) {
    SKIP_WITHOUT_PROMETHEUS_CPP();
    testing::internal::CaptureStderr();
    std::optional<MetricsServer> server;
    try {
        server.emplace("0.0.0.0:0");
    } catch (...) {
        (void)testing::internal::GetCapturedStderr();
        throw;
    }
    const std::string log = testing::internal::GetCapturedStderr();
    EXPECT_NE(log.find("not a loopback address"), std::string::npos) << log;
    EXPECT_TRUE(http_get(server->port(), "/metrics")) << "0.0.0.0 serves loopback too";
    testing::internal::CaptureStderr();
    { MetricsServer quiet("127.0.0.1:0"); }
    EXPECT_EQ(testing::internal::GetCapturedStderr().find("loopback"), std::string::npos);
}

/// A temporary directory, removed with its contents.
struct TempDir {
    fs::path path;
    TempDir() {
        std::string pattern = (fs::temp_directory_path() / "outcore-prometheus-XXXXXX").string();
        if (::mkdtemp(pattern.data()) != nullptr) path = pattern;
    }
    ~TempDir() {
        std::error_code ec;
        if (!path.empty()) fs::remove_all(path, ec);
    }
};

/// The last `n` bytes of a file, for failure messages.
std::string tail(const fs::path& file, std::size_t n = 2000) {
    std::ifstream in(file);
    std::stringstream s;
    s << in.rdbuf();
    const std::string text = s.str();
    return text.size() > n ? text.substr(text.size() - n) : text;
}

TEST(MetricsThreads, RealPrometheusScrapesTheEndpoint) {
    SKIP_WITHOUT_PROMETHEUS_CPP();
    if (::access(kPrometheus, X_OK) != 0)
        GTEST_SKIP() << kPrometheus << " not found (Debian: prometheus): not testing a real scrape";
    const Source source = known_source();
    MetricsServer server("127.0.0.1:0");
    TempDir dir;
    ASSERT_FALSE(dir.path.empty());
    const std::uint16_t prometheus_port = free_port();
    ASSERT_NE(prometheus_port, 0);
    const fs::path config = dir.path / "prometheus.yml";
    const fs::path log = dir.path / "prometheus.log";
    {
        std::ofstream out(config);
        out << fmt::format(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: outcore\n    scrape_interval: 1s\n    scrape_timeout: 1s\n"
            "    static_configs:\n      - targets: ['127.0.0.1:{}']\n",
            server.port());
    }
    const std::string config_arg = "--config.file=" + config.string();
    const std::string storage_arg = "--storage.tsdb.path=" + (dir.path / "data").string();
    const std::string listen_arg = fmt::format("--web.listen-address=127.0.0.1:{}", prometheus_port);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0) << "fork failed";
    if (pid == 0) {
        const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            ::dup2(fd, STDOUT_FILENO);
            ::dup2(fd, STDERR_FILENO);
        }
        ::execl(kPrometheus, kPrometheus, config_arg.c_str(), storage_arg.c_str(), listen_arg.c_str(),
                "--log.level=warn", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    // Poll the query API until our series is there, at most 30 s.
    const std::string query = "/api/v1/query?query=outcore_bytes_resident";
    std::string answer;
    bool found = false;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!found && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(250ms);
        int status = 0;
        if (::waitpid(pid, &status, WNOHANG) == pid) {
            ADD_FAILURE() << "prometheus exited early (status " << status << "):\n" << tail(log);
            return;
        }
        if (const std::optional<std::string> body = http_get(prometheus_port, query)) {
            answer = *body;
            found = answer.find(R"("status":"success")") != std::string::npos &&
                    answer.find(R"("__name__":"outcore_bytes_resident")") != std::string::npos &&
                    answer.find(R"("tier":"disk")") != std::string::npos;
        }
    }
    // Stop it: SIGTERM, then wait at most 10 s before SIGKILL.
    ::kill(pid, SIGTERM);
    bool reaped = false;
    for (int i = 0; i < 100 && !reaped; ++i) {
        int status = 0;
        reaped = ::waitpid(pid, &status, WNOHANG) == pid;
        if (!reaped) std::this_thread::sleep_for(100ms);
    }
    if (!reaped) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
    }
    EXPECT_TRUE(reaped) << "prometheus ignored SIGTERM for 10 s";
    ASSERT_TRUE(found) << "no outcore_bytes_resident series within 30 s; last answer: " << answer
                       << "\nprometheus log:\n"
                       << tail(log);
    // The disk tier's value is one our source contributed to (other sources add only).
    const std::string disk_value = fmt::format(R"("{}")", snapshot().disk.resident_bytes);
    EXPECT_NE(answer.find(disk_value), std::string::npos) << answer;
}

TEST(Metrics, AlertRulesInTheDocsLoad) {
    constexpr const char* kPromtool = "/usr/bin/promtool";
    if (::access(kPromtool, X_OK) != 0)
        GTEST_SKIP() << kPromtool << " not found (Debian: prometheus): not checking the alert rules";
    const fs::path here = fs::path(__FILE__).parent_path();
    const fs::path doc = here / "../../../docs/observability.md";
    std::ifstream in(doc);
    ASSERT_TRUE(in) << "cannot read " << doc;
    std::stringstream text;
    text << in.rdbuf();
    // The ```yaml block after the alert-rules marker.
    const std::string page = text.str();
    const std::size_t marker = page.find("<!-- alert-rules");
    ASSERT_NE(marker, std::string::npos) << "no alert-rules marker in " << doc;
    const std::size_t open = page.find("```yaml\n", marker);
    const std::size_t close = page.find("\n```", open + 1);
    ASSERT_TRUE(open != std::string::npos && close != std::string::npos) << "no yaml block after the marker";
    TempDir dir;
    ASSERT_FALSE(dir.path.empty());
    std::ofstream(dir.path / "rules.yml") << page.substr(open + 8, close - (open + 8)) << "\n";
    fs::copy_file(here / "alert_rules_test.yml", dir.path / "alert_rules_test.yml");
    const fs::path log = dir.path / "promtool.log";
    const std::string cd = "cd '" + dir.path.string() + "' && ";
    EXPECT_EQ(std::system((cd + kPromtool + " check rules rules.yml > promtool.log 2>&1").c_str()), 0)
        << tail(log);
    EXPECT_EQ(std::system((cd + kPromtool + " test rules alert_rules_test.yml > promtool.log 2>&1").c_str()),
              0)
        << tail(log);
}

}  // namespace
}  // namespace outcore::monitor
