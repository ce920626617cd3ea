// gemm_bench — out-of-core GEMM on the CPU backend against in-core OpenBLAS sgemm,
// both measured in the same run (docs/BENCHMARKS.md). The target: f32,
// m = n = k = 8192, device budget 1/8 of the operands, at least 90% of in-core.
//
//   build-rel/bench/outcore_gemm_bench                       # n = 8192, 1 warm-up + 3 reps
//   build-rel/bench/outcore_gemm_bench --n 4096 --reps 5 --json out.json
//   build-rel/bench/outcore_gemm_bench --budget-fraction 0.25 --schedule a-panel
//
// The two runs alternate (in-core, out-of-core, in-core, ...) so drifting machine load
// hits both alike; each reports the median and the spread (min..max). The table comes
// last; --json writes one machine-readable record.
#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "outcore/backends/cpu.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/io/matrix.hpp"
#include "outcore/ops/gemm.hpp"
#include "outcore/tile/staging_cache.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
    std::uint64_t m = 8192, n = 8192, k = 8192;
    double budget_fraction = 1.0 / 8.0;
    std::uint64_t budget_bytes = 0;  // overrides the fraction
    int reps = 3;
    int warmup = 1;
    std::uint32_t depth = 2;
    std::uint32_t readers = 0;
    std::optional<outcore::tile::GemmSchedule> schedule;
    std::uint64_t tile_m = 0, tile_n = 0, tile_k = 0;
    double compute_flops = 0, link_bytes_per_second = 0;
    std::string json;
    bool measure_busy = true;
};

[[noreturn]] void usage(const char* what) {
    std::fprintf(
        stderr,
        "gemm_bench: %s\n"
        "usage: outcore_gemm_bench [--n N | --m M --n N --k K] [--budget-fraction F | --budget SIZE]\n"
        "                          [--reps R] [--warmup W] [--depth 2|3] [--readers T]\n"
        "                          [--schedule square-c|a-panel|b-panel] [--tiles M,N,K]\n"
        "                          [--rates FLOPS,BYTES_PER_S] [--no-busy] [--json FILE]\n",
        what);
    std::exit(2);
}

Args parse(int argc, char** argv) {
    Args a;
    bool square = true;
    for (int i = 1; i < argc; ++i) {
        const std::string_view flag = argv[i];
        auto value = [&]() -> std::string_view {
            if (i + 1 >= argc) usage("a flag is missing its value");
            return argv[++i];
        };
        auto number = [&](std::string_view v) { return std::strtoull(std::string(v).c_str(), nullptr, 10); };
        if (flag == "--n") {
            a.n = number(value());
            if (square) a.m = a.k = a.n;
        } else if (flag == "--m") {
            a.m = number(value());
            square = false;
        } else if (flag == "--k") {
            a.k = number(value());
            square = false;
        } else if (flag == "--budget-fraction") {
            a.budget_fraction = std::strtod(std::string(value()).c_str(), nullptr);
        } else if (flag == "--budget") {
            a.budget_bytes = outcore::parse_bytes(value(), "--budget");
        } else if (flag == "--reps") {
            a.reps = static_cast<int>(number(value()));
        } else if (flag == "--warmup") {
            a.warmup = static_cast<int>(number(value()));
        } else if (flag == "--depth") {
            a.depth = static_cast<std::uint32_t>(number(value()));
        } else if (flag == "--readers") {
            a.readers = static_cast<std::uint32_t>(number(value()));
        } else if (flag == "--schedule") {
            const std::string_view s = value();
            if (s == "square-c") {
                a.schedule = outcore::tile::GemmSchedule::SquareC;
            } else if (s == "a-panel") {
                a.schedule = outcore::tile::GemmSchedule::APanelResident;
            } else if (s == "b-panel") {
                a.schedule = outcore::tile::GemmSchedule::BPanelResident;
            } else {
                usage("unknown schedule");
            }
        } else if (flag == "--tiles") {
            // M,N,K: fixed tiles (needs --schedule), for comparing against hand-picked blocks
            const std::string v(value());
            unsigned long long tm = 0, tn = 0, tk = 0;
            if (std::sscanf(v.c_str(), "%llu,%llu,%llu", &tm, &tn, &tk) != 3) usage("--tiles takes M,N,K");
            a.tile_m = tm;
            a.tile_n = tn;
            a.tile_k = tk;
        } else if (flag == "--rates") {
            // FLOPS,BYTES_PER_SECOND: the planner's time model instead of fewest bytes
            const std::string v(value());
            if (std::sscanf(v.c_str(), "%lf,%lf", &a.compute_flops, &a.link_bytes_per_second) != 2) {
                usage("--rates takes FLOPS,BYTES_PER_SECOND");
            }
        } else if (flag == "--no-busy") {
            a.measure_busy = false;
        } else if (flag == "--json") {
            a.json = value();
        } else {
            usage("unknown flag");
        }
    }
    if (a.m == 0 || a.n == 0 || a.k == 0 || a.reps < 1 || a.warmup < 0)
        usage("sizes and --reps must be positive");
    return a;
}

struct Summary {
    double median = 0, min = 0, max = 0;
};
Summary summarize(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    const double median = n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    return {median, v.front(), v.back()};
}

double relative_error(const std::vector<float>& out, const std::vector<float>& ref) {
    double diff = 0;
    double norm = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
        const double d = static_cast<double>(out[i]) - static_cast<double>(ref[i]);
        if (!std::isfinite(d)) return INFINITY;
        diff += d * d;
        norm += static_cast<double>(ref[i]) * static_cast<double>(ref[i]);
    }
    return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

int run(const Args& args) {
    const std::uint64_t m = args.m;
    const std::uint64_t n = args.n;
    const std::uint64_t k = args.k;
    const std::uint64_t operand_bytes = (m * k + k * n + m * n) * sizeof(float);
    const std::uint64_t budget =
        args.budget_bytes != 0
            ? args.budget_bytes
            : static_cast<std::uint64_t>(static_cast<double>(operand_bytes) * args.budget_fraction);
    const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);

    std::fprintf(stderr, "gemm_bench: %llux%llux%llu f32, operands %s, budget %s; generating inputs...\n",
                 static_cast<unsigned long long>(m), static_cast<unsigned long long>(n),
                 static_cast<unsigned long long>(k), outcore::format_size(operand_bytes).c_str(),
                 outcore::format_size(budget).c_str());
    std::vector<float> a(static_cast<std::size_t>(m * k));
    std::vector<float> b(static_cast<std::size_t>(k * n));
    std::vector<float> c_ref(static_cast<std::size_t>(m * n));
    std::vector<float> c_out(static_cast<std::size_t>(m * n));
    std::mt19937 rng(12345);
    std::uniform_real_distribution<float> u(-1.0F, 1.0F);
    for (float& x : a) x = u(rng);
    for (float& x : b) x = u(rng);

    auto device = outcore::cpu::make_cpu_device({});
    // Pinned staging and slot memory survive between runs, as in any caller that runs
    // many GEMMs.
    outcore::tile::StagingCache staging(*device);
    outcore::alloc::BlockCache slots(*device);
    const outcore::io::HostMatrix ha(a.data(), m, k, m, outcore::io::Layout::ColMajor, outcore::DType::F32);
    const outcore::io::HostMatrix hb(b.data(), k, n, k, outcore::io::Layout::ColMajor, outcore::DType::F32);
    outcore::io::HostMatrix hc(c_out.data(), m, n, m, outcore::io::Layout::ColMajor, outcore::DType::F32);
    outcore::ops::GemmOptions opt;
    opt.type = outcore::DType::F32;
    opt.budget_bytes = budget;
    opt.pipeline_depth = args.depth;
    opt.schedule = args.schedule;
    opt.tile_m = args.tile_m;
    opt.tile_n = args.tile_n;
    opt.tile_k = args.tile_k;
    opt.compute_flops = args.compute_flops;
    opt.link_bytes_per_second = args.link_bytes_per_second;
    opt.reader_threads = args.readers;
    opt.measure_busy = args.measure_busy;
    opt.staging_cache = &staging;
    opt.device_cache = &slots;

    auto in_core = [&] {
        const auto t0 = Clock::now();
        cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m),
                    static_cast<blasint>(n), static_cast<blasint>(k), 1.0F, a.data(), static_cast<blasint>(m),
                    b.data(), static_cast<blasint>(k), 0.0F, c_ref.data(), static_cast<blasint>(m));
        return std::chrono::duration<double>(Clock::now() - t0).count();
    };
    auto out_of_core = [&] {
        std::fill(c_out.begin(), c_out.end(), NAN);
        return outcore::ops::gemm(*device, ha, hb, hc, opt);
    };

    for (int w = 0; w < args.warmup; ++w) {
        std::fprintf(stderr, "warm-up %d/%d\n", w + 1, args.warmup);
        (void)in_core();
        (void)out_of_core();
    }
    std::vector<double> t_in;
    std::vector<double> t_out;
    std::vector<outcore::ops::GemmReport> reports;
    for (int r = 0; r < args.reps; ++r) {
        t_in.push_back(in_core());
        reports.push_back(out_of_core());
        t_out.push_back(reports.back().seconds);
        std::fprintf(stderr, "rep %d/%d: in-core %.3f s, out-of-core %.3f s (%.1f%%)\n", r + 1, args.reps,
                     t_in.back(), t_out.back(), 100.0 * t_in.back() / t_out.back());
    }
    const double err = relative_error(c_out, c_ref);
    const Summary si = summarize(t_in);
    const Summary so = summarize(t_out);
    // The report of the median out-of-core run (ties: the first).
    const auto median_it =
        std::min_element(reports.begin(), reports.end(), [&](const auto& x, const auto& y) {
            return std::abs(x.seconds - so.median) < std::abs(y.seconds - so.median);
        });
    const outcore::ops::GemmReport& rep = *median_it;
    const outcore::tile::GemmPlan& plan = rep.plan;
    const double ratio = si.median / so.median;

    std::printf(
        "\nout-of-core GEMM, CPU backend (%s), f32 %llux%llux%llu, budget %s = %.3g of the operands (%s)\n",
        device->info().name.c_str(), static_cast<unsigned long long>(m), static_cast<unsigned long long>(n),
        static_cast<unsigned long long>(k), outcore::format_size(budget).c_str(),
        static_cast<double>(budget) / static_cast<double>(operand_bytes),
        outcore::format_size(operand_bytes).c_str());
    std::printf("plan: %s, tiles %llux%llux%llu, slots A %u B %u C %u (+%u prefetch), device %s of %s\n",
                std::string(outcore::tile::to_string(plan.schedule)).c_str(),
                static_cast<unsigned long long>(plan.tile_m), static_cast<unsigned long long>(plan.tile_n),
                static_cast<unsigned long long>(plan.tile_k), plan.a_slots, plan.b_slots, plan.c_slots,
                plan.prefetch_chunks, outcore::format_size(plan.device_bytes).c_str(),
                outcore::format_size(budget).c_str());
    std::printf("moved %s (lower bound %s, %.2fx); peak device %s; hidden transfer %.1f%%\n",
                outcore::format_size(rep.bytes_moved).c_str(),
                outcore::format_size(rep.lower_bound_bytes).c_str(),
                static_cast<double>(rep.bytes_moved) / static_cast<double>(rep.lower_bound_bytes),
                outcore::format_size(rep.peak_device_bytes).c_str(), 100.0 * rep.hidden_transfer_fraction);
    std::printf(
        "busy (median run, %.3f s wall): upload %.3f s, compute %.3f s, download %.3f s, "
        "read/pack %.3f s, write %.3f s\n",
        rep.seconds, rep.upload_busy_seconds, rep.compute_busy_seconds, rep.download_busy_seconds,
        rep.read_busy_seconds, rep.write_busy_seconds);
    std::printf("relative error vs in-core: %.2e\n\n", err);
    std::printf("%-22s %10s %10s %10s %10s %9s\n", "run", "median s", "min s", "max s", "GFLOP/s",
                "vs in-core");
    std::printf("%-22s %10.3f %10.3f %10.3f %10.1f %8.1f%%\n", "in-core cblas_sgemm", si.median, si.min,
                si.max, flops / si.median * 1e-9, 100.0);
    std::printf("%-22s %10.3f %10.3f %10.3f %10.1f %8.1f%%\n", "outcore gemm", so.median, so.min, so.max,
                flops / so.median * 1e-9, 100.0 * ratio);

    if (!args.json.empty()) {
        std::FILE* f = std::fopen(args.json.c_str(), "w");
        if (f == nullptr) {
            std::fprintf(stderr, "gemm_bench: cannot write %s\n", args.json.c_str());
            return 1;
        }
        std::fprintf(
            f,
            "{\"bench\": \"gemm_cpu\", \"m\": %llu, \"n\": %llu, \"k\": %llu, \"dtype\": \"f32\", "
            "\"reps\": %d, \"budget_bytes\": %llu, \"operand_bytes\": %llu, \"schedule\": \"%s\", "
            "\"tile_m\": %llu, \"tile_n\": %llu, \"tile_k\": %llu, \"device_bytes\": %llu, "
            "\"peak_device_bytes\": %llu, \"bytes_moved\": %llu, \"lower_bound_bytes\": %llu, "
            "\"seconds\": %.6f, \"seconds_min\": %.6f, \"seconds_max\": %.6f, \"tflops\": %.6f, "
            "\"in_core_seconds\": %.6f, \"in_core_seconds_min\": %.6f, \"in_core_seconds_max\": %.6f, "
            "\"in_core_tflops\": %.6f, \"ratio\": %.4f, \"hidden_transfer_fraction\": %.4f, "
            "\"upload_busy_seconds\": %.6f, \"compute_busy_seconds\": %.6f, \"download_busy_seconds\": %.6f, "
            "\"read_busy_seconds\": %.6f, \"write_busy_seconds\": %.6f, \"relative_error\": %.3e}\n",
            static_cast<unsigned long long>(m), static_cast<unsigned long long>(n),
            static_cast<unsigned long long>(k), args.reps, static_cast<unsigned long long>(budget),
            static_cast<unsigned long long>(operand_bytes),
            std::string(outcore::tile::to_string(plan.schedule)).c_str(),
            static_cast<unsigned long long>(plan.tile_m), static_cast<unsigned long long>(plan.tile_n),
            static_cast<unsigned long long>(plan.tile_k), static_cast<unsigned long long>(plan.device_bytes),
            static_cast<unsigned long long>(rep.peak_device_bytes),
            static_cast<unsigned long long>(rep.bytes_moved),
            static_cast<unsigned long long>(rep.lower_bound_bytes), so.median, so.min, so.max,
            flops / so.median * 1e-12, si.median, si.min, si.max, flops / si.median * 1e-12, ratio,
            rep.hidden_transfer_fraction, rep.upload_busy_seconds, rep.compute_busy_seconds,
            rep.download_busy_seconds, rep.read_busy_seconds, rep.write_busy_seconds, err);
        std::fclose(f);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(parse(argc, argv));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gemm_bench: %s\n", e.what());
        return 1;
    }
}
