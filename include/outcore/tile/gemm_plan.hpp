// outcore/tile/gemm_plan.hpp — how an out-of-core GEMM is cut into tiles under a budget.
//
//   tile::GemmProblem p{.m = 32768, .n = 32768, .k = 32768, .type = DType::F32,
//                       .compute = GemmCompute::FastTF32};
//   tile::PlanLimits lim{.budget_bytes = 3 * kGiB, .compute_flops = 330e12,
//                        .link_bytes_per_second = 55.3e9};
//   tile::GemmPlan plan = tile::plan_gemm(p, lim);   // A-panel resident, 16384-row panels
//   plan.device_bytes;   // ≤ 3 GiB, checked before any data moves
//   plan.bytes_moved;    // exactly what the executor will move; ≥ plan.lower_bound_bytes
//
// Pure: no device calls. Every matrix is column-major (BLAS); op(A) is m×k, op(B) k×n,
// C m×n. C tiles are tile_m × tile_n; k is streamed in chunks of tile_k (always
// shrinking at the tail: accumulation is not write-once). bf16 inputs are 2 bytes and
// C is f32 (4 bytes); tf32 is f32 data computed with GemmCompute::FastTF32.
//
// Why tiles hide transfers: a device-resident C tile of side t needs 2·t·tk·w bytes of
// A and B per k-chunk and does 2·t²·tk flops on them, so its uploads hide behind its
// compute when t ≥ w·F/B (w bytes per element, F FLOP/s, B bytes/s). More generally a
// block of C of shape r × c that reads its operands once hides them when the harmonic
// mean 2/(1/r + 1/c) ≥ w·F/B; GemmPlan::reuse_side() is that mean (docs/tiling.md).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "outcore/device/dtype.hpp"
#include "outcore/device/kernels.hpp"
#include "outcore/tile/grid.hpp"
#include "outcore/tile/limits.hpp"

namespace outcore::tile {

/// C = α·op(A)·op(B) + β·C, with op(A) m×k and op(B) k×n.
struct GemmProblem {
    std::uint64_t m = 0, n = 0, k = 0;
    DType type = DType::F32;  ///< F32, F64 or BF16 (C is f32 for bf16)
    GemmCompute compute = GemmCompute::Exact;
    bool trans_a = false;  ///< transposes change which host bytes form a tile, not how many
    bool trans_b = false;
    bool beta_nonzero = false;  ///< C is read (uploaded) before it is accumulated into
    /// bf16 or f16 inputs only: C in the inputs' type rather than f32 (half the bytes
    /// down). A 16-bit C cannot carry partial sums between k chunks, so every plan has
    /// one chunk over the whole k (tile_k = k).
    bool narrow_c = false;
    /// Edge C tiles: Shrink (default) or ShiftInwards (full-size tiles for kernels
    /// that need one shape; not allowed with beta_nonzero, where an overlapped
    /// element would be scaled by β twice).
    TailPolicy tail = TailPolicy::Shrink;
};

/// Which operand stays on the device while the others stream past it.
enum class GemmSchedule : unsigned char {
    /// A C tile stays resident while A (tile_m × tile_k) and B (tile_k × tile_n)
    /// chunks stream through `depth` slots each. A is read ceil(n/tile_n) times, B
    /// ceil(m/tile_m) times. Tiles run in c_grid() row-major order.
    SquareC,
    /// A row panel of A (tile_m × k) stays resident while every C tile of that row is
    /// computed with streamed B chunks: A is read once, B ceil(m/tile_m) times. The
    /// panel lives in a ring of chunk slots (see GemmPlan::a_slots): the first tile
    /// of a row consumes it chunk by chunk as it arrives, and the next panel fills
    /// the spare slots, then each slot the last tile of the row has finished with.
    /// Tiles run in c_grid() row-major order.
    APanelResident,
    /// Symmetric: a column panel of B (k × tile_n) stays resident, A chunks stream;
    /// B is read once, A ceil(n/tile_n) times. Tiles run column by column.
    BPanelResident,
};

/// "square-c", "a-panel", "b-panel".
[[nodiscard]] std::string_view to_string(GemmSchedule schedule) noexcept;

/// A chosen tiling and everything it will cost. Slot sizes are rounded up to
/// min_offset_alignment, so slots laid back to back in one heap are all aligned.
struct GemmPlan {
    GemmProblem problem{};
    GemmSchedule schedule = GemmSchedule::SquareC;
    TailPolicy tail = TailPolicy::Shrink;
    std::uint64_t tile_m = 0, tile_n = 0, tile_k = 0;  ///< each ≤ its extent
    std::uint32_t depth = 0;  ///< the ring depth per input stream (limits.pipeline_depth)
    /// Slots actually allocated. A streamed operand has a ring of min(depth, chunks
    /// streamed) chunk slots. A resident panel is a ring of k_chunks() +
    /// prefetch_chunks chunk slots: chunk c of panel r goes to slot (r·k_chunks() + c)
    /// mod a_slots (b_slots), uploaded as soon as that slot's previous chunk has had
    /// its last use — so the next panel streams in behind the current one.
    /// c_slots: 1 for a single C tile, else 2 (one computes while the previous one
    /// downloads), or 3 where the budget left after prefetch_chunks holds one more
    /// and there are at least 3 C tiles (GEMMs run ahead of C downloads slower than a
    /// GEMM); at least `group`, and retained_b + 1 where B chunks are retained.
    std::uint32_t a_slots = 0, b_slots = 0, c_slots = 0;
    /// Extra panel chunk slots bought with budget the minimum footprint leaves over
    /// (0 for SquareC or a single panel): how far the next panel can upload ahead.
    std::uint32_t prefetch_chunks = 0;
    /// Panel schedules with a single panel (the whole of A, or of B, resident): the
    /// first `group` C tiles are computed k chunk by k chunk together (k outer), so
    /// the panel's upload overlaps `group` tiles of compute instead of one. The
    /// panel's load is the run's lead-in (4 GiB of A at 55 GB/s is 78 ms, against
    /// 37 ms of tf32 compute for one 32768×5632 tile): a group that computes about
    /// as long as the panel loads hides it. c_slots ≥ group. 1: tile by tile. Only
    /// plan_gemm_fixed sets it: on the H200 the grouped tf32 plans the search had
    /// preferred ran slower than ungrouped ones (docs/tiling.md, "Groups").
    std::uint32_t group = 1;
    /// APanelResident with tile_k = k only, 0 otherwise: the A panel ring is cut along k
    /// into chunks of a_chunk_k columns (a_slots of them, a_slot_bytes each, laid back to
    /// back in one device slot) while B still goes up whole-k per tile (chunk_a_panel).
    /// A row's first tile computes chunk by chunk as they arrive, its last chunk by chunk
    /// as the next panel takes their slots, the tiles between with one GEMM over the
    /// panel (even panels hold the ring's first k_chunks regions, odd ones its last, so a
    /// panel never wraps); prefetch_chunks of the next panel go up in pieces beside those
    /// middle tiles.
    std::uint64_t a_chunk_k = 0;
    /// A chunked panel with nothing of the next panel ahead (prefetch_chunks 0) only, 0
    /// otherwise: the rows walk C in a serpentine (odd rows right to left), so a row's
    /// last `retained_b` tiles and the next row's first ones share their B columns; their
    /// B chunks stay in the B ring (b_slots = retained_b + the streaming ring, at least 2)
    /// and are not uploaded again,
    /// and the next row's first retained_b tiles run k outer as a group (c_slots ≥
    /// retained_b + 1), one GEMM per tile as each chunk of the new panel lands, so that
    /// panel's upload overlaps retained_b tiles of compute instead of one
    /// (retain_b_chunks; docs/tiling.md, "A serpentine with retained B"). With β ≠ 0 the
    /// group's C inputs queue behind the new panel's chunks, so the group then starts only
    /// once the panel is up: the bytes are saved, the overlap is not.
    std::uint32_t retained_b = 0;
    /// With retained_b only: how many of the new panel's chunks the group computes k
    /// outer; the rest go tile by tile in the walk's order, one GEMM over those chunks
    /// each (they lie back to back). Once the panel has landed a group that is
    /// compute-bound gains nothing from chunk-sized GEMMs (a 16384×512×4096 tf32 GEMM ran
    /// at 0.74 of in-core on an H100, the whole-k one at 1.04), and finishing its tiles
    /// one at a time frees their B and C slots for the next tiles, which reuse them in
    /// that order (the executor turns the B ring so). retain_b_chunks sets it to the chunks that land before
    /// the group's compute reaches the last one (all where the rates are unknown); 0 here means all.
    /// docs/tiling.md, "A serpentine with retained B".
    std::uint32_t retained_k_outer = 0;
    /// A chunked panel with a 16-bit C (GemmProblem::narrow_c) only, 0 otherwise: one f32
    /// tile of tile_m × tile_n (aligned) where a row's first tile, and its last where a
    /// next panel follows, sum their per-chunk GEMMs before one conversion rounds them
    /// into the C slot (conversions are not in kernel_calls); the other tiles go through
    /// one GEMM that rounds as it stores. In device_bytes.
    std::uint64_t acc_bytes = 0;
    std::uint64_t a_slot_bytes = 0;       ///< one A chunk, tile_m × tile_k (× a_chunk_k where set)
    std::uint64_t b_slot_bytes = 0;       ///< one B chunk, tile_k × tile_n
    std::uint64_t c_slot_bytes = 0;       ///< one C tile (f32 for bf16)
    std::uint64_t device_bytes = 0;       ///< Σ slots·slot bytes; never above the budget
    std::uint64_t bytes_to_device = 0;    ///< A and B uploads (with re-reads) + C when β ≠ 0
    std::uint64_t bytes_to_host = 0;      ///< C downloads
    std::uint64_t bytes_moved = 0;        ///< bytes_to_device + bytes_to_host
    std::uint64_t lower_bound_bytes = 0;  ///< no schedule within the budget moves less
    /// GEMM calls: C tiles × k chunks (a_chunk_k: chunk_a_panel's or retain_b_chunks's).
    std::uint64_t kernel_calls = 0;
    double flop_count = 0;  ///< 2·m·n·k (overlapped C counted twice)
    /// Model estimates (0 when the rates in PlanLimits are unknown): compute =
    /// flops/F, call overhead = calls·kernel_call_seconds, transfer from the link
    /// model (all bytes, both directions), fill = the first chunks' upload, drain =
    /// the last C tile's download. total: for SquareC max(fill + compute, transfer +
    /// one chunk's GEMM) + call overhead + drain; for panel schedules a sum of phases
    /// that charges each panel switch what the prefetch slots cannot hide
    /// (docs/tiling.md, "time model"). Always total ≥ max(compute, transfer).
    double compute_seconds = 0, call_overhead_seconds = 0, transfer_seconds = 0;
    double fill_seconds = 0, drain_seconds = 0, total_seconds = 0;
    /// The measured rate of this plan's tile shape the estimates used
    /// (PlanLimits::gemm_shape_flops), or 0: they used PlanLimits::compute_flops.
    double shape_flops = 0;

    /// The grid of C tiles (m × n by tile_m × tile_n, with the plan's tail policy).
    [[nodiscard]] TileGrid c_grid() const;
    /// Number of k chunks per C tile: ceil(k / tile_k).
    [[nodiscard]] std::uint64_t k_chunks() const noexcept;
    /// The side of a square C block with the same operand reuse: harmonic mean of
    /// (tile_m, tile_n) for SquareC, (tile_m, n) for APanelResident, (m, tile_n) for
    /// BPanelResident. Transfers hide when reuse_side() ≥ w·F/B.
    [[nodiscard]] double reuse_side() const noexcept;
};

/// The most tile shapes one plan_gemm call asks PlanLimits::gemm_shape_flops for. Eight:
/// with six, the Vulkan GEMM on an H100 sometimes probed only k chunks up to 1024 (the
/// single rate ranks shallow chunks first) and ran 16384×2816×1024 at 0.878 of in-core
/// where the deeper 1536 and 2048 chunks, unprobed, ran at 0.90–0.91 (BENCHMARKS.md).
inline constexpr std::size_t kMaxShapeProbes = 8;

/// Input element bytes of a GEMM type (UsageError for types GEMM does not take).
[[nodiscard]] std::uint32_t gemm_input_bytes(DType type);
/// C element bytes: f32 for bf16 inputs, else the input size.
[[nodiscard]] std::uint32_t gemm_output_bytes(DType type);
/// C element bytes of a problem: gemm_output_bytes, or the input size with narrow_c.
[[nodiscard]] std::uint32_t gemm_c_bytes(const GemmProblem& problem);

/// The best plan for the problem: among all schedules and candidate tiles that fit
/// the budget, the smallest estimated time (ties: fewer bytes moved, then larger
/// tiles); with rates unknown, the fewest bytes moved. Tiles of at least 256 in each
/// dimension (or the whole dimension) are preferred whenever any fit.
/// Throws UsageError for an empty or unsupported problem, bad limits, a problem whose
/// operands overflow 64-bit byte counts, and a budget below gemm_minimum_budget()
/// (the message states the minimum). Pure and thread-safe, except that it calls
/// limits.gemm_shape_flops when set (for at most kMaxShapeProbes tile shapes).
[[nodiscard]] GemmPlan plan_gemm(const GemmProblem& problem, const PlanLimits& limits);

/// As plan_gemm, restricted to one schedule (benchmarks, tests, expert overrides).
[[nodiscard]] GemmPlan plan_gemm(const GemmProblem& problem, const PlanLimits& limits, GemmSchedule schedule);

/// The plan with exactly these tiles, schedule, GemmPlan::group and `c_slots` C slots (0: as
/// plan_gemm would choose them for these tiles), costed as plan_gemm would (tiles are clamped
/// to their extents). Throws UsageError when it does not fit the budget or max_buffer_bytes,
/// a group > 1 is asked of a plan with more than one panel, or c_slots is 1 or more than the
/// C tiles. A group needs a C slot per tile: c_slots below it are raised to it. For comparing
/// against hand-picked plans.
[[nodiscard]] GemmPlan plan_gemm_fixed(const GemmProblem& problem, const PlanLimits& limits,
                                       GemmSchedule schedule, std::uint64_t tile_m, std::uint64_t tile_n,
                                       std::uint64_t tile_k, std::uint32_t group = 1,
                                       std::uint32_t c_slots = 0);

/// The plan with its A panel ring cut along k (GemmPlan::a_chunk_k): an APanelResident
/// plan with tile_k = k, at least two panels (the last may be shorter: its chunks keep
/// the leading dimension tile_m in the regions) and A not transposed. A 16-bit C (narrow_c) also takes an f32
/// tile of sums (GemmPlan::acc_bytes) out of the budget, and needs a device that converts f32 to the C type
/// (Kernels::supports_convert; the executor checks). chunk_k 0 picks the chunk — of k halved down to
/// kMinPanelChunkK, those whose spare regions hold at least one chunk of the next panel, the nearest to
/// kPanelChunkK — and returns the plan unchanged where none prefetches anything; a given chunk_k must divide
/// k and fit (UsageError otherwise). Bytes moved are the plan's; of the time estimates only the calls'
/// overhead follows the new kernel_calls.
[[nodiscard]] GemmPlan chunk_a_panel(const GemmPlan& plan, const PlanLimits& limits,
                                     std::uint64_t chunk_k = 0);
/// For an a-panel plan over the whole k (two or more panels, A not transposed): the plan
/// of the same rows in narrower tiles — the multiples of kNarrowerWidthStep below its width,
/// down to a third of it — cut by chunk_a_panel, that holds more columns of the next panel
/// ahead than chunk_a_panel makes of the plan itself (any, where it leaves the plan whole):
/// the most columns ahead, then the fastest by the plans' estimates (ties: the wider), of
/// those at most kNarrowerSlack slower than the plan by them; none where none qualifies, the
/// plan's own chunks hold the whole next panel, or the plan is another. With unknown rates
/// every estimate is 0 and only the columns ahead decide. The candidates' shapes go to
/// limits.gemm_shapes_ahead first, where set. ops::plan_gemm uses it on the CUDA default path
/// where the planner's tiles leave no room for chunks (a 16-bit C's f32 tile of sums can tip
/// them) and, for a 16-bit C, also where they hold less ahead than narrower ones. On H100s
/// (docs/tiling.md, "The A panel in chunks") a bf16 plan with a bf16 C in 16384×1536 tiles,
/// left whole, ran 155 ms where 16384×768 or ×1024 in chunks (4096 columns ahead) ran
/// 136–146 ms and 16384×512 (8192 ahead) 136–137 ms; the phase model prices neither chunks
/// nor what goes up ahead, so the search cannot see that.
[[nodiscard]] std::optional<GemmPlan> narrower_chunked_panel(const GemmPlan& plan, const PlanLimits& limits);
/// Where `plan` holds all of A as one panel (an a-panel plan with tile_m ≥ m), whose upload
/// is the run's lead-in: the plan of two equal panels over the whole k (tile_m = m/2
/// rounded up to 256) with the A panel in chunks and the whole next panel ahead, of the
/// widths kTwoPanelWidths that fit, the fastest by the plans' estimates; none where none
/// fits or the plan is another. On H100s such plans ran tf32 at 6 GiB 0.4–3 points of
/// in-core faster than the planner's single whole-A panel (docs/tiling.md, "The A panel in
/// chunks"); the phase model does not price chunking, so the search cannot see it.
[[nodiscard]] std::optional<GemmPlan> two_chunked_panels(const GemmPlan& plan, const PlanLimits& limits);
/// An a-panel plan over the whole k with two or more panels, A not transposed and an f32
/// or f64 C (not a 16-bit one), as GemmPlan::retained_b describes: the panel in chunks of
/// kPanelChunkK columns (or the nearest that divides k, down to kMinPanelChunkK) with
/// nothing of the next panel ahead, and the budget the panel, B's streaming ring (the
/// plan's b_slots, at least 2) and C's slots leave spent on retained B chunks, each with
/// its C slot — `retained`
/// of them (UsageError where they do not fit), or as many as fit (0: the largest, up to
/// half a row's tiles: a row's last retained tiles must all have gone up in that row); the plan unchanged
/// where fewer than kMinRetainedB fit, where (retained 0) they would save less than `min_share` of
/// the plan's bytes up, or the plan is another. B's bytes up drop by the retained tiles' B at
/// each row change; kernel_calls follow the group's GEMMs (GemmPlan::retained_k_outer: from
/// the limits' rates, else all chunks k outer; it asks limits.gemm_shape_flops, where set,
/// for one shape, tile_m × tile_n × the chunk); the time estimates are the plan's.
[[nodiscard]] GemmPlan retain_b_chunks(const GemmPlan& plan, const PlanLimits& limits,
                                       std::uint32_t retained = 0, double min_share = 0);
/// A plan that retains B chunks with its group computing `outer` of a new panel's chunks k
/// outer (GemmPlan::retained_k_outer, 1 to a_slots), kernel_calls recounted; UsageError for
/// another plan or count.
[[nodiscard]] GemmPlan with_retained_k_outer(const GemmPlan& plan, std::uint32_t outer);
/// The fewest retained B chunks retain_b_chunks makes a plan of by itself.
inline constexpr std::uint32_t kMinRetainedB = 2;
/// The tile widths two_chunked_panels tries: those measured (BENCHMARKS.md, ninth session).
inline constexpr std::array<std::uint64_t, 2> kTwoPanelWidths{1024, 512};
/// The step by which narrower_chunked_panel narrows a plan's tiles, and how much slower
/// than the plan by the estimates its choice may be (chunks were worth 0.5–7 % on an H100).
inline constexpr std::uint64_t kNarrowerWidthStep = 256;
inline constexpr double kNarrowerSlack = 0.05;
/// The narrowest A chunk chunk_a_panel picks by itself (a row's first and last tiles
/// run one GEMM per chunk).
inline constexpr std::uint64_t kMinPanelChunkK = 2048;
/// The chunk chunk_a_panel picks where it can: on an H100 the tf32 3 GiB plan ran best
/// with chunks of 4096 columns (0.731 of in-core, against 0.724 with 2048; tiling.md).
inline constexpr std::uint64_t kPanelChunkK = 4096;

/// The smallest budget plan_gemm accepts for this problem and these limits (the
/// budget in `limits` is ignored). Throws as plan_gemm does for bad input.
[[nodiscard]] std::uint64_t gemm_minimum_budget(const GemmProblem& problem, const PlanLimits& limits);

/// Smith et al.'s tight I/O lower bound in bytes for a device of `budget_bytes`:
/// max(compulsory, (2mnk/√S − 2S)·w) with S = budget / w elements, compulsory = A and
/// B once, C once out (and once in when β ≠ 0). UsageError when it overflows.
[[nodiscard]] std::uint64_t gemm_lower_bound_bytes(const GemmProblem& problem, std::uint64_t budget_bytes);

}  // namespace outcore::tile
