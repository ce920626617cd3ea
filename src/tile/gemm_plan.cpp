#include "outcore/tile/gemm_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "plan_math.hpp"

namespace outcore::tile {

std::string detail::describe_gemm(const GemmProblem& p) {
    const std::string_view type = p.compute == GemmCompute::FastTF32 ? "tf32" : to_string(p.type);
    return fmt::format("GEMM {}x{}x{} {}", p.m, p.n, p.k, type);
}

using detail::Axis;
using detail::Count;

namespace {

constexpr std::uint64_t kEfficientTile = 256;  // below this a GEMM tile runs far from peak
constexpr std::uint32_t kOutputSlots = 2;      // one C tile computes while the last downloads
constexpr std::array kSchedules{GemmSchedule::SquareC, GemmSchedule::APanelResident,
                                GemmSchedule::BPanelResident};

void validate(const GemmProblem& p) {
    if (p.m == 0 || p.n == 0 || p.k == 0) {
        throw UsageError("tile", fmt::format("GEMM {}x{}x{}: m, n and k must be at least 1", p.m, p.n, p.k));
    }
    (void)gemm_input_bytes(p.type);
    if (p.compute == GemmCompute::FastTF32 && p.type != DType::F32) {
        throw UsageError("tile", fmt::format("GEMM: tf32 compute needs f32 data, not {}", to_string(p.type)));
    }
    if (p.narrow_c && !is_16bit_float(p.type)) {
        throw UsageError("tile", fmt::format("GEMM: a C narrower than f32 needs bf16 or f16 inputs, not {}",
                                             to_string(p.type)));
    }
    if (p.beta_nonzero && p.tail == TailPolicy::ShiftInwards) {
        throw UsageError("tile",
                         "GEMM: the shift-inwards tail computes overlapped C elements twice, which is "
                         "wrong when beta != 0; use the shrink tail");
    }
}

using detail::describe_gemm;

// What every candidate shares.
struct Context {
    const GemmProblem& problem;
    const PlanLimits& limits;
    std::uint64_t w = 0;   // input element bytes
    std::uint64_t wc = 0;  // C element bytes
    detail::LinkModel link;
    bool timed = false;  // both rates known: minimise time, else bytes
};

std::uint32_t ring_slots(Count uploads, std::uint32_t depth) {
    return uploads.ok() && uploads.value() < depth ? static_cast<std::uint32_t>(uploads.value()) : depth;
}

std::uint32_t clamp_slots(Count slots) {
    constexpr std::uint64_t kMax = std::numeric_limits<std::uint32_t>::max();
    return static_cast<std::uint32_t>(std::min(slots.value(), kMax));
}

// The smallest footprint of a candidate (no panel prefetch); false when a slot
// overflows or exceeds the largest binding. Separate from the byte counts so the
// search rejects candidates that do not fit before costing them.
bool fill_memory(const Context& cx, GemmSchedule s, const Axis& am, const Axis& an, const Axis& ak,
                 GemmPlan& out) {
    const std::uint64_t align = cx.limits.min_offset_alignment;
    const std::uint32_t depth = cx.limits.pipeline_depth;
    const Count tiles = Count(am.count) * an.count;
    const Count chunk_uploads = tiles * ak.count;
    const Count a_slot = detail::align_count(Count(am.tile) * ak.tile * cx.w, align);
    const Count b_slot = detail::align_count(Count(ak.tile) * an.tile * cx.w, align);
    // A resident panel is a ring of k-chunk slots, one per chunk of the panel: the
    // same ring as a streamed operand, only deep enough to keep a whole panel.
    const std::uint32_t a_slots =
        s == GemmSchedule::APanelResident ? clamp_slots(Count(ak.count)) : ring_slots(chunk_uploads, depth);
    const std::uint32_t b_slots =
        s == GemmSchedule::BPanelResident ? clamp_slots(Count(ak.count)) : ring_slots(chunk_uploads, depth);
    const Count c_slot = detail::align_count(Count(am.tile) * an.tile * cx.wc, align);
    const std::uint32_t c_slots = tiles.ok() && tiles.value() == 1 ? 1 : kOutputSlots;
    const Count device = Count(a_slots) * a_slot + Count(b_slots) * b_slot + Count(c_slots) * c_slot;
    if (!device.ok() || ak.count > std::numeric_limits<std::uint32_t>::max()) return false;
    const std::uint64_t max_slot = cx.limits.max_buffer_bytes;
    if (a_slot.value() > max_slot || b_slot.value() > max_slot || c_slot.value() > max_slot) return false;
    out.a_slots = a_slots;
    out.b_slots = b_slots;
    out.c_slots = c_slots;
    out.prefetch_chunks = 0;
    out.a_slot_bytes = a_slot.value();
    out.b_slot_bytes = b_slot.value();
    out.c_slot_bytes = c_slot.value();
    out.device_bytes = device.value();
    return true;
}

// One C slot more than the smallest footprint's two: GEMM j + 3 then waits for the
// download of tile j instead of j + 1, so GEMMs run ahead of C downloads that take
// longer than a GEMM (bf16 on an H100, docs/tiling.md "C's download ring"). False
// where there are too few C tiles for it to matter or it does not fit the budget.
bool add_c_slot(const Context& cx, GemmPlan& out) {
    const Count tiles = Count(ceil_div(cx.problem.m, out.tile_m)) * ceil_div(cx.problem.n, out.tile_n);
    if (!tiles.ok() || tiles.value() <= out.c_slots) return false;
    const Count device = Count(out.device_bytes) + out.c_slot_bytes;
    if (!device.ok() || device.value() > cx.limits.budget_bytes) return false;
    out.c_slots += 1;
    out.device_bytes = device.value();
    return true;
}

// Budget left over after the smallest footprint deepens the panel ring: the next
// panel's first chunks upload while the current row still computes, which is what
// hides a panel switch. At most one panel's worth, and only if there is a next panel.
void add_prefetch(const Context& cx, GemmSchedule s, const Axis& am, const Axis& an, const Axis& ak,
                  GemmPlan& out) {
    const bool a_panel = s == GemmSchedule::APanelResident;
    if (s == GemmSchedule::SquareC || (a_panel ? am.count : an.count) < 2) return;
    const std::uint64_t chunk = a_panel ? out.a_slot_bytes : out.b_slot_bytes;
    const std::uint64_t spare = cx.limits.budget_bytes - out.device_bytes;
    std::uint32_t& slots = a_panel ? out.a_slots : out.b_slots;
    const auto extra = static_cast<std::uint32_t>(std::min<std::uint64_t>(
        {spare / chunk, ak.count, std::numeric_limits<std::uint32_t>::max() - slots}));
    out.prefetch_chunks = extra;
    slots += extra;
    out.device_bytes += std::uint64_t{extra} * chunk;
}

// The budget the smallest footprint leaves: first the panel prefetch (the model
// prices it), then a third C slot where there is still room. The model cannot see
// what that slot is for — while a GEMM waits on a C download, the operand rings fill
// and the uploads stop, so a link whose directions share runs at one direction's
// rate — but it costs nothing the plan would otherwise use.
void add_spare_slots(const Context& cx, GemmSchedule s, const Axis& am, const Axis& an, const Axis& ak,
                     GemmPlan& out) {
    add_prefetch(cx, s, am, an, ak, out);
    (void)add_c_slot(cx, out);
}

// The slowest chain of ring waits over `tiles` C tiles (mean tiles, full k chunks).
// A streamed operand's ring of `slots` chunks: chunk j + slots goes up only after
// GEMM j is done, so every chain j, j + slots, j + 2·slots, ... runs its uploads and
// GEMMs one after the other. With k_chunks a multiple of slots, one chain holds the
// same chunk of every tile; the full chunks' chain is then the slowest, and a short
// last chunk (k = 589 as 512 + 77) leaves the big ones serialized (up + GEMM each).
// Otherwise the chains rotate and each carries its share of all chunks.
double ring_chain_seconds(const Context& cx, GemmSchedule s, const Axis& am, const Axis& an, const Axis& ak,
                          const GemmPlan& c, double tiles) {
    const double flops = cx.limits.compute_flops;
    const auto k = static_cast<double>(cx.problem.k);
    const auto w = static_cast<double>(cx.w);
    const double mm = static_cast<double>(am.sum) / static_cast<double>(am.count);
    const double mn = static_cast<double>(an.sum) / static_cast<double>(an.count);
    const bool a_streamed = s != GemmSchedule::APanelResident;
    const bool b_streamed = s != GemmSchedule::BPanelResident;
    const std::uint32_t ring = std::max(1U, s == GemmSchedule::SquareC ? std::min(c.a_slots, c.b_slots)
                                            : a_streamed               ? c.a_slots
                                                                       : c.b_slots);
    const auto kc = static_cast<double>(ak.count);
    const double kt = ak.count % ring == 0 ? static_cast<double>(ak.tile) : k / kc;
    const double up = ((a_streamed ? mm * kt : 0.0) + (b_streamed ? kt * mn : 0.0)) * w;
    const double operand =
        tiles * kc / static_cast<double>(ring) * (cx.link.up_seconds(up) + 2.0 * mm * mn * kt / flops);
    // Likewise the C ring: tile j + c_slots takes tile j's slot once it is down. With
    // β ≠ 0 its C goes up then, and the uploads issued after it (its own operand
    // chunks) wait behind it on the in-order upload channel.
    // Tiles go row by row (rows of B panels run along m); with a row's length a
    // multiple of c_slots, each chain holds one column of full tiles, not the mean.
    const std::uint32_t c_ring = std::max(1U, c.c_slots);
    const bool along_m = s == GemmSchedule::BPanelResident;
    const Axis& row = along_m ? am : an;
    const bool same_column = row.count % c_ring == 0;
    const double cm = along_m && same_column ? static_cast<double>(am.tile) : mm;
    const double cn = !along_m && same_column ? static_cast<double>(an.tile) : mn;
    const double c_bytes = cm * cn * static_cast<double>(cx.wc);
    const double tile_operands = ((a_streamed ? cm * k : 0.0) + (b_streamed ? k * cn : 0.0)) * w;
    const double tile_gemm = 2.0 * cm * cn * k / flops;
    const double before_down =
        cx.problem.beta_nonzero
            ? cx.link.up_seconds(c_bytes) + std::max(cx.link.up_seconds(tile_operands), tile_gemm)
            : tile_gemm;
    // A C tile goes down while the next tiles' operands go up: on a link whose two
    // directions share less than both alone, slower than down_seconds says (bf16 on an
    // H100: 96 MiB tiles took 2.3–3.8 ms beside uploads, against 1.7 ms alone).
    const double moved = static_cast<double>(c.bytes_to_device) + static_cast<double>(c.bytes_to_host);
    const double down_share = moved > 0 ? static_cast<double>(c.bytes_to_host) / moved : 1.0;
    const double down = cx.link.down_beside_up_seconds(c_bytes, down_share);
    const double result = tiles / static_cast<double>(c_ring) * (before_down + down);
    return std::max(operand, result);
}

// The model's run time of a costed candidate (docs/tiling.md, "time model").
double estimate_seconds(const Context& cx, GemmSchedule s, const Axis& am, const Axis& an, const Axis& ak,
                        const GemmPlan& c) {
    const double flops = cx.limits.compute_flops;
    const auto tm = static_cast<double>(am.tile);
    const auto tn = static_cast<double>(an.tile);
    const auto tk = static_cast<double>(ak.tile);
    const auto k = static_cast<double>(cx.problem.k);
    const auto w = static_cast<double>(cx.w);
    const double c_tile = tm * tn * static_cast<double>(cx.wc);
    const double c_up = cx.problem.beta_nonzero ? c_tile : 0.0;
    const double step = 2.0 * tm * tn * tk / flops;
    const double fixed =
        c.call_overhead_seconds + cx.link.down_seconds(static_cast<double>(am.last * an.last * cx.wc));

    const bool a_panel = s == GemmSchedule::APanelResident;
    const std::uint64_t rows = a_panel ? am.count : an.count;     // panels
    const std::uint64_t per_row = a_panel ? an.count : am.count;  // C tiles per panel
    // A panel ring of one slot (one chunk, no prefetch) cannot take the next panel
    // until the current one is used up: its uploads and the GEMMs then alternate.
    const bool one_panel_slot = s != GemmSchedule::SquareC && ak.count + c.prefetch_chunks < 2;
    const double mm = static_cast<double>(am.sum) / static_cast<double>(am.count);
    const double mn = static_cast<double>(an.sum) / static_cast<double>(an.count);
    auto chain = [&](double tiles) { return ring_chain_seconds(cx, s, am, an, ak, c, tiles); };
    if (s == GemmSchedule::SquareC || per_row < 2) {
        // Streaming: small chunks flow through rings, so the link and the GEMMs overlap
        // except at the ends. Compute-bound: fill + compute; link-bound: every upload
        // back to back, then the last chunk's GEMM. Drain and call costs on top.
        if (one_panel_slot) return c.transfer_seconds + c.compute_seconds + fixed;
        const double fill = cx.link.up_seconds((tm * tk + tk * tn) * w + c_up);
        const double tiles = static_cast<double>(am.count) * static_cast<double>(an.count);
        return std::max({fill + c.compute_seconds, c.transfer_seconds + step, chain(tiles)}) + fixed;
    }
    // Panels: phases, each as long as the slower of its link and compute work. The
    // first tile waits for the whole first panel; the middle tiles of a row stream
    // their operand and prefetch the next panel into the spare chunk slots; the
    // last tile of a row and the first of the next overlap the rest of that panel,
    // which can only go up as the old panel's chunks are released.
    // Phases use the mean tile of each axis, so that their bytes and flops add up to
    // the problem's exactly: with full tiles, a small tail (213 of 512 rows) was
    // charged as a whole tile, which overestimated link-bound runs by 1.5x.
    const double mk = k / static_cast<double>(ak.count);
    const double chunk = (a_panel ? mm * mk : mk * mn) * w;
    const double panel = chunk * static_cast<double>(ak.count);
    const double streamed = (a_panel ? k * mn : mm * k) * w;  // per C tile
    const double tile_s = 2.0 * mm * mn * k / flops;
    const double c_mean = mm * mn * static_cast<double>(cx.wc);
    const double c_mean_up = cx.problem.beta_nonzero ? c_mean : 0.0;
    // A phase of `tiles` C tiles (tiles·k_chunks GEMM steps) overlaps its link and
    // compute work chunk by chunk: the slower side plus one piece of the faster one
    // (a two-stage pipeline). Pieces are GEMM steps, except in a phase led by a whole
    // panel: each of its k_chunks chunks feeds every tile of the phase (a group), so
    // the wait for the first chunk, or the GEMMs after the last, is a k_chunks-th of
    // the phase. Coarse chunks pay for it.
    const auto steps_per_tile = static_cast<double>(ak.count);
    auto phase = [&](double tiles, double extra_up, bool panel_led = false) {
        if (tiles <= 0 && extra_up <= 0) return 0.0;
        const double link = cx.link.seconds(tiles * (streamed + c_mean_up) + extra_up, tiles * c_mean);
        const double compute = tiles * tile_s;
        const double steps = std::max(1.0, tiles * steps_per_tile);
        return std::max({link, compute, chain(tiles)}) +
               std::min(link, compute) / (panel_led ? steps_per_tile : steps);
    };
    const auto pre = static_cast<double>(c.prefetch_chunks);
    const auto switches = static_cast<double>(rows - 1);
    const auto n_row = static_cast<double>(per_row);
    if (rows == 1) {  // one panel: its load overlaps the first `group` tiles (k outer)
        const double g = std::min(static_cast<double>(std::max(c.group, 1U)), n_row);
        return phase(g, panel, true) + phase(n_row - g, 0) + fixed;
    }
    const double first = phase(1, panel, true);
    const double middle = phase(n_row - 2, pre * chunk);
    const double change = one_panel_slot ? phase(2, 0) + cx.link.up_seconds(panel)
                                         : phase(2, (static_cast<double>(ak.count) - pre) * chunk);
    return first + switches * (middle + change) + phase(n_row - 1, 0) + fixed;
}

// A single-panel candidate with its first `group` C tiles computed together:
// group C slots (at least the plan's), priced by the model. False when the schedule
// has more than one panel or fewer tiles, or the slots exceed the budget.
// Only plan_gemm_fixed makes groups: the search does not, because on the H200
// (docs/BENCHMARKS.md, fourth run) the grouped tf32 plans it preferred ran slower
// than ungrouped ones — their narrow tiles and short k chunks lose more GEMM
// efficiency than the hidden panel load gains, which the model does not know yet.
bool with_group(const Context& cx, const Axis& am, const Axis& an, const Axis& ak, std::uint32_t group,
                GemmPlan& c) {
    const bool a_panel = c.schedule == GemmSchedule::APanelResident;
    if (c.schedule == GemmSchedule::SquareC || (a_panel ? am.count : an.count) != 1) return false;
    if ((a_panel ? an.count : am.count) < group || group < 2) return false;
    const std::uint32_t extra = group > c.c_slots ? group - c.c_slots : 0;
    const Count device = Count(c.device_bytes) + Count(extra) * c.c_slot_bytes;
    if (!device.ok() || device.value() > cx.limits.budget_bytes) return false;
    c.group = group;
    c.c_slots += extra;
    c.device_bytes = device.value();
    c.total_seconds = cx.timed ? estimate_seconds(cx, c.schedule, am, an, ak, c) : 0.0;
    return true;
}

// Bytes and time of a candidate whose memory is filled in; false on overflow.
// The link as one candidate's copies see it (PlanLimits::gemm_copy_rate): each
// operand's bytes at its chunk's measured 2-D rate (never above the link's), folded
// into one effective rate per direction; the duplex rate scales by the same efficiency.
detail::LinkModel copy_link(const Context& cx, const Axis& am, const Axis& an, const Axis& ak, double up_a,
                            double up_b, double c_up, double c_down) {
    detail::LinkModel l = cx.link;
    if (!cx.limits.gemm_copy_rate || !l.known()) return l;
    const double up = l.up_bytes_per_second;
    const double down = l.down_bytes_per_second;
    auto efficiency = [&](GemmOperand op, std::uint64_t outer, std::uint64_t inner) {
        const double r = cx.limits.gemm_copy_rate(op, outer, inner);
        return std::isfinite(r) && r > 0 ? std::min(1.0, r / up) : 1.0;
    };
    const double ea = efficiency(GemmOperand::A, am.tile, ak.tile);
    const double eb = efficiency(GemmOperand::B, an.tile, ak.tile);
    const double ec = efficiency(GemmOperand::C, am.tile, an.tile);
    const double up_bytes = up_a + up_b + c_up;
    // Seconds at the contiguous rate per byte, weighted by each operand's efficiency.
    const double up_weight = up_a / ea + up_b / eb + c_up / ec;
    const double e_up = up_bytes > 0 ? up_bytes / up_weight : 1.0;
    l.up_bytes_per_second = up * e_up;
    l.down_bytes_per_second = down * ec;
    if (l.duplex_bytes_per_second > 0 && up_bytes + c_down > 0) {
        l.duplex_bytes_per_second *= (up_bytes + c_down) / (up_weight + c_down / ec);
    }
    return l;
}

bool fill_cost(const Context& base, GemmSchedule s, const Axis& am, const Axis& an, const Axis& ak,
               GemmPlan& out) {
    const GemmProblem& p = base.problem;
    const Count kw = Count(p.k) * base.w;
    // Each C tile reads its row of A and its column of B once over all k chunks; a
    // resident panel is read once for its whole row (column) of tiles.
    const Count a_reads = s == GemmSchedule::APanelResident ? Count(1) : Count(an.count);
    const Count b_reads = s == GemmSchedule::BPanelResident ? Count(1) : Count(am.count);
    const Count up_a = Count(am.sum) * kw * a_reads;
    const Count up_b = Count(an.sum) * kw * b_reads;
    const Count c_bytes = Count(am.sum) * an.sum * base.wc;
    const Count up = up_a + up_b + (p.beta_nonzero ? c_bytes : Count(0));
    const Count moved = up + c_bytes;
    const Count calls = Count(am.count) * an.count * ak.count;
    if (!moved.ok() || !calls.ok()) return false;
    const Context cx{
        base.problem,
        base.limits,
        base.w,
        base.wc,
        copy_link(base, am, an, ak, static_cast<double>(up_a.value()), static_cast<double>(up_b.value()),
                  p.beta_nonzero ? static_cast<double>(c_bytes.value()) : 0.0,
                  static_cast<double>(c_bytes.value())),
        base.timed};

    out.bytes_to_device = up.value();
    out.bytes_to_host = c_bytes.value();
    out.bytes_moved = moved.value();
    out.kernel_calls = calls.value();
    out.flop_count =
        2.0 * static_cast<double>(am.sum) * static_cast<double>(an.sum) * static_cast<double>(p.k);

    const double flops = cx.limits.compute_flops;
    out.compute_seconds = flops > 0 ? out.flop_count / flops : 0.0;
    out.call_overhead_seconds =
        flops > 0 ? static_cast<double>(out.kernel_calls) * cx.limits.kernel_call_seconds : 0.0;
    out.transfer_seconds =
        cx.link.seconds(static_cast<double>(out.bytes_to_device), static_cast<double>(out.bytes_to_host));
    // Informative: the wait before the first GEMM and after the last one.
    out.fill_seconds = cx.link.up_seconds(static_cast<double>(
        (am.tile * ak.tile + ak.tile * an.tile) * cx.w + (p.beta_nonzero ? am.tile * an.tile * cx.wc : 0)));
    out.drain_seconds = cx.link.down_seconds(static_cast<double>(am.last * an.last * cx.wc));
    out.total_seconds = cx.timed ? estimate_seconds(cx, s, am, an, ak, out) : 0.0;
    return true;
}

// Plans whose estimated times differ by less than this are equally fast: the model is
// not that precise, nor are the measured shape and copy rates (H200 probes of one tile
// shape differ by 1–3 % between calls), and among them fewer bytes moved is the more
// robust choice (less exposed to a slower or shared link). At 1 % an f32 plan moving
// 60 GiB, 1 % ahead on its probes, ran at 0.896 of in-core; at 3 % the planner chose a
// 16 GiB plan that ran at 0.941 (BENCHMARKS.md, sixth run, calls 4 and 5).
constexpr double kTimeSlack = 0.03;

// Bytes, then larger tiles (fewer calls, better GEMM efficiency), then fewer calls.
bool fewer_bytes(const GemmPlan& a, const GemmPlan& b) {
    if (a.bytes_moved != b.bytes_moved) return a.bytes_moved < b.bytes_moved;
    const double va =
        static_cast<double>(a.tile_m) * static_cast<double>(a.tile_n) * static_cast<double>(a.tile_k);
    const double vb =
        static_cast<double>(b.tile_m) * static_cast<double>(b.tile_n) * static_cast<double>(b.tile_k);
    if (va != vb) return va > vb;
    return a.kernel_calls < b.kernel_calls;
}

// The chosen plan: with times known, the fewest bytes among those within kTimeSlack
// of the fastest; otherwise simply the fewest bytes.
std::optional<GemmPlan> choose(const std::vector<GemmPlan>& feasible, bool timed) {
    if (feasible.empty()) return std::nullopt;
    double fastest = std::numeric_limits<double>::infinity();
    if (timed) {
        for (const GemmPlan& c : feasible) fastest = std::min(fastest, c.total_seconds);
    }
    const GemmPlan* best = nullptr;
    for (const GemmPlan& c : feasible) {
        if (timed && c.total_seconds > fastest * (1.0 + kTimeSlack)) continue;
        if (best == nullptr || fewer_bytes(c, *best)) best = &c;
    }
    return *best;
}

// Candidates the single rate ranks within this factor of the fastest have their tile
// shapes measured: the per-shape rates seen on the H200 differ from the single rate
// by up to ~25%, so a plan ranked further back is not expected to come out ahead.
constexpr double kShapeWindow = 1.4;

// Recosts a candidate with `flops` as its compute rate (bytes and memory unchanged).
void recost(const Context& cx, double flops, GemmPlan& c) {
    PlanLimits limits = cx.limits;
    limits.compute_flops = flops;
    const Context shaped{cx.problem, limits, cx.w, cx.wc, cx.link, cx.timed};
    const Axis am = detail::make_axis(cx.problem.m, c.tile_m, cx.problem.tail);
    const Axis an = detail::make_axis(cx.problem.n, c.tile_n, cx.problem.tail);
    const Axis ak = detail::make_axis(cx.problem.k, c.tile_k, TailPolicy::Shrink);
    (void)fill_cost(shaped, c.schedule, am, an, ak, c);  // the byte counts fitted the first time
    c.shape_flops = flops;
}

// With PlanLimits::gemm_shape_flops: keeps the candidates of at most kMaxShapeProbes
// tile shapes — the single rate's choice, then the shapes it ranks fastest within
// kShapeWindow — recosted with their shapes' measured rates (a shape it cannot
// measure keeps the single rate). The choice is then made among those.
void rank_by_shape(const Context& cx, std::vector<GemmPlan>& feasible) {
    if (!cx.timed || !cx.limits.gemm_shape_flops || feasible.empty()) return;
    // Stable: choose() keeps the first of equal plans (a-panel before its mirror image).
    std::stable_sort(feasible.begin(), feasible.end(),
                     [](const GemmPlan& a, const GemmPlan& b) { return a.total_seconds < b.total_seconds; });
    const double cutoff = feasible.front().total_seconds * kShapeWindow;
    struct Shape {
        std::uint64_t m, n, k;
        double flops;
    };
    // The shapes asked for: the single rate's choice first, so that with every shape
    // unknown the choice stays; then those of the candidates in rank order, at most
    // kMaxShapeProbes. All named up front (gemm_shapes_ahead), then asked one by one.
    std::vector<std::array<std::uint64_t, 3>> wanted;
    auto want = [&](const GemmPlan& c) {
        const std::array<std::uint64_t, 3> shape{c.tile_m, c.tile_n, c.tile_k};
        const bool known = std::find(wanted.begin(), wanted.end(), shape) != wanted.end();
        if (!known && wanted.size() < kMaxShapeProbes) wanted.push_back(shape);
    };
    want(*choose(feasible, true));
    for (const GemmPlan& c : feasible) {
        if (c.total_seconds > cutoff) break;
        want(c);
    }
    if (cx.limits.gemm_shapes_ahead) cx.limits.gemm_shapes_ahead(wanted);
    std::vector<Shape> shapes;
    for (const auto& [m, n, k] : wanted) {
        const double f = cx.limits.gemm_shape_flops(m, n, k);
        shapes.push_back({m, n, k, std::isfinite(f) && f > 0 ? f : 0.0});
    }
    std::vector<GemmPlan> kept;
    for (GemmPlan& c : feasible) {
        if (c.total_seconds > cutoff) break;
        auto it = std::find_if(shapes.begin(), shapes.end(), [&](const Shape& s) {
            return s.m == c.tile_m && s.n == c.tile_n && s.k == c.tile_k;
        });
        if (it == shapes.end()) continue;  // past kMaxShapeProbes shapes
        if (it->flops > 0) recost(cx, it->flops, c);
        kept.push_back(c);
    }
    feasible = std::move(kept);
}

struct SearchResult {
    std::vector<GemmPlan> feasible;  // costed candidates within the budget
    std::uint64_t minimum_device_bytes = std::numeric_limits<std::uint64_t>::max();
};

// Tiles of at least min(extent, 256) in every dimension run near peak; smaller ones
// are searched only when none of those fit (tiny budgets), which also keeps the
// common search to about 12³ candidates per schedule.
enum class Sizes : unsigned char { Efficient, All };

std::vector<Axis> axes(std::uint64_t extent, TailPolicy tail, Sizes sizes) {
    std::vector<Axis> out;
    for (const std::uint64_t t : detail::tile_candidates(extent)) {
        if (sizes == Sizes::Efficient && t < std::min(extent, kEfficientTile)) continue;
        out.push_back(detail::make_axis(extent, t, tail));
    }
    return out;
}

SearchResult search(const Context& cx, const std::vector<GemmSchedule>& schedules, Sizes sizes) {
    const GemmProblem& p = cx.problem;
    const std::vector<Axis> ms = axes(p.m, p.tail, sizes);
    const std::vector<Axis> ns = axes(p.n, p.tail, sizes);
    // A 16-bit C holds no partial sums: one chunk over the whole k.
    const std::vector<Axis> ks = p.narrow_c
                                     ? std::vector<Axis>{detail::make_axis(p.k, p.k, TailPolicy::Shrink)}
                                     : axes(p.k, TailPolicy::Shrink, sizes);

    SearchResult r;
    GemmPlan c;
    c.problem = p;
    c.tail = p.tail;
    c.depth = cx.limits.pipeline_depth;
    for (const GemmSchedule s : schedules) {
        c.schedule = s;
        for (const Axis& am : ms) {
            for (const Axis& an : ns) {
                for (const Axis& ak : ks) {
                    if (!fill_memory(cx, s, am, an, ak, c)) continue;
                    r.minimum_device_bytes = std::min(r.minimum_device_bytes, c.device_bytes);
                    if (c.device_bytes > cx.limits.budget_bytes) continue;
                    c.tile_m = am.tile;
                    c.tile_n = an.tile;
                    c.tile_k = ak.tile;
                    c.group = 1;
                    add_spare_slots(cx, s, am, an, ak, c);
                    if (fill_cost(cx, s, am, an, ak, c)) r.feasible.push_back(c);
                }
            }
        }
    }
    return r;
}

Context make_context(const GemmProblem& problem, const PlanLimits& limits) {
    validate(problem);
    detail::validate_limits(limits, "GEMM");
    Context cx{
        problem, limits, gemm_input_bytes(problem.type), gemm_c_bytes(problem), detail::link_model(limits),
        false};
    cx.timed = limits.compute_flops > 0 && cx.link.known();
    return cx;
}

[[noreturn]] void throw_no_fit(const Context& cx, std::uint64_t minimum_device_bytes) {
    if (minimum_device_bytes == std::numeric_limits<std::uint64_t>::max()) {
        throw UsageError("tile",
                         fmt::format("{}: no tiling fits max_buffer_bytes {}", describe_gemm(cx.problem),
                                     format_size(cx.limits.max_buffer_bytes)));
    }
    detail::throw_below_minimum(describe_gemm(cx.problem), minimum_device_bytes, cx.limits.budget_bytes);
}

GemmPlan best_plan(const Context& cx, const std::vector<GemmSchedule>& schedules) {
    SearchResult r = search(cx, schedules, Sizes::Efficient);
    if (r.feasible.empty()) r = search(cx, schedules, Sizes::All);
    rank_by_shape(cx, r.feasible);
    const std::optional<GemmPlan> best = choose(r.feasible, cx.timed);
    if (!best) throw_no_fit(cx, r.minimum_device_bytes);
    GemmPlan plan = *best;
    plan.lower_bound_bytes = gemm_lower_bound_bytes(cx.problem, cx.limits.budget_bytes);
    return plan;
}

void check_compulsory(const GemmProblem& p) {
    // Throws for problems whose operands alone overflow 64-bit byte counts.
    (void)gemm_lower_bound_bytes(p, 0);
}

}  // namespace

std::string_view to_string(GemmSchedule schedule) noexcept {
    switch (schedule) {
        case GemmSchedule::SquareC: return "square-c";
        case GemmSchedule::APanelResident: return "a-panel";
        case GemmSchedule::BPanelResident: return "b-panel";
    }
    return "?";
}

TileGrid GemmPlan::c_grid() const { return TileGrid({problem.m, problem.n}, {tile_m, tile_n}, tail); }

std::uint64_t GemmPlan::k_chunks() const noexcept { return tile_k == 0 ? 0 : ceil_div(problem.k, tile_k); }

double GemmPlan::reuse_side() const noexcept {
    auto harmonic = [](double a, double b) { return a > 0 && b > 0 ? 2.0 / (1.0 / a + 1.0 / b) : 0.0; };
    const auto m = static_cast<double>(problem.m);
    const auto n = static_cast<double>(problem.n);
    const auto tm = static_cast<double>(tile_m);
    const auto tn = static_cast<double>(tile_n);
    switch (schedule) {
        case GemmSchedule::SquareC: return harmonic(tm, tn);
        case GemmSchedule::APanelResident: return harmonic(tm, n);
        case GemmSchedule::BPanelResident: return harmonic(m, tn);
    }
    return 0.0;
}

std::uint32_t gemm_input_bytes(DType type) {
    switch (type) {
        case DType::F32:
        case DType::F64:
        case DType::BF16:
        case DType::F16: return dtype_bytes(type);
        case DType::U8:
        case DType::U16: break;
    }
    throw UsageError("tile", fmt::format("GEMM does not take {} data (f32, f64, tf32, bf16 and f16 only)",
                                         to_string(type)));
}

std::uint32_t gemm_output_bytes(DType type) {
    (void)gemm_input_bytes(type);  // UsageError for types GEMM does not take
    return dtype_bytes(gemm_c_dtype(type));
}

std::uint32_t gemm_c_bytes(const GemmProblem& problem) {
    return problem.narrow_c ? gemm_input_bytes(problem.type) : gemm_output_bytes(problem.type);
}

std::uint64_t gemm_lower_bound_bytes(const GemmProblem& p, std::uint64_t budget_bytes) {
    validate(p);
    const std::uint64_t w = gemm_input_bytes(p.type);
    const std::uint64_t wc = gemm_c_bytes(p);
    const Count c = Count(p.m) * p.n * wc;
    const Count compulsory = (Count(p.m) * p.k + Count(p.k) * p.n) * w + c + (p.beta_nonzero ? c : Count(0));
    if (!compulsory.ok()) {
        throw UsageError("tile", fmt::format("{}: the operands exceed 2^64 bytes", describe_gemm(p)));
    }
    // Smith et al. count elements through a fast memory of S elements; counting every
    // element at the smallest size (and S at that size too) keeps it a true bound.
    const long double s_elements = static_cast<long double>(budget_bytes / w);
    if (s_elements < 1) return compulsory.value();
    const long double mnk =
        static_cast<long double>(p.m) * static_cast<long double>(p.n) * static_cast<long double>(p.k);
    const long double smith =
        (2.0L * mnk / std::sqrt(s_elements) - 2.0L * s_elements) * static_cast<long double>(w);
    if (smith <= static_cast<long double>(compulsory.value())) return compulsory.value();
    if (smith >= 18446744073709551615.0L) return std::numeric_limits<std::uint64_t>::max();
    return static_cast<std::uint64_t>(smith);
}

GemmPlan plan_gemm(const GemmProblem& problem, const PlanLimits& limits) {
    const Context cx = make_context(problem, limits);
    check_compulsory(problem);
    return best_plan(cx, {kSchedules.begin(), kSchedules.end()});
}

GemmPlan plan_gemm(const GemmProblem& problem, const PlanLimits& limits, GemmSchedule schedule) {
    const Context cx = make_context(problem, limits);
    check_compulsory(problem);
    return best_plan(cx, {schedule});
}

GemmPlan plan_gemm_fixed(const GemmProblem& problem, const PlanLimits& limits, GemmSchedule schedule,
                         std::uint64_t tile_m, std::uint64_t tile_n, std::uint64_t tile_k,
                         std::uint32_t group, std::uint32_t c_slots) {
    const Context cx = make_context(problem, limits);
    check_compulsory(problem);
    if (tile_m == 0 || tile_n == 0 || tile_k == 0) {
        throw UsageError("tile",
                         fmt::format("GEMM tile {}x{}x{} has a zero dimension", tile_m, tile_n, tile_k));
    }
    const Axis am = detail::make_axis(problem.m, tile_m, problem.tail);
    const Axis an = detail::make_axis(problem.n, tile_n, problem.tail);
    const Axis ak = detail::make_axis(problem.k, tile_k, TailPolicy::Shrink);
    if (problem.narrow_c && ak.count > 1) {
        throw UsageError("tile",
                         fmt::format("{}: a {} C holds no partial sums, so tile_k must be the whole k "
                                     "({}), not {}",
                                     describe_gemm(problem), to_string(problem.type), problem.k, tile_k));
    }
    GemmPlan plan;
    plan.problem = problem;
    plan.schedule = schedule;
    plan.tail = problem.tail;
    plan.depth = limits.pipeline_depth;
    plan.tile_m = am.tile;
    plan.tile_n = an.tile;
    plan.tile_k = ak.tile;
    const std::string what = fmt::format("{} with {} tiles {}x{}x{}", describe_gemm(problem),
                                         to_string(schedule), am.tile, an.tile, ak.tile);
    if (!fill_memory(cx, schedule, am, an, ak, plan)) {
        throw UsageError("tile", fmt::format("{}: a slot exceeds max_buffer_bytes {}", what,
                                             format_size(limits.max_buffer_bytes)));
    }
    if (c_slots != 0) {
        const Count tiles = Count(am.count) * an.count;
        if (c_slots < 2 || !tiles.ok() || c_slots > tiles.value()) {
            throw UsageError("tile", fmt::format("{}: {} C slots asked, but there are {} C tiles (2 to that "
                                                 "many slots)",
                                                 what, c_slots, tiles.value()));
        }
        plan.device_bytes += std::uint64_t{c_slots - plan.c_slots} * plan.c_slot_bytes;
        plan.c_slots = c_slots;
    }
    if (plan.device_bytes > limits.budget_bytes)
        detail::throw_below_minimum(what, plan.device_bytes, limits.budget_bytes);
    if (c_slots == 0) {
        add_spare_slots(cx, schedule, am, an, ak, plan);
    } else {
        add_prefetch(cx, schedule, am, an, ak, plan);
    }
    if (!fill_cost(cx, schedule, am, an, ak, plan)) {
        throw UsageError("tile", fmt::format("{}: bytes moved exceed 2^64", what));
    }
    if (group > 1 && !with_group(cx, am, an, ak, group, plan)) {
        throw UsageError("tile", fmt::format("{}: a group of {} tiles needs a single panel of at least that "
                                             "many tiles, and {} more C slots within the budget",
                                             what, group, group > plan.c_slots ? group - plan.c_slots : 0));
    }
    if (cx.timed && limits.gemm_shape_flops) {
        const double f = limits.gemm_shape_flops(am.tile, an.tile, ak.tile);
        if (std::isfinite(f) && f > 0) recost(cx, f, plan);
    }
    plan.lower_bound_bytes = gemm_lower_bound_bytes(problem, limits.budget_bytes);
    return plan;
}

std::uint64_t gemm_minimum_budget(const GemmProblem& problem, const PlanLimits& limits) {
    PlanLimits unlimited = limits;
    unlimited.budget_bytes = 0;  // nothing fits: the search only records footprints
    const Context cx = make_context(problem, unlimited);
    check_compulsory(problem);
    const SearchResult r = search(cx, {kSchedules.begin(), kSchedules.end()}, Sizes::All);
    if (r.minimum_device_bytes == std::numeric_limits<std::uint64_t>::max())
        throw_no_fit(cx, r.minimum_device_bytes);
    return r.minimum_device_bytes;
}

}  // namespace outcore::tile
