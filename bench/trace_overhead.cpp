// outcore_trace_overhead — what the timeline trace (docs/tracing.md) costs, in one run:
//   1. the recorder's cost per event: monitor::report() a million times with no
//      observer and with a TraceRecorder registered (thread CPU time), and the cost of
//      writing those events (to_json, write);
//   2. an out-of-core GEMM on the CPU backend (the device outcore gemm uses here), alternating
//      untraced and traced runs of the same ops::gemm after a warm-up; prints the median
//      wall and process CPU seconds of each and the difference.
//
//   outcore_trace_overhead [N=2048] [REPS=5] [BUDGET_MIB=16]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <random>
#include <vector>

#include "outcore/backends/cpu.hpp"
#include "outcore/core/size.hpp"
#include "outcore/io/matrix.hpp"
#include "outcore/monitor/hooks.hpp"
#include "outcore/monitor/trace.hpp"
#include "outcore/ops/gemm.hpp"
using namespace outcore;
int main(int argc, char** argv) {
    const std::uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 2048;
    const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
    const std::uint64_t budget = (argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 16) * kMiB;
    auto device = cpu::make_cpu_device({.total_memory_bytes = 2 * kGiB});
    std::vector<float> a(n * n), b(n * n), c(n * n);
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<float> u(-1, 1);
    for (auto& x : a) x = u(rng);
    for (auto& x : b) x = u(rng);
    auto host = [&](std::vector<float>& v) {
        return io::HostMatrix(static_cast<void*>(v.data()), n, n, n, io::Layout::ColMajor, DType::F32);
    };
    io::HostMatrix ha = host(a), hb = host(b), hc = host(c);
    ops::GemmOptions o;
    o.budget_bytes = budget;
    o.measure_rates = false;
    auto thread_cpu = [] {
        timespec ts{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
    };
    // The recorder's own cost per event: report() calls with and without a recorder.
    {
        constexpr int kEvents = 1'000'000;
        auto time_reports = [&] {
            const double t0 = thread_cpu();
            for (int i = 0; i < kEvents; ++i) {
                monitor::report(monitor::OpEvent{.kind = monitor::OpKind::Upload,
                                                 .queue = "upload",
                                                 .name = "upload",
                                                 .bytes = 4096,
                                                 .device_id = 1,
                                                 .begin_ns = i,
                                                 .end_ns = i + 1});
            }
            return (thread_cpu() - t0) * 1e9 / kEvents;
        };
        const double unobserved = time_reports();
        monitor::TraceRecorder rec;
        double observed = 0;
        {
            monitor::ObserverRegistration reg(rec);
            observed = time_reports();
        }
        const double w0 = thread_cpu();
        const std::uint64_t written =
            rec.write((std::filesystem::temp_directory_path() / "outcore_trace_overhead_events.json"));
        const double write_s = thread_cpu() - w0;
        const double j0 = thread_cpu();
        const std::size_t json_bytes = rec.to_json().size();
        fmt::print("to_json: {} bytes in {:.2f} CPU s\n", json_bytes, thread_cpu() - j0);
        fmt::print(
            "per event (thread CPU): {:.1f} ns unobserved, {:.1f} ns recorded; writing {} events took {:.2f} "
            "CPU s\n",
            unobserved, observed, written, write_s);
    }
    auto cpu_now = [] {
        timespec ts{};
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
    };
    std::vector<double> off, on, cpu_off, cpu_on;
    std::uint64_t events = 0;
    (void)ops::gemm(*device, ha, hb, hc, o);  // warm-up
    for (int r = 0; r < reps; ++r) {
        for (int traced = 0; traced < 2; ++traced) {
            if (traced)
                monitor::start_trace(
                    (std::filesystem::temp_directory_path() / "outcore_trace_overhead_gemm.json"));
            const double c0 = cpu_now();
            const auto t0 = std::chrono::steady_clock::now();
            const ops::GemmReport rep = ops::gemm(*device, ha, hb, hc, o);
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (traced) events = monitor::stop_trace();  // writing is not timed: it happens at exit
            (traced ? on : off).push_back(s);
            (traced ? cpu_on : cpu_off).push_back(cpu_now() - c0);
            fmt::print("{} {:.4f} s ({} kernels)\n", traced ? "traced  " : "untraced", s,
                       rep.pipeline.compute_count);
        }
    }
    std::sort(cpu_off.begin(), cpu_off.end());
    std::sort(cpu_on.begin(), cpu_on.end());
    fmt::print("process CPU seconds: median untraced {:.4f}, traced {:.4f} ({:+.2f} %)\n",
               cpu_off[cpu_off.size() / 2], cpu_on[cpu_on.size() / 2],
               100 * (cpu_on[cpu_on.size() / 2] / cpu_off[cpu_off.size() / 2] - 1));
    std::sort(off.begin(), off.end());
    std::sort(on.begin(), on.end());
    const double mo = off[off.size() / 2], mn = on[on.size() / 2];
    fmt::print(
        "n={} budget={} MiB reps={}: median untraced {:.4f} s [{:.4f}..{:.4f}], traced {:.4f} s "
        "[{:.4f}..{:.4f}], "
        "overhead {:+.2f} %, {} events per traced run\n",
        n, budget / kMiB, reps, mo, off.front(), off.back(), mn, on.front(), on.back(), 100 * (mn / mo - 1),
        events);
}
