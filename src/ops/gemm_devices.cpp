#include "outcore/ops/gemm_devices.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "ops/unit_scheduler.hpp"
#include "outcore/core/error.hpp"
#include "outcore/device/dtype.hpp"

namespace outcore::ops {

namespace {

constexpr const char* kComponent = "gemm";

/// The block [row0, row0 + rows) × [col0, col0 + cols) of a source, as a source.
class SourceWindow final : public io::MatrixSource {
public:
    SourceWindow(const io::MatrixSource& s, std::uint64_t row0, std::uint64_t col0, std::uint64_t rows,
                 std::uint64_t cols)
        : s_(s), row0_(row0), col0_(col0), rows_(rows), cols_(cols) {}
    [[nodiscard]] std::uint64_t rows() const noexcept override { return rows_; }
    [[nodiscard]] std::uint64_t cols() const noexcept override { return cols_; }
    [[nodiscard]] DType dtype() const noexcept override { return s_.dtype(); }
    [[nodiscard]] std::optional<io::DirectMatrix> direct() const override {
        std::optional<io::DirectMatrix> d = s_.direct();
        if (d) d->data += (row0_ + col0_ * d->ld_elements) * dtype_bytes(s_.dtype());
        return d;
    }
    [[nodiscard]] bool row_major() const noexcept override { return s_.row_major(); }

private:
    void do_read(std::uint64_t row0, std::uint64_t col0, std::uint64_t rows, std::uint64_t cols,
                 std::byte* dst, std::uint64_t ld_elements) const override {
        s_.read(row0_ + row0, col0_ + col0, rows, cols, dst, ld_elements);
    }

    const io::MatrixSource& s_;
    std::uint64_t row0_, col0_, rows_, cols_;
};

/// The same block of a sink, as a sink (never committed itself).
class SinkWindow final : public io::MatrixSink {
public:
    /// `mutex` serializes the writes of every window on `s` (sinks need not be thread-safe).
    SinkWindow(io::MatrixSink& s, std::mutex& mutex, std::uint64_t row0, std::uint64_t col0,
               std::uint64_t rows, std::uint64_t cols)
        : s_(s), mutex_(mutex), row0_(row0), col0_(col0), rows_(rows), cols_(cols) {}
    [[nodiscard]] std::uint64_t rows() const noexcept override { return rows_; }
    [[nodiscard]] std::uint64_t cols() const noexcept override { return cols_; }
    [[nodiscard]] DType dtype() const noexcept override { return s_.dtype(); }
    [[nodiscard]] std::optional<io::DirectMatrix> direct_sink() const override {
        std::optional<io::DirectMatrix> d = s_.direct_sink();
        if (d) d->data += (row0_ + col0_ * d->ld_elements) * dtype_bytes(s_.dtype());
        return d;
    }

private:
    void do_write(std::uint64_t row0, std::uint64_t col0, std::uint64_t rows, std::uint64_t cols,
                  const std::byte* src, std::uint64_t ld_elements) override {
        std::lock_guard lock(mutex_);
        s_.write(row0_ + row0, col0_ + col0, rows, cols, src, ld_elements);
    }

    io::MatrixSink& s_;
    std::mutex& mutex_;
    std::uint64_t row0_, col0_, rows_, cols_;
};

/// A block of C: rows [i0, i0 + m) × columns [j0, j0 + n).
struct Unit {
    std::uint64_t i0 = 0, m = 0, j0 = 0, n = 0;
};

/// C cut for the devices: panels (a whole row or column of the plan's C tiles), each
/// cut into units along its tiles.
struct Cut {
    std::vector<Unit> panels;
    std::vector<Unit> units;  // panel by panel
    std::vector<std::size_t> units_per_panel;
};

/// Units along the plan's panels (see the header), at least two per device where the
/// problem has that many tiles.
Cut make_units(const tile::GemmPlan& plan, std::uint64_t m, std::uint64_t n, std::size_t devices) {
    const bool columns = plan.schedule == tile::GemmSchedule::BPanelResident;
    const std::uint64_t outer_extent = columns ? n : m;
    const std::uint64_t outer_tile = columns ? plan.tile_n : plan.tile_m;
    const std::uint64_t inner_extent = columns ? m : n;
    const std::uint64_t inner_tile = columns ? plan.tile_m : plan.tile_n;
    const std::uint64_t panels = (outer_extent + outer_tile - 1) / outer_tile;
    const std::uint64_t want = 2 * static_cast<std::uint64_t>(devices);
    const std::uint64_t split = panels >= want ? 1 : (want + panels - 1) / panels;
    auto block = [columns](std::uint64_t o0, std::uint64_t on, std::uint64_t i0, std::uint64_t in) {
        return columns ? Unit{.i0 = i0, .m = in, .j0 = o0, .n = on}
                       : Unit{.i0 = o0, .m = on, .j0 = i0, .n = in};
    };
    Cut cut;
    for (const auto& [o0, on] : detail::cut(outer_extent, outer_tile, panels)) {
        cut.panels.push_back(block(o0, on, 0, inner_extent));
        const auto pieces = detail::cut(inner_extent, inner_tile, split);
        for (const auto& [i0, in] : pieces) cut.units.push_back(block(o0, on, i0, in));
        cut.units_per_panel.push_back(pieces.size());
    }
    return cut;
}

/// The operand windows of one block of C, for ops::gemm.
struct Windows {
    SourceWindow a, b;
    SinkWindow c;
    std::optional<SourceWindow> c_in;

    Windows(const io::MatrixSource& sa, const io::MatrixSource& sb, io::MatrixSink& sc,
            std::mutex& sink_mutex, const tile::GemmProblem& problem, const GemmOptions& options,
            const Unit& u)
        // op(A) rows i0.. are A's columns when A is stored transposed; likewise B.
        : a(options.trans_a ? SourceWindow(sa, 0, u.i0, problem.k, u.m)
                            : SourceWindow(sa, u.i0, 0, u.m, problem.k)),
          b(options.trans_b ? SourceWindow(sb, u.j0, 0, u.n, problem.k)
                            : SourceWindow(sb, 0, u.j0, problem.k, u.n)),
          c(sc, sink_mutex, u.i0, u.j0, u.m, u.n) {
        if (problem.beta_nonzero) c_in.emplace(*options.c_in, u.i0, u.j0, u.m, u.n);
    }
    /// `o` with the input C pointed at this window's.
    void point(GemmOptions& o) { o.c_in = c_in ? &*c_in : nullptr; }
};

/// The options that run a panel's window with the whole problem's tiles, so its tile
/// grid is the plan's (units map to whole tiles) and every tile is computed as one
/// device computes it.
GemmOptions with_plan_tiles(const GemmOptions& options, const tile::GemmPlan& plan) {
    GemmOptions o = options;
    o.schedule = plan.schedule;
    o.tile_m = plan.tile_m;
    o.tile_n = plan.tile_n;
    o.tile_k = plan.tile_k;
    o.group = plan.group;
    o.c_slots = 0;  // each window's planner (a forced count may exceed a window's tiles)
    o.progress = {};
    return o;
}

}  // namespace

DeviceCaches::DeviceCaches(std::span<Device* const> devices) {
    for (Device* d : devices) caches_.push_back(std::make_unique<Caches>(*d));
}

MultiGemmReport gemm_on_devices(std::span<Device* const> devices, const io::MatrixSource& a,
                                const io::MatrixSource& b, io::MatrixSink& c, const GemmOptions& given,
                                DeviceCaches* caches) {
    const auto start = std::chrono::steady_clock::now();
    // Devices share a panel's tiles run by run, so no panel is in chunks
    // (GemmOptions::panel_chunk_k): every plan here, the reported one too, keeps it whole.
    if (given.panel_chunk_k.value_or(0) != 0)
        throw UsageError(kComponent, "an A panel in chunks (panel_chunk_k) is for one device only");
    GemmOptions options = given;
    options.panel_chunk_k = 0;
    detail::check_devices(devices, kComponent);
    if (caches != nullptr) {
        bool same = caches->size() == devices.size();
        for (std::size_t d = 0; same && d < devices.size(); ++d) same = caches->at(d).device == devices[d];
        if (!same) throw UsageError(kComponent, "the DeviceCaches were made for other devices");
    }
    const tile::GemmProblem problem = gemm_problem(a, b, c, options);
    MultiGemmReport report;
    report.plan = plan_gemm(*devices[0], a, b, c, options);
    GemmOptions check = options;
    check.measure_rates = false;
    for (std::size_t d = 1; d < devices.size(); ++d) (void)plan_gemm(*devices[d], a, b, c, check);
    const Cut cut = make_units(report.plan, problem.m, problem.n, devices.size());
    report.units = cut.units.size();
    report.devices = detail::empty_shares(devices);
    const bool columns = report.plan.schedule == tile::GemmSchedule::BPanelResident;
    std::mutex sink_mutex;

    // A device keeps its panel resident across the units it takes of it when the
    // whole plan's tiles fit its budget for a panel's window (the first panel is the
    // largest); one that cannot fit them runs each unit as its own GEMM, as planned
    // for that unit alone. Its tiles are fixed, so rates would only feed estimates: they
    // are not measured (a device thread would probe the link while others use it).
    GemmOptions resident_options = with_plan_tiles(options, report.plan);
    resident_options.measure_rates = false;
    // A window's first and last tiles are not the problem's: every tile one GEMM call
    // per k chunk, as in a single-device run with one_call_per_chunk.
    resident_options.one_call_per_chunk = true;
    std::vector<char> resident(devices.size(), 0);
    {
        GemmOptions o = resident_options;
        Windows w(a, b, c, sink_mutex, problem, options, cut.panels[0]);
        w.point(o);
        for (std::size_t d = 0; d < devices.size(); ++d) {
            try {
                (void)plan_gemm(*devices[d], w.a, w.b, w.c, o);
                resident[d] = 1;
            } catch (const UsageError&) {  // below the tiles' minimum: plain units
            }
        }
    }

    // Pinned staging, slot memory and queues kept per device across its units, and
    // across calls where the caller passes them (GemmOptions' caches belong to one
    // device, so they are not used here).
    std::optional<DeviceCaches> own;
    DeviceCaches& kept = caches != nullptr ? *caches : own.emplace(devices);
    // Progress is called on the device threads only (never on a pipeline thread, where
    // locks are held and, on CUDA, the download queue's host thread may not touch the
    // device), serialised here; a throw from it fails the call like any unit's failure.
    std::mutex progress_mutex;
    std::uint64_t done = 0;
    auto units_done = [&](std::uint64_t count) {
        if (count == 0) return;
        std::lock_guard lock(progress_mutex);
        for (std::uint64_t i = 0; i < count; ++i) {
            ++done;
            if (options.progress)
                options.progress(static_cast<double>(done) / static_cast<double>(cut.units.size()));
        }
    };
    // Unit u's tiles in its panel's window, in the order the plan walks them.
    auto tiles_of = [&](const Unit& u) {
        const std::uint64_t begin = columns ? u.i0 : u.j0;
        const std::uint64_t extent = columns ? u.m : u.n;
        const std::uint64_t tile = columns ? report.plan.tile_m : report.plan.tile_n;
        return std::pair{begin / tile, (begin + extent + tile - 1) / tile};
    };

    detail::PanelQueue queue(cut.units_per_panel, devices.size());
    detail::run_panels(devices, queue, kComponent, [&](std::size_t d, detail::PanelQueue::Visit visit) {
        if (resident[d] == 0) {
            for (std::optional<std::size_t> u = visit.unit; u; u = queue.next(visit.panel)) {
                Windows w(a, b, c, sink_mutex, problem, options, cut.units[*u]);
                GemmOptions o = options;
                o.progress = {};
                o.c_slots = 0;  // planned for the unit alone
                o.one_call_per_chunk = true;
                o.next_tiles = {};
                o.tile_written = {};
                kept.at(d).use_in(o);
                w.point(o);
                report.devices[d].add(gemm(*devices[d], w.a, w.b, w.c, o));
                units_done(1);
            }
            return;
        }
        // One GEMM over the panel's window, fed its units one by one: the panel goes
        // up once for all of them.
        Windows w(a, b, c, sink_mutex, problem, options, cut.panels[visit.panel]);
        GemmOptions o = resident_options;
        kept.at(d).use_in(o);
        w.point(o);
        // Tiles written are tracked per claimed unit (with several writer threads drains
        // finish out of order, so a count of tiles would report a unit early).
        std::mutex claimed_mutex;         // claims on this thread, tiles on a pipeline thread
        std::vector<std::uint64_t> left;  // per claimed unit: its tiles not yet written
        std::vector<std::size_t> owner(tiles_of(cut.panels[visit.panel]).second, 0);  // tile -> claimed unit
        std::uint64_t finished = 0;  // claimed units with every tile written
        std::uint64_t reported = 0;  // of those, passed to progress (this thread)
        double claim_wait = 0;       // seconds spent waiting in queue.next
        auto report_finished = [&] {
            std::uint64_t now = 0;
            {
                std::lock_guard lock(claimed_mutex);
                now = finished;
            }
            units_done(now - reported);
            reported = now;
        };
        auto claim = [&](std::size_t u) {
            const auto [begin, end] = tiles_of(cut.units[u]);
            std::lock_guard lock(claimed_mutex);
            for (std::uint64_t t = begin; t < end; ++t) owner[t] = left.size();
            left.push_back(end - begin);
            return std::pair{begin, end};
        };
        auto next_unit = [&]() -> std::optional<std::size_t> {
            const auto t0 = std::chrono::steady_clock::now();
            const std::optional<std::size_t> u = queue.next(visit.panel);
            claim_wait += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            return u;
        };
        std::optional<std::size_t> first = visit.unit;
        o.next_tiles = [&]() -> std::pair<std::uint64_t, std::uint64_t> {
            report_finished();
            const std::optional<std::size_t> u = first ? first : next_unit();
            first.reset();
            if (!u) return {0, 0};
            auto range = claim(*u);
            if (devices.size() == 1) {
                // No other device could take the rest of the panel: claim it all now, so
                // the GEMM does not wait for its tiles to land between units. A panel's
                // units are consecutive and cut in tile order, so the ranges join.
                while (const std::optional<std::size_t> more = next_unit()) {
                    const auto next = claim(*more);
                    if (next.first != range.second)
                        throw InternalError(kComponent, "a panel's units do not join");
                    range.second = next.second;
                }
            }
            return range;
        };
        o.tile_written = [&](std::uint64_t t) {
            std::lock_guard lock(claimed_mutex);
            if (--left[owner[t]] == 0) ++finished;
        };
        const GemmReport r = gemm(*devices[d], w.a, w.b, w.c, o);
        report.devices[d].add(r, left.size());
        // Time blocked on the other devices' first claims is not this device's work.
        report.devices[d].busy_seconds -= claim_wait;
        report_finished();
    });

    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double flops = 2.0 * static_cast<double>(problem.m) * static_cast<double>(problem.n) *
                         static_cast<double>(problem.k);
    report.tflops = report.seconds > 0 ? flops / report.seconds * 1e-12 : 0.0;
    report.bytes_moved = detail::bytes_moved(report.devices);
    return report;
}

}  // namespace outcore::ops
