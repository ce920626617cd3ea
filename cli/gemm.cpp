// cli/gemm.cpp — `outcore gemm`: an out-of-core C = α·op(A)·op(B) + β·C under a device
// budget, on .npy files or seeded random operands, with its plan, what it moved
// against the lower bound, throughput, overlap, peak device memory and, with
// --verify, its error against a float64 reference.
//
//   outcore gemm --m 4096 --n 4096 --k 4096 --budget 32MiB --verify
//   outcore gemm --a A.npy --b B.npy --out C.npy --transb --dtype f32 --budget 256MiB --json run.json
//
// Order of work: parse and check every flag, open the inputs, plan on shapes (a budget
// below the minimum fails here, before anything is allocated), create the output,
// generate random operands, run, commit, verify, report. Exit codes: main.cpp.
#include "outcore/ops/gemm.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>

#include "commands.hpp"
#include "device_shares.hpp"
#include "gemm_support.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/registry.hpp"
#include "outcore/io/npy.hpp"
#include "outcore/ops/gemm_devices.hpp"
#include "progress.hpp"
#include "run_support.hpp"

namespace outcore::cli {
namespace {

struct GemmFlags {
    std::optional<std::string> m, n, k;
    std::optional<std::string> a_path, b_path, c_path, out_path;
    bool trans_a = false;
    bool trans_b = false;
    std::optional<std::string> alpha, beta;
    std::optional<std::string> dtype;
    std::optional<std::string> c_dtype;  ///< --c-dtype: f32, or the 16-bit input type
    std::optional<std::string> budget;
    std::optional<std::string> seed;
    std::optional<std::string> json;
    bool verify = false;
    bool force = false;
    bool quiet = false;
    bool no_rate_probe = false;
    std::optional<std::string> devices;  ///< --devices all|0,1,...
};

struct TypeChoice {
    DType type = DType::F32;
    GemmCompute compute = GemmCompute::Exact;
    std::string name = "f32";
};

TypeChoice parse_gemm_type(const std::string& text) {
    if (text == "f32") return {DType::F32, GemmCompute::Exact, text};
    if (text == "f64") return {DType::F64, GemmCompute::Exact, text};
    if (text == "tf32") return {DType::F32, GemmCompute::FastTF32, text};
    if (text == "bf16") return {DType::BF16, GemmCompute::Exact, text};
    if (text == "f16") return {DType::F16, GemmCompute::Exact, text};
    throw UsageError("gemm",
                     fmt::format("--dtype '{}': expected f32, f64, tf32, bf16 or f16", io::printable(text)));
}

/// C's element type: gemm_c_dtype(type), or with --c-dtype f32 or a 16-bit type's own
/// (a bf16 or f16 C, tile::GemmProblem::narrow_c). UsageError for any other.
DType gemm_c_type(const GemmFlags& f, const TypeChoice& type) {
    const DType wide = gemm_c_dtype(type.type);
    if (!f.c_dtype) return wide;
    const std::optional<DType> asked = parse_dtype(*f.c_dtype);
    const bool narrow_ok = is_16bit_float(type.type);
    if (asked && (*asked == wide || (narrow_ok && *asked == type.type))) return *asked;
    throw UsageError("gemm", fmt::format("--c-dtype '{}': a {} GEMM writes C as {}{}",
                                         io::printable(*f.c_dtype), type.name, to_string(wide),
                                         narrow_ok ? fmt::format(" or {}", to_string(type.type)) : ""));
}

/// The operands a run reads: .npy readers (wrapped for bf16) or random host matrices.
struct Operands {
    std::unique_ptr<io::NpyMatrixReader> a_file, b_file, c_file;
    std::unique_ptr<Bf16FromF32> a_bf16, b_bf16;
    HostBuffer a_data, b_data, c_data;
    std::unique_ptr<io::HostMatrix> a_host, b_host, c_host;
    const io::MatrixSource* a = nullptr;
    const io::MatrixSource* b = nullptr;
    const io::MatrixSource* c_in = nullptr;
};

/// Opens --a/--b (and --c) and checks their element type against --dtype.
void open_files(const GemmFlags& f, TypeChoice& type, bool type_given, Operands& ops) {
    ops.a_file = std::make_unique<io::NpyMatrixReader>(*f.a_path);
    ops.b_file = std::make_unique<io::NpyMatrixReader>(*f.b_path);
    if (!type_given) {
        // The files decide: f32, f64 or f16.
        const DType t = ops.a_file->dtype();
        if (t != DType::F32 && t != DType::F64 && t != DType::F16) {
            throw UsageError("gemm",
                             fmt::format("--a '{}' holds {} elements; gemm reads f32, f64 or f16 files",
                                         io::printable(ops.a_file->path()), to_string(t)));
        }
        type = parse_gemm_type(std::string(to_string(t)));
    }
    const DType file_type = type.type == DType::BF16 ? DType::F32 : type.type;
    auto check = [&](const io::NpyMatrixReader& r, const char* flag) {
        if (r.dtype() != file_type) {
            throw UsageError("gemm", fmt::format("{} '{}' holds {} elements; --dtype {} needs {}", flag,
                                                 io::printable(r.path()), to_string(r.dtype()), type.name,
                                                 to_string(file_type)));
        }
    };
    check(*ops.a_file, "--a");
    check(*ops.b_file, "--b");
    ops.a = ops.a_file.get();
    ops.b = ops.b_file.get();
    if (type.type == DType::BF16) {
        ops.a_bf16 = std::make_unique<Bf16FromF32>(*ops.a_file);
        ops.b_bf16 = std::make_unique<Bf16FromF32>(*ops.b_file);
        ops.a = ops.a_bf16.get();
        ops.b = ops.b_bf16.get();
    }
    if (f.c_path) {
        ops.c_file = std::make_unique<io::NpyMatrixReader>(*f.c_path);
        const DType c_type = gemm_c_type(f, type);
        if (ops.c_file->dtype() != c_type) {
            throw UsageError("gemm",
                             fmt::format("--c '{}' holds {} elements; C is {}", io::printable(*f.c_path),
                                         to_string(ops.c_file->dtype()), to_string(c_type)));
        }
        ops.c_in = ops.c_file.get();
    }
}

void check_flag_dimension(const char* flag, std::optional<std::uint64_t> given, std::uint64_t have,
                          const char* from) {
    if (given && *given != have) {
        throw UsageError("gemm", fmt::format("{} {} disagrees with {} ({})", flag, *given, from, have));
    }
}

void print_plan(const tile::GemmPlan& plan, std::uint64_t budget) {
    const tile::TileGrid grid = plan.c_grid();
    fmt::print("plan: {} schedule, C tiles {}x{} ({} x {} tiles), k chunks of {} ({} per tile)\n",
               tile::to_string(plan.schedule), plan.tile_m, plan.tile_n, grid.tile_rows(), grid.tile_cols(),
               plan.tile_k, plan.k_chunks());
    if (plan.group > 1) {
        fmt::print("      the first {} tiles k outer, together, while the resident panel arrives\n",
                   plan.group);
    }
    if (plan.a_chunk_k != 0) {
        fmt::print("      the A panel in chunks of {} columns, {} of the next panel's up ahead{}\n",
                   plan.a_chunk_k, plan.prefetch_chunks,
                   plan.acc_bytes == 0
                       ? std::string()
                       : fmt::format(", f32 sums of {} for the 16-bit C", format_size(plan.acc_bytes)));
    }
    fmt::print("      slots: A {} x {}, B {} x {}, C {} x {}; pipeline depth {}\n", plan.a_slots,
               format_size(plan.a_slot_bytes), plan.b_slots, format_size(plan.b_slot_bytes), plan.c_slots,
               format_size(plan.c_slot_bytes), plan.depth);
    fmt::print("      device memory {} of the {} budget ({})\n", format_size(plan.device_bytes),
               format_size(budget),
               format_percent(static_cast<double>(plan.device_bytes) / static_cast<double>(budget)));
    fmt::print("      will move {} (lower bound {}: {})\n", format_size(plan.bytes_moved),
               format_size(plan.lower_bound_bytes), format_ratio(plan.bytes_moved, plan.lower_bound_bytes));
    if (plan.total_seconds > 0) {
        fmt::print("      model: {} ({}), compute {}, transfers {}\n", format_seconds(plan.total_seconds),
                   plan.shape_flops > 0
                       ? fmt::format("its tile shape measured at {:.1f} TFLOP/s", plan.shape_flops * 1e-12)
                       : std::string("the device's single GEMM rate"),
                   format_seconds(plan.compute_seconds), format_seconds(plan.transfer_seconds));
    }
}

void print_report(const ops::GemmReport& r) {
    fmt::print("time: {}, {:.3f} TFLOP/s ({:.1f} GFLOP/s)\n", format_seconds(r.seconds), r.tflops,
               r.tflops * 1e3);
    fmt::print("moved: {} ({} the lower bound of {}), {} of transfer time hidden behind compute\n",
               format_size(r.bytes_moved), format_ratio(r.bytes_moved, r.lower_bound_bytes),
               format_size(r.lower_bound_bytes), format_percent(r.hidden_transfer_fraction));
    fmt::print("device memory: peak {} of the {} budget\n", format_size(r.peak_device_bytes),
               format_size(r.budget_bytes));
    fmt::print("busy: upload {}, compute {}, download {}; host read {}, write {}\n",
               format_seconds(r.upload_busy_seconds), format_seconds(r.compute_busy_seconds),
               format_seconds(r.download_busy_seconds), format_seconds(r.read_busy_seconds),
               format_seconds(r.write_busy_seconds));
}

nlohmann::json report_json(const ops::GemmReport& r, const TypeChoice& type, const DeviceInfo& device,
                           const GemmFlags& f, std::optional<std::uint64_t> seed) {
    const tile::GemmPlan& p = r.plan;
    nlohmann::json j = {
        {"command", "gemm"},
        {"device", device.id()},
        {"m", p.problem.m},
        {"n", p.problem.n},
        {"k", p.problem.k},
        {"dtype", type.name},
        {"c_dtype",
         to_string(tile::gemm_c_bytes(p.problem) == 2 ? p.problem.type : gemm_c_dtype(p.problem.type))},
        {"trans_a", f.trans_a},
        {"trans_b", f.trans_b},
        {"inputs", seed ? "random" : "npy"},
        {"schedule", tile::to_string(p.schedule)},
        {"tile_m", p.tile_m},
        {"tile_n", p.tile_n},
        {"tile_k", p.tile_k},
        {"a_slots", p.a_slots},
        {"b_slots", p.b_slots},
        {"c_slots", p.c_slots},
        {"group", p.group},
        {"a_chunk_k", p.a_chunk_k},
        {"acc_bytes", p.acc_bytes},
        {"model_s", p.total_seconds},
        {"shape_tflops", p.shape_flops * 1e-12},
        {"plan_device_bytes", p.device_bytes},
        {"budget_bytes", r.budget_bytes},
        {"peak_device_bytes", r.peak_device_bytes},
        {"bytes_moved", r.bytes_moved},
        {"lower_bound_bytes", r.lower_bound_bytes},
        {"seconds", r.seconds},
        {"tflops", r.tflops},
        {"hidden_transfer_fraction", r.hidden_transfer_fraction},
        {"upload_busy_seconds", r.upload_busy_seconds},
        {"compute_busy_seconds", r.compute_busy_seconds},
        {"download_busy_seconds", r.download_busy_seconds},
        {"read_busy_seconds", r.read_busy_seconds},
        {"write_busy_seconds", r.write_busy_seconds},
    };
    if (seed) j["seed"] = *seed;
    return j;
}

/// A several-device run as one report (device_shares.hpp, fold_shares).
ops::GemmReport whole_run(const ops::MultiGemmReport& r) {
    ops::GemmReport out;
    out.plan = r.plan;
    out.seconds = r.seconds;
    out.tflops = r.tflops;
    out.bytes_moved = r.bytes_moved;
    out.lower_bound_bytes = r.plan.lower_bound_bytes;
    fold_shares(out, r.devices);
    return out;
}

int run_gemm(const GemmFlags& f, const GlobalOptions& globals) {
    // Flags first: every usage error before any file is opened or memory allocated.
    std::optional<std::uint64_t> m, n, k;
    if (f.m) m = parse_count("--m", *f.m);
    if (f.n) n = parse_count("--n", *f.n);
    if (f.k) k = parse_count("--k", *f.k);
    const double alpha = f.alpha ? parse_real("--alpha", *f.alpha) : 1.0;
    const double beta = f.beta ? parse_real("--beta", *f.beta) : 0.0;
    TypeChoice type = f.dtype ? parse_gemm_type(*f.dtype) : TypeChoice{};
    if (f.dtype) (void)gemm_c_type(f, type);  // --c-dtype against --dtype, before any file is opened
    const bool files = f.a_path.has_value();
    if (f.a_path.has_value() != f.b_path.has_value()) {
        throw UsageError("gemm", "--a and --b go together (or neither, for random inputs)");
    }
    if (f.c_path && !files) throw UsageError("gemm", "--c needs --a and --b (random runs generate C)");
    if (f.c_path && beta == 0.0) throw UsageError("gemm", "--c is read only when --beta is not 0");
    if (files && beta != 0.0 && !f.c_path) {
        throw UsageError("gemm", "--beta with --a/--b needs the input C as --c C0.npy");
    }
    if (files && f.seed) throw UsageError("gemm", "--seed is for random inputs, not --a/--b");
    if (!files && (!m || !n || !k)) {
        throw UsageError("gemm", "random inputs need --m, --n and --k (or give --a A.npy --b B.npy)");
    }
    std::optional<std::uint64_t> seed;
    if (!files)
        seed = f.seed ? parse_count("--seed", *f.seed)
                      : (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();

    Config config = make_config(globals);
    const std::vector<std::unique_ptr<Device>> devices = open_devices(f.devices, globals, config);
    const std::unique_ptr<Device>& device = devices.front();
    const std::uint64_t budget = resolve_budget(f.budget, config, device->info());
    JsonDestination json(f.json, f.force);
    const bool text = !f.quiet && !json.to_stdout();

    Operands ops;
    if (files) {
        open_files(f, type, f.dtype.has_value(), ops);
        const bool ta = f.trans_a;
        const bool tb = f.trans_b;
        check_flag_dimension("--m", m, ta ? ops.a->cols() : ops.a->rows(), "--a");
        check_flag_dimension("--k", k, ta ? ops.a->rows() : ops.a->cols(), "--a");
        check_flag_dimension("--n", n, tb ? ops.b->rows() : ops.b->cols(), "--b");
        m = ta ? ops.a->cols() : ops.a->rows();
        k = ta ? ops.a->rows() : ops.a->cols();
        n = tb ? ops.b->rows() : ops.b->cols();
    }
    const DType c_type = gemm_c_type(f, type);

    // Plan on shapes: shapes that disagree, an empty problem, sizes that overflow and
    // a budget below the minimum all fail here, before anything is allocated.
    ops::GemmOptions options;
    options.type = type.type;
    options.compute = type.compute;
    options.trans_a = f.trans_a;
    options.trans_b = f.trans_b;
    options.alpha = alpha;
    options.beta = beta;
    options.budget_bytes = budget;
    const ShapeMatrix a_shape(f.trans_a ? *k : *m, f.trans_a ? *m : *k, type.type);
    const ShapeMatrix b_shape(f.trans_b ? *n : *k, f.trans_b ? *k : *n, type.type);
    ShapeMatrix c_shape(*m, *n, c_type);
    options.c_in = beta != 0.0 ? (ops.c_in != nullptr ? ops.c_in : &c_shape) : nullptr;
    const io::MatrixSource& a_plan = files ? *ops.a : a_shape;
    const io::MatrixSource& b_plan = files ? *ops.b : b_shape;
    // The minimum budget depends on sizes alone: check it before measuring rates.
    // This also rejects empty and overflowing shapes (UsageError from the planner).
    ops::GemmOptions probe = options;
    probe.measure_rates = false;
    probe.budget_bytes = 0;
    const std::uint64_t minimum = tile::gemm_minimum_budget(ops::gemm_problem(a_plan, b_plan, c_shape, probe),
                                                            ops::gemm_limits(*device, probe));
    if (budget < minimum) {
        throw UsageError(
            "gemm", fmt::format("a device budget of {} is below the minimum of {} ({} bytes) for "
                                "this {}x{}x{} {} GEMM",
                                format_size(budget), format_size(minimum), minimum, *m, *n, *k, type.name));
    }

    // Host memory for random operands and an in-memory C, all checked before any of it exists.
    const std::uint64_t host_limit = host_limit_bytes(config);
    const std::uint64_t w = dtype_bytes(type.type);
    const std::uint64_t wc = dtype_bytes(c_type);
    const std::uint64_t mn = checked_mul(*m, *n, "gemm");
    const std::uint64_t a_bytes = checked_mul(checked_mul(*m, *k, "gemm"), w, "gemm");
    const std::uint64_t b_bytes = checked_mul(checked_mul(*k, *n, "gemm"), w, "gemm");
    const std::uint64_t c_bytes = checked_mul(mn, wc, "gemm");
    std::uint64_t host_bytes = f.out_path ? 0 : c_bytes;
    if (!files) {
        host_bytes = checked_add(host_bytes, checked_add(a_bytes, b_bytes, "gemm"), "gemm");
        if (beta != 0.0) host_bytes = checked_add(host_bytes, c_bytes, "gemm");
    }
    if (host_bytes > host_limit) {
        throw OutOfMemory(
            "gemm",
            fmt::format("the in-memory operands{} do not fit the host budget (write C with --out, "
                        "or set --host-budget)",
                        files ? "" : " (random inputs)"),
            {.requested_bytes = host_bytes, .tier = Tier::Host, .budget_bytes = host_limit});
    }

    // The device's rates steer tile shapes only when tiles stream: a problem that fits
    // the budget whole runs in one tile, and skips the probe (~0.1-1 s).
    const std::uint64_t whole_bytes = checked_add(checked_add(a_bytes, b_bytes, "gemm"),
                                                  checked_mul(c_bytes, beta != 0.0 ? 2 : 1, "gemm"), "gemm");
    options.measure_rates = whole_bytes > budget && !f.no_rate_probe;
    const tile::GemmPlan plan = ops::plan_gemm(*device, a_plan, b_plan, c_shape, options);

    // The output exists from here on under a temporary name; it is renamed only by commit().
    std::unique_ptr<io::NpyMatrixWriter> c_file;
    std::unique_ptr<io::HostMatrix> c_mem;
    HostBuffer c_mem_data;
    io::MatrixSink* c_sink = nullptr;
    if (f.out_path) {
        c_file = std::make_unique<io::NpyMatrixWriter>(*f.out_path, *m, *n, c_type, f.force);
        c_sink = c_file.get();
    } else {
        c_mem_data = allocate_host(mn * wc, "C", host_limit);
        c_mem = std::make_unique<io::HostMatrix>(c_mem_data.get(), *m, *n, *n, io::Layout::RowMajor, c_type);
        c_sink = c_mem.get();
    }
    if (!files) {
        const std::uint64_t ar = a_shape.rows(), ac = a_shape.cols(), br = b_shape.rows(),
                            bc = b_shape.cols();
        ops.a_data = allocate_host(ar * ac * w, "A", host_limit);
        ops.b_data = allocate_host(br * bc * w, "B", host_limit);
        fill_random(ops.a_data.get(), ar, ac, type.type, *seed, kStreamA);
        fill_random(ops.b_data.get(), br, bc, type.type, *seed, kStreamB);
        ops.a_host = std::make_unique<io::HostMatrix>(static_cast<const void*>(ops.a_data.get()), ar, ac, ac,
                                                      io::Layout::RowMajor, type.type);
        ops.b_host = std::make_unique<io::HostMatrix>(static_cast<const void*>(ops.b_data.get()), br, bc, bc,
                                                      io::Layout::RowMajor, type.type);
        ops.a = ops.a_host.get();
        ops.b = ops.b_host.get();
        if (beta != 0.0) {
            ops.c_data = allocate_host(mn * wc, "the input C", host_limit);
            fill_random(ops.c_data.get(), *m, *n, c_type, *seed, kStreamC);
            ops.c_host = std::make_unique<io::HostMatrix>(static_cast<const void*>(ops.c_data.get()), *m, *n,
                                                          *n, io::Layout::RowMajor, c_type);
            ops.c_in = ops.c_host.get();
        }
    }
    options.c_in = beta != 0.0 ? ops.c_in : nullptr;

    if (text) {
        fmt::print("gemm: C[{}x{}] = {}op(A)·op(B){}, op(A) {}x{}, {} on {} ({}), budget {}\n", *m, *n,
                   alpha == 1.0 ? "" : fmt::format("{}·", alpha),
                   beta != 0.0 ? fmt::format(" + {}·C", beta) : "", *m, *k, type.name, device->info().id(),
                   device->info().name, format_size(budget));
        fmt::print("inputs: {}{}{}\n",
                   files ? fmt::format("A '{}', B '{}'", *f.a_path, *f.b_path)
                         : fmt::format("random, seed {}", *seed),
                   f.trans_a ? ", A transposed" : "", f.trans_b ? ", B transposed" : "");
        print_plan(plan, budget);
        std::fflush(stdout);
    }

    ProgressBar bar("gemm", !f.quiet);
    options.progress = bar.callback();
    ops::GemmReport report;
    std::optional<ops::MultiGemmReport> shares;
    if (devices.size() > 1) {
        std::vector<Device*> all;
        for (const auto& d : devices) all.push_back(d.get());
        shares = ops::gemm_on_devices(all, *ops.a, *ops.b, *c_sink, options);
        report = whole_run(*shares);
    } else {
        report = ops::execute_gemm(*device, plan, *ops.a, *ops.b, *c_sink, options);
    }
    bar.finish();
    if (c_file) c_file->commit();

    nlohmann::json record = report_json(report, type, device->info(), f, seed);
    if (shares) record["devices"] = shares_json(shares->devices);
    if (text) {
        print_report(report);
        if (shares) print_shares(shares->units, shares->devices);
        if (f.out_path) fmt::print("output: {}\n", *f.out_path);
    }

    std::optional<GemmCheck> check;
    if (f.verify) {
        // The written file is re-read: the check covers the writer too.
        std::unique_ptr<io::NpyMatrixReader> c_back;
        if (c_file) c_back = std::make_unique<io::NpyMatrixReader>(*f.out_path);
        check =
            verify_gemm({.a = ops.a,
                         .b = ops.b,
                         .c_in = ops.c_in,
                         .c_out = c_back ? static_cast<const io::MatrixSource*>(c_back.get()) : c_mem.get(),
                         .trans_a = f.trans_a,
                         .trans_b = f.trans_b,
                         .alpha = alpha,
                         .beta = beta,
                         .type = type.type,
                         .compute = type.compute,
                         .m = *m,
                         .n = *n,
                         .k = *k,
                         .seed = seed.value_or(0)});
        record["relative_error"] = check->relative_error;
        record["error_bound"] = check->bound_error;
        record["verified_elements"] = check->element_count;
        record["verified_full"] = check->full;
        record["verify_passed"] = check->passed;
        if (text) {
            fmt::print(
                "verify: {} against float64 ({} elements in {} blocks): relative error {:.3e} (bound "
                "{:.1e}){}: {}\n",
                check->full ? "every element" : "sampled blocks", check->element_count, check->block_count,
                check->relative_error, check->bound_error,
                check->non_finite_count != 0 ? fmt::format(", {} NaN/inf", check->non_finite_count) : "",
                check->passed ? "ok" : "FAILED");
        }
    }
    json.write(record);
    std::fflush(stdout);
    if (check && !check->passed) {
        throw CorruptionError(
            "verify",
            fmt::format("gemm result differs from the float64 reference: relative error {:.3e} over the "
                        "{} bound {:.1e}{}",
                        check->relative_error, type.name, check->bound_error,
                        check->non_finite_count != 0
                            ? fmt::format(", {} NaN/inf elements", check->non_finite_count)
                            : ""));
    }
    return 0;
}

}  // namespace

void add_gemm_command(CLI::App& app, const GlobalOptions& globals, CommandList& commands) {
    auto* sub =
        app.add_subcommand("gemm", "Out-of-core C = alpha*op(A)*op(B) + beta*C under a device budget");
    auto f = std::make_shared<GemmFlags>();
    sub->add_option("--m", f->m, "Rows of op(A) and C (random inputs; checked against --a)")->type_name("N");
    sub->add_option("--n", f->n, "Columns of op(B) and C")->type_name("N");
    sub->add_option("--k", f->k, "Columns of op(A), rows of op(B)")->type_name("N");
    sub->add_option("--a", f->a_path, "A as a 2-D .npy (C or Fortran order)")->type_name("A.npy");
    sub->add_option("--b", f->b_path, "B as a 2-D .npy")->type_name("B.npy");
    sub->add_option("--c", f->c_path, "The input C for --beta != 0 with file inputs")->type_name("C0.npy");
    sub->add_option("--out", f->out_path, "Write C here (.npy, through a temporary file)")
        ->type_name("C.npy");
    sub->add_flag("--transa", f->trans_a, "op(A) = A^T");
    sub->add_flag("--transb", f->trans_b, "op(B) = B^T");
    sub->add_option("--alpha", f->alpha, "alpha (default 1)")->type_name("X");
    sub->add_option("--beta", f->beta, "beta (default 0)")->type_name("X");
    sub->add_option("--dtype", f->dtype,
                    "f32, f64, tf32 (f32 data), bf16 or f16 (C in f32); default: the files', else f32")
        ->type_name("TYPE");
    sub->add_option("--c-dtype", f->c_dtype,
                    "C's type: f32 (default), or bf16 / f16 for those inputs (rounded once from f32 sums; "
                    "not .npy for bf16)")
        ->type_name("TYPE");
    sub->add_option("--budget", f->budget,
                    "Device memory budget: 256MiB, 1.5GB, 50%, auto (default: --device-budget)")
        ->type_name("SIZE");
    sub->add_option("--seed", f->seed, "Seed of the random inputs (default: random, printed)")
        ->type_name("N");
    sub->add_flag("--verify", f->verify,
                  "Compare with a float64 reference (sampled 64x64 blocks when large)");
    sub->add_option("--json", f->json, "Write a JSON record to stdout, or to FILE (--json=FILE)")
        ->expected(0, 1)
        ->type_name("[FILE]");
    sub->add_flag("--force", f->force, "Overwrite existing outputs");
    sub->add_flag("--quiet", f->quiet, "No progress bar and no summary (errors and --json only)");
    sub->add_flag("--no-rate-probe", f->no_rate_probe,
                  "Plan without measuring the device's GEMM and link rates (~1 s): fewest bytes moved");
    sub->add_option("--devices", f->devices,
                    "Run on several devices of the backend: all, or indices like 0,1 (each with --budget)")
        ->type_name("all|0,1,...");
    commands.push_back({sub, [&globals, f] { return run_gemm(*f, globals); }});
}

}  // namespace outcore::cli
