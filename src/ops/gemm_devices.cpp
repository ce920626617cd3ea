#include "outcore/ops/gemm_devices.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>

#include "ops/unit_scheduler.hpp"
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

/// Units along the plan's panels (see the header), at least two per device where the
/// problem has that many tiles.
std::vector<Unit> make_units(const tile::GemmPlan& plan, std::uint64_t m, std::uint64_t n,
                             std::size_t devices) {
    const bool columns = plan.schedule == tile::GemmSchedule::BPanelResident;
    const std::uint64_t outer_extent = columns ? n : m;
    const std::uint64_t outer_tile = columns ? plan.tile_n : plan.tile_m;
    const std::uint64_t inner_extent = columns ? m : n;
    const std::uint64_t inner_tile = columns ? plan.tile_m : plan.tile_n;
    const std::uint64_t panels = (outer_extent + outer_tile - 1) / outer_tile;
    const std::uint64_t want = 2 * static_cast<std::uint64_t>(devices);
    const std::uint64_t split = panels >= want ? 1 : (want + panels - 1) / panels;
    std::vector<Unit> units;
    for (const auto& [o0, on] : detail::cut(outer_extent, outer_tile, panels)) {
        for (const auto& [i0, in] : detail::cut(inner_extent, inner_tile, split)) {
            units.push_back(columns ? Unit{.i0 = i0, .m = in, .j0 = o0, .n = on}
                                    : Unit{.i0 = o0, .m = on, .j0 = i0, .n = in});
        }
    }
    return units;
}

}  // namespace

MultiGemmReport gemm_on_devices(std::span<Device* const> devices, const io::MatrixSource& a,
                                const io::MatrixSource& b, io::MatrixSink& c, const GemmOptions& options) {
    const auto start = std::chrono::steady_clock::now();
    detail::check_devices(devices, kComponent);
    const tile::GemmProblem problem = gemm_problem(a, b, c, options);
    MultiGemmReport report;
    report.plan = plan_gemm(*devices[0], a, b, c, options);
    GemmOptions check = options;
    check.measure_rates = false;
    for (std::size_t d = 1; d < devices.size(); ++d) (void)plan_gemm(*devices[d], a, b, c, check);
    const std::vector<Unit> units = make_units(report.plan, problem.m, problem.n, devices.size());
    report.units = units.size();
    report.devices = detail::empty_shares(devices);

    // Pinned staging kept per device across its units (a caller's cache belongs to one
    // device, so it is not used here).
    std::vector<std::unique_ptr<tile::StagingCache>> caches;
    for (Device* d : devices) caches.push_back(std::make_unique<tile::StagingCache>(*d));
    std::mutex sink_mutex;
    std::mutex progress_mutex;
    std::uint64_t done = 0;
    detail::run_units(devices, units.size(), kComponent, [&](std::size_t d, std::size_t u) {
        const Unit& unit = units[u];
        // op(A) rows i0.. are A's columns when A is stored transposed; likewise B.
        const SourceWindow wa = options.trans_a ? SourceWindow(a, 0, unit.i0, problem.k, unit.m)
                                                : SourceWindow(a, unit.i0, 0, unit.m, problem.k);
        const SourceWindow wb = options.trans_b ? SourceWindow(b, unit.j0, 0, unit.n, problem.k)
                                                : SourceWindow(b, 0, unit.j0, problem.k, unit.n);
        SinkWindow wc(c, sink_mutex, unit.i0, unit.j0, unit.m, unit.n);
        std::optional<SourceWindow> wc_in;
        GemmOptions o = options;
        o.progress = {};
        o.staging_cache = caches[d].get();
        if (problem.beta_nonzero) {
            wc_in.emplace(*options.c_in, unit.i0, unit.j0, unit.m, unit.n);
            o.c_in = &*wc_in;
        }
        const GemmReport r = gemm(*devices[d], wa, wb, wc, o);
        report.devices[d].add(r);
        std::lock_guard lock(progress_mutex);
        ++done;
        if (options.progress) options.progress(static_cast<double>(done) / static_cast<double>(units.size()));
    });

    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double flops = 2.0 * static_cast<double>(problem.m) * static_cast<double>(problem.n) *
                         static_cast<double>(problem.k);
    report.tflops = report.seconds > 0 ? flops / report.seconds * 1e-12 : 0.0;
    report.bytes_moved = detail::bytes_moved(report.devices);
    return report;
}

}  // namespace outcore::ops
