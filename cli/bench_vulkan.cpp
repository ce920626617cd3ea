// cli/bench_vulkan.cpp — `outcore bench vulkan`: the Vulkan backend's figures (issue 7,
// §3), each a ratio against a baseline measured in the same run (docs/BENCHMARKS.md).
//
//   outcore bench vulkan                               # n = 16384, the default blockings
//   outcore bench vulkan --n 1024 --tiles 16x4x16 --backend vulkan:1 --json out.json
//
// 1. In-core float32 GEMM through the shader for each blocking (--tiles, a device
//    opened per blocking), operands resident, against in-core cuBLAS SGEMM at the same
//    size when this outcore has the CUDA backend and the machine a CUDA device.
// 2. Out-of-core float32 GEMM (A, B, C in host memory, budget a quarter of the
//    operands) with the fastest blocking, against that blocking's in-core time; with
//    --explore, also with forced tiles (one line each, traced beside --trace).
// Every result is checked against a float64 reference on sampled entries.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_gpu.hpp"
#include "commands.hpp"
#include "outcore/core/error.hpp"
#include "outcore/device/queue.hpp"
#include "outcore/device/registry.hpp"
#include "outcore/io/matrix.hpp"
#include "outcore/ops/gemm.hpp"
#include "run_support.hpp"
#ifdef OUTCORE_CLI_WITH_VULKAN
#include "outcore/backends/vulkan.hpp"
#endif

namespace outcore::cli {

namespace {

using namespace gpu_bench;  // NOLINT(google-build-using-namespace): the bench helpers

struct VulkanBenchFlags {
    std::string n = "16384";
    // gemm.comp's 8×8 blockings (16x8x16, 16x8x16c, 16x8x8c, 8x8x16c) are left out: on
    // the H200 each takes ~20 s of pipeline build and 3.7 s a run for 2.4 TFLOP/s
    // (BENCHMARKS.md); name them with --tiles to time them.
    std::vector<std::string> tiles{"16x8x8v", "16x8x16v", "16x4x16c"};
    int reps = 3;
    int warmup = 1;
    std::optional<std::string> json;
    std::string trace;  // --trace: the out-of-core run that measures busy times, traced
    bool force = false;
    bool skip_cuda = false;
    bool skip_copies = false;
    bool skip_beside = false;
    std::vector<std::string> explore;  // SCHEDULE:MxNxK[:gG][:cC]: out-of-core with forced tiles
};

#ifdef OUTCORE_CLI_WITH_VULKAN
std::string tflops(double flops, double seconds) {  // GFLOP/s under 1 TFLOP/s (lavapipe)
    const double rate = flops / seconds;
    return rate < 1e12 ? fmt::format("{:.2f} GFLOP/s", rate * 1e-9)
                       : fmt::format("{:.2f} TFLOP/s", rate * 1e-12);
}

vulkan::GemmTile parse_tile(const std::string& text) {
    vulkan::GemmTile t;
    unsigned w = 0, p = 0, d = 0;
    int used = 0;
    const int got = std::sscanf(text.c_str(), "%ux%ux%u%n", &w, &p, &d, &used);
    const std::string rest = got == 3 ? text.substr(static_cast<std::size_t>(used)) : "";
    if (got != 3 || (!rest.empty() && rest != "c" && rest != "v") || text.find('-') != std::string::npos ||
        w == 0 || p == 0 || d == 0) {
        throw UsageError("bench",
                         fmt::format("--tiles '{}': expected WORKGROUPxPER_THREADxDEPTH[c|v]", text));
    }
    t.workgroup = w, t.per_thread = p, t.depth = d, t.contiguous = rest == "c", t.vectorized = rest == "v";
    return t;
}

std::string tile_name(const vulkan::GemmTile& t) {
    return fmt::format("{}x{}x{}{}", t.workgroup, t.per_thread, t.depth,
                       t.contiguous   ? "c"
                       : t.vectorized ? "v"
                                      : "");
}

/// The Vulkan device index the flags name ("vulkan:2" → 2), else 0.
std::uint32_t vulkan_index(const GlobalOptions& globals) {
    const std::string selector = device_selector(globals);
    if (selector.empty() || selector == "vulkan") return 0;
    if (!selector.starts_with("vulkan:")) {
        throw UsageError("bench", fmt::format("`bench vulkan` runs on a Vulkan device, not '{}'", selector));
    }
    return static_cast<std::uint32_t>(parse_count("--backend", selector.substr(7)));
}

/// The trace of an --explore run: beside `trace` ("vk.trace.json" →
/// "vk.square-c-16384x4096x1024.trace.json").
std::string explore_trace_path(const std::string& trace, const std::string& explore) {
    std::string tag = explore;
    for (char& ch : tag)
        if (ch == ':') ch = '-';
    const std::size_t slash = trace.find_last_of('/');
    const std::size_t dot = trace.find('.', slash == std::string::npos ? 0 : slash + 1);
    if (dot == std::string::npos) return trace + "." + tag;
    return trace.substr(0, dot) + "." + tag + trace.substr(dot);
}

struct Row {
    std::string what, outcore, baseline;
    double ratio = 0;
    double target = 0;  // 0: none
};
#endif

int run_bench_vulkan(const VulkanBenchFlags& f, const GlobalOptions& globals) {
#ifndef OUTCORE_CLI_WITH_VULKAN
    (void)f;
    (void)globals;
    throw UsageError("bench", "this outcore was built without the Vulkan backend: `bench vulkan` needs it");
#else
    const std::uint64_t n = parse_count("--n", f.n);
    if (n < 256 || n % 256 != 0) throw UsageError("bench", "--n must be a multiple of 256, at least 256");
    std::vector<vulkan::GemmTile> tiles;
    for (const std::string& t : f.tiles) tiles.push_back(parse_tile(t));
    if (tiles.empty()) throw UsageError("bench", "--tiles names no blocking");
    std::vector<ForcedTiles> explore;  // parsed before anything runs
    for (const std::string& e : f.explore) explore.push_back(parse_forced_tiles(e, e));
    JsonDestination json(f.json, f.force);
    const int reps = std::max(1, f.reps);
    const int warmup = std::max(0, f.warmup);
    const std::uint32_t index = vulkan_index(globals);
    auto say = [](const std::string& line) { fmt::print("{}\n", line), std::fflush(stdout); };

    const std::uint64_t nn = n * n;
    const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
    std::vector<float> a(nn), b(nn), c(nn);
    fill_random(a.data(), nn, 1);
    fill_random(b.data(), nn, 2);
    auto error_of = [&](const float* result, std::uint64_t seed) {
        return gemm_sample_error(reinterpret_cast<const std::byte*>(a.data()),
                                 reinterpret_cast<const std::byte*>(b.data()), result, n, DType::F32, 16,
                                 seed);
    };
    constexpr double kTolerance = 1e-4;
    nlohmann::json record{{"n", n}, {"reps", reps}};
    std::vector<Row> rows;
    bool wrong = false;

    // --- in-core: the shader at each blocking ----------------------------------------
    nlohmann::json in_core = nlohmann::json::array();
    std::size_t best = tiles.size();
    double best_s = 0;
    std::string device_name;
    for (std::size_t i = 0; i < tiles.size(); ++i) {
        const vulkan::GemmTile& t = tiles[i];
        const std::string name = tile_name(t);
        std::unique_ptr<Device> dev;
        try {
            dev = vulkan::make_vulkan_device({.index = index, .gemm_tile = t});
        } catch (const UsageError& e) {
            say(fmt::format("blocking {}: {}", name, e.what()));
            continue;
        }
        device_name = dev->info().name;
        // One run first (the warm-up): a blocking 3x slower than the best so far is not
        // timed further, so a poor one costs little device time.
        const double probe_s =
            in_core_gemm(*dev, DType::F32, GemmCompute::Exact, a.data(), b.data(), c.data(), n, 0, 1)
                .median();
        if (best != tiles.size() && probe_s > 3 * best_s) {
            in_core.push_back({{"blocking", name}, {"probe_s", probe_s}, {"skipped", "over 3x the best"}});
            say(fmt::format(
                "in-core Vulkan GEMM, blocking {}: {} in its first run, over 3x the best: skipped", name,
                format_seconds(probe_s)));
            continue;
        }
        const Timing tm = in_core_gemm(*dev, DType::F32, GemmCompute::Exact, a.data(), b.data(), c.data(), n,
                                       std::max(0, warmup - 1), reps);
        const double err = error_of(c.data(), 5 + i);
        wrong = wrong || err > kTolerance;
        in_core.push_back({{"blocking", name}, {"timing", tm.to_json()}, {"max_sample_error", err}});
        say(
            fmt::format("in-core Vulkan GEMM, blocking {} ({}×{} threads, {}×{} each{}, {} deep) on {}: {} "
                        "({}), sample error {:.2e}{}",
                        name, t.workgroup, t.workgroup, t.per_thread, t.per_thread,
                        t.contiguous   ? " adjacent"
                        : t.vectorized ? " as 2x2 vec4 blocks"
                                       : "",
                        t.depth, device_name, tflops(flops, tm.median()), format_seconds(tm.median()), err,
                        err > kTolerance ? "  FAILED" : ""));
        if (err <= kTolerance && (best == tiles.size() || tm.median() < best_s))
            best = i, best_s = tm.median();
    }
    record["device"] = device_name;
    record["in_core"] = in_core;
    if (best == tiles.size()) {
        say("bench vulkan: no blocking ran a correct in-core GEMM");
        return 1;
    }
    const vulkan::GemmTile& bt = tiles[best];
    const std::string best_name = tile_name(bt);

    // --- in-core cuBLAS SGEMM, the baseline -------------------------------------
    std::unique_ptr<Device> cuda;  // also times the tile GEMMs beside copies, below
    if (!f.skip_cuda) {
        try {
            cuda = open_device("cuda", make_config(globals));
        } catch (const Error& e) {
            say(fmt::format("cuBLAS baseline skipped: {}", e.what()));
        }
        if (cuda) {
            const Timing tm = in_core_gemm(*cuda, DType::F32, GemmCompute::Exact, a.data(), b.data(),
                                           c.data(), n, warmup, reps);
            record["cublas_sgemm"] = {{"device", cuda->info().name}, {"timing", tm.to_json()}};
            say(fmt::format("in-core cuBLAS SGEMM on {}: {} ({})", cuda->info().name,
                            tflops(flops, tm.median()), format_seconds(tm.median())));
            rows.push_back({fmt::format("Vulkan shader f32 ({}) vs cuBLAS SGEMM", best_name),
                            tflops(flops, best_s), tflops(flops, tm.median()), tm.median() / best_s, 0.5});
        }
    }

    // --- 2-D uploads by run length -------------------------------------------------------
    // The out-of-core GEMM uploads chunks of the operands as 2-D copies (one run per
    // column, a VkBufferCopy region each); this shows what a region costs on this driver.
    if (!f.skip_copies) {
        const std::unique_ptr<Device> dev = vulkan::make_vulkan_device({.index = index, .gemm_tile = bt});
        const std::uint64_t bytes = std::min<std::uint64_t>(nn * 4 / 4, std::uint64_t{192} << 20);
        PinnedArray host(*dev, 2 * bytes, "bench.copy.host");
        Block target =
            dev->allocate({.bytes = bytes, .kind = MemoryKind::Device, .tag = "bench.copy.device"});
        auto q = dev->create_queue(QueueRole::Upload);
        nlohmann::json copies = nlohmann::json::array();
        std::vector<std::uint64_t> runs{bytes};
        for (const std::uint64_t kib : {1024, 256, 64, 32, 16, 4})
            if (kib * 1024 < bytes) runs.push_back(kib * 1024);
        for (const std::uint64_t run : runs) {
            // Runs 2·run apart on the host (a column of a matrix twice as tall), packed on the device.
            const Copy2D shape{.width_bytes = run,
                               .rows = bytes / run,
                               .host_pitch_bytes = run == bytes ? run : 2 * run,
                               .buffer_pitch_bytes = run};
            const Timing tm = time_reps(1, 3, [&] {
                q->upload_2d(host.data(), BufferView(target), shape);
                q->synchronize();
            });
            const double rate = static_cast<double>(shape.rows * run) / tm.min();
            copies.push_back({{"run_bytes", run},
                              {"runs", shape.rows},
                              {"timing", tm.to_json()},
                              {"bytes_per_second", rate}});
            say(fmt::format("upload of {} as {} run(s) of {} from HostPinned memory: {:.1f} GB/s ({} best)",
                            format_size(shape.rows * run), shape.rows, format_size(run), rate * 1e-9,
                            format_seconds(tm.min())));
        }
        record["uploads_2d"] = copies;
    }

    // --- out-of-core with the best blocking ----------------------------------------------
    {
        const std::unique_ptr<Device> dev = vulkan::make_vulkan_device({.index = index, .gemm_tile = bt});
        PinnedArray pa(*dev, nn * 4, "bench.A");
        PinnedArray pb(*dev, nn * 4, "bench.B");
        PinnedArray pc(*dev, nn * 4, "bench.C");
        std::copy(a.begin(), a.end(), pa.floats());
        std::copy(b.begin(), b.end(), pb.floats());
        io::HostMatrix ma(pa.data(), n, n, n, io::Layout::ColMajor, DType::F32);
        io::HostMatrix mb(pb.data(), n, n, n, io::Layout::ColMajor, DType::F32);
        io::HostMatrix mc(pc.data(), n, n, n, io::Layout::ColMajor, DType::F32);
        // HostPinned: tiles go up and down straight from the matrices, as in bench gpu
        // (without this every chunk was packed by the pipeline's fill threads first).
        for (io::HostMatrix* m : {&ma, &mb, &mc}) m->set_device_readable(true);
        const std::uint64_t budget = 3 * nn * 4 / 4;
        tile::StagingCache staging(*dev);
        alloc::BlockCache slots(*dev);  // NVIDIA: ~12 ms to allocate the slots, as much to free them
        tile::QueueCache queues(*dev);  // NVIDIA: 1.7 ms to make a pipeline's queues, 3–4 ms to destroy them
        ops::GemmOptions o{.type = DType::F32,
                           .budget_bytes = budget,
                           .measure_busy = false,
                           .staging_cache = &staging,
                           .device_cache = &slots,
                           .queue_cache = &queues};
        const tile::GemmPlan plan = ops::plan_gemm(*dev, ma, mb, mc, o);
        if (!f.skip_beside) {
            // What a C tile's download (and the uploads) cost the plan's tile GEMMs, here
            // and through cuBLAS on the same card when the CUDA baseline ran.
            constexpr int kGemms = 4;
            const std::uint64_t c_bytes = plan.tile_m * plan.tile_n * 4;
            nlohmann::json beside;
            for (Device* d : {dev.get(), cuda.get()}) {
                if (d == nullptr) continue;
                const BesideCopies bc =
                    gemm_beside_copies(*d, plan.tile_m, plan.tile_n, plan.tile_k, kGemms, c_bytes, reps);
                const std::string who = d == dev.get() ? "vulkan" : "cuda";
                beside[who] = bc.to_json();
                auto ms = [](double s) { return fmt::format("{:.2f} ms", s * 1e3); };
                say(fmt::format(
                    "{}: {} tile GEMMs {}x{}x{}: {} alone; {:+.2f} ms beside a {} download ({} by "
                    "itself), {:+.2f} ms beside an upload of as much, {:+.2f} ms beside both",
                    who, kGemms, plan.tile_m, plan.tile_n, plan.tile_k, ms(bc.alone),
                    (bc.download - bc.alone) * 1e3, format_size(c_bytes), ms(bc.copy_alone),
                    (bc.upload - bc.alone) * 1e3, (bc.both - bc.alone) * 1e3));
                say(fmt::format(
                    "{}: the download into HostCached memory: {:+.2f} ms beside them ({} by itself)", who,
                    (bc.download_cached - bc.alone) * 1e3, ms(bc.copy_cached_alone)));
            }
            record["gemm_beside_copies"] = beside;
        }
        cuda.reset();  // no CUDA context beside the timed Vulkan runs
        ops::GemmReport last;
        const Timing tm =
            time_reps(warmup, reps, [&] { last = ops::execute_gemm(*dev, plan, ma, mb, mc, o); });
        if (!f.trace.empty()) {
            // Its own run: measuring busy times adds host tasks that drain the queues.
            const auto t0 = std::chrono::steady_clock::now();
            run_traced(f.trace, [&] { (void)ops::execute_gemm(*dev, plan, ma, mb, mc, o); });
            say(fmt::format(
                "out-of-core run traced to {}: {}", f.trace,
                format_seconds(
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count())));
        }
        if (dev->info().compute_lanes == 2 && plan.k_chunks() > 1) {
            // The same plan with C tiles split over the two lanes (GemmOptions::split_c_tiles).
            ops::GemmOptions split = o;
            split.split_c_tiles = true;
            const Timing ts =
                time_reps(0, reps, [&] { (void)ops::execute_gemm(*dev, plan, ma, mb, mc, split); });
            record["out_of_core_tiles_split"] = {{"timing", ts.to_json()},
                                                 {"of_in_core", best_s / ts.median()}};
            say(fmt::format("out-of-core, same plan, C tiles split over the two lanes: {} ({} of in-core)",
                            tflops(flops, ts.median()), format_percent(best_s / ts.median())));
        }
        nlohmann::json explored = nlohmann::json::array();
        for (std::size_t i = 0; i < explore.size(); ++i) {
            const std::string& e = f.explore[i];
            const ForcedTiles& forced = explore[i];
            ops::GemmOptions x = o;
            x.schedule = forced.schedule;
            x.tile_m = forced.m, x.tile_n = forced.n, x.tile_k = forced.k, x.group = forced.group;
            x.c_slots = forced.c_slots;
            if (forced.depth != 0) x.pipeline_depth = forced.depth;
            if (forced.lanes != 0) x.compute_lanes = forced.lanes;
            if (forced.paced) x.pace_c_downloads = forced.paced;
            x.panel_chunk_k = forced.panel_chunk_k;
            x.retained_b = forced.retained_b;
            x.retained_k_outer = forced.retained_k_outer;
            tile::GemmPlan xp;
            try {
                xp = ops::plan_gemm(*dev, ma, mb, mc, x);
            } catch (const UsageError& err) {
                say(fmt::format("explore {}: {}", e, err.what()));
                continue;
            }
            ops::GemmReport xr;
            const Timing tx =
                time_reps(warmup, reps, [&] { xr = ops::execute_gemm(*dev, xp, ma, mb, mc, x); });
            std::string traced;
            if (!f.trace.empty()) {
                traced = explore_trace_path(f.trace, e);
                run_traced(traced, [&] { (void)ops::execute_gemm(*dev, xp, ma, mb, mc, x); });
            }
            explored.push_back({{"explore", e},
                                {"c_slots", xp.c_slots},
                                {"a_chunk_k", xp.a_chunk_k},
                                {"retained_b", xp.retained_b},
                                {"retained_k_outer", xp.retained_k_outer},
                                {"paced_downloads", xr.paced_downloads},
                                {"timing", tx.to_json()},
                                {"of_in_core", best_s / tx.median()}});
            say(fmt::format("explore {}: {} ({} of in-core), C slots {}, depth {}, paced downloads {}{}{}", e,
                            tflops(flops, tx.median()), format_percent(best_s / tx.median()), xp.c_slots,
                            xp.depth, xr.paced_downloads, describe_panel_chunks(xp),
                            traced.empty() ? "" : ", traced to " + traced));
        }
        if (!explored.empty()) record["explore"] = explored;
        o.measure_busy = true;
        last = ops::execute_gemm(*dev, plan, ma, mb, mc, o);
        const double err = error_of(pc.floats(), 11);
        wrong = wrong || err > kTolerance;
        const double ratio = best_s / tm.median();
        record["out_of_core"] = {{"blocking", best_name},
                                 {"budget_bytes", budget},
                                 {"schedule", tile::to_string(plan.schedule)},
                                 {"tiles", {plan.tile_m, plan.tile_n, plan.tile_k}},
                                 {"c_slots", plan.c_slots},
                                 {"timing", tm.to_json()},
                                 {"of_in_core", ratio},
                                 {"bytes_moved", last.bytes_moved},
                                 {"peak_device_bytes", last.peak_device_bytes},
                                 {"hidden_transfer_fraction", last.hidden_transfer_fraction},
                                 {"busy_s",
                                  {{"upload", last.upload_busy_seconds},
                                   {"compute", last.compute_busy_seconds},
                                   {"download", last.download_busy_seconds}}},
                                 {"max_sample_error", err}};
        say(fmt::format(
            "out-of-core Vulkan GEMM, budget {} ({} {}x{}x{}, C slots {}): {} ({} of in-core), moved {}, "
            "peak {}, hidden {}, busy up/compute/down {:.3f}/{:.3f}/{:.3f} s, sample error {:.2e}{}",
            format_size(budget), tile::to_string(plan.schedule), plan.tile_m, plan.tile_n, plan.tile_k,
            plan.c_slots, tflops(flops, tm.median()), format_percent(ratio), format_size(last.bytes_moved),
            format_size(last.peak_device_bytes), format_percent(last.hidden_transfer_fraction),
            last.upload_busy_seconds, last.compute_busy_seconds, last.download_busy_seconds, err,
            err > kTolerance ? "  FAILED" : ""));
        rows.push_back({fmt::format("Vulkan out-of-core f32, budget {}", format_size(budget)),
                        tflops(flops, tm.median()), fmt::format("in-core {}", tflops(flops, best_s)), ratio,
                        0.9});
    }

    // --- the table --------------------------------------------------------------------------
    nlohmann::json table = nlohmann::json::array();
    fmt::print("\n{:<44} {:>16} {:>24} {:>8} {:>7} {}\n", "case", "outcore", "baseline", "ratio", "target",
               "");
    for (const Row& r : rows) {
        const bool met = r.ratio >= r.target;
        fmt::print("{:<44} {:>16} {:>24} {:>8.3f} {:>7.2f} {}\n", r.what, r.outcore, r.baseline, r.ratio,
                   r.target, met ? "met" : "MISSED");
        table.push_back({{"case", r.what},
                         {"outcore", r.outcore},
                         {"baseline", r.baseline},
                         {"ratio", r.ratio},
                         {"target", r.target},
                         {"met", met}});
    }
    record["table"] = table;
    if (json.enabled()) json.write(record);
    if (wrong) say("bench vulkan: a GEMM's sampled error is over 1e-4 (FAILED above)");
    return wrong ? 1 : 0;
#endif
}

}  // namespace

void add_bench_vulkan_command(CLI::App& bench, const GlobalOptions& globals, CommandList& commands) {
    auto* vk = bench.add_subcommand(
        "vulkan", "The Vulkan suite: the GEMM shader vs cuBLAS SGEMM, out-of-core vs in-core Vulkan");
    auto f = std::make_shared<VulkanBenchFlags>();
    vk->add_option("--n", f->n, "m = n = k of the GEMMs (default 16384)")->type_name("N");
    vk->add_option("--tiles", f->tiles,
                   "Shader blockings to time in-core, WORKGROUPxPER_THREADxDEPTH, 'c' for adjacent rows per "
                   "thread, 'v' for the vec4 shader (16x8x8v, 16x8x16v) (default 16x8x8v 16x8x16v 16x4x16c); "
                   "the fastest runs out-of-core")
        ->type_name("WxPxD");
    vk->add_option("--reps", f->reps, "Timed repetitions (median reported; default 3)")->type_name("N");
    vk->add_option("--warmup", f->warmup, "Untimed runs first (default 1)")->type_name("N");
    vk->add_option("--json", f->json, "Write the record as JSON to FILE (bare: stdout)")
        ->type_name("FILE")
        ->expected(0, 1);
    vk->add_flag("--skip-cuda", f->skip_cuda, "Skip the cuBLAS baseline");
    vk->add_flag("--skip-copies", f->skip_copies, "Skip the 2-D upload rates by run length");
    vk->add_flag("--skip-beside", f->skip_beside,
                 "Skip timing the plan's tile GEMMs beside a C tile's download and an upload");
    vk->add_option("--trace", f->trace,
                   "Trace one more out-of-core run (busy times not measured) to FILE (device times where the "
                   "device has calibrated timestamps; docs/tracing.md)")
        ->type_name("FILE");
    vk->add_flag("--force", f->force, "Overwrite an existing --json FILE");
    vk->add_option(
          "--explore", f->explore,
          "Also time the out-of-core GEMM with a forced plan, "
          "SCHEDULE:MxNxK[:gGROUP][:cSLOTS][:dDEPTH][:lLANES][:kCHUNK][:rRETAINED][:oOUTER][:paced|:whole] "
          "(schedule square-c, a-panel or b-panel; GROUP tiles k outer; SLOTS C slots; DEPTH 2 or 3 "
          "slots per streamed operand; LANES 1 or 2 compute queues; the A panel in chunks of CHUNK "
          "columns, 0 whole; rows in a serpentine keeping RETAINED B chunks, 0 none; OUTER chunks "
          "of a new panel the retained group computes k outer; C downloads paced over the next "
          "tile's GEMMs or whole; repeatable); traced beside --trace")
        ->type_name("PLAN");
    commands.push_back({vk, [&globals, f] { return run_bench_vulkan(*f, globals); }});
}

}  // namespace outcore::cli
