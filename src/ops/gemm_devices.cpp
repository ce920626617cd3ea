#include "outcore/ops/gemm_devices.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <set>
#include <thread>

#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
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
    SinkWindow(io::MatrixSink& s, std::uint64_t row0, std::uint64_t col0, std::uint64_t rows,
               std::uint64_t cols)
        : s_(s), row0_(row0), col0_(col0), rows_(rows), cols_(cols) {}
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
        s_.write(row0_ + row0, col0_ + col0, rows, cols, src, ld_elements);
    }

    io::MatrixSink& s_;
    std::uint64_t row0_, col0_, rows_, cols_;
};

/// A block of C: rows [i0, i0 + m) × columns [j0, j0 + n).
struct Unit {
    std::uint64_t i0 = 0, m = 0, j0 = 0, n = 0;
};

/// Cuts `extent` into `pieces` runs that are multiples of `tile` (the last shorter).
std::vector<std::pair<std::uint64_t, std::uint64_t>> cut(std::uint64_t extent, std::uint64_t tile,
                                                         std::uint64_t pieces) {
    const std::uint64_t tiles = (extent + tile - 1) / tile;
    pieces = std::clamp<std::uint64_t>(pieces, 1, tiles);
    std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
    std::uint64_t begin_tile = 0;
    for (std::uint64_t p = 0; p < pieces; ++p) {
        const std::uint64_t end_tile = tiles * (p + 1) / pieces;
        const std::uint64_t begin = begin_tile * tile;
        const std::uint64_t end = std::min(extent, end_tile * tile);
        if (end > begin) out.emplace_back(begin, end - begin);
        begin_tile = end_tile;
    }
    return out;
}

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
    for (const auto& [o0, on] : cut(outer_extent, outer_tile, panels)) {
        for (const auto& [i0, in] : cut(inner_extent, inner_tile, split)) {
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
    if (devices.empty()) throw UsageError(kComponent, "no devices to run on");
    std::set<const Device*> seen;
    for (const Device* d : devices) {
        if (d == nullptr) throw UsageError(kComponent, "a null device");
        if (!seen.insert(d).second) {
            throw UsageError(kComponent, fmt::format("device {} is listed twice", d->info().id()));
        }
    }
    const tile::GemmProblem problem = gemm_problem(a, b, c, options);
    MultiGemmReport report;
    report.plan = plan_gemm(*devices[0], a, b, c, options);
    const std::vector<Unit> units = make_units(report.plan, problem.m, problem.n, devices.size());
    report.units = units.size();
    report.devices.resize(devices.size());

    std::atomic<std::size_t> next{0};
    std::atomic<bool> stop{false};
    std::mutex mutex;  // guards failure, done and the progress callback
    std::exception_ptr failure;
    std::uint64_t done = 0;

    auto run_device = [&](std::size_t d) {
        Device& device = *devices[d];
        DeviceShare& share = report.devices[d];
        share.device = device.info().id();
        try {
            for (;;) {
                if (stop.load()) return;
                const std::size_t u = next.fetch_add(1);
                if (u >= units.size()) return;
                const Unit& unit = units[u];
                // op(A) rows i0.. are A's columns when A is stored transposed; likewise B.
                const SourceWindow wa = options.trans_a ? SourceWindow(a, 0, unit.i0, problem.k, unit.m)
                                                        : SourceWindow(a, unit.i0, 0, unit.m, problem.k);
                const SourceWindow wb = options.trans_b ? SourceWindow(b, unit.j0, 0, unit.n, problem.k)
                                                        : SourceWindow(b, 0, unit.j0, problem.k, unit.n);
                SinkWindow wc(c, unit.i0, unit.j0, unit.m, unit.n);
                std::optional<SourceWindow> wc_in;
                GemmOptions o = options;
                o.progress = {};
                if (problem.beta_nonzero) {
                    wc_in.emplace(*options.c_in, unit.i0, unit.j0, unit.m, unit.n);
                    o.c_in = &*wc_in;
                }
                const GemmReport r = gemm(device, wa, wb, wc, o);
                share.units += 1;
                share.bytes_moved += r.bytes_moved;
                share.peak_device_bytes = std::max(share.peak_device_bytes, r.peak_device_bytes);
                share.budget_bytes = r.budget_bytes;
                share.busy_seconds += r.seconds;
                std::lock_guard lock(mutex);
                ++done;
                if (options.progress) {
                    options.progress(static_cast<double>(done) / static_cast<double>(units.size()));
                }
            }
        } catch (...) {
            stop.store(true);
            std::lock_guard lock(mutex);
            if (!failure) {
                failure = std::current_exception();
                try {
                    std::rethrow_exception(failure);
                } catch (const std::exception& e) {
                    log::error(kComponent, "device {} failed; stopping the others: {}", share.device,
                               e.what());
                } catch (...) {
                    log::error(kComponent, "device {} failed; stopping the others", share.device);
                }
            }
        }
    };
    std::vector<std::thread> threads;
    threads.reserve(devices.size());
    for (std::size_t d = 0; d < devices.size(); ++d) threads.emplace_back(run_device, d);
    for (std::thread& t : threads) t.join();
    if (failure) std::rethrow_exception(failure);

    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double flops = 2.0 * static_cast<double>(problem.m) * static_cast<double>(problem.n) *
                         static_cast<double>(problem.k);
    report.tflops = report.seconds > 0 ? flops / report.seconds * 1e-12 : 0.0;
    for (const DeviceShare& s : report.devices) report.bytes_moved += s.bytes_moved;
    return report;
}

}  // namespace outcore::ops
