// Device-timed tracing on a real GPU (skipped without one): while a monitor observes,
// CudaQueue times the copies and kernels a layer claimed (monitor::OpNameScope) with
// CUDA events and reports them itself — unclaimed work is not reported;
// a copy's interval is > 0 and lies inside the host interval that enqueued and
// synchronized it; kernels carry the OpNameScope name; a traced out-of-core GEMM
// reports each upload once (Pipeline skips device-timed devices), its bytes adding
// up to the pipeline's count even with the rate probe on; nothing is reported while
// nothing observes. And
// `outcore bench gpu` reports the traced/untraced ratio of the f32 GEMM case.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_support.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/kernels.hpp"
#include "outcore/device/queue.hpp"
#include "outcore/io/matrix.hpp"
#include "outcore/monitor/device_time.hpp"
#include "outcore/monitor/hooks.hpp"
#include "outcore/monitor/trace_summary.hpp"
#include "outcore/ops/gemm.hpp"
#include "support/op_collector.hpp"
#include "support/test_seed.hpp"
#include "support/traced_device_checks.hpp"

namespace {

using outcore::Block;
using outcore::BufferView;
using outcore::kMiB;
using outcore::MemoryKind;
using outcore::QueueRole;
using outcore::monitor::OpEvent;
using outcore::monitor::OpKind;
using CudaTraceTest = outcore::cuda::test::CudaTest;

/// How far a device time may fall outside the host interval around it: half the
/// anchor's window (re-taken up to ten times while wider than 20 µs, but a busy host
/// can keep it wide) plus cudaEventElapsedTime's ~0.5 µs. At 100 µs a copy on the
/// H200 once began 105 µs before its host stamp; a clock mapped wrongly is off by
/// milliseconds or more, which this still catches.
constexpr std::int64_t kSlackNs = 250'000;

using Collector = outcore::test::OpCollector;

TEST_F(CudaTraceTest, ACopyIsTimedByTheDeviceInsideItsHostInterval) {
    const std::uint64_t bytes = 64 * kMiB;
    Block host = dev().allocate({.bytes = bytes, .kind = MemoryKind::HostPinned, .tag = "test.host"});
    Block device = dev().allocate({.bytes = bytes, .kind = MemoryKind::Device, .tag = "test.device"});
    auto q = dev().create_queue(QueueRole::Upload);
    Collector c;
    std::int64_t t0 = 0, t1 = 0;
    {
        const outcore::monitor::ObserverRegistration reg(c);
        q->upload(host.host(), BufferView(device));  // observed, but claimed by no layer: not reported
        q->synchronize();
        const outcore::monitor::OpNameScope claimed("upload");
        q->upload(host.host(), BufferView(device));  // first traced op: takes the anchor
        q->synchronize();
        t0 = outcore::monitor::now_ns();
        q->upload(host.host(), BufferView(device));
        q->download(BufferView(device), host.host());
        q->synchronize();
        t1 = outcore::monitor::now_ns();
    }
    const auto seen = c.seen();
    ASSERT_EQ(seen.size(), 3U);
    for (const auto& s : seen) {
        EXPECT_EQ(s.queue, "upload");
        EXPECT_EQ(s.bytes, bytes);
        EXPECT_GT(s.end_ns, s.begin_ns) << "64 MiB take tens of microseconds";
    }
    EXPECT_EQ(seen[1].kind, OpKind::Upload);
    EXPECT_EQ(seen[1].name, "upload");
    EXPECT_EQ(seen[2].kind, OpKind::Download);
    EXPECT_EQ(seen[2].name, "download");
    EXPECT_GE(seen[1].begin_ns, t0 - kSlackNs);
    EXPECT_LE(seen[2].end_ns, t1 + kSlackNs);
    EXPECT_LE(seen[1].end_ns, seen[2].begin_ns + kSlackNs) << "one stream: in order";
    // 64 MiB cannot cross PCIe/NVLink-C2C faster than ~1 TB/s: the duration is real.
    EXPECT_GT(seen[1].end_ns - seen[1].begin_ns, static_cast<std::int64_t>(bytes / 1000));
}

TEST_F(CudaTraceTest, KernelsCarryTheirScopeNameAndNothingIsReportedUnobserved) {
    const std::uint64_t n = 256;
    Block a = dev().allocate({.bytes = n * n * 4, .kind = MemoryKind::Device, .tag = "test.a"});
    Block b = dev().allocate({.bytes = n * n * 4, .kind = MemoryKind::Device, .tag = "test.b"});
    Block cm = dev().allocate({.bytes = n * n * 4, .kind = MemoryKind::Device, .tag = "test.c"});
    auto q = dev().create_queue(QueueRole::Compute);
    const outcore::GemmTileArgs args{.type = outcore::DType::F32,
                                     .m = n,
                                     .n = n,
                                     .k = n,
                                     .a = BufferView(a),
                                     .lda = n,
                                     .b = BufferView(b),
                                     .ldb = n,
                                     .c = BufferView(cm),
                                     .ldc = n,
                                     .alpha = 1.0,
                                     .beta = 0.0};
    Collector c;
    q->fill(BufferView(a), std::byte{0});  // unobserved: not reported to anyone later
    q->synchronize();
    outcore::test::run_claimed_fill_unclaimed_fill_and_gemm(dev(), *q, args, BufferView(a), BufferView(b), c);
    const auto seen = c.seen();
    ASSERT_GE(seen.size(), 2U);
    EXPECT_EQ(seen.front().name, "fill");
    EXPECT_EQ(seen.front().queue, "compute");
    for (std::size_t i = 1; i < seen.size(); ++i) {
        EXPECT_EQ(seen[i].kind, OpKind::Kernel);
        EXPECT_EQ(seen[i].name, "gemm");
        EXPECT_GE(seen[i].end_ns, seen[i].begin_ns);
    }
}

TEST_F(CudaTraceTest, ATracedGemmReportsEachCopyOnce) {
    outcore::ops::GemmOptions o{.type = outcore::DType::F32};  // the device's working set
    o.measure_rates = true;  // its copies and GEMMs are not the pipeline's: not reported
    outcore::test::expect_traced_gemm_reports_each_copy_once(dev(), 1024, o);
}

/// The built `outcore` next to this test binary (build/tests/.. /cli/outcore), or "".
std::string find_cli() {
    if (const char* env = std::getenv("OUTCORE_CLI")) return env;
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) return {};
    const std::filesystem::path cli = self.parent_path().parent_path() / "cli" / "outcore";
    return std::filesystem::exists(cli, ec) ? cli.string() : std::string();
}

/// `outcore bench gpu --n 2048 --reps 1 --warmup 0 --skip-cublasxt --skip-blur <args>` in a
/// fresh folder `dir` (its --json there); its output, exit code and JSON.
struct BenchRun {
    int rc = 0;
    std::string text;
    nlohmann::json json;
};
BenchRun run_small_bench_gpu(const std::string& cli, const std::filesystem::path& dir,
                             const std::string& args) {
    std::filesystem::create_directories(dir);
    const std::string json_file = (dir / "bench.json").string();
    const std::string command = cli + " bench gpu --n 2048 --reps 1 --warmup 0 --skip-cublasxt --skip-blur " +
                                args + " --json " + json_file + " > " + (dir / "out.txt").string() + " 2>&1";
    BenchRun r;
    r.rc = std::system(command.c_str());
    std::ifstream out((dir / "out.txt").string());
    r.text.assign(std::istreambuf_iterator<char>(out), std::istreambuf_iterator<char>());
    if (r.rc == 0) {
        std::ifstream in(json_file);
        r.json = nlohmann::json::parse(in);
    }
    return r;
}

std::filesystem::path scratch(const std::string& name) {
    return std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
}

TEST_F(CudaTraceTest, BenchGpuReportsTheTraceOverheadOfTheF32Gemm) {
    const std::string cli = find_cli();
    if (cli.empty()) GTEST_SKIP() << "no outcore binary next to the tests (set OUTCORE_CLI)";
    const std::filesystem::path dir = scratch("outcore-trace-bench");
    const BenchRun b = run_small_bench_gpu(cli, dir, "--skip-npy");
    std::filesystem::remove_all(dir);
    ASSERT_EQ(b.rc, 0) << b.text;
    const nlohmann::json& j = b.json;
    ASSERT_TRUE(j.contains("trace_overhead")) << b.text;
    const nlohmann::json& t = j["trace_overhead"];
    EXPECT_GT(t["ratio"].get<double>(), 0.0);
    EXPECT_NEAR(t["ratio"].get<double>(),
                t["traced"]["median_s"].get<double>() / t["untraced"]["median_s"].get<double>(), 1e-9);
    EXPECT_GT(t["trace_events"].get<std::uint64_t>(), 0U);
    bool row = false;
    for (const nlohmann::json& r : j["table"])
        row = row || r["case"].get<std::string>().find("traced") != std::string::npos;
    EXPECT_TRUE(row) << "the table has the traced / untraced row";
    EXPECT_NE(b.text.find("traced"), std::string::npos);
}

TEST_F(CudaTraceTest, BenchGpuTracesTheNpyCasesReaderFills) {
    const std::string cli = find_cli();
    if (cli.empty()) GTEST_SKIP() << "no outcore binary next to the tests (set OUTCORE_CLI)";
    const std::filesystem::path dir = scratch("outcore-trace-npy");
    const BenchRun b = run_small_bench_gpu(
        cli, dir, "--skip-gemm --npy-dir " + dir.string() + " --trace-dir " + (dir / "traces").string());
    const std::filesystem::path trace = dir / "traces" / "gemm-npy.trace.json";
    const bool traced = std::filesystem::exists(trace);
    const outcore::monitor::TraceSummary s =
        traced ? outcore::monitor::summarize_trace(trace) : outcore::monitor::TraceSummary{};
    std::filesystem::remove_all(dir);
    ASSERT_EQ(b.rc, 0) << b.text;
    ASSERT_TRUE(traced) << b.text;
    ASSERT_TRUE(b.json.contains("npy")) << b.text;
    // Every byte that went up was read from the files by a reader thread first.
    std::uint64_t read = 0;
    for (const auto& t : s.tracks) {
        if (t.name.starts_with("read ")) read += t.bytes;
    }
    EXPECT_EQ(read, b.json["npy"]["bytes_read"].get<std::uint64_t>());
    EXPECT_EQ(s.direction("h2d").bytes, read);
}

}  // namespace
