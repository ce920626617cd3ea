// cli/filter.cpp — `outcore filter`: a tiled image filter (Gaussian, box, Sobel, a user
// kernel) from a .tif/.tiff or .npy image to another, under a device budget, with its
// plan, bytes moved against the lower bound, throughput, overlap and peak device
// memory; --verify compares sampled regions bit for bit with the whole-image filter.
//
//   outcore filter gaussian --sigma 8 in.tif out.tif --budget 256MiB --verify
//   outcore filter conv --kernel k.txt --edge mirror in.npy out.npy --json=run.json
//
// The whole-image reference of a region is the filter run in core (on a CPU device)
// over that region plus its halo, the halo read from the input with the edge mode:
// exactly what filtering the whole image computes there. Exit codes: main.cpp.
#include "outcore/ops/filter.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "commands.hpp"
#include "device_shares.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/registry.hpp"
#include "outcore/io/image.hpp"
#include "outcore/io/tiff.hpp"
#include "outcore/ops/filter_devices.hpp"
#include "outcore/ops/filter_run.hpp"
#include "progress.hpp"
#include "run_support.hpp"

namespace outcore::cli {
namespace {

constexpr std::uint64_t kRegionSide = 128;
constexpr std::uint64_t kRandomRegions = 4;
constexpr std::uint64_t kWholeImageCheckPixels = std::uint64_t{1} << 22;

struct FilterFlags {
    std::string kind;
    std::string in_path;
    std::string out_path;
    std::optional<std::string> sigma, radius, kernel_path;
    std::string edge = "clamp";
    std::optional<std::string> budget;
    std::optional<std::string> seed;
    std::optional<std::string> json;
    bool verify = false;
    bool force = false;
    bool quiet = false;
    std::optional<std::string> devices;  ///< --devices all|0,1,...
};

bool has_tiff_extension(const std::string& path) {
    auto ends_with = [&](std::string_view suffix) {
        if (path.size() < suffix.size()) return false;
        return std::equal(suffix.rbegin(), suffix.rend(), path.rbegin(),
                          [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); });
    };
    return ends_with(".tif") || ends_with(".tiff");
}

void require_tiff_support(const std::string& path) {
    if (has_tiff_extension(path) && !io::tiff_supported()) {
        throw UsageError("filter", fmt::format("'{}': TIFF support was not built (install libtiff-dev and "
                                               "reconfigure, or use .npy)",
                                               io::printable(path)));
    }
}

ops::FilterSpec make_spec(const FilterFlags& f) {
    const std::optional<ops::FilterKind> kind = ops::parse_filter_kind(f.kind);
    if (!kind) {
        throw UsageError("filter", fmt::format("unknown filter '{}' (gaussian, box, sobel or conv)",
                                               io::printable(f.kind)));
    }
    const std::optional<ops::EdgeMode> edge = ops::parse_edge_mode(f.edge);
    if (!edge) {
        throw UsageError("filter",
                         fmt::format("--edge '{}': expected clamp, mirror or zero", io::printable(f.edge)));
    }
    auto only_for = [&](const std::optional<std::string>& flag, const char* name, ops::FilterKind owner) {
        if (flag && *kind != owner) {
            throw UsageError("filter", fmt::format("{} applies to {} only, not {}", name,
                                                   ops::to_string(owner), ops::to_string(*kind)));
        }
        if (!flag && *kind == owner) {
            throw UsageError("filter", fmt::format("{} needs {}", ops::to_string(owner), name));
        }
    };
    only_for(f.sigma, "--sigma", ops::FilterKind::Gaussian);
    only_for(f.radius, "--radius", ops::FilterKind::Box);
    only_for(f.kernel_path, "--kernel", ops::FilterKind::Conv);
    switch (*kind) {
        case ops::FilterKind::Gaussian:
            return ops::FilterSpec::gaussian(parse_real("--sigma", *f.sigma), *edge);
        case ops::FilterKind::Box: {
            const std::uint64_t r = parse_count("--radius", *f.radius);
            if (r > ops::kMaxSeparableRadius) {
                throw UsageError("filter", fmt::format("--radius {} is over the largest, {}", r,
                                                       ops::kMaxSeparableRadius));
            }
            return ops::FilterSpec::box(static_cast<std::uint32_t>(r), *edge);
        }
        case ops::FilterKind::Sobel: return ops::FilterSpec::sobel(*edge);
        case ops::FilterKind::Conv: return ops::load_kernel_file(*f.kernel_path, *edge);
    }
    throw InternalError("filter", "unhandled filter kind");
}

std::string describe_spec(const ops::FilterSpec& spec) {
    switch (spec.kind) {
        case ops::FilterKind::Gaussian:
            return fmt::format("gaussian sigma {} (radius {}, {} taps per pass)", spec.sigma, spec.radius,
                               spec.kernel.size());
        case ops::FilterKind::Box:
            return fmt::format("box radius {} ({} taps per pass)", spec.radius, 2 * spec.radius + 1);
        case ops::FilterKind::Sobel: return "sobel magnitude (3x3)";
        case ops::FilterKind::Conv:
            return fmt::format("conv {}x{} kernel", 2 * spec.radius + 1, 2 * spec.radius + 1);
    }
    return "?";
}

/// Nominal floating-point operations per output sample: a multiply and an add per tap
/// and pass (the separable row pass over the halo rows is not counted).
double flops_per_sample(const ops::FilterSpec& spec) {
    const double taps = 2.0 * spec.radius + 1.0;
    switch (spec.kind) {
        case ops::FilterKind::Gaussian:
        case ops::FilterKind::Box: return 2.0 * 2.0 * taps;
        case ops::FilterKind::Conv: return 2.0 * taps * taps;
        case ops::FilterKind::Sobel: return 2.0 * 2.0 * 6.0 + 3.0;  // 6 non-zero taps each way, the magnitude
    }
    return 0;
}

/// What --verify compares.
struct FilterCheck {
    std::uint64_t region_count = 0;
    std::uint64_t pixel_count = 0;
    std::uint64_t mismatch_count = 0;
    double relative_error = 0;  ///< ‖out − ref‖ / ‖ref‖ over the compared samples (0 when equal)
    bool whole_image = false;
};

double sample(const std::byte* p, DType type, std::uint64_t index) noexcept {
    switch (type) {
        case DType::U8: return static_cast<double>(std::to_integer<unsigned>(p[index]));
        case DType::U16: {
            std::uint16_t v = 0;
            std::memcpy(&v, p + index * 2, 2);
            return v;
        }
        default: {
            float v = 0;
            std::memcpy(&v, p + index * 4, 4);
            return v;
        }
    }
}

/// Regions to compare: the whole image when small, else the four corners (the edge
/// mode), one region across the first tile seam and kRandomRegions random ones.
std::vector<tile::TileRect> pick_regions(const ops::ImageShape& image, const tile::FilterPlan& plan,
                                         std::uint64_t seed) {
    const std::uint64_t rows = image.extent.rows;
    const std::uint64_t cols = image.extent.cols;
    if (rows * cols <= kWholeImageCheckPixels) return {tile::TileRect{0, 0, image.extent}};
    const tile::Extent size{std::min(kRegionSide, rows), std::min(kRegionSide, cols)};
    std::vector<tile::TileRect> regions = {{0, 0, size},
                                           {0, cols - size.cols, size},
                                           {rows - size.rows, 0, size},
                                           {rows - size.rows, cols - size.cols, size}};
    // Across the seam below (or right of) the first tile: both tiles' halos meet here.
    const tile::TileRect first = plan.grid.tile(0);
    if (first.size.rows < rows) {
        const std::uint64_t r =
            std::min(first.size.rows - std::min(first.size.rows, size.rows / 2), rows - size.rows);
        regions.push_back({r, (cols - size.cols) / 2, size});
    } else if (first.size.cols < cols) {
        const std::uint64_t c =
            std::min(first.size.cols - std::min(first.size.cols, size.cols / 2), cols - size.cols);
        regions.push_back({(rows - size.rows) / 2, c, size});
    }
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::uint64_t> row(0, rows - size.rows);
    std::uniform_int_distribution<std::uint64_t> col(0, cols - size.cols);
    for (std::uint64_t i = 0; i < kRandomRegions; ++i) regions.push_back({row(rng), col(rng), size});
    return regions;
}

FilterCheck verify_filter(Device& reference_device, const ops::FilterSpec& spec, const io::ImageSource& in,
                          const io::ImageSource& out, const tile::FilterPlan& plan, std::uint64_t seed) {
    const ops::ImageShape image = ops::image_shape(in.info());
    const std::uint64_t pix = image.pixel_bytes();
    const std::uint64_t row_bytes = image.row_bytes();
    const std::uint32_t halo = spec.halo();
    const ops::RegionReader read = [&in, row_bytes, pix](std::uint64_t row0, std::uint64_t rows,
                                                         std::uint64_t col0, std::uint64_t cols,
                                                         std::byte* dst, std::uint64_t stride) {
        std::vector<std::byte> band(static_cast<std::size_t>(rows * row_bytes));
        in.read_rows(row0, rows, band.data(), row_bytes);
        for (std::uint64_t r = 0; r < rows; ++r) {
            std::memcpy(dst + r * stride, band.data() + r * row_bytes + col0 * pix,
                        static_cast<std::size_t>(cols * pix));
        }
    };

    FilterCheck check;
    const std::vector<tile::TileRect> regions = pick_regions(image, plan, seed);
    check.region_count = regions.size();
    check.whole_image = regions.size() == 1 && regions[0].size == image.extent;
    double diff_sq = 0;
    double ref_sq = 0;
    for (const tile::TileRect& region : regions) {
        // The region and its halo as the whole image would see them ...
        const ops::ImageShape padded{
            .extent = {region.size.rows + 2ULL * halo, region.size.cols + 2ULL * halo},
            .channels = image.channels,
            .type = image.type};
        const std::uint64_t padded_stride = padded.row_bytes();
        std::vector<std::byte> input(static_cast<std::size_t>(padded.extent.rows * padded_stride));
        ops::fill_halo(image, region, halo, spec.edge, read, input.data(), padded_stride);
        // ... filtered in core: its centre reads only pixels inside `input`, so the
        // edge mode applied around `input` never reaches it.
        const std::vector<std::byte> ref =
            ops::filter_whole_image_reference(reference_device, spec, padded, input, image.type);
        std::vector<std::byte> got(static_cast<std::size_t>(region.size.rows * row_bytes));
        out.read_rows(region.row, region.size.rows, got.data(), row_bytes);
        const std::uint64_t samples_per_pixel = image.channels;
        for (std::uint64_t r = 0; r < region.size.rows; ++r) {
            const std::byte* want = ref.data() + (r + halo) * padded_stride + halo * pix;
            const std::byte* have = got.data() + r * row_bytes + region.col * pix;
            for (std::uint64_t c = 0; c < region.size.cols; ++c) {
                if (std::memcmp(want + c * pix, have + c * pix, static_cast<std::size_t>(pix)) != 0) {
                    ++check.mismatch_count;
                }
                for (std::uint64_t s = 0; s < samples_per_pixel; ++s) {
                    const double w = sample(want, image.type, c * samples_per_pixel + s);
                    const double h = sample(have, image.type, c * samples_per_pixel + s);
                    diff_sq += (w - h) * (w - h);
                    ref_sq += w * w;
                }
            }
        }
        check.pixel_count += region.size.rows * region.size.cols;
    }
    if (check.mismatch_count != 0) {
        check.relative_error = ref_sq > 0 ? std::sqrt(diff_sq / ref_sq) : std::sqrt(diff_sq);
        if (!std::isfinite(check.relative_error)) check.relative_error = INFINITY;
    }
    return check;
}

/// Host bytes filter_run.cpp allocates for a plan besides the device slots: an upload
/// staging buffer per input slot and two download ones; 2-D tiles also assemble a band
/// of output rows and read whole rows per fill (two reader threads).
std::uint64_t executor_host_bytes(const tile::FilterPlan& p, const io::ImageInfo& info) {
    std::uint64_t bytes = p.depth * p.input_slot_bytes + 2 * p.output_slot_bytes;
    if (!p.row_strips) bytes += (p.tile.rows + 2 * (p.tile.rows + 2ULL * p.problem.halo)) * info.row_bytes();
    return bytes;
}

/// How the budget is spent.
struct Sizing {
    tile::FilterPlan plan;
    std::uint64_t device_budget = 0;  ///< what the executor may hold on the device
    std::uint64_t host_bytes = 0;     ///< staging and file buffers (0 when not counted)
};

/// The plan for `budget`. On a discrete device the budget is device memory. On a
/// unified-memory device (the CPU backend; Apple GPUs) staging and file buffers are
/// the same RAM as the "device" slots — Metal counts shared buffers in its working
/// set too — so the slots get what they leave: the largest device budget whose plan,
/// with its staging and the file buffers (`file_bytes`), fits.
Sizing size_plan(const Device& device, const ops::FilterSpec& spec, const io::ImageInfo& info,
                 ops::FilterOptions options, std::uint64_t budget, std::uint64_t file_bytes) {
    if (!device.info().unified_memory) {
        const std::uint64_t minimum = ops::filter_minimum_budget(device, spec, info, options);
        if (budget < minimum) {
            throw UsageError("filter",
                             fmt::format("a device budget of {} is below the minimum of {} ({} bytes) "
                                         "for this filter and image",
                                         format_size(budget), format_size(minimum), minimum));
        }
        options.budget_bytes = budget;
        return {ops::plan_filter(device, spec, info, options), budget, 0};
    }
    const std::uint64_t min_device = ops::filter_minimum_budget(device, spec, info, options);
    options.budget_bytes = min_device;
    const tile::FilterPlan smallest = ops::plan_filter(device, spec, info, options);
    const std::uint64_t smallest_host = executor_host_bytes(smallest, info) + file_bytes;
    const std::uint64_t minimum = smallest.device_bytes + smallest_host;
    if (budget < minimum) {
        throw UsageError(
            "filter",
            fmt::format("a budget of {} is below the minimum of {} ({} bytes) for this filter and image "
                        "(on a unified-memory device the budget also holds the staging and file "
                        "buffers: {} of them)",
                        format_size(budget), format_size(minimum), minimum, format_size(smallest_host)));
    }
    std::uint64_t device_budget = budget - file_bytes;
    for (int attempt = 0; attempt < 32; ++attempt) {
        options.budget_bytes = device_budget;
        tile::FilterPlan plan = ops::plan_filter(device, spec, info, options);
        const std::uint64_t host = executor_host_bytes(plan, info) + file_bytes;
        if (plan.device_bytes + host <= budget) return {std::move(plan), device_budget, host};
        const std::uint64_t shrink = std::max(plan.device_bytes + host - budget, device_budget / 32);
        if (device_budget - min_device <= shrink) break;
        device_budget -= shrink;
    }
    return {smallest, min_device, smallest_host};
}

/// The tallest row strips that fit, up to an eighth of the image (at least eight
/// tiles, so reading, filtering and writing overlap): the planner steps strip heights
/// coarsely, and for strips taller is strictly better (less halo). `start` fits.
Sizing tallest_strips(const Device& device, const ops::FilterSpec& spec, const io::ImageInfo& info,
                      ops::FilterOptions options, std::uint64_t budget, std::uint64_t file_bytes,
                      const Sizing& start) {
    const bool unified = device.info().unified_memory;
    const std::uint64_t device_budget = unified ? budget - file_bytes : budget;
    options.budget_bytes = device_budget;
    options.tile_cols = info.cols;
    auto attempt = [&](std::uint64_t rows) -> std::optional<Sizing> {
        options.tile_rows = rows;
        tile::FilterPlan plan;
        try {
            plan = ops::plan_filter(device, spec, info, options);  // UsageError: over the device budget
        } catch (const UsageError&) {
            return std::nullopt;
        }
        const std::uint64_t host = unified ? executor_host_bytes(plan, info) + file_bytes : 0;
        if (plan.device_bytes + host > budget) return std::nullopt;
        return Sizing{std::move(plan), device_budget, host};
    };
    Sizing best = start;
    std::uint64_t lo = start.plan.tile.rows;  // fits
    std::uint64_t hi = std::max(lo, (info.rows + 7) / 8);
    while (lo < hi) {
        const std::uint64_t mid = lo + (hi - lo + 1) / 2;
        if (std::optional<Sizing> s = attempt(mid)) {
            best = std::move(*s);
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    return best;
}

/// Row strips read exactly their rows; a 2-D tile reads whole rows too (sources read
/// whole rows) and keeps only its columns, so strips win on the host unless their
/// halo makes them move much more. Strips when they fit and move at most 25% more.
Sizing choose_plan(const Device& device, const ops::FilterSpec& spec, const io::ImageInfo& info,
                   const ops::FilterOptions& options, std::uint64_t budget, std::uint64_t file_bytes) {
    ops::FilterOptions strip_options = options;
    strip_options.strips_only = true;
    std::optional<Sizing> strips;
    try {
        strips = size_plan(device, spec, info, strip_options, budget, file_bytes);
        strips = tallest_strips(device, spec, info, strip_options, budget, file_bytes, *strips);
    } catch (const UsageError&) {
        // Strips below their minimum: the planner's 2-D tiles, or its error.
    }
    Sizing any = size_plan(device, spec, info, options, budget, file_bytes);
    if (strips &&
        static_cast<double>(strips->plan.bytes_moved) <= 1.25 * static_cast<double>(any.plan.bytes_moved)) {
        return std::move(*strips);
    }
    return any;
}

/// Opens IN. A TIFF gets the smallest decode cache (two strips or tile rows: enough
/// for halo'd bands read top to bottom); `buffer_bytes` is what the reader holds.
std::unique_ptr<io::ImageSource> open_input(const std::string& path, std::uint64_t& buffer_bytes) {
    buffer_bytes = 0;
    if (!has_tiff_extension(path)) return io::open_image(path);
    auto reader = std::make_unique<io::TiffReader>(path, io::TiffReadOptions{.cache_bytes = 0});
    buffer_bytes = 2 * reader->unit_rows() * reader->info().row_bytes();
    return reader;
}

void print_plan(const tile::FilterPlan& plan, std::uint64_t budget) {
    const tile::TileGrid& g = plan.grid;
    if (plan.row_strips) {
        fmt::print("plan: row strips of {} rows ({} tiles)", plan.tile.rows, g.count());
    } else {
        fmt::print("plan: {}x{} tiles ({} x {} = {} tiles)", plan.tile.rows, plan.tile.cols, g.tile_rows(),
                   g.tile_cols(), g.count());
    }
    fmt::print(", halo {}; slots: {} input x {}, {} output x {}{}\n", plan.problem.halo, plan.depth,
               format_size(plan.input_slot_bytes), plan.output_slots, format_size(plan.output_slot_bytes),
               plan.intermediate_bytes != 0
                   ? fmt::format(", device-only intermediate {}", format_size(plan.intermediate_bytes))
                   : "");
    fmt::print("      device memory {} of the {} budget ({})\n", format_size(plan.device_bytes),
               format_size(budget),
               format_percent(static_cast<double>(plan.device_bytes) / static_cast<double>(budget)));
    fmt::print("      will move {} (lower bound {}: {}, halo overhead {})\n", format_size(plan.bytes_moved),
               format_size(plan.lower_bound_bytes), format_ratio(plan.bytes_moved, plan.lower_bound_bytes),
               format_percent(plan.halo_overhead_fraction));
}

/// A several-device run as one report (device_shares.hpp, fold_shares).
ops::FilterReport whole_run(const ops::MultiFilterReport& m, const tile::FilterPlan& plan) {
    ops::FilterReport r;
    r.plan = plan;
    r.seconds = m.seconds;
    r.megapixels_per_second = m.megapixels_per_second;
    r.bytes_moved = m.bytes_moved;
    r.lower_bound_bytes = plan.lower_bound_bytes;
    fold_shares(r, m.devices);
    return r;
}

int run_filter(const FilterFlags& f, const GlobalOptions& globals) {
    const ops::FilterSpec spec = make_spec(f);
    const std::uint64_t seed = f.seed
                                   ? parse_count("--seed", *f.seed)
                                   : (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
    require_tiff_support(f.in_path);
    require_tiff_support(f.out_path);

    Config config = make_config(globals);
    const std::vector<std::unique_ptr<Device>> devices = open_devices(f.devices, globals, config);
    const std::unique_ptr<Device>& device = devices.front();
    const std::uint64_t budget = resolve_budget(f.budget, config, device->info());
    JsonDestination json(f.json, f.force);
    const bool text = !f.quiet && !json.to_stdout();

    std::uint64_t reader_bytes = 0;
    const std::unique_ptr<io::ImageSource> in = open_input(f.in_path, reader_bytes);
    const io::ImageInfo& info = in->info();
    ops::FilterOptions options;
    std::unique_ptr<io::ImageSink> out = io::create_image(f.out_path, info, f.force);
    // A TIFF writer holds one tile row of output.
    const std::uint64_t writer_bytes =
        has_tiff_extension(f.out_path) ? std::uint64_t{out->info().tile_rows} * info.row_bytes() : 0;
    const Sizing sizing = choose_plan(*device, spec, info, options, budget, reader_bytes + writer_bytes);
    const tile::FilterPlan& plan = sizing.plan;
    options.budget_bytes = sizing.device_budget;
    options.strips_only = plan.row_strips;

    if (text) {
        fmt::print("filter: {}, edge {}, on '{}' ({}x{}, {} channel{}, {}, {})\n", describe_spec(spec),
                   ops::to_string(spec.edge), f.in_path, info.rows, info.cols, info.channels,
                   info.channels == 1 ? "" : "s", to_string(info.dtype), format_size(info.bytes()));
        fmt::print("device: {} ({}), budget {}\n", device->info().id(), device->info().name,
                   format_size(budget));
        print_plan(plan, budget);
        if (sizing.host_bytes != 0) {
            const std::uint64_t file_bytes = reader_bytes + writer_bytes;
            fmt::print(
                "      unified memory: the budget also holds {} of host staging and {} of file buffers: {} "
                "in all\n",
                format_size(sizing.host_bytes - file_bytes), format_size(file_bytes),
                format_size(plan.device_bytes + sizing.host_bytes));
        }
        std::fflush(stdout);
    }

    ProgressBar bar("filter", !f.quiet);
    options.progress = bar.callback();
    ops::FilterReport r;
    std::optional<ops::MultiFilterReport> shares;
    if (devices.size() > 1) {
        std::vector<Device*> all;
        for (const auto& d : devices) all.push_back(d.get());
        shares = ops::filter_on_devices(all, spec, *in, *out, options, has_tiff_extension(f.out_path));
        r = whole_run(*shares, plan);
    } else {
        r = ops::execute_filter(*device, plan, spec, *in, *out, options);
    }
    bar.finish();
    out->commit();

    const double samples = static_cast<double>(info.rows) * static_cast<double>(info.cols) * info.channels;
    const double tflops = r.seconds > 0 ? samples * flops_per_sample(spec) / r.seconds * 1e-12 : 0.0;
    nlohmann::json record = {
        {"command", "filter"},
        {"device", device->info().id()},
        {"filter", ops::to_string(spec.kind)},
        {"sigma", spec.sigma},
        {"radius", spec.radius},
        {"edge", ops::to_string(spec.edge)},
        {"rows", info.rows},
        {"cols", info.cols},
        {"channels", info.channels},
        {"dtype", to_string(info.dtype)},
        {"tile_rows", plan.tile.rows},
        {"tile_cols", plan.tile.cols},
        {"tile_count", plan.grid.count()},
        {"input_slots", plan.depth},
        {"output_slots", plan.output_slots},
        {"plan_device_bytes", plan.device_bytes},
        {"budget_bytes", budget},
        {"device_budget_bytes", r.budget_bytes},
        {"peak_device_bytes", r.peak_device_bytes},
        {"staging_bytes", r.pipeline.staging_bytes},
        {"counted_host_bytes", sizing.host_bytes},
        {"bytes_moved", r.bytes_moved},
        {"lower_bound_bytes", r.lower_bound_bytes},
        {"seconds", r.seconds},
        {"megapixels_per_second", r.megapixels_per_second},
        {"tflops", tflops},
        {"hidden_transfer_fraction", r.hidden_transfer_fraction},
        {"upload_busy_seconds", r.upload_busy_seconds},
        {"compute_busy_seconds", r.compute_busy_seconds},
        {"download_busy_seconds", r.download_busy_seconds},
        {"read_busy_seconds", r.read_busy_seconds},
        {"write_busy_seconds", r.write_busy_seconds},
    };
    if (shares) record["devices"] = shares_json(shares->devices);
    if (text) {
        fmt::print("time: {}, {:.1f} Mpixel/s ({:.4f} TFLOP/s nominal)\n", format_seconds(r.seconds),
                   r.megapixels_per_second, tflops);
        fmt::print("moved: {} ({} the lower bound of {}), {} of transfer time hidden behind compute\n",
                   format_size(r.bytes_moved), format_ratio(r.bytes_moved, r.lower_bound_bytes),
                   format_size(r.lower_bound_bytes), format_percent(r.hidden_transfer_fraction));
        fmt::print("device memory: peak {} of the {} budget; host staging {}\n",
                   format_size(r.peak_device_bytes), format_size(budget),
                   format_size(r.pipeline.staging_bytes));
        fmt::print("busy: upload {}, compute {}, download {}; host read {}, write {}\n",
                   format_seconds(r.upload_busy_seconds), format_seconds(r.compute_busy_seconds),
                   format_seconds(r.download_busy_seconds), format_seconds(r.read_busy_seconds),
                   format_seconds(r.write_busy_seconds));
        if (shares) print_shares(shares->units, shares->devices);
        fmt::print("output: {}\n", f.out_path);
    }

    std::optional<FilterCheck> check;
    if (f.verify) {
        const std::unique_ptr<Device> cpu = open_device("cpu", config);
        const std::unique_ptr<io::ImageSource> back = io::open_image(f.out_path);
        check = verify_filter(*cpu, spec, *in, *back, plan, seed);
        record["relative_error"] = check->relative_error;
        record["mismatched_pixels"] = check->mismatch_count;
        record["verified_pixels"] = check->pixel_count;
        record["verify_passed"] = check->mismatch_count == 0;
        if (text) {
            fmt::print(
                "verify: {} ({} pixels) against the whole-image filter, bit for bit: {} mismatching pixel{}: "
                "{}\n",
                check->whole_image ? "the whole image" : fmt::format("{} regions", check->region_count),
                check->pixel_count, check->mismatch_count, check->mismatch_count == 1 ? "" : "s",
                check->mismatch_count == 0 ? "ok" : "FAILED");
        }
    }
    json.write(record);
    std::fflush(stdout);
    if (check && check->mismatch_count != 0) {
        throw CorruptionError("verify",
                              fmt::format("{} of {} sampled pixels differ from the whole-image filter "
                                          "(relative error {:.3e})",
                                          check->mismatch_count, check->pixel_count, check->relative_error));
    }
    return 0;
}

}  // namespace

void add_filter_command(CLI::App& app, const GlobalOptions& globals, CommandList& commands) {
    auto* sub =
        app.add_subcommand("filter", "Tiled image filter (gaussian, box, sobel, conv) under a device budget");
    auto f = std::make_shared<FilterFlags>();
    sub->add_option("filter", f->kind, "gaussian, box, sobel or conv")->required();
    sub->add_option("in", f->in_path, "Input image: .tif/.tiff or .npy")->required();
    sub->add_option("out", f->out_path, "Output image: .tif/.tiff (tiled) or .npy")->required();
    sub->add_option("--sigma", f->sigma, "Gaussian standard deviation in pixels (radius ceil(3 sigma))")
        ->type_name("X");
    sub->add_option("--radius", f->radius, "Box radius (side 2r+1)")->type_name("N");
    sub->add_option("--kernel", f->kernel_path, "Conv kernel: text file of (2r+1)^2 numbers, side <= 15")
        ->type_name("FILE");
    sub->add_option("--edge", f->edge, "Beyond the edge: clamp (default), mirror or zero")->type_name("MODE");
    sub->add_option("--budget", f->budget,
                    "Device memory budget: 256MiB, 1.5GB, 50%, auto (default: --device-budget)")
        ->type_name("SIZE");
    sub->add_option("--seed", f->seed, "Seed picking the regions --verify compares")->type_name("N");
    sub->add_flag("--verify", f->verify, "Compare sampled regions bit for bit with the whole-image filter");
    sub->add_option("--json", f->json, "Write a JSON record to stdout, or to FILE (--json=FILE)")
        ->expected(0, 1)
        ->type_name("[FILE]");
    sub->add_flag("--force", f->force, "Overwrite existing outputs");
    sub->add_flag("--quiet", f->quiet, "No progress bar and no summary (errors and --json only)");
    sub->add_option("--devices", f->devices,
                    "Run on several devices of the backend: all, or indices like 0,1 (each with --budget; "
                    ".npy output)")
        ->type_name("all|0,1,...");
    commands.push_back({sub, [&globals, f] { return run_filter(*f, globals); }});
}

}  // namespace outcore::cli
