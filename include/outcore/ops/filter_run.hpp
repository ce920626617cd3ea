// outcore/ops/filter_run.hpp — tiled image filtering under a device budget: the
// image never needs to fit on the device, and the result equals the in-core
// filter_whole_image_reference bit for bit.
//
//   auto in = io::open_image("in.tif");
//   auto out = io::create_image("out.tif", in->info(), /*force=*/false);
//   ops::FilterReport r = ops::filter(device, ops::FilterSpec::gaussian(8.0), *in, *out,
//                                     {.budget_bytes = 256 * kMiB});
//   out->commit();
//   r.plan.tile;  r.bytes_moved;  r.lower_bound_bytes;  r.peak_device_bytes <= r.budget_bytes
//
// How it runs. tile::plan_filter chooses the output tiles (row strips whenever they
// are nearly as cheap; no tile size to pick), then each tile streams through a
// tile::Pipeline: a reader thread fills pinned staging with the tile's input and its
// halo (fill_halo: pixels beyond the image follow the edge mode), the upload queue
// copies it into an input slot, the compute queue runs the passes — a separable
// filter's horizontal pass writes a device-only f32 intermediate that never crosses
// the link, its vertical pass writes an output slot — and the download queue brings
// the output back for the writer thread to hand to the sink. Slots form rings (depth
// 2–3 inputs, 2 outputs), so tile i+1 uploads and tile i−1 downloads while tile i
// computes.
//
// Memory. Every slot comes from the pipeline's Heap over an alloc::Budget of the
// budget, so exceeding it throws OutOfMemory instead of being trusted. The halo is
// padded on the host, so an input slot holds (tile rows + 2·halo) × (tile cols +
// 2·halo) pixels — a little more than the planner's clamped input rectangle — and
// plan_filter below shrinks the planning budget until these slots fit. Host memory:
// the staging rings (about the size of the slots again) plus, for 2-D tiles, one
// band of output rows being assembled for the sink and, per fill in flight, the
// whole-width input rows it reads (io::ImageSource reads whole rows; the planner
// prefers row strips, which read exactly their rows).
#pragma once

#include <cstdint>
#include <functional>

#include "outcore/device/device.hpp"
#include "outcore/io/image.hpp"
#include "outcore/ops/filter.hpp"
#include "outcore/tile/filter_plan.hpp"
#include "outcore/tile/pipeline.hpp"

namespace outcore::ops {

struct FilterOptions {
    /// Device bytes the run may hold; 0 = the device's recommended working set.
    std::uint64_t budget_bytes = 0;
    /// Input slots in the ring (2 or 3).
    std::uint32_t pipeline_depth = 2;
    /// Force the output tile (both non-zero; clamped to the image) instead of the
    /// planner's choice: tests and benchmarks. Still checked against the budget.
    std::uint64_t tile_rows = 0, tile_cols = 0;
    /// Only row strips (tiles as wide as the image), never 2-D tiles.
    bool strips_only = false;
    /// Host→device, device→host and both-at-once bandwidth for the planner's time
    /// model (0: unknown; see measure_rates).
    double link_bytes_per_second = 0;
    double link_d2h_bytes_per_second = 0;
    double link_duplex_bytes_per_second = 0;
    /// `filter` (and with_measured_rates) fill the link fields left at 0 from the
    /// device's measured rates (tile::cached_link_rates, once per process), so the
    /// planner weighs halo bytes against the first upload and the last download
    /// (docs/tiling.md, "Filters"); with the link unknown it takes the largest tiles.
    bool measure_rates = true;
    /// Threads filling input tiles from the source (0: 2). The sink is written by one.
    std::uint32_t reader_threads = 0;
    /// Per-queue busy times and the hidden-transfer fraction (two host tasks per op).
    bool measure_busy = true;
    /// Called with the fraction of output rows written (0..1], from the writer
    /// thread, never concurrently with itself. Must not throw (a throw fails the run).
    std::function<void(double)> progress = {};
};

struct FilterReport {
    /// The tiling run, with this executor's slot sizes and byte counts (see plan_filter).
    tile::FilterPlan plan{};
    /// Wall time of the whole call (setup, streaming, last write).
    double seconds = 0;
    /// Output pixels per second, in millions.
    double megapixels_per_second = 0;
    std::uint64_t bytes_moved = 0;        ///< measured: uploaded + downloaded
    std::uint64_t lower_bound_bytes = 0;  ///< the image in once, the result out once
    /// Highest device bytes held at once: the pipeline's Statistics adaptor under the
    /// Budget, plus a weights buffer when the taps do not fit inline.
    std::uint64_t peak_device_bytes = 0;
    std::uint64_t budget_bytes = 0;
    double hidden_transfer_fraction = 1.0;  ///< see tile::PipelineStats
    double upload_busy_seconds = 0;
    double compute_busy_seconds = 0;
    double download_busy_seconds = 0;
    double read_busy_seconds = 0;   ///< filling input tiles (source reads, halo), all readers
    double write_busy_seconds = 0;  ///< writing the sink
    tile::PipelineStats pipeline{};
};

/// The plan `filter` would run, without running it (the CLI prints it first): the
/// planner's tiling with the slot sizes, device bytes and bytes moved of this
/// executor (halo padded on the host; Shrink tails). device_bytes counts the slots and
/// a weights buffer when the taps go in one, and never exceeds the budget. Throws
/// UsageError for a bad spec or image (u8/u16/f32, 1..4 channels), forced tiles over
/// the budget, and a budget below the minimum (the message states it).
[[nodiscard]] tile::FilterPlan plan_filter(const Device& device, const FilterSpec& spec,
                                           const io::ImageInfo& image, const FilterOptions& options);

/// The smallest budget plan_filter accepts for this filter, image and options
/// (options.budget_bytes is ignored; forced tiles are not considered). Throws as
/// plan_filter does for a bad spec or image.
[[nodiscard]] std::uint64_t filter_minimum_budget(const Device& device, const FilterSpec& spec,
                                                  const io::ImageInfo& image, const FilterOptions& options);

/// Runs `plan` (from plan_filter, same spec, image and options): reads every input
/// pixel the tiles need from `source`, writes every output row once to `sink` in
/// order, top to bottom; does not commit() the sink. The sink's shape and type must
/// equal the source's. Throws the first failure of the run (UsageError, OutOfMemory,
/// IoError, BackendError ...) after stopping it and freeing what it allocated.
FilterReport execute_filter(Device& device, const tile::FilterPlan& plan, const FilterSpec& spec,
                            const io::ImageSource& source, io::ImageSink& sink, const FilterOptions& options);

/// `options` with the link fields left at 0 filled from the device's measured rates
/// when options.measure_rates (else unchanged): pass the result to plan_filter and
/// execute_filter to plan as `filter` does.
[[nodiscard]] FilterOptions with_measured_rates(Device& device, const FilterOptions& options);

/// with_measured_rates + plan_filter + execute_filter.
FilterReport filter(Device& device, const FilterSpec& spec, const io::ImageSource& source,
                    io::ImageSink& sink, const FilterOptions& options);

/// The ImageShape of an io::ImageInfo (UsageError for a type or channel count filters
/// do not take).
[[nodiscard]] ImageShape image_shape(const io::ImageInfo& info);

}  // namespace outcore::ops
