// outcore/ops/filter_devices.hpp — one tiled filter over several devices, each under
// its own budget.
//
//   ops::MultiFilterReport r = ops::filter_on_devices(devices, spec, source, sink, options);
//
// The image is cut into row bands (multiples of the single-device plan's tile rows,
// four per device where the image has that many); devices take bands from one
// shared queue (ops/unit_scheduler). Each band is filtered by ops::filter on its device
// with `halo` extra rows of the real image above and below, which the band's filter
// reads as its neighbours; the rows those extra rows make wrong (the band's own edge
// padding) are dropped, so every output row is the whole-image filter's, bit for bit.
// The sink takes the bands' rows under one lock, in band order within a band but not
// across bands: a sink that needs rows top to bottom (TiffWriter) is refused up front.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "outcore/ops/filter_run.hpp"
#include "outcore/ops/gemm_devices.hpp"

namespace outcore::ops {

struct MultiFilterReport {
    double seconds = 0;
    double megapixels_per_second = 0;
    std::uint64_t bytes_moved = 0;
    std::uint64_t units = 0;  ///< bands
    std::vector<DeviceShare> devices;
};

/// Filters `source` into `sink` (same shape and type) over `devices`. UsageError for
/// no devices or one listed twice, and for a sink that must be written in order
/// (`in_order_sink`); otherwise throws as ops::filter does. Does not commit() the sink.
MultiFilterReport filter_on_devices(std::span<Device* const> devices, const FilterSpec& spec,
                                    const io::ImageSource& source, io::ImageSink& sink,
                                    const FilterOptions& options, bool in_order_sink = false);

}  // namespace outcore::ops
