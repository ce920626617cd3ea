// cli/bench_devices.cpp — `outcore bench devices`: one out-of-core GEMM over 1, 2, …
// N devices of a host (ops::gemm_on_devices), the scaling measured in one run against
// cuBLASXt given the same devices (issue: several GPUs; docs/multi-device.md).
//
//   outcore bench devices                                   # every CUDA device, n = 65536
//   outcore bench devices --devices 0,1 --types f32 --reps 1 --warmup 0 --json out.json
//   outcore --backend cpu bench devices --devices 0,1 --n 512 --budget 1MiB   # CPU devices
//
// A, B and C are float32 (bf16 A and B for --types bf16) in pinned host memory of the
// first device; every device gets the same budget (default: a quarter of the operands,
// as in `bench gpu`). For each count N the first N devices run the whole GEMM
// (ops::gemm_on_devices; one device runs ops::gemm, the single-device path); parallel
// efficiency is T(smallest count)·count / (N·T(N)). cuBLASXt (CUDA builds, CUDA devices)
// runs cublasXtSgemm on the same devices and host matrices at each --xt-blocks size; its
// SGEMM is also the baseline of the tf32 rows, since it has no tf32 path. Every run's C
// is first filled with NaN and sampled against a float64 reference afterwards. The
// table comes last.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_gpu.hpp"
#include "commands.hpp"
#include "device_shares.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/io/matrix.hpp"
#include "outcore/ops/gemm_devices.hpp"
#include "run_support.hpp"
#ifdef OUTCORE_CLI_WITH_CUDA
#include "outcore/backends/cuda_baselines.hpp"
#endif

namespace outcore::cli {

namespace {

using namespace gpu_bench;  // NOLINT(google-build-using-namespace): the bench helpers

struct DevicesFlags {
    std::string devices = "all";
    std::string n = "65536";
    std::vector<std::string> types{"f32", "tf32"};
    std::string counts;  // "1,2": device counts to run; default 1..N
    std::optional<std::string> budget;
    int reps = 3;
    int warmup = 1;
    bool skip_xt = false;
    std::vector<int> xt_blocks{8192, 16384};
    std::optional<std::string> json;
    bool force = false;
};

struct TypeCase {
    std::string name;
    DType type = DType::F32;
    GemmCompute compute = GemmCompute::Exact;
    double tolerance = 0;  // of the sampled error (bench gpu's)
};

TypeCase parse_type(const std::string& name) {
    if (name == "f32") return {name, DType::F32, GemmCompute::Exact, 1e-4};
    if (name == "tf32") return {name, DType::F32, GemmCompute::FastTF32, 5e-3};
    if (name == "bf16") return {name, DType::BF16, GemmCompute::Exact, 2e-2};
    throw UsageError("--types", fmt::format("'{}' is not f32, tf32 or bf16", name));
}

/// "1,2,4" → ascending, distinct, each in [1, available].
std::vector<std::size_t> parse_counts(const std::string& text, std::size_t available) {
    std::vector<std::size_t> out;
    if (text.empty()) {
        for (std::size_t i = 1; i <= available; ++i) out.push_back(i);
        return out;
    }
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = std::min(text.find(',', start), text.size());
        const std::uint64_t c = parse_count("--counts", text.substr(start, comma - start));
        if (c < 1 || c > available) {
            throw UsageError("--counts", fmt::format("'{}': each count must be 1 to {} (the devices given)",
                                                     text, available));
        }
        out.push_back(static_cast<std::size_t>(c));
        start = comma + 1;
    }
    if (!std::is_sorted(out.begin(), out.end()) || std::adjacent_find(out.begin(), out.end()) != out.end())
        throw UsageError("--counts", fmt::format("'{}': counts must ascend, each once", text));
    return out;
}

/// cuBLASXt's block size as the output names it (0: its default).
std::string block_name(int block) { return block == 0 ? std::string("default") : std::to_string(block); }

/// One line of the final table.
struct Row {
    std::string what;
    double seconds = 0;
    double tflops = 0;
    double efficiency = 0;  // against the smallest count
    double xt_tflops = 0;   // 0: not measured
    int xt_block = 0;
    bool error_ok = true;
};

int run_bench_devices(const DevicesFlags& f, const GlobalOptions& globals) {
    // Every option is checked before anything is allocated or run.
    Config config = make_config(globals);
    const std::uint64_t n = parse_count("--n", f.n);
    if (n < 64 || n > (std::uint64_t{1} << 24)) throw UsageError("--n", "must be 64 to 16777216");
    std::vector<TypeCase> types;
    for (const std::string& t : f.types) types.push_back(parse_type(t));
    if (types.empty()) throw UsageError("--types", "name at least one of f32, tf32, bf16");
    for (const int block : f.xt_blocks) {
        if (block < 0)
            throw UsageError("--xt-blocks", fmt::format("{} is negative (0: cuBLASXt's default)", block));
    }
    JsonDestination json(f.json, f.force);
    const std::vector<std::unique_ptr<Device>> owned = open_devices(f.devices, globals, config);
    std::vector<Device*> devices;
    for (const auto& d : owned) devices.push_back(d.get());
    const std::vector<std::size_t> counts = parse_counts(f.counts, devices.size());
    Device& first = *devices.front();
    const bool budget_given = f.budget.has_value();
    const std::uint64_t budget_flag = budget_given ? resolve_budget(f.budget, config, first.info()) : 0;
    const int reps = std::max(1, f.reps);
    const int warmup = std::max(0, f.warmup);
    const std::uint64_t default_budget_f32 = 3 * n * n * 4 / 4;
    auto budget_of = [&](const TypeCase& tc) {
        return budget_given ? budget_flag : (tc.type == DType::BF16 ? 3 * n * n * 2 / 4 : default_budget_f32);
    };
    auto options_of = [&](const TypeCase& tc) {
        return ops::GemmOptions{.type = tc.type, .compute = tc.compute, .budget_bytes = budget_of(tc)};
    };
    // A, B and C (and bf16 copies of A and B) must fit the host budget: refused here,
    // not found out by the kernel's out-of-memory killer while they are filled.
    auto uses = [&types](DType type) {
        return std::any_of(types.begin(), types.end(), [type](const TypeCase& t) { return t.type == type; });
    };
    const bool any_bf16 = uses(DType::BF16);
    const std::uint64_t host_bytes = 3 * n * n * 4 + (any_bf16 ? 2 * n * n * 2 : 0);
    if (host_bytes > host_limit_bytes(config)) {
        throw UsageError("--n",
                         fmt::format("n = {} needs {} of host memory for the matrices; the host budget "
                                     "allows {}: pass a smaller --n",
                                     n, format_size(host_bytes), format_size(host_limit_bytes(config))));
    }
    // Every device plans every type before anything is allocated or timed, so a budget
    // under the minimum (or a type a device lacks) fails at once, not after cuBLASXt.
    // Planning reads shapes only: the matrices point at one float, never read.
    {
        float shape_only = 0;
        for (const TypeCase& tc : types) {
            const io::HostMatrix sa(&shape_only, n, n, n, io::Layout::ColMajor, tc.type);
            const io::HostMatrix sb(&shape_only, n, n, n, io::Layout::ColMajor, tc.type);
            io::HostMatrix sc(&shape_only, n, n, n, io::Layout::ColMajor, DType::F32);
            ops::GemmOptions o = options_of(tc);
            o.measure_rates = false;
            for (Device* d : devices) (void)ops::plan_gemm(*d, sa, sb, sc, o);
        }
    }
    std::FILE* text = json.to_stdout() ? stderr : stdout;
    auto say = [text](const std::string& line) { fmt::print(text, "{}\n", line), std::fflush(text); };

    const std::uint64_t nn = n * n;
    const bool any_f32 = uses(DType::F32);
    const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
    nlohmann::json record;
    record["n"] = n;
    record["reps"] = reps;
    record["warmup"] = warmup;
    nlohmann::json listed = nlohmann::json::array();
    for (Device* d : devices) listed.push_back({{"id", d->info().id()}, {"name", d->info().name}});
    record["devices"] = listed;
    say(fmt::format("outcore bench devices: {} device(s) from {} ({}), n = {}, {} reps after {} warm-up",
                    devices.size(), first.info().id(), first.info().name, n, reps, warmup));

    // Pinned host operands of the first device (portable: every device reads them).
    PinnedArray a(first, nn * 4, "bench.devices.A");
    PinnedArray b(first, nn * 4, "bench.devices.B");
    PinnedArray c(first, nn * 4, "bench.devices.C");
    fill_random(a.floats(), nn, 1);
    fill_random(b.floats(), nn, 2);
    std::optional<PinnedArray> a16, b16;
    if (any_bf16) {
        a16.emplace(first, nn * 2, "bench.devices.A16");
        b16.emplace(first, nn * 2, "bench.devices.B16");
        to_bf16(a.floats(), reinterpret_cast<std::uint16_t*>(a16->data()), nn);
        to_bf16(b.floats(), reinterpret_cast<std::uint16_t*>(b16->data()), nn);
    }
    io::HostMatrix mc(c.data(), n, n, n, io::Layout::ColMajor, DType::F32);
    mc.set_device_readable(true);

    // --- cuBLASXt SGEMM on the same devices -------------------------------------------
    struct Xt {
        double seconds = 0;  // the best block's median
        int block = 0;
    };
    std::vector<Xt> xt(counts.size());
    bool xt_ran = false;
    std::string xt_why_not = f.skip_xt                        ? "--skip-cublasxt"
                             : !any_f32                       ? "it has no bf16 GEMM"
                             : first.info().backend != "cuda" ? "it needs CUDA devices"
                                                              : "every --xt-blocks size is over --n";
#ifdef OUTCORE_CLI_WITH_CUDA
    if (!f.skip_xt && any_f32 && first.info().backend == "cuda") {
        nlohmann::json xt_record = nlohmann::json::array();
        for (std::size_t ci = 0; ci < counts.size(); ++ci) {
            std::vector<int> ordinals;
            for (std::size_t d = 0; d < counts[ci]; ++d)
                ordinals.push_back(static_cast<int>(devices[d]->info().index));
            for (const int block : f.xt_blocks) {
                if (block > static_cast<int>(n)) continue;
                // The seconds of the call itself (bench gpu's measure), not the handle's set-up.
                Timing t;
                for (int r = 0; r < (block == 0 ? 1 : warmup + reps); ++r) {
                    const double s = cuda::cublasxt_sgemm_seconds(ordinals, block, n, n, n, a.floats(), n,
                                                                  b.floats(), n, c.floats(), n);
                    if (block == 0 || r >= warmup) t.seconds.push_back(s);
                }
                xt_record.push_back({{"devices", counts[ci]},
                                     {"block", block},
                                     {"timing", t.to_json()},
                                     {"tflops", flops / t.median() * 1e-12}});
                say(fmt::format("cuBLASXt SGEMM on {} device(s), block {}: {:.1f} TFLOP/s ({})", counts[ci],
                                block_name(block), flops / t.median() * 1e-12, format_seconds(t.median())));
                if (xt[ci].seconds == 0 || t.median() < xt[ci].seconds) xt[ci] = {t.median(), block};
                xt_ran = true;
            }
        }
        record["cublasxt"] = xt_record;
    }
#endif

    // --- outcore on the first N devices -------------------------------------------------
    std::vector<Row> rows;
    nlohmann::json runs = nlohmann::json::array();
    for (const TypeCase& tc : types) {
        const bool bf16 = tc.type == DType::BF16;
        io::HostMatrix ma(bf16 ? a16->data() : a.data(), n, n, n, io::Layout::ColMajor, tc.type);
        io::HostMatrix mb(bf16 ? b16->data() : b.data(), n, n, n, io::Layout::ColMajor, tc.type);
        ma.set_device_readable(true);
        mb.set_device_readable(true);
        const ops::GemmOptions options = options_of(tc);
        double base_s = 0;
        std::size_t base_count = 0;
        for (std::size_t ci = 0; ci < counts.size(); ++ci) {
            const std::size_t count = counts[ci];
            const std::span<Device* const> use(devices.data(), count);
            std::memset(c.data(), 0xFF, nn * 4);  // NaN: an element left unwritten fails the samples
            ops::MultiGemmReport last;
            // Every count keeps its devices' staging, slot memory and queues across the
            // repetitions (as `bench gpu` does for one device). One device runs the
            // single-device GEMM (as `outcore gemm` without --devices): the best one GPU
            // does, the figure the scaling is measured from.
            ops::DeviceCaches caches(use);
            const Timing t = time_reps(warmup, reps, [&] {
                if (count > 1) {
                    last = ops::gemm_on_devices(use, ma, mb, mc, options, &caches);
                    return;
                }
                ops::GemmOptions one = options;
                caches.at(0).use_in(one);
                const ops::GemmReport r = ops::gemm(first, ma, mb, mc, one);
                last = {.seconds = r.seconds,
                        .tflops = r.tflops,
                        .bytes_moved = r.bytes_moved,
                        .units = 1,
                        .plan = r.plan,
                        .devices = {{.device = first.info().id()}}};
                last.devices[0].add(r);
            });
            const double err =
                gemm_sample_error(ma.direct()->data, mb.direct()->data, c.floats(), n, tc.type, 16, 7);
            if (ci == 0) base_s = t.median(), base_count = count;
            Row r{.what = fmt::format("{} on {} device(s)", tc.name, count),
                  .seconds = t.median(),
                  .tflops = flops / t.median() * 1e-12,
                  .efficiency =
                      base_s * static_cast<double>(base_count) / (static_cast<double>(count) * t.median()),
                  .xt_tflops = xt[ci].seconds > 0 ? flops / xt[ci].seconds * 1e-12 : 0,
                  .xt_block = xt[ci].block,
                  .error_ok = err <= tc.tolerance};
            runs.push_back({{"type", tc.name},
                            {"devices", count},
                            {"budget_bytes", options.budget_bytes},
                            {"schedule", tile::to_string(last.plan.schedule)},
                            {"tiles", {last.plan.tile_m, last.plan.tile_n, last.plan.tile_k}},
                            {"units", last.units},
                            {"timing", t.to_json()},
                            {"tflops", r.tflops},
                            {"efficiency", r.efficiency},
                            {"bytes_moved", last.bytes_moved},
                            {"shares", shares_json(last.devices)},
                            {"max_sample_error", err},
                            {"error_ok", r.error_ok}});
            say(fmt::format(
                "outcore {} on {} device(s): {:.1f} TFLOP/s ({}), efficiency {}, {} {}x{}x{} in {} "
                "units, moved {}, sample error {:.2e}{}",
                tc.name, count, r.tflops, format_seconds(t.median()), format_percent(r.efficiency),
                tile::to_string(last.plan.schedule), last.plan.tile_m, last.plan.tile_n, last.plan.tile_k,
                last.units, format_size(last.bytes_moved), err,
                r.error_ok ? "" : fmt::format(" FAILED (over {:.0e})", tc.tolerance)));
            print_shares(last.units, last.devices, text);
            rows.push_back(r);
        }
    }
    record["runs"] = runs;

    // --- the table ----------------------------------------------------------------------------
    fmt::print(text, "\n{:<24} {:>10} {:>10} {:>11} {:>22} {:>12}\n", "case", "time", "TFLOP/s", "efficiency",
               "cuBLASXt SGEMM", "vs cuBLASXt");
    nlohmann::json table = nlohmann::json::array();
    bool all_ok = true;
    for (const Row& r : rows) {
        all_ok = all_ok && r.error_ok;
        const std::string xt_text =
            r.xt_tflops > 0 ? fmt::format("{:.1f} (block {})", r.xt_tflops, block_name(r.xt_block))
                            : std::string("—");
        const std::string vs =
            r.xt_tflops > 0 ? fmt::format("{:.3f}", r.tflops / r.xt_tflops) : std::string("—");
        fmt::print(text, "{:<24} {:>10} {:>10.1f} {:>11.3f} {:>22} {:>12}{}\n", r.what,
                   format_seconds(r.seconds), r.tflops, r.efficiency, xt_text, vs,
                   r.error_ok ? "" : "  WRONG RESULT");
        nlohmann::json row{{"case", r.what},
                           {"seconds", r.seconds},
                           {"tflops", r.tflops},
                           {"efficiency", r.efficiency},
                           {"error_ok", r.error_ok}};
        if (r.xt_tflops > 0) row["vs_cublasxt"] = r.tflops / r.xt_tflops;
        table.push_back(row);
    }
    if (!xt_ran) fmt::print(text, "(cuBLASXt not run: {})\n", xt_why_not);
    record["table"] = table;
    if (json.enabled()) json.write(record);
    return all_ok ? 0 : 1;
}

}  // namespace

void add_bench_devices_command(CLI::App& bench, const GlobalOptions& globals, CommandList& commands) {
    auto* sub = bench.add_subcommand(
        "devices", "One out-of-core GEMM over 1..N devices: scaling and cuBLASXt on the same devices");
    auto f = std::make_shared<DevicesFlags>();
    sub->add_option("--devices", f->devices, "Devices of the backend: all (default) or indices like 0,1")
        ->type_name("all|LIST");
    sub->add_option("--n", f->n, "m = n = k (default 65536)")->type_name("N");
    sub->add_option("--types", f->types, "f32, tf32, bf16 (default f32 tf32)")
        ->delimiter(',')
        ->type_name("LIST");
    sub->add_option("--counts", f->counts, "Device counts to run, ascending (default 1 to all): 1,2")
        ->type_name("LIST");
    sub->add_option("--budget", f->budget,
                    "Device budget of every device (default: a quarter of the operands)")
        ->type_name("SIZE");
    sub->add_option("--reps", f->reps, "Timed repetitions (median reported; default 3)")->type_name("N");
    sub->add_option("--warmup", f->warmup, "Untimed runs first (default 1)")->type_name("N");
    sub->add_flag("--skip-cublasxt", f->skip_xt, "Skip cuBLASXt");
    sub->add_option("--xt-blocks", f->xt_blocks, "cuBLASXt block sizes (0: its default; default 8192,16384)")
        ->delimiter(',')
        ->type_name("LIST");
    sub->add_option("--json", f->json, "Write the record as JSON to FILE (bare: stdout)")
        ->type_name("FILE")
        ->expected(0, 1);
    sub->add_flag("--force", f->force, "Overwrite an existing --json FILE");
    commands.push_back({sub, [&globals, f] { return run_bench_devices(*f, globals); }});
}

}  // namespace outcore::cli
