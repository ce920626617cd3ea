// filter_run.cpp — the tiled filter executor: plan with tile::plan_filter, stream the
// tiles through a tile::Pipeline (see outcore/ops/filter_run.hpp).
#include "outcore/ops/filter_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "filter_tile.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/kernel_params.hpp"
#include "outcore/tile/rates.hpp"

namespace outcore::ops {

namespace {

constexpr const char* kComponent = "filter";
constexpr std::uint32_t kDownloadStaging = 2;
constexpr std::uint32_t kDefaultReaders = 2;
/// Each retry of the planning budget shrinks it by at least this fraction, so the
/// search ends in a few steps even when the deficit is tiny.
constexpr std::uint64_t kShrinkDivisor = 64;
constexpr int kPlanAttempts = 16;

tile::PlanLimits limits_for(const Device& device, const FilterOptions& options) {
    const DeviceInfo& info = device.info();
    tile::PlanLimits limits;
    limits.budget_bytes =
        options.budget_bytes != 0 ? options.budget_bytes : info.recommended_working_set_bytes;
    limits.min_offset_alignment = info.min_offset_alignment;
    limits.max_buffer_bytes = info.max_buffer_bytes;
    limits.max_inline_bytes = info.max_inline_bytes;
    limits.pipeline_depth = options.pipeline_depth;
    limits.link_bytes_per_second = options.link_bytes_per_second;
    limits.link_d2h_bytes_per_second = options.link_d2h_bytes_per_second;
    limits.link_duplex_bytes_per_second = options.link_duplex_bytes_per_second;
    return limits;
}

/// Device bytes of the taps when they do not go inline (a buffer outside the
/// pipeline's slots, counted against the same budget).
std::uint64_t weights_device_bytes(const Device& device, const FilterSpec& spec) {
    const std::uint64_t bytes = spec.kernel.size() * sizeof(float);
    if (bytes == 0 || fits_inline(device.info(), bytes)) return 0;
    return align_up(bytes, device.info().min_offset_alignment);
}

tile::FilterProblem problem_for(const FilterSpec& spec, const ImageShape& image,
                                const FilterOptions& options) {
    return tile::FilterProblem{.image = image.extent,
                               .channels = image.channels,
                               .type = image.type,
                               .halo = spec.halo(),
                               .separable = spec.separable(),
                               .tail = tile::TailPolicy::Shrink,
                               .strips_only = options.strips_only};
}

/// Replaces the planner's slot sizes and byte counts with this executor's: inputs
/// padded by the full halo on the host, one f32 intermediate, outputs of the image
/// type, and a weights buffer when the taps are not inline.
void cost(tile::FilterPlan& plan, const FilterSpec& spec, const ImageShape& image,
          const tile::PlanLimits& limits, std::uint64_t weights_bytes) {
    const std::uint64_t align = limits.min_offset_alignment;
    const std::uint64_t h2 = 2ULL * spec.halo();
    const std::uint64_t pix = image.pixel_bytes();
    const tile::TileShape t = plan.tile;
    auto aligned = [&](std::uint64_t bytes) { return checked_align_up(bytes, align, kComponent); };
    plan.input_slot_bytes = aligned(checked_mul(
        checked_mul(checked_add(t.rows, h2, kComponent), checked_add(t.cols, h2, kComponent), kComponent),
        pix, kComponent));
    plan.intermediate_bytes =
        spec.separable() ? aligned(detail::intermediate_bytes(spec, image.channels, t)) : 0;
    plan.output_slot_bytes = aligned(checked_mul(checked_mul(t.rows, t.cols, kComponent), pix, kComponent));
    std::uint64_t device = checked_mul(plan.depth, plan.input_slot_bytes, kComponent);
    device =
        checked_add(device, checked_mul(plan.output_slots, plan.output_slot_bytes, kComponent), kComponent);
    device = checked_add(device, plan.intermediate_bytes, kComponent);
    plan.device_bytes = checked_add(device, weights_bytes, kComponent);
    // Shrink tiles: Σ over tiles of (rows + 2h)(cols + 2h) factors into the sums over
    // tile rows and tile columns.
    const tile::TileGrid& g = plan.grid;
    const std::uint64_t padded_rows =
        checked_add(image.extent.rows, checked_mul(g.tile_rows(), h2, kComponent), kComponent);
    const std::uint64_t padded_cols =
        checked_add(image.extent.cols, checked_mul(g.tile_cols(), h2, kComponent), kComponent);
    plan.bytes_to_device = checked_mul(checked_mul(padded_rows, padded_cols, kComponent), pix, kComponent);
    plan.bytes_to_host = checked_mul(image.extent.rows, image.row_bytes(), kComponent);
    plan.bytes_moved = checked_add(plan.bytes_to_device, plan.bytes_to_host, kComponent);
    plan.lower_bound_bytes = checked_mul(plan.bytes_to_host, 2, kComponent);
    plan.halo_overhead_fraction = static_cast<double>(plan.bytes_moved - plan.lower_bound_bytes) /
                                  static_cast<double>(plan.lower_bound_bytes);
    const double up = limits.link_bytes_per_second;
    const double down = limits.link_d2h_bytes_per_second > 0 ? limits.link_d2h_bytes_per_second : up;
    if (up > 0) {
        const tile::TileRect first = g.tile(0);
        const tile::TileRect last = g.tile(g.count() - 1);
        plan.transfer_seconds =
            static_cast<double>(plan.bytes_to_device) / up + static_cast<double>(plan.bytes_to_host) / down;
        plan.fill_seconds = static_cast<double>((first.size.rows + h2) * (first.size.cols + h2) * pix) / up;
        plan.drain_seconds = static_cast<double>(last.size.rows * last.size.cols * pix) / down;
        plan.total_seconds = plan.transfer_seconds + plan.fill_seconds + plan.drain_seconds;
    }
}

std::string describe(const FilterSpec& spec, const ImageShape& image) {
    return fmt::format("{} filter (halo {}) on a {}x{}x{} {} image", to_string(spec.kind), spec.halo(),
                       image.extent.rows, image.extent.cols, image.channels, outcore::to_string(image.type));
}

/// The planner's smallest tiling, costed as this executor runs it: the minimum.
tile::FilterPlan smallest_plan(const FilterSpec& spec, const ImageShape& image,
                               const tile::FilterProblem& problem, const tile::PlanLimits& base,
                               std::uint64_t weights_bytes) {
    tile::PlanLimits limits = base;
    // A footprint, not a time: planned untimed (fewest bytes), so the minimum is the
    // same whatever link rates the options carry (ops::filter measures them).
    limits.link_bytes_per_second = 0;
    limits.link_d2h_bytes_per_second = 0;
    limits.link_duplex_bytes_per_second = 0;
    limits.budget_bytes = tile::filter_minimum_budget(problem, limits);
    tile::FilterPlan plan = tile::plan_filter(problem, limits);
    cost(plan, spec, image, base, weights_bytes);
    return plan;
}

}  // namespace

std::uint64_t filter_minimum_budget(const Device& device, const FilterSpec& spec, const io::ImageInfo& info,
                                    const FilterOptions& options) {
    spec.validate();
    const ImageShape image = image_shape(info);
    return smallest_plan(spec, image, problem_for(spec, image, options), limits_for(device, options),
                         weights_device_bytes(device, spec))
        .device_bytes;
}

ImageShape image_shape(const io::ImageInfo& info) {
    const ImageShape shape{
        .extent = {.rows = info.rows, .cols = info.cols}, .channels = info.channels, .type = info.dtype};
    shape.validate();
    return shape;
}

tile::FilterPlan plan_filter(const Device& device, const FilterSpec& spec, const io::ImageInfo& info,
                             const FilterOptions& options) {
    spec.validate();
    const ImageShape image = image_shape(info);
    const tile::PlanLimits base = limits_for(device, options);
    const std::uint64_t budget = base.budget_bytes;
    const std::uint64_t weights = weights_device_bytes(device, spec);
    const tile::FilterProblem problem = problem_for(spec, image, options);

    if ((options.tile_rows == 0) != (options.tile_cols == 0)) {
        throw UsageError(kComponent, "a forced tile needs both tile_rows and tile_cols");
    }
    if (options.tile_rows != 0) {
        if (options.pipeline_depth < 2 || options.pipeline_depth > 3) {
            throw UsageError(kComponent, fmt::format("pipeline depth {} (2 or 3)", options.pipeline_depth));
        }
        tile::FilterPlan plan;
        plan.problem = problem;
        plan.tile = tile::TileShape{.rows = std::min(options.tile_rows, image.extent.rows),
                                    .cols = std::min(options.tile_cols, image.extent.cols)};
        plan.grid = tile::TileGrid(image.extent, plan.tile, tile::TailPolicy::Shrink);
        plan.row_strips = plan.tile.cols == image.extent.cols;
        plan.depth =
            static_cast<std::uint32_t>(std::min<std::uint64_t>(options.pipeline_depth, plan.grid.count()));
        plan.output_slots = static_cast<std::uint32_t>(std::min<std::uint64_t>(2, plan.grid.count()));
        cost(plan, spec, image, base, weights);
        if (plan.device_bytes > budget) {
            throw UsageError(
                kComponent,
                fmt::format("{}x{} tiles need {} of device memory, over the budget of {}", plan.tile.rows,
                            plan.tile.cols, format_size(plan.device_bytes), format_size(budget)));
        }
        return plan;
    }

    tile::PlanLimits limits = base;
    const std::uint64_t planner_minimum = tile::filter_minimum_budget(problem, limits);
    const tile::FilterPlan smallest = smallest_plan(spec, image, problem, base, weights);
    if (smallest.device_bytes > budget) {
        throw UsageError(kComponent,
                         fmt::format("a device budget of {} is below the minimum of {} ({} bytes) for a {}",
                                     format_size(budget), format_size(smallest.device_bytes),
                                     smallest.device_bytes, describe(spec, image)));
    }
    // Host-side halos make slots larger than the planner counts: shrink the budget it
    // plans with until the executor's slots fit the real one.
    std::uint64_t plan_budget = budget - weights;
    for (int attempt = 0; attempt < kPlanAttempts && plan_budget >= planner_minimum; ++attempt) {
        limits.budget_bytes = plan_budget;
        tile::FilterPlan plan = tile::plan_filter(problem, limits);
        cost(plan, spec, image, base, weights);
        if (plan.device_bytes <= budget) return plan;
        const std::uint64_t shrink = std::max(plan.device_bytes - budget, plan_budget / kShrinkDivisor);
        if (plan_budget - planner_minimum < shrink) break;
        plan_budget -= shrink;
    }
    return smallest;
}

FilterReport execute_filter(Device& device, const tile::FilterPlan& plan, const FilterSpec& spec,
                            const io::ImageSource& source, io::ImageSink& sink,
                            const FilterOptions& options) {
    const auto start = std::chrono::steady_clock::now();
    spec.validate();
    const ImageShape image = image_shape(source.info());
    const io::ImageInfo& out_info = sink.info();
    if (out_info.rows != image.extent.rows || out_info.cols != image.extent.cols ||
        out_info.channels != image.channels || out_info.dtype != image.type) {
        throw UsageError(
            kComponent,
            fmt::format("the output is {}x{}x{} {}, the input {}x{}x{} {}", out_info.rows, out_info.cols,
                        out_info.channels, outcore::to_string(out_info.dtype), image.extent.rows,
                        image.extent.cols, image.channels, outcore::to_string(image.type)));
    }
    const tile::FilterProblem& pp = plan.problem;
    if (pp.image != image.extent || pp.channels != image.channels || pp.type != image.type ||
        pp.halo != spec.halo() || pp.separable != spec.separable() || plan.grid.extent() != image.extent ||
        plan.grid.count() == 0 || plan.grid.tail() != tile::TailPolicy::Shrink || plan.depth == 0 ||
        plan.output_slots == 0) {
        throw UsageError(kComponent,
                         "the plan was made for another image or filter (make it with plan_filter)");
    }
    const tile::PlanLimits limits = limits_for(device, options);
    const std::uint64_t budget = limits.budget_bytes;
    const std::uint64_t weights_bytes = weights_device_bytes(device, spec);
    // Sizes are recomputed rather than trusted: a hand-edited plan cannot overrun a slot.
    tile::FilterPlan run = plan;
    cost(run, spec, image, limits, weights_bytes);
    if (run.device_bytes > budget) {
        throw UsageError(kComponent, fmt::format("the plan needs {} of device memory, over the budget of {}",
                                                 format_size(run.device_bytes), format_size(budget)));
    }

    // Taps: inline, or a small device buffer filled before the run (counted above).
    KernelParams weights;
    {
        const std::unique_ptr<Queue> queue = device.create_queue(QueueRole::Upload);
        weights = detail::make_weights(device, *queue, spec);
        queue->synchronize();
    }

    const std::uint32_t halo = spec.halo();
    const std::uint64_t pix = image.pixel_bytes();
    const std::uint64_t row_bytes = image.row_bytes();
    const std::uint64_t width = image.extent.cols;
    const bool strips = run.grid.tile_cols() == 1;
    // A 2-D tile reads only its columns (in-memory sources copy them directly).
    const RegionReader read = [&source](std::uint64_t row0, std::uint64_t rows, std::uint64_t col0,
                                        std::uint64_t cols, std::byte* dst, std::uint64_t stride) {
        source.read_region(row0, rows, col0, cols, dst, stride);
    };
    // A device-readable source gives each tile's pixels straight to the device, which
    // fills the halo beyond the image's edge itself; a device-writable sink takes
    // each output tile straight from the device. Neither then needs staging.
    const std::optional<io::DirectImage> direct_in = source.direct_source();
    const std::optional<io::DirectImage> direct_out = sink.direct_sink();
    // 2-D tiles into a sink that takes rows: output rows are assembled across a band of
    // tiles, then written in order (sinks such as TIFF take rows top to bottom). Only
    // then: zeroing a band of a large image costs more than streaming it (0.4 s for the
    // 704 MiB band of 32768² f32 in 5632-row tiles, measured on the H200's host).
    std::vector<std::byte> band(strips || direct_out ? 0
                                                     : static_cast<std::size_t>(run.tile.rows * row_bytes));
    std::uint64_t rows_written = 0;  // writer thread only

    std::vector<tile::SlotSpec> slots;
    for (std::uint32_t i = 0; i < run.depth; ++i) slots.push_back({run.input_slot_bytes, "filter.in"});
    const tile::SlotId mid_slot{static_cast<std::uint32_t>(slots.size())};
    if (spec.separable()) slots.push_back({run.intermediate_bytes, "filter.intermediate"});
    const auto first_out = static_cast<std::uint32_t>(slots.size());
    for (std::uint32_t i = 0; i < run.output_slots; ++i)
        slots.push_back({run.output_slot_bytes, "filter.out"});

    const auto prepared = std::chrono::steady_clock::now();
    tile::PipelineStats stats;
    std::chrono::steady_clock::time_point streamed;
    // Declared after everything its work touches: destroying it (end of this scope)
    // drains the device work and host threads first.
    {
        tile::Pipeline p(device, tile::PipelineOptions{
                                     .budget_bytes = budget - weights_bytes,
                                     .slots = std::move(slots),
                                     .upload_staging = {.bytes = direct_in ? 0 : run.input_slot_bytes,
                                                        .count = direct_in ? 0 : run.depth},
                                     .download_staging = {.bytes = direct_out ? 0 : run.output_slot_bytes,
                                                          .count = direct_out ? 0 : kDownloadStaging},
                                     .reader_threads = direct_in                     ? 0
                                                       : options.reader_threads != 0 ? options.reader_threads
                                                                                     : kDefaultReaders,
                                     .writer_threads = 1,
                                     .measure_busy = options.measure_busy,
                                 });
        const tile::TileGrid& grid = run.grid;
        for (std::uint64_t i = 0; i < grid.count(); ++i) {
            const tile::TileRect t = grid.tile(i);
            const tile::SlotId in_slot{static_cast<std::uint32_t>(i % run.depth)};
            const tile::SlotId out_slot{first_out + static_cast<std::uint32_t>(i % run.output_slots)};
            const std::uint64_t in_stride = (t.size.cols + 2ULL * halo) * pix;
            const std::uint64_t in_bytes = (t.size.rows + 2ULL * halo) * in_stride;
            const std::uint64_t out_stride = t.size.cols * pix;
            const std::uint64_t out_bytes = t.size.rows * out_stride;

            const detail::HaloRegion region = detail::halo_region(image, t, halo, spec.edge, in_stride);
            const bool pad_on_device = direct_in && region.area.crosses_edge();
            if (direct_in) {
                const Copy2D shape{.width_bytes = (region.col_hi - region.col_lo) * pix,
                                   .rows = region.row_hi - region.row_lo,
                                   .host_pitch_bytes = direct_in->row_stride_bytes,
                                   .buffer_pitch_bytes = in_stride};
                p.upload_2d_from(
                    in_slot, region.inside_offset,
                    direct_in->data + region.row_lo * direct_in->row_stride_bytes + region.col_lo * pix,
                    shape);
            } else {
                p.upload(in_slot, 0, in_bytes,
                         [&image, &spec, &read, t, halo, in_stride](std::span<std::byte> staging) {
                             fill_halo(image, t, halo, spec.edge, read, staging.data(), in_stride);
                         });
            }
            detail::FilterTileViews views{.in = p.view(in_slot).sub(0, in_bytes),
                                          .in_stride = in_stride,
                                          .intermediate = {},
                                          .intermediate_stride = 0,
                                          .out = p.view(out_slot).sub(0, out_bytes),
                                          .out_stride = out_stride};
            std::vector<tile::SlotAccess> accesses{
                pad_on_device ? tile::updates(in_slot) : tile::reads(in_slot), tile::writes(out_slot)};
            if (spec.separable()) {
                // Written by the row pass, read by the column pass, never downloaded.
                views.intermediate = p.view(mid_slot);
                views.intermediate_stride = detail::intermediate_row_bytes(image.channels, t.size.cols);
                accesses.push_back(tile::writes(mid_slot));
            }
            p.compute(
                std::span<const tile::SlotAccess>(accesses),
                [&device, &spec, &weights, &image, t, views, pad_on_device, area = region.area](Queue& q) {
                    if (pad_on_device)
                        device.kernels().pad_edges(q, PadEdgesArgs{.area = area, .buffer = views.in});
                    detail::enqueue_filter_tile(device.kernels(), q, spec, weights, image, image.type, t.size,
                                                views);
                },
                to_string(spec.kind));
            if (direct_out) {
                const Copy2D shape{.width_bytes = out_stride,
                                   .rows = t.size.rows,
                                   .host_pitch_bytes = direct_out->row_stride_bytes,
                                   .buffer_pitch_bytes = out_stride};
                p.download_2d_to(out_slot, 0,
                                 direct_out->data + t.row * direct_out->row_stride_bytes + t.col * pix, shape,
                                 [&, t] {
                                     if (t.col + t.size.cols < width) return;  // one report per band
                                     rows_written += t.size.rows;
                                     if (options.progress) {
                                         options.progress(static_cast<double>(rows_written) /
                                                          static_cast<double>(image.extent.rows));
                                     }
                                 });
                continue;
            }
            p.download(out_slot, 0, out_bytes, [&, t, out_stride](std::span<const std::byte> staging) {
                if (strips) {
                    sink.write_rows(t.row, t.size.rows, staging.data(), out_stride);
                } else {
                    for (std::uint64_t r = 0; r < t.size.rows; ++r) {
                        std::memcpy(band.data() + r * row_bytes + t.col * pix,
                                    staging.data() + r * out_stride, static_cast<std::size_t>(out_stride));
                    }
                    if (t.col + t.size.cols < width) return;  // the band is not complete yet
                    sink.write_rows(t.row, t.size.rows, band.data(), row_bytes);
                }
                rows_written += t.size.rows;
                if (options.progress) {
                    options.progress(static_cast<double>(rows_written) /
                                     static_cast<double>(image.extent.rows));
                }
            });
        }
        stats = p.finish();
        streamed = std::chrono::steady_clock::now();
    }
    const auto done = std::chrono::steady_clock::now();
    auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    log::debug(kComponent, "{} tiles: set-up {:.1f} ms, pipeline {:.1f} ms, tear-down {:.1f} ms",
               run.grid.count(), ms(start, prepared), ms(prepared, streamed), ms(streamed, done));

    FilterReport r;
    r.plan = run;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.megapixels_per_second =
        r.seconds > 0 ? static_cast<double>(image.extent.rows * image.extent.cols) / r.seconds / 1e6 : 0.0;
    r.bytes_moved = stats.bytes_uploaded + stats.bytes_downloaded;
    r.lower_bound_bytes = run.lower_bound_bytes;
    r.peak_device_bytes = stats.peak_device_bytes + weights_bytes;
    r.budget_bytes = budget;
    if (r.peak_device_bytes > budget) {
        throw InternalError(kComponent, fmt::format("held {} of device memory, over the budget of {}",
                                                    format_size(r.peak_device_bytes), format_size(budget)));
    }
    r.hidden_transfer_fraction = stats.hidden_transfer_fraction;
    r.upload_busy_seconds = stats.upload_busy_seconds;
    r.compute_busy_seconds = stats.compute_busy_seconds;
    r.download_busy_seconds = stats.download_busy_seconds;
    r.read_busy_seconds = stats.read_busy_seconds;
    r.write_busy_seconds = stats.write_busy_seconds;
    r.pipeline = stats;
    return r;
}

FilterOptions with_measured_rates(Device& device, const FilterOptions& options) {
    FilterOptions o = options;
    if (!o.measure_rates) return o;
    const tile::DeviceRates& r = tile::cached_link_rates(device);
    if (o.link_bytes_per_second == 0) o.link_bytes_per_second = r.upload_bytes_per_second;
    if (o.link_d2h_bytes_per_second == 0) o.link_d2h_bytes_per_second = r.download_bytes_per_second;
    if (o.link_duplex_bytes_per_second == 0) o.link_duplex_bytes_per_second = r.duplex_bytes_per_second;
    return o;
}

FilterReport filter(Device& device, const FilterSpec& spec, const io::ImageSource& source,
                    io::ImageSink& sink, const FilterOptions& options) {
    const FilterOptions o = with_measured_rates(device, options);
    const tile::FilterPlan plan = plan_filter(device, spec, source.info(), o);
    return execute_filter(device, plan, spec, source, sink, o);
}

}  // namespace outcore::ops
