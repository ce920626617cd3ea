// outcore/ops/gemm.hpp — out-of-core GEMM: C = α·op(A)·op(B) + β·C under a device budget.
//
//   io::NpyMatrixReader a("A.npy"), b("B.npy");
//   io::NpyMatrixWriter c("C.npy", m, n, DType::F32, /*force=*/false);
//   ops::GemmReport r = ops::gemm(device, a, b, c, {.type = DType::F32, .budget_bytes = 256 * kMiB});
//   c.commit();
//   r.plan.tile_m;  r.tflops;  r.hidden_transfer_fraction;  r.peak_device_bytes <= r.budget_bytes
//
// The operands never need to fit on the device: gemm plans tiles with tile::plan_gemm
// (no block size to pick), then streams them through a tile::Pipeline. Each C tile
// stays on the device while its k-panels are accumulated into it, one GEMM call per
// k-chunk (β on the first chunk only, α on every chunk, no atomics); the
// APanelResident / BPanelResident schedules keep a panel of A (B) on the device and
// reuse it across a whole row (column) of C tiles.
//
// Shapes and layouts. Sources and sinks are logical matrices (io::MatrixSource /
// MatrixSink) that hand out column-major blocks whatever their storage: op(A) is A
// (m × k) or, with trans_a, Aᵀ where A is k × m; likewise B (k × n, or n × k with
// trans_b); C is m × n. A row-major caller (NumPy's C order, a row-major
// io::HostMatrix) needs nothing special: the io layer presents the logical matrix and
// transposes while packing a tile. A transposed operand is packed in its stored
// orientation (a k-chunk of Aᵀ is read as the kk × mi block of A) and the kernel is
// told trans_a, so no transpose happens on the device.
//
// β ≠ 0 reads the input C from GemmOptions::c_in (a MatrixSource of C's shape; it
// may be the same object or memory as the sink: each C tile is read before it is
// written). k = 0 is rejected like any empty problem.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>

#include "outcore/alloc/block_cache.hpp"
#include "outcore/device/device.hpp"
#include "outcore/device/dtype.hpp"
#include "outcore/device/kernels.hpp"
#include "outcore/io/matrix.hpp"
#include "outcore/tile/gemm_plan.hpp"
#include "outcore/tile/pipeline.hpp"
#include "outcore/tile/queue_cache.hpp"
#include "outcore/tile/staging_cache.hpp"

namespace outcore::ops {

/// GemmOptions::fill_part_bytes where it is 0.
inline constexpr std::uint64_t kDefaultFillPartBytes = 32ULL << 20;

struct GemmOptions {
    /// Input element type: F32, F64, BF16 or F16 (16-bit floats store C in f32).
    DType type = DType::F32;
    /// FastTF32 with F32 data where the backend has it (Kernels::supports_gemm).
    GemmCompute compute = GemmCompute::Exact;
    bool trans_a = false;
    bool trans_b = false;
    double alpha = 1.0;
    double beta = 0.0;
    /// Device bytes the run may hold; 0 = the device's recommended working set.
    std::uint64_t budget_bytes = 0;
    /// Slots per streamed operand (2 or 3).
    std::uint32_t pipeline_depth = 2;
    /// Called with the fraction of C written (0..1], from a pipeline thread, never
    /// concurrently with itself. Must not throw (a throw fails the run).
    std::function<void(double)> progress = {};

    /// The input C for β ≠ 0 (required then, ignored otherwise); shape m × n, C's type.
    const io::MatrixSource* c_in = nullptr;
    /// Force a schedule instead of the planner's choice (tests, benchmarks).
    std::optional<tile::GemmSchedule> schedule = std::nullopt;
    /// Force tiles (all three non-zero, with `schedule`): tile::plan_gemm_fixed.
    std::uint64_t tile_m = 0, tile_n = 0, tile_k = 0;
    /// With forced tiles of a single panel: GemmPlan::group (1: tile by tile).
    std::uint32_t group = 1;
    /// With forced tiles: C slots (0: as the planner would; tile::plan_gemm_fixed).
    std::uint32_t c_slots = 0;
    /// Device rates for the planner's time model: FLOP/s of this type, host→device,
    /// device→host and both-at-once bytes/s. 0 = take them from tile::cached_rates
    /// when measure_rates, else unknown (the planner then minimises bytes moved).
    double compute_flops = 0;
    double link_bytes_per_second = 0;
    double link_d2h_bytes_per_second = 0;
    double link_duplex_bytes_per_second = 0;
    /// Measure the device's rates once per process (tile/rates.hpp) for the fields above
    /// left at 0.
    bool measure_rates = true;
    /// Host threads packing tiles from the sources (0: half the cores, 2 to 8) and
    /// writing C (0: 1).
    std::uint32_t reader_threads = 0;
    std::uint32_t writer_threads = 0;
    /// A chunk packed from a source that is not device-readable (a file, pageable
    /// memory) is filled in parts of at least this many bytes, at most one per reader
    /// thread, so that several threads read it at once (0: kDefaultFillPartBytes, 32 MiB).
    std::uint64_t fill_part_bytes = 0;
    /// Per-queue busy times and the hidden-transfer fraction (two host tasks per op).
    bool measure_busy = true;
    /// Pinned staging kept across calls (null: allocated and freed by this call).
    tile::StagingCache* staging_cache = nullptr;
    /// Device memory for the slots kept across calls (alloc/block_cache.hpp; null: made
    /// and freed by this call). Repeated runs of one plan then allocate nothing.
    alloc::BlockCache* device_cache = nullptr;
    /// Queues kept across calls (tile/queue_cache.hpp; null: made and destroyed by this call).
    tile::QueueCache* queue_cache = nullptr;
    /// Compute queues the tiles alternate over, 1 or 2 (0: DeviceInfo::compute_lanes).
    /// Each takes its own GEMM workspace out of the budget.
    std::uint32_t compute_lanes = 0;
    /// With two lanes, compute a tile of several k chunks as two column parts, one per
    /// lane, so one lane's GEMM tail can overlap the other's work (src/ops/gemm.cpp,
    /// CPart). Off by default: on the H200's Vulkan driver it made the square-C plan
    /// 15 % slower (BENCHMARKS.md, "Ninth run"). Off: a tile's chunks run on one
    /// lane, consecutive tiles alternate.
    bool split_c_tiles = false;
    /// Download each C tile in pieces, one after each of the next tile's GEMMs, instead
    /// of whole after its own last GEMM (src/ops/gemm_pacing.hpp): for links whose two
    /// directions share one budget, where a whole tile's download starves the next
    /// chunks' uploads. Unset: paced where both directions at once carry less than 1.5×
    /// one direction (the given or measured rates). Only where C is device-readable, the
    /// tiles are not handed out run by run, and a tile has at least three k chunks.
    std::optional<bool> pace_c_downloads = std::nullopt;
    /// The A panel of an a-panel plan over the whole k in chunks along k
    /// (tile::chunk_a_panel, GemmPlan::a_chunk_k), so the next panel's first chunks go up
    /// during the current row in the budget a whole second panel would not fit: unset,
    /// as the planner's default (src/ops/gemm.cpp, kChunkedPanels: chunked wherever
    /// tile::chunk_a_panel finds a chunk that prefetches anything, and where the planner's
    /// tiles (not forced ones) leave no room for that — or, with a 16-bit C, hold less of
    /// the next panel ahead than narrower ones — in narrower tiles,
    /// tile::narrower_chunked_panel); 0, never; else
    /// chunks of this many columns (UsageError where the plan cannot have them). A 16-bit
    /// C also takes an f32 tile of sums from the budget and needs Kernels::convert (the
    /// default leaves its panel whole where the device lacks it). Never with
    /// split_c_tiles, one_call_per_chunk or next_tiles.
    std::optional<std::uint64_t> panel_chunk_k = std::nullopt;
    /// Rows of an a-panel plan over the whole k that walk C in a serpentine and keep the
    /// B chunks they share (tile::retain_b_chunks, GemmPlan::retained_b; the panel then in
    /// chunks with nothing ahead): unset, as the planner's default (src/ops/gemm.cpp,
    /// kRetainedB); 0, never; else this many (UsageError where the plan cannot have them).
    /// Not with panel_chunk_k, split_c_tiles, one_call_per_chunk or next_tiles.
    std::optional<std::uint32_t> retained_b = std::nullopt;
    /// With B chunks retained (by the planner or retained_b): how many of a new panel's
    /// chunks the row's first tiles compute k outer before finishing tile by tile
    /// (GemmPlan::retained_k_outer), 1 to the panel's chunk count; unset, as
    /// tile::retain_b_chunks chooses. For benchmarks; UsageError where the plan retains
    /// nothing or the count is out of range.
    std::optional<std::uint32_t> retained_k_outer = std::nullopt;
    /// One GEMM call per k chunk of every C tile: the run's first chunk not in k-pieces
    /// and its last tile not drained in column parts (src/ops/gemm.cpp). Either splits
    /// one GEMM into several calls, which may sum in another order; with this set C is
    /// bit for bit the same however the tiles are shared out. gemm_on_devices sets it
    /// for its runs, so its C equals one device's gemm with it set.
    bool one_call_per_chunk = false;
    /// Hands the call its C tiles run by run instead of all of them (gemm_on_devices:
    /// devices sharing one panel's tiles, each keeping the panel resident across its
    /// runs). Called on the calling thread before each run, once no more of the tiles
    /// handed out so far are still to come off the device than the plan has C slots (a
    /// device holds no tiles it could not yet have on the device, which other devices
    /// could take); returns the next [begin, end) of tile indices in the order the plan
    /// walks C (c_grid() row-major, column-major for BPanelResident), or an empty range
    /// to end the call. A range past the grid, or one with a tile handed out before, is
    /// a UsageError. Tiles never handed out are neither computed nor written, and
    /// `progress` still counts over the whole grid (it then never reaches 1); a panel
    /// is uploaded when a run first needs it, and the next panel is not prefetched.
    /// Null: every tile, in order.
    std::function<std::pair<std::uint64_t, std::uint64_t>()> next_tiles = {};
    /// Called with a C tile's index (as next_tiles numbers them) once that tile is
    /// written — to the sink, or for a direct sink, into its memory — for bookkeeping
    /// (which of next_tiles' runs are complete; drains may finish out of order). Runs
    /// where `progress` does: on a writer thread, or the download queue's host thread,
    /// which must not call the device; keep it short. A throw fails the call.
    std::function<void(std::uint64_t)> tile_written = {};
};

struct GemmReport {
    tile::GemmPlan plan{};
    /// Wall time of the whole call (planning, allocation, streaming, last write).
    double seconds = 0;
    /// 2·m·n·k / seconds / 1e12.
    double tflops = 0;
    std::uint64_t bytes_moved = 0;        ///< measured: uploaded + downloaded
    std::uint64_t lower_bound_bytes = 0;  ///< Smith et al.'s bound for this budget
    std::uint64_t peak_device_bytes = 0;  ///< from the Statistics adaptor under the Budget
    std::uint64_t budget_bytes = 0;
    double hidden_transfer_fraction = 1.0;  ///< see tile::PipelineStats
    double upload_busy_seconds = 0;
    double compute_busy_seconds = 0;
    double download_busy_seconds = 0;
    double read_busy_seconds = 0;    ///< packing tiles from the sources, all reader threads
    double write_busy_seconds = 0;   ///< writing C tiles to the sink
    tile::PipelineStats pipeline{};  ///< everything the pipeline measured
    /// Whether C tiles were computed as two column parts on two lanes
    /// (GemmOptions::split_c_tiles): then a tile of two or more columns makes two GEMM
    /// calls per k chunk, and plan.kernel_calls counts one.
    bool c_tiles_split = false;
    /// Column parts the run's last C tile was computed (its last k chunk) and
    /// downloaded in, so the run ends one part's download after its last GEMM; 1: whole.
    /// Each part past the first adds a GEMM call plan.kernel_calls does not count; 1
    /// also for a run that did not compute the problem's last tile.
    std::uint64_t drain_parts = 1;
    /// C download pieces issued after a later tile's GEMM (GemmOptions::pace_c_downloads;
    /// 0: not paced).
    std::uint64_t paced_downloads = 0;
    /// A-panel rows whose first B chunk went up ahead of their panel's first chunk, which
    /// waited for the row before to free its slot (so the row's first GEMM starts on its
    /// first piece of A rather than behind the whole chunk).
    std::uint64_t b_ahead = 0;
};

/// The problem `gemm` would solve and the plan it would run, without running it (the
/// CLI prints it first). Throws UsageError for disagreeing shapes or types, a type
/// the device's kernels lack, a budget below the minimum (stating it).
[[nodiscard]] tile::GemmPlan plan_gemm(Device& device, const io::MatrixSource& a, const io::MatrixSource& b,
                                       const io::MatrixSink& c, const GemmOptions& options);

/// Runs `plan` (from plan_gemm above, for the same operands and options). Writes every
/// element of C exactly once (a C tile after its last k-chunk); does not commit() the
/// sink. Throws the first failure of the run (UsageError, OutOfMemory, IoError,
/// BackendError ...) after stopping it and freeing everything it allocated.
/// Thread safety: one call per device queue set; concurrent calls on one device are
/// fine (each makes its own queues and memory) as far as the device allows.
GemmReport execute_gemm(Device& device, const tile::GemmPlan& plan, const io::MatrixSource& a,
                        const io::MatrixSource& b, io::MatrixSink& c, const GemmOptions& options);

/// plan_gemm + execute_gemm.
GemmReport gemm(Device& device, const io::MatrixSource& a, const io::MatrixSource& b, io::MatrixSink& c,
                const GemmOptions& options);

/// The PlanLimits gemm uses for this device, budget and options (budget 0 resolved to
/// the device's recommended working set; rates measured once if options ask for it,
/// and then gemm_shape_flops set to measure tile shapes on `device`, which must
/// outlive the limits).
[[nodiscard]] tile::PlanLimits gemm_limits(Device& device, const GemmOptions& options);

/// The GemmProblem for these operands and options; UsageError when shapes or types
/// disagree.
[[nodiscard]] tile::GemmProblem gemm_problem(const io::MatrixSource& a, const io::MatrixSource& b,
                                             const io::MatrixSink& c, const GemmOptions& options);

}  // namespace outcore::ops
