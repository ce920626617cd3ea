// src/ops/gemm.cpp — the out-of-core GEMM (outcore/ops/gemm.hpp). About 1200 lines on
// purpose: execute_gemm is one walk over C tiles whose steps (first-chunk pieces, drain
// parts, split tiles, paced downloads, runs handed out tile by tile, an A panel in
// chunks with a 16-bit C's f32 sums, retained B in a serpentine) share its slots, rings
// and regions; the operand feeding and the pacing live in gemm_feed.hpp and
// gemm_pacing.hpp, and cutting the walk itself apart would spread that shared state.
#include "outcore/ops/gemm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "gemm_feed.hpp"
#include "gemm_pacing.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/core/size.hpp"
#include "outcore/tile/rates.hpp"

namespace outcore::ops {

namespace {

using detail::ChunkedPanel;
using detail::OperandCut;
using detail::PanelFeeder;

constexpr const char* kComponent = "gemm";
constexpr std::uint32_t kDefaultWriterThreads = 1;

/// Packing threads: enough to keep a fast link fed from host memory (a big host packs
/// tens of GB/s with a handful of cores), at least 2 so reading overlaps packing.
std::uint32_t default_reader_threads() noexcept {
    const unsigned cores = std::max(1U, std::thread::hardware_concurrency());
    return std::clamp<std::uint32_t>(cores / 2, 2, 8);
}
constexpr std::uint32_t kDownloadStaging = 2;  // one C tile drains while the next downloads

std::uint64_t op_rows(const io::MatrixSource& s, bool trans) noexcept { return trans ? s.cols() : s.rows(); }
std::uint64_t op_cols(const io::MatrixSource& s, bool trans) noexcept { return trans ? s.rows() : s.cols(); }

/// Serialises progress calls and keeps them monotonic; reports each tile written to
/// GemmOptions::tile_written.
class Progress {
public:
    Progress(const GemmOptions& options, std::uint64_t total)
        : callback_(options.progress), tile_written_(options.tile_written), total_(total) {}
    void tile_done(std::uint64_t t) {
        if (tile_written_) tile_written_(t);
        if (!callback_) return;
        std::lock_guard lock(mutex_);
        ++done_;
        callback_(static_cast<double>(done_) / static_cast<double>(total_));
    }

private:
    const std::function<void(double)>& callback_;
    const std::function<void(std::uint64_t)>& tile_written_;
    std::uint64_t total_;
    std::uint64_t done_ = 0;
    std::mutex mutex_;
};

/// The first GEMM of an A-panel run waits for a whole panel chunk (1 GiB for the f32 plan on
/// the H200, 20-25 ms at the link's rate) before the device does anything. Each A ring slot
/// is therefore made of kFirstChunkPieces regions along k, every chunk goes up piece by
/// piece, and the run's first GEMM — for an A panel, every chunk of each row's first tile,
/// which may still be landing — is issued per piece, so the device starts after the first
/// piece; later GEMMs read every piece at once. Square-C runs stream their A chunks the same
/// way (the Vulkan plan's first GEMM waited 4.5 ms on an H100 for a 96 MiB A chunk and its B
/// chunk), where A is device-readable (packed pieces would each hold a chunk-sized staging
/// buffer). Only where a piece is contiguous in the slot (A not transposed: chunks are on ×
/// kn, column-major) and every tile row has the same rows (the regions are cut for them);
/// neither with split_c_tiles nor with GemmOptions::one_call_per_chunk.
constexpr std::uint64_t kFirstChunkPieces = 4;

/// The run's last C tile drains in this many column parts: its last k chunk is
/// computed part by part and each part goes down as soon as its GEMM is done, so the
/// run ends one part's download after its last GEMM rather than a whole tile's (5.3 ms
/// for the Vulkan GEMM's 256 MiB tiles on an H100, BENCHMARKS.md). The slot that tile
/// uses is cut into regions at part boundaries (each at the device's offset
/// alignment, so only where every tile has the same rows); every tile in that slot
/// reaches it through them — one GEMM per k chunk over all of them, one download per
/// part. Neither with split_c_tiles nor with GemmOptions::one_call_per_chunk (which
/// gemm_on_devices sets: a window's last tile is not the problem's).
constexpr std::uint64_t kDrainParts = 2;
/// Drain parts are whole multiples of this many columns: on an H100 the Vulkan GEMM's
/// last chunk in four parts 704 columns wide ran at 60 % of its whole rate, costing
/// more than the shorter drain saved; no split where a tile is narrower than two.
constexpr std::uint64_t kDrainColumnStep = 128;

/// One column part of a C tile: its slot (a region when split), its first column
/// within the tile, its width and its lane. With GemmOptions::split_c_tiles (off by
/// default) and two compute lanes, a tile of several k chunks is two such parts, each
/// its own region of the C slot (the right one at the device's offset alignment; no
/// split where that does not fit) with its own GEMMs on its own lane, sharing the A
/// and B chunks, so one lane's last partial wave could overlap the other's work. On
/// the H200's Vulkan driver it made the square-C plan slower (0.661 against 0.774 of
/// in-core, BENCHMARKS.md "Ninth run"), hence off. A tile in the slot of the run's
/// last tile (kDrainParts) is that slot's column regions, all on the tile's lane.
/// Otherwise a tile is one part.
struct CPart {
    tile::SlotId slot;
    std::uint64_t j = 0;
    std::uint64_t cols = 0;
    unsigned lane = 0;
};

/// Whether plan_gemm cuts an a-panel plan's panel into chunks where the caller leaves
/// GemmOptions::panel_chunk_k unset (tile::chunk_a_panel picks the chunk), on the CUDA
/// backend: on an H100, tf32 and bf16 a-panel plans ran 0.5–2 points of in-core faster
/// with their panel in chunks than with the same tiles whole (docs/tiling.md, "The A panel
/// in chunks"). Not measured on the Vulkan GPUs, nor worth anything on the CPU backend, so
/// not their default. Where the planner's tiles leave no room for chunks (or, with a
/// 16-bit C, hold less of the next panel ahead than narrower ones), the default takes
/// narrower tiles in chunks (tile::narrower_chunked_panel), so it may change tile_n.
constexpr bool kChunkedPanels = true;

/// Whether plan_gemm, on the CUDA backend with GemmOptions::retained_b unset, makes the
/// rows of an a-panel plan over the whole k (the planner's, or two_chunked_panels') walk
/// a serpentine and keep the B chunks they share (tile::retain_b_chunks), where that
/// saves at least kRetainedShare of the plan's bytes up. On two H100 hosts (2026-12-07)
/// tf32 at 6 GiB, 32 chunks kept (1/6 of the bytes up), ran 4.7 % (4 chunks k outer) and
/// 6.7 % (all) faster than the same tiles without; at 3 GiB, 8 kept of 512-wide tiles (1/24),
/// 0.4–0.9 % and 4.4 %, and 3 kept of 1024-wide ones 1.6 % slower (docs/tiling.md, "A
/// serpentine with retained B").
constexpr bool kRetainedB = true;
constexpr double kRetainedShare = 0.1;

tile::GemmPlan plan_tiles(const tile::GemmProblem& problem, const tile::PlanLimits& limits,
                          const GemmOptions& options);
/// The plan: plan_tiles, then the A panel in chunks (in narrower tiles where the planner's
/// leave no room for them, or for a 16-bit C where narrower ones hold more of the next
/// panel ahead), two chunked panels or retained B chunks as the options and the backend's
/// defaults ask.
tile::GemmPlan choose_plan(const tile::GemmProblem& problem, const tile::PlanLimits& limits,
                           const GemmOptions& options, Device& device);

/// Whether the caller forced the tiles (GemmOptions::tile_m, tile_n or tile_k).
bool tiles_forced(const GemmOptions& options) {
    return options.tile_m != 0 || options.tile_n != 0 || options.tile_k != 0;
}

/// Compute queues the run uses: GemmOptions::compute_lanes, else the device's.
std::uint32_t lanes_for(const Device& device, const GemmOptions& options) {
    const std::uint32_t lanes =
        options.compute_lanes != 0 ? options.compute_lanes : device.info().compute_lanes;
    if (lanes < 1 || lanes > 2)
        throw UsageError(kComponent, fmt::format("compute_lanes {} is not 1 or 2", lanes));
    return lanes;
}

/// What the pipeline's slots may hold: the budget less the workspace that each compute
/// queue's GEMM kernels take outside it (DeviceInfo::gemm_workspace_bytes), so that the
/// budget holds for all the device memory the run uses. A budget under four workspaces
/// (tests, tiny runs) keeps its whole size for the slots: the workspace is then held
/// beside it, as the log says once.
std::uint64_t budget_for(const Device& device, const GemmOptions& options) {
    const DeviceInfo& info = device.info();
    const std::uint64_t budget =
        options.budget_bytes != 0 ? options.budget_bytes : info.recommended_working_set_bytes;
    const std::uint64_t workspace = info.gemm_workspace_bytes * lanes_for(device, options);
    if (budget / 4 < workspace) {
        static std::once_flag warned;
        std::call_once(warned, [&] {
            log::warn(kComponent,
                      "a device budget of {} bytes is under four times the {} bytes of workspace {}'s GEMM "
                      "kernels take; the workspace is held beside the budget",
                      budget, workspace, info.id());
        });
        return budget;
    }
    return budget - workspace;
}

/// UsageError where the problem has a 16-bit C and the device's kernels write none.
void require_narrow_c_support(Device& device, const tile::GemmProblem& problem) {
    if (problem.narrow_c && !device.kernels().supports_narrow_c(problem.type)) {
        throw UsageError(
            kComponent, fmt::format("device {} has no {} GEMM with a {} C (use an f32 C)", device.info().id(),
                                    to_string(problem.type), to_string(problem.type)));
    }
}

}  // namespace

tile::GemmProblem gemm_problem(const io::MatrixSource& a, const io::MatrixSource& b, const io::MatrixSink& c,
                               const GemmOptions& options) {
    const std::uint32_t out_bytes = tile::gemm_output_bytes(options.type);  // UsageError for other types
    // 16-bit inputs take an f32 C, or one of their own type (tile::GemmProblem::narrow_c).
    const bool narrow_c = out_bytes != dtype_bytes(options.type) && c.dtype() == options.type;
    const DType out_type = out_bytes == dtype_bytes(options.type) || narrow_c ? options.type : DType::F32;
    auto check_type = [&](const char* name, DType have, DType want) {
        if (have != want) {
            throw UsageError(kComponent, fmt::format("{} holds {} elements, the GEMM needs {}", name,
                                                     to_string(have), to_string(want)));
        }
    };
    check_type("A", a.dtype(), options.type);
    check_type("B", b.dtype(), options.type);
    check_type("C", c.dtype(), out_type);

    tile::GemmProblem p;
    p.m = op_rows(a, options.trans_a);
    p.k = op_cols(a, options.trans_a);
    p.n = op_cols(b, options.trans_b);
    p.type = options.type;
    p.compute = options.compute;
    p.trans_a = options.trans_a;
    p.trans_b = options.trans_b;
    p.beta_nonzero = options.beta != 0.0;
    p.narrow_c = narrow_c;
    const std::uint64_t kb = op_rows(b, options.trans_b);
    if (kb != p.k) {
        throw UsageError(
            kComponent,
            fmt::format("op(A) is {}x{} but op(B) is {}x{}: the inner dimensions differ", p.m, p.k, kb, p.n));
    }
    if (c.rows() != p.m || c.cols() != p.n) {
        throw UsageError(kComponent,
                         fmt::format("C is {}x{} but op(A)·op(B) is {}x{}", c.rows(), c.cols(), p.m, p.n));
    }
    if (p.beta_nonzero) {
        if (options.c_in == nullptr) {
            throw UsageError(kComponent, "beta != 0 needs the input C (GemmOptions::c_in)");
        }
        check_type("the input C", options.c_in->dtype(), out_type);
        if (options.c_in->rows() != p.m || options.c_in->cols() != p.n) {
            throw UsageError(kComponent, fmt::format("the input C is {}x{}, C is {}x{}", options.c_in->rows(),
                                                     options.c_in->cols(), p.m, p.n));
        }
    }
    return p;
}

tile::PlanLimits gemm_limits(Device& device, const GemmOptions& options) {
    const DeviceInfo& info = device.info();
    tile::PlanLimits limits;
    limits.budget_bytes = budget_for(device, options);
    limits.min_offset_alignment = info.min_offset_alignment;
    limits.max_buffer_bytes = info.max_buffer_bytes;
    limits.max_inline_bytes = info.max_inline_bytes;
    limits.pipeline_depth = options.pipeline_depth;
    limits.compute_flops = options.compute_flops;
    limits.link_bytes_per_second = options.link_bytes_per_second;
    limits.link_d2h_bytes_per_second = options.link_d2h_bytes_per_second;
    limits.link_duplex_bytes_per_second = options.link_duplex_bytes_per_second;
    if (options.measure_rates) {
        // Measured rates fill only what the caller left unknown.
        tile::PlanLimits measured;
        tile::apply_rates(tile::cached_rates(device, options.type, options.compute), options.type,
                          options.compute, measured);
        if (limits.compute_flops == 0) limits.compute_flops = measured.compute_flops;
        if (limits.link_bytes_per_second == 0) limits.link_bytes_per_second = measured.link_bytes_per_second;
        if (limits.link_d2h_bytes_per_second == 0)
            limits.link_d2h_bytes_per_second = measured.link_d2h_bytes_per_second;
        if (limits.link_duplex_bytes_per_second == 0) {
            limits.link_duplex_bytes_per_second = measured.link_duplex_bytes_per_second;
        }
        // A measured single rate is refined per tile shape (tile/limits.hpp); a rate the
        // caller gave is taken as it is.
        if (options.compute_flops == 0 && limits.compute_flops > 0) {
            const tile::GemmShape base{.type = options.type,
                                       .compute = options.compute,
                                       .trans_a = options.trans_a,
                                       .trans_b = options.trans_b};
            tile::set_shape_probes(limits, device, base);
        }
    }
    return limits;
}

tile::GemmPlan plan_gemm(Device& device, const io::MatrixSource& a, const io::MatrixSource& b,
                         const io::MatrixSink& c, const GemmOptions& options) {
    const tile::GemmProblem problem = gemm_problem(a, b, c, options);
    if (!device.kernels().supports_gemm(options.type, options.compute)) {
        throw UsageError(
            kComponent, fmt::format("device {} has no {}{} GEMM", device.info().id(), to_string(options.type),
                                    options.compute == GemmCompute::FastTF32 ? " (tf32)" : ""));
    }
    require_narrow_c_support(device, problem);
    tile::PlanLimits limits = gemm_limits(device, options);
    if (options.measure_rates && options.link_bytes_per_second == 0 && limits.link_bytes_per_second > 0) {
        // Chunks of operands in device-readable memory go up as 2-D copies whose runs are
        // their columns; each run length is measured once (tile/limits.hpp).
        const std::uint64_t w = tile::gemm_input_bytes(options.type);
        const std::uint64_t wc = tile::gemm_c_bytes(problem);
        const std::optional<io::DirectMatrix> c_view =
            problem.beta_nonzero && options.c_in != nullptr ? options.c_in->direct() : c.direct_sink();
        limits.gemm_copy_rate = [&device, w, wc, trans_a = problem.trans_a, trans_b = problem.trans_b,
                                 a_view = a.direct(), b_view = b.direct(),
                                 c_view](tile::GemmOperand op, std::uint64_t outer, std::uint64_t inner) {
            // The stored chunk is nr × nc, column-major: runs of nr elements, nc of them.
            auto rate = [&](const std::optional<io::DirectMatrix>& v, std::uint64_t nr, std::uint64_t nc,
                            std::uint64_t bytes) {
                if (!v) return 0.0;
                return tile::cached_upload_2d_rate(device, v->data,
                                                   Copy2D{.width_bytes = nr * bytes,
                                                          .rows = nc,
                                                          .host_pitch_bytes = v->ld_elements * bytes,
                                                          .buffer_pitch_bytes = nr * bytes});
            };
            switch (op) {
                case tile::GemmOperand::A:
                    return trans_a ? rate(a_view, inner, outer, w) : rate(a_view, outer, inner, w);
                case tile::GemmOperand::B:
                    return trans_b ? rate(b_view, outer, inner, w) : rate(b_view, inner, outer, w);
                case tile::GemmOperand::C: return rate(c_view, outer, inner, wc);
            }
            return 0.0;
        };
    }
    tile::GemmPlan plan = choose_plan(problem, limits, options, device);
    if (options.retained_k_outer) plan = tile::with_retained_k_outer(plan, *options.retained_k_outer);
    return plan;
}

namespace {

tile::GemmPlan choose_plan(const tile::GemmProblem& problem, const tile::PlanLimits& limits,
                           const GemmOptions& options, Device& device) {
    const tile::GemmPlan plan = plan_tiles(problem, limits, options);
    // The A panel in chunks (GemmOptions::panel_chunk_k).
    const bool can_chunk = !options.split_c_tiles && !options.one_call_per_chunk && !options.next_tiles;
    const std::uint64_t chunk_k = options.panel_chunk_k.value_or(0);
    if (chunk_k != 0 && !can_chunk) {
        throw UsageError(kComponent,
                         "panel_chunk_k goes with neither split_c_tiles, one_call_per_chunk nor next_tiles");
    }
    const std::uint32_t retained = options.retained_b.value_or(0);
    if (retained != 0) {
        if (!can_chunk || options.panel_chunk_k) {
            throw UsageError(kComponent,
                             "retained_b goes with neither panel_chunk_k, split_c_tiles, "
                             "one_call_per_chunk nor next_tiles");
        }
        return tile::retain_b_chunks(plan, limits, retained);
    }
    const bool by_default = kChunkedPanels && device.info().backend == "cuda";
    if (!can_chunk || (options.panel_chunk_k ? chunk_k == 0 : !by_default)) return plan;
    // A 16-bit C sums a chunked tile in f32 and converts it (execute_gemm).
    const Kernels& k = device.kernels();
    if (problem.narrow_c && (!k.supports_convert(DType::F32, problem.type) ||
                             (problem.beta_nonzero && !k.supports_convert(problem.type, DType::F32)))) {
        if (chunk_k == 0) return plan;
        throw UsageError(kComponent,
                         fmt::format("device {} cannot convert f32 sums to a {} C, which an A panel "
                                     "in chunks needs",
                                     device.info().id(), to_string(problem.type)));
    }
    // The planner's own single whole-A panel: two chunked panels instead where they fit
    // with the whole next panel ahead (tile::two_chunked_panels).
    std::optional<tile::GemmPlan> two;
    if (chunk_k == 0 && !tiles_forced(options)) two = tile::two_chunked_panels(plan, limits);
    // Then rows that keep the B chunks they share, where the budget holds enough of them
    // (unless the options say never).
    if (kRetainedB && !options.panel_chunk_k && !options.retained_b) {
        const tile::GemmPlan kept = tile::retain_b_chunks(two ? *two : plan, limits, 0, kRetainedShare);
        if (kept.retained_b != 0) return kept;
    }
    if (two) return *two;
    const tile::GemmPlan chunked = tile::chunk_a_panel(plan, limits, chunk_k);
    // Where the planner's tiles leave no room for chunks, narrower ones that have it; for a
    // 16-bit C, narrower ones with more of the next panel ahead where they hold more.
    if (chunk_k == 0 && (chunked.a_chunk_k == 0 || problem.narrow_c) && !tiles_forced(options)) {
        if (std::optional<tile::GemmPlan> narrower = tile::narrower_chunked_panel(plan, limits)) {
            log::info(kComponent,
                      "{}x{} tiles leave little room for the A panel in chunks; {}x{} tiles in chunks of {}, "
                      "{} ahead",
                      plan.tile_m, plan.tile_n, narrower->tile_m, narrower->tile_n, narrower->a_chunk_k,
                      narrower->prefetch_chunks);
            return *narrower;
        }
    }
    return chunked;
}

tile::GemmPlan plan_tiles(const tile::GemmProblem& problem, const tile::PlanLimits& limits,
                          const GemmOptions& options) {
    const bool fixed = tiles_forced(options);
    if ((options.group != 1 || options.c_slots != 0) && !fixed)
        throw UsageError(kComponent, "a group or C slot count needs forced tiles (tile_m, tile_n, tile_k)");
    if (fixed) {
        if (!options.schedule) throw UsageError(kComponent, "fixed tiles need a schedule too");
        return tile::plan_gemm_fixed(problem, limits, *options.schedule, options.tile_m, options.tile_n,
                                     options.tile_k, options.group, options.c_slots);
    }
    return options.schedule ? tile::plan_gemm(problem, limits, *options.schedule)
                            : tile::plan_gemm(problem, limits);
}

}  // namespace

GemmReport execute_gemm(Device& device, const tile::GemmPlan& plan, const io::MatrixSource& a,
                        const io::MatrixSource& b, io::MatrixSink& c, const GemmOptions& options) {
    const auto start = std::chrono::steady_clock::now();
    const tile::GemmProblem problem = gemm_problem(a, b, c, options);
    const tile::GemmProblem& pp = plan.problem;
    if (pp.m != problem.m || pp.n != problem.n || pp.k != problem.k || pp.type != problem.type ||
        pp.trans_a != problem.trans_a || pp.trans_b != problem.trans_b ||
        pp.beta_nonzero != problem.beta_nonzero || pp.compute != problem.compute ||
        pp.narrow_c != problem.narrow_c) {
        throw UsageError(kComponent, "the plan was made for another problem");
    }
    require_narrow_c_support(device, problem);
    if (plan.tile_m == 0 || plan.tile_n == 0 || plan.tile_k == 0 || plan.a_slots == 0 || plan.b_slots == 0 ||
        plan.c_slots == 0) {
        throw UsageError(kComponent, "the plan is empty (make it with plan_gemm)");
    }
    const std::uint64_t w = tile::gemm_input_bytes(problem.type);
    const std::uint64_t wc = tile::gemm_c_bytes(problem);
    const tile::TileGrid grid = plan.c_grid();
    const std::uint64_t k_chunks = plan.k_chunks();
    const bool beta_nonzero = problem.beta_nonzero;
    const bool a_panel = plan.schedule == tile::GemmSchedule::APanelResident;
    const bool b_panel = plan.schedule == tile::GemmSchedule::BPanelResident;
    const bool claimed = static_cast<bool>(options.next_tiles);
    // GemmPlan::a_chunk_k: the A panel ring in chunks along k, one slot cut into regions.
    const bool chunked = plan.a_chunk_k != 0;
    if (chunked &&
        (!a_panel || k_chunks != 1 || problem.trans_a || problem.k % plan.a_chunk_k != 0 ||
         plan.a_slot_bytes != plan.tile_m * plan.a_chunk_k * w || plan.a_slots < problem.k / plan.a_chunk_k ||
         plan.a_slots > 2 * (problem.k / plan.a_chunk_k) || claimed || options.split_c_tiles ||
         options.one_call_per_chunk)) {
        throw UsageError(
            kComponent,
            "a plan with its A panel in chunks (a_chunk_k) needs an a-panel plan over the whole k "
            "(chunk_a_panel), and neither split C tiles, one call per chunk nor tiles handed out");
    }
    // GemmPlan::retained_b: a serpentine walk whose rows keep the B chunks they share.
    const std::uint64_t retained = plan.retained_b;
    if (retained != 0 &&
        (!chunked || plan.a_slots != problem.k / plan.a_chunk_k || plan.prefetch_chunks != 0 ||
         plan.b_slots < retained + 2 || plan.c_slots < retained + 1 || problem.narrow_c ||
         2 * retained > plan.c_grid().tile_cols() || plan.retained_k_outer > plan.a_slots)) {
        throw UsageError(kComponent,
                         "a plan that retains B chunks (retained_b) needs its A panel in chunks with nothing "
                         "ahead, retained_b + 2 B slots, retained_b + 1 C slots, an f32 or f64 C, at least "
                         "twice as many tiles a row as it retains and at most its panel's chunks k outer "
                         "(retain_b_chunks)");
    }
    // A 16-bit C with the panel in chunks: tiles made of several GEMMs sum in an f32 tile
    // (GemmPlan::acc_bytes), then one conversion rounds the sums into C.
    const bool sums_apart = chunked && problem.narrow_c;
    if (sums_apart) {
        Kernels& k = device.kernels();
        if (plan.acc_bytes < plan.tile_m * plan.tile_n * 4) {
            throw UsageError(kComponent,
                             "a plan with its A panel in chunks and a 16-bit C needs an f32 tile "
                             "of sums (acc_bytes; chunk_a_panel makes it)");
        }
        if (!k.supports_convert(DType::F32, problem.type) ||
            (beta_nonzero && !k.supports_convert(problem.type, DType::F32))) {
            throw UsageError(kComponent,
                             fmt::format("device {} cannot convert f32 sums to a {} C, which an A "
                                         "panel in chunks needs (panel_chunk_k = 0 keeps it whole)",
                                         device.info().id(), to_string(problem.type)));
        }
    }

    // Device slots, all from the plan: a ring of chunk slots per input operand (for a
    // resident panel, k_chunks + prefetch_chunks of them) and c_slots C tiles.
    tile::PipelineOptions po;
    po.budget_bytes = budget_for(device, options);
    if (chunked) {
        po.slots.push_back({std::uint64_t{plan.a_slots} * plan.a_slot_bytes, "gemm.a"});
    } else {
        for (std::uint32_t i = 0; i < plan.a_slots; ++i) po.slots.push_back({plan.a_slot_bytes, "gemm.a"});
    }
    for (std::uint32_t i = 0; i < plan.b_slots; ++i) po.slots.push_back({plan.b_slot_bytes, "gemm.b"});
    for (std::uint32_t i = 0; i < plan.c_slots; ++i) po.slots.push_back({plan.c_slot_bytes, "gemm.c"});
    if (sums_apart) po.slots.push_back({plan.acc_bytes, "gemm.sums"});
    const bool a_direct = a.direct().has_value();
    const bool b_direct = b.direct().has_value();
    // Panel schedules walk C in panel order: "outer" is the panel (a row of tiles for
    // A panels, a column for B panels), "inner" the tile within it.
    const std::uint64_t outer_count = b_panel ? grid.tile_cols() : grid.tile_rows();
    const std::uint64_t inner_count = b_panel ? grid.tile_rows() : grid.tile_cols();
    // The first chunk's pieces (kFirstChunkPieces): every A chunk goes up in pieces of
    // piece_k columns where piece_k < tile_k (0: whole). Streamed (square-C) A only from
    // device-readable memory: packed, one chunk's pieces would take every buffer of the
    // staging ring it shares with B (not measured). Not for a 16-bit C: the pieces'
    // GEMMs would round their partial sums into it.
    const bool a_streamed = plan.schedule == tile::GemmSchedule::SquareC;
    const std::uint64_t piece_k =
        !chunked && (a_panel || (a_streamed && a_direct)) && !problem.trans_a &&
                !options.one_call_per_chunk && !problem.narrow_c && !options.split_c_tiles &&
                (outer_count == 1 || problem.m % plan.tile_m == 0)
            ? align_up((plan.tile_k + kFirstChunkPieces - 1) / kFirstChunkPieces, 256)
            : 0;
    const bool a_in_pieces = piece_k != 0 && piece_k < plan.tile_k;
    // A staged A in pieces fills a piece at a time: its staging buffers need hold no more.
    const std::uint64_t a_k = chunked ? plan.a_chunk_k : a_in_pieces ? piece_k : plan.tile_k;
    const std::uint64_t c_tile_bytes = plan.tile_m * plan.tile_n * wc;
    po.reader_threads = options.reader_threads != 0 ? options.reader_threads : default_reader_threads();
    // Packed chunks are filled in parts, several reader threads to a chunk (fill_parts).
    const std::uint64_t part_bytes =
        options.fill_part_bytes != 0 ? options.fill_part_bytes : kDefaultFillPartBytes;
    OperandCut a_cut{&a, problem.trans_a, w, a.direct()};
    OperandCut b_cut{&b, !problem.trans_b, w, b.direct()};
    const std::uint64_t a_part =
        a_direct ? 0 : a_cut.cut_parts(plan.tile_m, a_k, part_bytes, po.reader_threads);
    const std::uint64_t b_part =
        b_direct ? 0 : b_cut.cut_parts(plan.tile_n, plan.tile_k, part_bytes, po.reader_threads);
    // A packed input C (β ≠ 0) goes up tile by tile, cut like an operand whose "k" is C's columns.
    const bool c_in_packed = beta_nonzero && !options.c_in->direct().has_value();
    OperandCut c_in_cut{options.c_in, false, wc, std::nullopt};
    const std::uint64_t c_in_part =
        c_in_packed ? c_in_cut.cut_parts(plan.tile_m, plan.tile_n, part_bytes, po.reader_threads) : 0;
    // Staging: enough buffers that each stream's fills can run a ring ahead, a part of a
    // chunk each; none for what moves straight from device-readable memory (DirectMatrix).
    const std::uint64_t packed_parts =
        (a_direct ? 0 : a_cut.parts) + (b_direct ? 0 : b_cut.parts) + (c_in_packed ? c_in_cut.parts : 0);
    if (packed_parts > 0) {
        po.upload_staging = {
            .bytes = std::max({a_part, b_part, c_in_part}),
            .count = static_cast<std::uint32_t>(packed_parts * std::max<std::uint32_t>(plan.depth, 2))};
    }
    if (!c.direct_sink().has_value())
        po.download_staging = {.bytes = c_tile_bytes, .count = kDownloadStaging};
    po.writer_threads = options.writer_threads != 0 ? options.writer_threads : kDefaultWriterThreads;
    po.measure_busy = options.measure_busy;
    po.staging_cache = options.staging_cache;
    po.device_cache = options.device_cache;
    po.queue_cache = options.queue_cache;
    po.compute_lanes = lanes_for(device, options);

    // Declared before the pipeline: drains running on its threads use it until the
    // pipeline's destructor has joined them.
    Progress progress(options, grid.count());
    // Tiles handed out run by run (next_tiles): the calling thread paces itself on
    // events recorded after each tile's download (see the claimed loop below), a ring
    // of c_slots + 1 of them. Made before the pipeline so they outlive its records.
    std::vector<std::unique_ptr<Event>> landed;
    if (claimed) {
        for (std::uint32_t i = 0; i <= plan.c_slots; ++i) landed.push_back(device.create_event());
    }
    std::uint64_t downloads_issued = 0;
    // C tiles paced down over the next tile's GEMMs (gemm_pacing.hpp): pieces per tile.
    // Decided before the pipeline holds its slots (pace_c_downloads may measure the link),
    // and only where there is something to spread.
    std::uint64_t paced_pieces =
        c.direct_sink().has_value() && !claimed && grid.count() > 1
            ? detail::paced_pieces(k_chunks, c_tile_bytes, plan.tile_n,
                                   options.pace_c_downloads ? 1 : detail::kMinPacedPieceBytes)
            : 0;
    if (paced_pieces > 0 && !detail::pace_c_downloads(device, options)) paced_pieces = 0;
    std::optional<tile::Pipeline> pipeline;  // torn down before returning, timed
    tile::Pipeline& p = pipeline.emplace(device, po);
    // Host time around the device work (OUTCORE_LOG=debug): what a trace of device
    // operations cannot show.
    log::debug_if_slow(kComponent, start, 0.0, "the call up to the pipeline made");
    std::vector<tile::SlotId> a_ring;
    std::vector<tile::SlotId> b_ring;
    std::vector<tile::SlotId> c_ring;
    std::uint32_t next = 0;
    if (chunked) {
        const tile::SlotId whole{next++};
        for (std::uint32_t i = 0; i < plan.a_slots; ++i)
            a_ring.push_back(p.region(whole, i * plan.a_slot_bytes, plan.a_slot_bytes));
    } else {
        for (std::uint32_t i = 0; i < plan.a_slots; ++i) a_ring.push_back(tile::SlotId{next++});
    }
    for (std::uint32_t i = 0; i < plan.b_slots; ++i) b_ring.push_back(tile::SlotId{next++});
    for (std::uint32_t i = 0; i < plan.c_slots; ++i) c_ring.push_back(tile::SlotId{next++});
    const tile::SlotId sums_slot{sums_apart ? next++ : 0};

    // Plain values, not optionals: GCC 12 misreads an optional's engaged state here.
    const std::optional<io::DirectMatrix> c_sink_view = c.direct_sink();
    const bool c_direct = c_sink_view.has_value();
    const io::DirectMatrix c_out = c_sink_view.value_or(io::DirectMatrix{});
    const std::optional<io::DirectMatrix> c_in_view =
        beta_nonzero ? options.c_in->direct() : std::optional<io::DirectMatrix>{};
    const bool c_in_direct = c_in_view.has_value();
    const io::DirectMatrix c_in_mem = c_in_view.value_or(io::DirectMatrix{});
    // With retained_b the rows walk a serpentine (odd ones right to left), so a row's
    // last tiles and the next row's first share their B columns.
    auto walked_column = [&](std::uint64_t outer, std::uint64_t inner) {
        return retained != 0 && outer % 2 == 1 ? inner_count - 1 - inner : inner;
    };
    PanelFeeder panel(p, a_panel ? a_ring : b_ring, a_panel ? a_cut : b_cut, plan, problem.k);
    std::optional<ChunkedPanel> a_chunks;
    if (chunked) a_chunks.emplace(p, a_ring, a_cut, plan);
    auto panel_extent = [&](std::uint64_t o) {
        const tile::TileRect r = b_panel ? grid.tile(0, o) : grid.tile(o, 0);
        return b_panel ? std::pair{r.col, r.size.cols} : std::pair{r.row, r.size.rows};
    };

    // The first chunk's pieces (piece_k above): regions of every A ring slot, by slot
    // index, cut for the first panel's rows.
    std::vector<std::vector<tile::SlotId>> a_pieces;
    if (a_in_pieces) {
        const std::uint64_t on0 = panel_extent(0).second;
        a_pieces.resize(plan.a_slots);
        for (const tile::SlotId s : a_ring) {
            for (std::uint64_t k0 = 0; k0 < plan.tile_k; k0 += piece_k) {
                const std::uint64_t begin = k0 * on0 * w;
                const std::uint64_t end =
                    k0 + piece_k >= plan.tile_k ? plan.a_slot_bytes : (k0 + piece_k) * on0 * w;
                a_pieces[s.index].push_back(p.region(s, begin, end - begin));
            }
        }
        if (a_panel) panel.split(&a_pieces, piece_k);
    }
    // An A slot's memory, whole (a split slot is only reachable through its regions).
    auto a_view = [&](tile::SlotId s) {
        if (a_pieces.empty()) return p.view(s);
        const BufferView first = p.view(a_pieces[s.index].front());
        return BufferView(first.block, first.offset, plan.a_slot_bytes);
    };
    bool first_gemm = true;  // the run's first GEMM goes piece by piece

    // C tiles in two column parts, one per lane (CPart), where a tile has several
    // k chunks and the slot holds both parts at their aligned places.
    // Left parts are a whole number of 4-byte words wide in the B chunk (bf16's right
    // part starts at column `left` of B: a 2-byte offset is not a word), at most half
    // the tile rounded up to that step.
    const std::uint64_t part_step = w < 4 ? 4 / w : 1;
    auto left_of = [part_step](std::uint64_t nj) { return std::min(nj, align_up((nj + 1) / 2, part_step)); };
    const std::uint64_t left_cols = left_of(plan.tile_n);
    const std::uint64_t right_at = align_up(plan.tile_m * left_cols * wc,
                                            std::max<std::uint64_t>(device.info().min_offset_alignment, 1));
    const bool split_c = options.split_c_tiles && po.compute_lanes == 2 && k_chunks > 1 &&
                         left_cols < plan.tile_n && a_pieces.empty() &&
                         right_at + plan.tile_m * (plan.tile_n - left_cols) * wc <= plan.c_slot_bytes;
    std::vector<std::array<tile::SlotId, 2>> c_halves;  // by position in c_ring
    if (split_c) {
        for (const tile::SlotId s : c_ring) {
            c_halves.push_back(
                {p.region(s, 0, right_at), p.region(s, right_at, plan.c_slot_bytes - right_at)});
        }
    }
    // The last tile's slot in column parts (kDrainParts): regions of drain_cols columns
    // of tile_m rows, each starting at a multiple of the offset alignment and, for
    // bf16, of a 4-byte word of B.
    const std::uint64_t last_tile = grid.count() - 1;
    const tile::SlotId drain_slot = c_ring[last_tile % c_ring.size()];
    std::vector<tile::SlotId> drain_regions;
    std::uint64_t drain_cols = 0;
    const bool one_gemm_in_pieces = grid.count() == 1 && k_chunks == 1 && !a_pieces.empty();
    const std::uint64_t last_cols =
        grid.tile(grid.tile_rows() - 1, walked_column(grid.tile_rows() - 1, grid.tile_cols() - 1)).size.cols;
    if (!split_c && !one_gemm_in_pieces && !options.one_call_per_chunk &&
        grid.tile(grid.tile_rows() - 1, 0).size.rows == plan.tile_m) {
        const std::uint64_t align = std::max<std::uint64_t>(device.info().min_offset_alignment, 1);
        const std::uint64_t column = plan.tile_m * wc;
        const std::uint64_t step_cols =
            std::lcm(std::lcm(part_step, align / std::gcd(align, column)), kDrainColumnStep);
        drain_cols = align_up((plan.tile_n + kDrainParts - 1) / kDrainParts, step_cols);
        // Split only where the last tile has more than one part (else every tile in
        // that slot would go down in parts for nothing).
        const bool worth_it = plan.tile_n >= kDrainParts * step_cols && last_cols > drain_cols;
        for (std::uint64_t j = 0; worth_it && j < plan.tile_n; j += drain_cols) {
            const std::uint64_t end =
                j + drain_cols >= plan.tile_n ? plan.c_slot_bytes : (j + drain_cols) * column;
            drain_regions.push_back(p.region(drain_slot, j * column, end - j * column));
        }
    }
    const bool drains_in_parts = !drain_regions.empty();
    std::uint64_t drain_count = 1;  // parts the last tile was computed in, if this run computed it

    std::optional<detail::PacedDownloads> pacer;
    if (paced_pieces > 0) pacer.emplace(p);

    Kernels& kernels = device.kernels();
    std::uint64_t a_next = 0;
    std::uint64_t b_next = 0;
    // Tiles handed out run by run (next_tiles) need not follow panel order: each
    // panel starts at its first tile computed, and none is prefetched for a successor
    // that may never come.
    std::uint64_t started_outer = UINT64_MAX;
    // One C tile's part of the work: its place, its slot, and whether a next panel
    // follows (panel schedules).
    struct TileWork {
        std::uint64_t t, inner, i0, j0, mi, nj, c_bytes;
        std::uint64_t index;  // in c_grid() row-major order (t walks a serpentine with retained_b)
        tile::SlotId cs;
        bool has_next_panel;
    };
    // A C part is an mi × cols column-major block of C, packed (ld mi) in its slot.
    auto c_part_shape = [wc](const io::DirectMatrix& mat, std::uint64_t mi, std::uint64_t cols) {
        return Copy2D{.width_bytes = mi * wc,
                      .rows = cols,
                      .host_pitch_bytes = mat.ld_elements * wc,
                      .buffer_pitch_bytes = mi * wc};
    };
    // The tile's C parts: the whole slot on the tile's lane (consecutive tiles
    // alternate), the drain slot's regions it covers (on its lane), or two column parts
    // on lanes 0 and 1.
    auto c_parts = [&](const TileWork& tw) {
        std::vector<CPart> parts;
        if (drains_in_parts && tw.cs.index == drain_slot.index) {
            for (std::size_t r = 0; r < drain_regions.size() && r * drain_cols < tw.nj; ++r) {
                const std::uint64_t j = r * drain_cols;
                parts.push_back({.slot = drain_regions[r],
                                 .j = j,
                                 .cols = std::min(j + drain_cols, tw.nj) - j,
                                 .lane = static_cast<unsigned>(tw.t % 2)});
            }
            return parts;
        }
        if (!split_c) {
            parts.push_back({.slot = tw.cs, .j = 0, .cols = tw.nj, .lane = static_cast<unsigned>(tw.t % 2)});
            return parts;
        }
        const auto& halves = c_halves[tw.t % c_halves.size()];
        const std::uint64_t left = left_of(tw.nj);
        parts.push_back({.slot = halves[0], .j = 0, .cols = left, .lane = 0});
        if (tw.nj > left) parts.push_back({.slot = halves[1], .j = left, .cols = tw.nj - left, .lane = 1});
        return parts;
    };
    // The tile's C as one matrix (ld mi), and every access a GEMM over all of it makes.
    auto c_whole = [&](const TileWork& tw) {
        if (!drains_in_parts || tw.cs.index != drain_slot.index) return p.view(tw.cs).sub(0, tw.c_bytes);
        const BufferView first = p.view(drain_regions.front());
        return BufferView(first.block, first.offset, tw.c_bytes);
    };
    auto c_accesses = [&](const TileWork& tw, bool overwrite, std::vector<tile::SlotAccess> accesses) {
        for (const CPart& part : c_parts(tw))
            accesses.push_back(overwrite ? tile::writes(part.slot) : tile::updates(part.slot));
        return accesses;
    };
    // Row-major tiles for SquareC and APanelResident, column-major for
    // BPanelResident: consecutive tiles share the resident panel. Starts the panel
    // at its first tile and brings the tile's input C up when β ≠ 0.
    auto begin_tile = [&](std::uint64_t t) {
        const std::uint64_t outer = t / inner_count;
        const std::uint64_t inner = t % inner_count;
        const std::uint64_t across = walked_column(outer, inner);
        const tile::TileRect rect = b_panel ? grid.tile(inner, outer) : grid.tile(outer, across);
        TileWork tw{.t = t,
                    .inner = inner,
                    .i0 = rect.row,
                    .j0 = rect.col,
                    .mi = rect.size.rows,
                    .nj = rect.size.cols,
                    .c_bytes = rect.size.rows * rect.size.cols * wc,
                    .index = b_panel ? t : outer * inner_count + across,
                    .cs = c_ring[t % c_ring.size()],
                    .has_next_panel = (a_panel || b_panel) && outer + 1 < outer_count && !claimed};
        if ((a_panel || b_panel) && outer != started_outer) {
            started_outer = outer;
            const auto [o0, on] = panel_extent(outer);
            const auto [n0, nn] =
                tw.has_next_panel ? panel_extent(outer + 1) : std::pair{std::uint64_t{0}, std::uint64_t{0}};
            if (chunked) {
                a_chunks->start(o0, on, n0, nn);
            } else {
                panel.start(o0, on, n0, nn);
            }
        }
        for (const CPart& part : beta_nonzero ? c_parts(tw) : std::vector<CPart>{}) {
            const std::uint64_t j0 = tw.j0 + part.j;
            if (c_in_direct) {
                p.upload_2d_from(part.slot, 0, c_in_mem.data + (tw.i0 + j0 * c_in_mem.ld_elements) * wc,
                                 c_part_shape(c_in_mem, tw.mi, part.cols));
                continue;
            }
            c_in_cut.upload(p, part.slot, tw.i0, j0, tw.mi, part.cols);
        }
        return tw;
    };
    // What every GEMM of a tile shares: its type, transposes, C's shape and α.
    auto tile_args = [&](const TileWork& tw) {
        GemmTileArgs args;
        args.type = problem.type;
        args.compute = problem.compute;
        args.trans_a = problem.trans_a;
        args.trans_b = problem.trans_b;
        args.m = tw.mi;
        args.n = tw.nj;
        args.ldc = tw.mi;
        args.alpha = options.alpha;
        args.narrow_c = problem.narrow_c;
        return args;
    };
    // A tile of a plan with its A panel in chunks (GemmPlan::a_chunk_k): B whole-k; the
    // row's first tile GEMM by GEMM as the chunks arrive, its last (before a next panel)
    // chunk by chunk as the next panel takes their regions, the tiles between one GEMM
    // over the panel with a piece of the next panel going up beside it.
    std::optional<tile::SlotId> b_ahead;  // the next row's first B, up before the next panel
    std::uint64_t b_ahead_rows = 0;       // GemmReport::b_ahead
    const std::uint64_t middle_tiles = inner_count > 2 ? inner_count - 2 : 1;
    const std::uint64_t prefetch_cols =
        chunked ? tile::ceil_div(a_chunks->prefetch_columns(), middle_tiles) : 0;
    auto step_chunked = [&](const TileWork& tw) {
        const std::uint64_t k = problem.k;
        const std::uint64_t b_bytes = k * tw.nj * w;
        tile::SlotId bs{};
        if (b_ahead) {
            bs = *std::exchange(b_ahead, std::nullopt);
        } else {
            bs = b_ring[b_next++ % b_ring.size()];
            b_cut.upload(p, bs, tw.j0, 0, tw.nj, k);
        }
        const bool first = tw.inner == 0;
        const bool releasing = tw.has_next_panel && tw.inner + 1 == inner_count;
        if (releasing && b_ring.size() > 1 && retained == 0) {
            // The next row's first B goes up ahead of the chunks this tile frees, so that
            // row's first GEMM can start on the first of them (with retained_b it is up).
            const tile::TileRect next_rect = grid.tile(tw.t / inner_count + 1, 0);
            b_ahead = b_ring[b_next++ % b_ring.size()];
            ++b_ahead_rows;
            b_cut.upload(p, *b_ahead, next_rect.col, 0, next_rect.size.cols, k);
        }
        // Column j, row k1 of the B slot: k_rows, k × nj (ld k); else nj × k (ld nj).
        auto b_at = [&](std::uint64_t j, std::uint64_t k1) {
            const std::uint64_t off = b_cut.k_rows ? (j * k + k1) * w : (k1 * tw.nj + j) * w;
            return p.view(bs).sub(off, b_bytes - off);
        };
        GemmTileArgs args = tile_args(tw);
        args.lda = plan.tile_m;  // a shorter last panel keeps the regions' leading dimension
        args.ldb = b_cut.ld(tw.nj, k);
        args.c = c_whole(tw);
        const auto lane = static_cast<unsigned>(tw.t % 2);
        const std::uint64_t ck = a_chunks->chunk_k();
        // A 16-bit C made of several GEMMs: `sum_into` points each at the f32 tile
        // (sums_slot) and `round_sums` rounds that into C once (`begin_sums` reads C into
        // it first where β ≠ 0).
        const std::uint64_t elems = tw.mi * tw.nj;
        const BufferView sums = sums_apart ? p.view(sums_slot).sub(0, elems * 4) : BufferView{};
        auto begin_sums = [&] {
            if (!beta_nonzero) return;
            std::vector<tile::SlotAccess> accesses{tile::writes(sums_slot)};
            for (const CPart& part : c_parts(tw)) accesses.push_back(tile::reads(part.slot));
            const ConvertArgs widen{
                .from = problem.type, .to = DType::F32, .count = elems, .in = c_whole(tw), .out = sums};
            p.compute(
                accesses, [&kernels, widen](Queue& q) { kernels.convert(q, widen); }, "convert", lane);
        };
        auto sum_into = [&](GemmTileArgs& g, bool overwrite, std::vector<tile::SlotAccess> accesses) {
            g.narrow_c = false;
            g.c = sums;
            accesses.push_back(overwrite ? tile::writes(sums_slot) : tile::updates(sums_slot));
            return accesses;
        };
        auto round_sums = [&] {
            const ConvertArgs narrow{
                .from = DType::F32, .to = problem.type, .count = elems, .in = sums, .out = c_whole(tw)};
            p.compute(
                c_accesses(tw, true, {tile::reads(sums_slot)}),
                [&kernels, narrow](Queue& q) { kernels.convert(q, narrow); }, "convert", lane);
        };
        if (first || releasing) {
            // A first tile takes the chunks in the order they can land; a last one (all up)
            // in k order, which frees the regions in the order the next panel wants them.
            std::vector<std::uint64_t> sequence = a_chunks->order();
            if (!first) std::sort(sequence.begin(), sequence.end());
            if (sums_apart) begin_sums();
            for (std::size_t i = 0; i < sequence.size(); ++i) {
                const std::uint64_t kc = sequence[i];
                const tile::SlotId as = a_chunks->current(kc);
                GemmTileArgs g = args;
                g.k = ck;
                g.a = p.view(as).sub(0, plan.tile_m * ck * w);
                g.b = b_at(0, kc * ck);
                g.beta = i == 0 ? options.beta : 1.0;
                const bool overwrite = i == 0 && !beta_nonzero;
                std::vector<tile::SlotAccess> ab{tile::reads(as), tile::reads(bs)};
                // Before the kernel's closure copies g: sum_into points it at the sums.
                const std::vector<tile::SlotAccess> accesses = sums_apart
                                                                   ? sum_into(g, overwrite, std::move(ab))
                                                                   : c_accesses(tw, overwrite, std::move(ab));
                p.compute(
                    accesses, [&kernels, g](Queue& q) { kernels.gemm(q, g); }, "gemm", lane);
                if (releasing) a_chunks->release(kc);
            }
            if (sums_apart) round_sums();
            return;
        }
        // The tiles between: one GEMM over the whole panel (one contiguous matrix), with a
        // piece of the next panel going up beside it. The last tile in column parts.
        a_chunks->prefetch(prefetch_cols);
        const std::vector<tile::SlotId> regions = a_chunks->regions();
        const bool drain_now = drains_in_parts && tw.t == last_tile;
        const std::vector<CPart> parts =
            drain_now ? c_parts(tw)
                      : std::vector<CPart>{{.slot = tw.cs, .j = 0, .cols = tw.nj, .lane = lane}};
        if (drain_now) drain_count = parts.size();
        for (const CPart& part : parts) {
            std::vector<tile::SlotAccess> accesses{tile::reads(bs)};
            for (const tile::SlotId r : regions) accesses.push_back(tile::reads(r));
            GemmTileArgs g = args;
            g.k = problem.k;
            const BufferView first_region = p.view(regions.front());
            g.a = BufferView(first_region.block, first_region.offset, plan.tile_m * g.k * w);
            g.b = b_at(part.j, 0);
            g.beta = options.beta;
            if (drain_now) {
                g.n = part.cols;
                g.c = p.view(part.slot).sub(0, tw.mi * part.cols * wc);
                accesses.push_back(beta_nonzero ? tile::updates(part.slot) : tile::writes(part.slot));
            } else {
                accesses = c_accesses(tw, !beta_nonzero, std::move(accesses));
            }
            p.compute(
                accesses, [&kernels, g](Queue& q) { kernels.gemm(q, g); }, "gemm", part.lane);
        }
    };
    // A row's first tiles with retained_b: their B chunks are those the previous row's last
    // tiles left in the ring (the serpentine walks back over the same columns: the row's
    // tile g over the previous row's last but g, B slot b_next − 1 − g, nothing uploaded
    // since), and they run k outer, each chunk of the new panel serving every tile of the
    // group as it lands, so the panel's upload overlaps the group's GEMMs.
    // After the first GemmPlan::retained_k_outer chunks (all up by the time the compute
    // gets there) the tiles finish one by one in the walk's order, each with one GEMM over
    // the chunks left, which lie back to back (nothing ahead: the panel's chunks land in
    // k order). The tiles after the group reuse the group's C slots in that order (tile
    // t's slot is t mod c_slots), and the B ring is turned so that they reuse its B slots
    // in that order too: a tile's slots free as it finishes, so the next tiles' B and
    // (β ≠ 0) C go up while the rest of the group computes.
    auto step_retained = [&](const std::vector<TileWork>& tiles) {
        const std::uint64_t k = problem.k;
        const std::uint64_t ck = a_chunks->chunk_k();
        const std::size_t size = b_ring.size();
        std::vector<tile::SlotId> kept;
        for (std::size_t g = 0; g < tiles.size(); ++g) kept.push_back(b_ring[(b_next + size - 1 - g) % size]);
        // The ring from b_next on: the streaming slots, then the kept ones from the
        // group's last tile to its first; the first tile's after the streaming slots.
        for (std::size_t g = 0; g < tiles.size(); ++g)
            b_ring[(b_next + size - tiles.size() + g) % size] = kept[g];
        const std::vector<std::uint64_t> sequence = a_chunks->order();
        const std::size_t outer = plan.retained_k_outer == 0
                                      ? sequence.size()
                                      : std::min<std::size_t>(plan.retained_k_outer, sequence.size());
        // Tile g over chunks [kc, kc + count) of the panel, the first `as` (the others
        // follow it in the same slot), reading `a_reads`.
        auto gemm = [&](std::size_t g, std::uint64_t kc, std::uint64_t count, tile::SlotId as,
                        std::vector<tile::SlotAccess> a_reads, bool first) {
            const TileWork& tw = tiles[g];
            GemmTileArgs args = tile_args(tw);
            args.lda = plan.tile_m;
            args.ldb = b_cut.ld(tw.nj, k);
            args.k = count * ck;
            const BufferView at = p.view(as);
            args.a = BufferView(at.block, at.offset, plan.tile_m * args.k * w);
            // Row kc·ck of the B chunk: k_rows, k × nj (ld k); else nj × k (ld nj).
            const std::uint64_t off = b_cut.k_rows ? kc * ck * w : kc * ck * tw.nj * w;
            args.b = p.view(kept[g]).sub(off, k * tw.nj * w - off);
            args.c = c_whole(tw);
            args.beta = first ? options.beta : 1.0;
            a_reads.push_back(tile::reads(kept[g]));
            p.compute(
                c_accesses(tw, first && !beta_nonzero, std::move(a_reads)),
                [&kernels, args](Queue& q) { kernels.gemm(q, args); }, "gemm",
                static_cast<unsigned>(tw.t % 2));
        };
        for (std::size_t i = 0; i < outer; ++i) {
            const std::uint64_t kc = sequence[i];
            const tile::SlotId as = a_chunks->current(kc);
            for (std::size_t g = 0; g < tiles.size(); ++g) gemm(g, kc, 1, as, {tile::reads(as)}, i == 0);
        }
        if (outer == sequence.size()) return;
        std::vector<tile::SlotAccess> rest;
        for (std::size_t i = outer; i < sequence.size(); ++i) {
            if (sequence[i] != sequence[outer] + (i - outer))
                throw UsageError(kComponent, "retained B: the panel's chunks land out of k order");
            rest.push_back(tile::reads(a_chunks->current(sequence[i])));
        }
        const tile::SlotId first_rest = a_chunks->current(sequence[outer]);
        for (std::size_t g = 0; g < tiles.size(); ++g)
            gemm(g, sequence[outer], sequence.size() - outer, first_rest, rest, outer == 0);
    };
    // Chunk kc of a tile: its operands (the panel's chunk, the streamed one), then the GEMM.
    auto step = [&](const TileWork& tw, std::uint64_t kc) {
        if (chunked) {
            step_chunked(tw);
            return;
        }
        const std::uint64_t k0 = kc * plan.tile_k;
        const std::uint64_t kn = std::min(plan.tile_k, problem.k - k0);
        const std::uint64_t a_bytes = tw.mi * kn * w;
        const std::uint64_t b_bytes = kn * tw.nj * w;
        tile::SlotId as{};
        tile::SlotId bs{};
        // The run's first GEMM, and an A panel row's first tile (its chunks may still be
        // landing), go piece by piece; their B chunk goes up ahead of the A pieces (uploads
        // run in program order), so the first piece's GEMM can start. A row's first B may
        // be up already (b_ahead, below).
        // Not the run's last tile where it drains in column parts (a single column of tiles).
        const bool pieced =
            !a_pieces.empty() &&
            (first_gemm || (a_panel && tw.inner == 0 && !(drains_in_parts && tw.t == last_tile)));
        first_gemm = false;
        const bool b_first = pieced || b_ahead;
        if (b_ahead) {
            bs = *std::exchange(b_ahead, std::nullopt);
        } else if (b_first) {
            bs = b_ring[b_next++ % b_ring.size()];
            b_cut.upload(p, bs, tw.j0, k0, tw.nj, kn);
        }
        if (a_panel) {
            as = panel.current(kc);
        } else {
            as = a_ring[a_next++ % a_ring.size()];
            detail::upload_chunk(p, a_cut, as, a_pieces.empty() ? detail::kNoPieces : a_pieces[as.index],
                                 piece_k, tw.i0, k0, tw.mi, kn);
        }
        if (b_panel) {
            bs = panel.current(kc);
        } else if (!b_first) {
            bs = b_ring[b_next++ % b_ring.size()];
            b_cut.upload(p, bs, tw.j0, k0, tw.nj, kn);
        }
        // The next panel goes up behind this step's streamed chunk, never in
        // front of it: an upload that must wait for a slot to be released would
        // otherwise hold up the chunks the next steps need.
        const bool last_in_row = tw.inner + 1 == inner_count;
        if (tw.has_next_panel && tw.inner > 0 && last_in_row && kc + 1 == k_chunks && a_panel &&
            !a_pieces.empty() && b_ring.size() > 1 && panel.releases_next_first(kc)) {
            // The next panel's first chunk goes up now, behind the row's last step: the next
            // row's first B goes ahead of it, so that row's first GEMM can start on its first
            // piece. Only at the row's last step: no later step of it needs a B slot.
            const tile::TileRect next_rect = grid.tile(tw.t / inner_count + 1, 0);
            b_ahead = b_ring[b_next++ % b_ring.size()];
            ++b_ahead_rows;
            b_cut.upload(p, *b_ahead, next_rect.col, 0, next_rect.size.cols,
                         std::min(plan.tile_k, problem.k));
        }
        if (tw.has_next_panel && tw.inner > 0) panel.prefetch(last_in_row, kc);
        if (tw.has_next_panel && tw.inner == 0 && inner_count == 1) panel.prefetch(true, kc);
        GemmTileArgs args = tile_args(tw);
        args.k = kn;
        args.a = a_view(as).sub(0, a_bytes);
        args.lda = a_cut.ld(tw.mi, kn);
        args.b = p.view(bs).sub(0, b_bytes);
        args.ldb = b_cut.ld(tw.nj, kn);
        // args.c: set per C part below (a split slot is reachable only through its parts).
        // β scales C once, on the first chunk; later chunks accumulate.
        args.beta = kc == 0 ? options.beta : 1.0;
        const bool overwrite = kc == 0 && !beta_nonzero;
        // Consecutive tiles alternate compute lanes; a tile's chunks stay on one (they
        // accumulate into its C in order). A panel row's first tile, in pieces, shares the
        // second tile's lane: on its own lane the second tile's first GEMM ran between
        // its pieces (H100 trace, f32), and the second tile's next B chunk, whose slot the
        // last piece frees, went up only then while compute waited for it (3.9 ms a row).
        const bool row_first_in_pieces = pieced && a_panel && tw.inner == 0 && inner_count > 1;
        const auto lane = static_cast<unsigned>((tw.t + (row_first_in_pieces ? 1 : 0)) % 2);
        // A's accesses: its slot, or every piece of it.
        std::vector<tile::SlotAccess> ab{tile::reads(bs)};
        if (a_pieces.empty()) {
            ab.push_back(tile::reads(as));
        } else {
            for (const tile::SlotId r : a_pieces[as.index]) ab.push_back(tile::reads(r));
        }
        if (!pieced) {
            // One GEMM per C part where the parts are split across lanes, and for the
            // last tile's last chunk (kDrainParts); else one over the whole tile.
            const bool drain_now = drains_in_parts && tw.t == last_tile && kc + 1 == k_chunks;
            if (split_c || drain_now) {
                const std::vector<CPart> parts = c_parts(tw);
                if (drain_now) drain_count = parts.size();
                for (const CPart& part : parts) {
                    GemmTileArgs half = args;
                    half.n = part.cols;
                    // Column j of the B chunk: k_rows, kn × nj (ld kn); else nj × kn (ld nj).
                    const std::uint64_t b_off = b_cut.k_rows ? part.j * kn * w : part.j * w;
                    half.b = p.view(bs).sub(b_off, b_bytes - b_off);
                    half.c = p.view(part.slot).sub(0, tw.mi * part.cols * wc);
                    std::vector<tile::SlotAccess> accesses = ab;
                    accesses.push_back(overwrite ? tile::writes(part.slot) : tile::updates(part.slot));
                    p.compute(
                        accesses, [&kernels, half](Queue& q) { kernels.gemm(q, half); }, "gemm", part.lane);
                }
                return;
            }
            args.c = c_whole(tw);
            p.compute(
                c_accesses(tw, overwrite, ab), [&kernels, args](Queue& q) { kernels.gemm(q, args); }, "gemm",
                lane);
            return;
        }
        // One GEMM per piece: k columns [k1, k1 + kr) of the A chunk
        // (contiguous, ld mi) and the matching rows of the B chunk.
        const std::vector<tile::SlotId>& pieces = a_pieces[as.index];
        args.c = c_whole(tw);
        for (std::uint64_t r = 0; r < pieces.size() && r * piece_k < kn; ++r) {
            const std::uint64_t k1 = r * piece_k;
            const std::uint64_t kr = std::min(piece_k, kn - k1);
            GemmTileArgs piece = args;
            piece.k = kr;
            piece.a = p.view(pieces[r]).sub(0, tw.mi * kr * w);
            const std::uint64_t b_off = b_cut.k_rows ? k1 * w : k1 * tw.nj * w;
            piece.b = p.view(bs).sub(b_off, b_bytes - b_off);
            if (r > 0) piece.beta = 1.0;
            p.compute(
                c_accesses(tw, r == 0 && overwrite, {tile::reads(pieces[r]), tile::reads(bs)}),
                [&kernels, piece](Queue& q) { kernels.gemm(q, piece); }, "gemm", lane);
        }
    };
    // After each GEMM, the next paced C piece (of an earlier tile), waiting for it.
    auto step_paced = [&](const TileWork& tw, std::uint64_t kc) {
        step(tw, kc);
        if (pacer) pacer->after_gemm(c_parts(tw).front().slot);
    };
    auto end_tile = [&](const TileWork& tw) {
        // Paced, every tile but the last goes down in column pieces of its parts, each
        // `offset` bytes into its part's slot, issued after the next tile's GEMMs.
        const bool paced = pacer && tw.t != last_tile;
        if (pacer && !paced) pacer->flush();
        const std::vector<CPart> whole = c_parts(tw);
        std::vector<std::pair<CPart, std::uint64_t>> parts;
        for (std::size_t r = 0; r < whole.size(); ++r) {
            const CPart& part = whole[r];
            // The tile's paced_pieces shared out over its parts (the first ones take the
            // remainder), so no piece is left for after the next tile's last GEMM.
            const std::uint64_t share = std::max<std::uint64_t>(
                1, paced_pieces / whole.size() + (r < paced_pieces % whole.size() ? 1 : 0));
            const std::uint64_t cols =
                paced ? tile::ceil_div(part.cols, std::min(share, part.cols)) : part.cols;
            for (std::uint64_t x = 0; x < part.cols; x += cols) {
                CPart piece = part;
                piece.j = part.j + x;
                piece.cols = std::min(cols, part.cols - x);
                parts.emplace_back(piece, x * tw.mi * wc);
            }
        }
        std::vector<detail::PacedDownloads::Issue> deferred;
        // The tile is written once its last part is (parts may land in any order).
        auto left = std::make_shared<std::atomic<std::size_t>>(parts.size());
        auto landed_part = [&progress, t = tw.index, left] {
            if (left->fetch_sub(1) == 1) progress.tile_done(t);
        };
        for (const auto& [part, offset] : parts) {
            const std::uint64_t j0 = tw.j0 + part.j;
            if (c_direct) {
                auto issue = [&p, slot = part.slot, offset,
                              host = c_out.data + (tw.i0 + j0 * c_out.ld_elements) * wc,
                              shape = c_part_shape(c_out, tw.mi, part.cols),
                              landed_part] { p.download_2d_to(slot, offset, host, shape, landed_part); };
                if (paced) {
                    deferred.push_back(std::move(issue));
                } else {
                    issue();
                }
                continue;
            }
            p.download(part.slot, 0, tw.mi * part.cols * wc,
                       [&c, tw, j0, cols = part.cols, landed_part](std::span<const std::byte> s) {
                           c.write(tw.i0, j0, tw.mi, cols, s.data(), tw.mi);
                           landed_part();
                       });
        }
        if (paced) pacer->defer(std::move(deferred));
        if (claimed) p.record_downloads(*landed[downloads_issued++ % landed.size()]);
    };
    // A single panel's first plan.group tiles go k outer: each panel chunk, as it
    // arrives, serves every tile of the group (GemmPlan::group).
    const bool single_panel = (a_panel || b_panel) && outer_count == 1;
    const std::uint64_t group =
        single_panel ? std::min<std::uint64_t>(std::max(plan.group, 1U), grid.count()) : 1;
    if (group > c_ring.size()) throw UsageError(kComponent, "the plan's group has more tiles than C slots");
    // Tiles [begin, end), the first `grouped` of them k outer.
    auto run_tiles = [&](std::uint64_t begin, std::uint64_t end, std::uint64_t grouped) {
        std::uint64_t first = begin;
        if (grouped > 1) {
            std::vector<TileWork> tiles;
            for (std::uint64_t t = begin; t < begin + grouped; ++t) tiles.push_back(begin_tile(t));
            for (std::uint64_t kc = 0; kc < k_chunks; ++kc) {
                for (const TileWork& tw : tiles) step_paced(tw, kc);
            }
            for (const TileWork& tw : tiles) end_tile(tw);
            first += grouped;
        }
        for (std::uint64_t t = first; t < end; ++t) {
            if (retained != 0 && t % inner_count == 0 && t >= inner_count) {
                // A row after the first: its first `retained` tiles as a group.
                std::vector<TileWork> tiles;
                for (std::uint64_t u = t; u < std::min(end, t + retained); ++u)
                    tiles.push_back(begin_tile(u));
                step_retained(tiles);
                for (const TileWork& tw : tiles) end_tile(tw);
                t += tiles.size() - 1;
                continue;
            }
            const TileWork tw = begin_tile(t);
            for (std::uint64_t kc = 0; kc < k_chunks; ++kc) step_paced(tw, kc);
            end_tile(tw);
        }
    };
    std::exception_ptr device_failure;
    if (claimed) {
        // The next run is asked for only once at most c_slots of the tiles described
        // have not yet landed: this thread describes work far ahead of the device (with
        // direct operands nothing holds it back), but no more C tiles than that can be
        // on the device at once, so tiles taken earlier would only be tiles no other
        // device can take. It waits on the event recorded after the download of tile
        // (described − c_slots − 1): unlike a count of tiles written (kept by the
        // drains, or by host tasks on the download queue that a failed queue skips),
        // that event completes even after a failure, and its wait() rethrows it.
        std::uint64_t described = 0;
        std::vector<bool> handed_out(grid.count(), false);
        const std::uint64_t in_flight = c_ring.size();
        // The group hides the panel's first upload, so only the first run has one.
        for (bool first_run = true;; first_run = false) {
            if (described > in_flight) {
                try {
                    landed[(described - in_flight - 1) % landed.size()]->wait();
                } catch (...) {
                    device_failure = std::current_exception();
                    break;  // finish() rethrows the queue's failure
                }
            }
            if (p.failed()) break;  // finish() rethrows the failure
            const auto [begin, end] = options.next_tiles();
            if (begin >= end) break;
            if (end > grid.count()) {
                throw UsageError(kComponent, fmt::format("next_tiles handed out tiles [{}, {}) of {}", begin,
                                                         end, grid.count()));
            }
            for (std::uint64_t t = begin; t < end; ++t) {
                if (handed_out[t]) {
                    throw UsageError(kComponent, fmt::format("next_tiles handed out tile {} twice", t));
                }
                handed_out[t] = true;
            }
            run_tiles(begin, end, first_run ? std::min(group, end - begin) : 1);
            described += end - begin;
        }
    } else {
        run_tiles(0, grid.count(), group);
    }
    if (pacer) pacer->flush();
    log::debug_if_slow(kComponent, start, 0.0, "the call up to every operation issued");
    const tile::PipelineStats stats = p.finish();
    log::debug_if_slow(kComponent, start, 0.0, "the call up to the last operation finished");
    // finish() rethrows what the event reported; should the queue not have kept it,
    // the run still must not pass for complete.
    if (device_failure) std::rethrow_exception(device_failure);

    GemmReport r;
    r.plan = plan;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double flops = 2.0 * static_cast<double>(problem.m) * static_cast<double>(problem.n) *
                         static_cast<double>(problem.k);
    r.tflops = r.seconds > 0 ? flops / r.seconds * 1e-12 : 0.0;
    r.bytes_moved = stats.bytes_uploaded + stats.bytes_downloaded;
    r.lower_bound_bytes = plan.lower_bound_bytes;
    r.peak_device_bytes = stats.peak_device_bytes;
    r.budget_bytes = stats.budget_bytes;
    r.hidden_transfer_fraction = stats.hidden_transfer_fraction;
    r.upload_busy_seconds = stats.upload_busy_seconds;
    r.compute_busy_seconds = stats.compute_busy_seconds;
    r.download_busy_seconds = stats.download_busy_seconds;
    r.read_busy_seconds = stats.read_busy_seconds;
    r.write_busy_seconds = stats.write_busy_seconds;
    r.pipeline = stats;
    r.c_tiles_split = split_c;
    r.drain_parts = drain_count;
    r.b_ahead = b_ahead_rows;
    r.paced_downloads = pacer ? pacer->paced() : 0;
    pipeline.reset();  // joins its threads, destroys its queues, returns its slots
    log::debug_if_slow(kComponent, start, 0.0, "the call up to the pipeline torn down");
    return r;
}

GemmReport gemm(Device& device, const io::MatrixSource& a, const io::MatrixSource& b, io::MatrixSink& c,
                const GemmOptions& options) {
    const auto start = std::chrono::steady_clock::now();
    const tile::GemmPlan plan = plan_gemm(device, a, b, c, options);
    GemmReport r = execute_gemm(device, plan, a, b, c, options);
    // Planning is part of the call's cost.
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double flops = 2.0 * static_cast<double>(plan.problem.m) * static_cast<double>(plan.problem.n) *
                         static_cast<double>(plan.problem.k);
    r.tflops = r.seconds > 0 ? flops / r.seconds * 1e-12 : 0.0;
    return r;
}

}  // namespace outcore::ops
