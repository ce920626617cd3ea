#include "outcore/ops/filter_devices.hpp"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>

#include "ops/unit_scheduler.hpp"
#include "outcore/core/error.hpp"

namespace outcore::ops {

namespace {

constexpr const char* kComponent = "filter";

/// Rows [lo, lo + info.rows) of a source, as an image.
class BandSource final : public io::ImageSource {
public:
    BandSource(const io::ImageSource& s, std::uint64_t lo, std::uint64_t rows)
        : s_(s), lo_(lo), info_(s.info()) {
        info_.rows = rows;
    }
    [[nodiscard]] const io::ImageInfo& info() const noexcept override { return info_; }
    [[nodiscard]] std::optional<io::DirectImage> direct_source() const override {
        std::optional<io::DirectImage> d = s_.direct_source();
        if (d) d->data += lo_ * d->row_stride_bytes;
        return d;
    }

private:
    void do_read_rows(std::uint64_t row0, std::uint64_t rows, std::byte* dst,
                      std::uint64_t row_stride_bytes) const override {
        s_.read_rows(lo_ + row0, rows, dst, row_stride_bytes);
    }
    void do_read_region(std::uint64_t row0, std::uint64_t rows, std::uint64_t col0, std::uint64_t cols,
                        std::byte* dst, std::uint64_t row_stride_bytes) const override {
        s_.read_region(lo_ + row0, rows, col0, cols, dst, row_stride_bytes);
    }

    const io::ImageSource& s_;
    std::uint64_t lo_;
    io::ImageInfo info_;
};

/// A band of rows [lo, lo + info.rows) of a sink that passes on only the rows in
/// [keep_lo, keep_hi) (image rows), under a lock shared by every band. Never direct:
/// the rows it drops must not reach the image.
class BandSink final : public io::ImageSink {
public:
    BandSink(io::ImageSink& s, std::mutex& mutex, std::uint64_t lo, std::uint64_t rows, std::uint64_t keep_lo,
             std::uint64_t keep_hi)
        : s_(s), mutex_(mutex), lo_(lo), keep_lo_(keep_lo), keep_hi_(keep_hi), info_(s.info()) {
        info_.rows = rows;
    }
    [[nodiscard]] const io::ImageInfo& info() const noexcept override { return info_; }

private:
    void do_write_rows(std::uint64_t row0, std::uint64_t rows, const std::byte* src,
                       std::uint64_t row_stride_bytes) override {
        const std::uint64_t first = std::max(lo_ + row0, keep_lo_);
        const std::uint64_t last = std::min(lo_ + row0 + rows, keep_hi_);
        if (first >= last) return;
        std::lock_guard lock(mutex_);
        s_.write_rows(first, last - first, src + (first - lo_ - row0) * row_stride_bytes, row_stride_bytes);
    }

    io::ImageSink& s_;
    std::mutex& mutex_;
    std::uint64_t lo_, keep_lo_, keep_hi_;
    io::ImageInfo info_;
};

}  // namespace

MultiFilterReport filter_on_devices(std::span<Device* const> devices, const FilterSpec& spec,
                                    const io::ImageSource& source, io::ImageSink& sink,
                                    const FilterOptions& options, bool in_order_sink) {
    const auto start = std::chrono::steady_clock::now();
    detail::check_devices(devices, kComponent);
    if (in_order_sink && devices.size() > 1) {
        throw UsageError(kComponent,
                         "this output takes rows only top to bottom (TIFF); write .npy to filter "
                         "on several devices");
    }
    const io::ImageInfo& image = source.info();
    const std::optional<io::DirectImage> direct_in = source.direct_source();
    const std::optional<io::DirectImage> direct_out = sink.direct_sink();
    if (devices.size() > 1 && (dynamic_cast<const void*>(&source) == dynamic_cast<const void*>(&sink) ||
                               (direct_in && direct_out && direct_in->data == direct_out->data))) {
        throw UsageError(kComponent,
                         "filtering in place on several devices: a band would overwrite rows its "
                         "neighbour still reads");
    }
    // Bands are cut in multiples of the plan a single device would run (ops::filter
    // measures the link, as each band's own run below does).
    const tile::FilterPlan plan =
        plan_filter(*devices[0], spec, image, with_measured_rates(*devices[0], options));
    for (std::size_t d = 1; d < devices.size(); ++d) (void)plan_filter(*devices[d], spec, image, options);
    const std::uint64_t rows = image.rows;
    const std::uint64_t halo = spec.halo();
    // Four bands per device: enough to even out the end; but no band under 8·halo rows,
    // so the halo rows each band reads and filters again (2·halo) stay a small part.
    const std::uint64_t by_halo = std::max<std::uint64_t>(rows / (8 * std::max<std::uint64_t>(halo, 1)), 1);
    const std::uint64_t pieces = std::min<std::uint64_t>(4 * devices.size(), by_halo);
    const auto bands = detail::cut(rows, std::max<std::uint64_t>(plan.tile.rows, 1), pieces);
    MultiFilterReport report;
    report.units = bands.size();
    report.devices = detail::empty_shares(devices);
    std::mutex sink_mutex;
    std::mutex progress_mutex;
    std::uint64_t done_rows = 0;
    detail::run_units(devices, bands.size(), kComponent, [&](std::size_t d, std::size_t u) {
        const auto [keep_lo, keep_rows] = bands[u];
        const std::uint64_t lo = keep_lo >= halo ? keep_lo - halo : 0;
        const std::uint64_t hi = std::min(rows, keep_lo + keep_rows + halo);
        const BandSource band_in(source, lo, hi - lo);
        BandSink band_out(sink, sink_mutex, lo, hi - lo, keep_lo, keep_lo + keep_rows);
        FilterOptions o = options;
        o.progress = {};
        const FilterReport r = filter(*devices[d], spec, band_in, band_out, o);
        report.devices[d].add(r);
        std::lock_guard lock(progress_mutex);
        done_rows += keep_rows;
        if (options.progress) options.progress(static_cast<double>(done_rows) / static_cast<double>(rows));
    });
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    report.megapixels_per_second =
        report.seconds > 0
            ? static_cast<double>(rows) * static_cast<double>(image.cols) / report.seconds * 1e-6
            : 0.0;
    report.bytes_moved = detail::bytes_moved(report.devices);
    return report;
}

}  // namespace outcore::ops
