// Tests of the tiled filter executor (ops::filter): through the real pipeline, the
// output equals ops::filter_whole_image_reference bit for bit for random images,
// filters, edge modes, budgets and forced tiles (tiles smaller than the halo, 1×1,
// 2-D tiles and row strips); the budget holds (peak ≤ budget, checked by the Budget
// adaptor), the intermediate never crosses the link, bytes moved match the plan;
// budgets below the minimum say the minimum; a failing source fails the run cleanly;
// a device-readable sink (tiles downloaded straight into it) equals a packed one, and a
// device-readable source (tiles uploaded straight from it, halos filled on the device)
// equals the staged path; ops::filter plans with the measured link unless told not to.
#include "outcore/ops/filter_run.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "filter_test_support.hpp"
#include "outcore/core/error.hpp"
#include "outcore/io/image.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::Device;
using outcore::DType;
using outcore::UsageError;
using outcore::ops::EdgeMode;
using outcore::ops::FilterKind;
using outcore::ops::FilterOptions;
using outcore::ops::FilterReport;
using outcore::ops::FilterSpec;
namespace ft = outcore::filter_test;
namespace io = outcore::io;
namespace ops = outcore::ops;

struct Image {
    io::ImageInfo info;
    std::vector<std::byte> pixels;
};

Image random_image(std::mt19937_64& rng, std::uint64_t max_rows, std::uint64_t max_cols) {
    Image im;
    im.info.rows = 1 + rng() % max_rows;
    im.info.cols = 1 + rng() % max_cols;
    im.info.channels = static_cast<std::uint32_t>(1 + rng() % 4);
    im.info.dtype = ft::kPixelTypes[rng() % 3];
    im.pixels = ft::random_elements(im.info.dtype, im.info.rows * im.info.cols * im.info.channels, rng);
    return im;
}

/// A random image (channels and type as random_image) of lo + rng() % count rows, then
/// columns, drawn in that order.
struct Sides {
    std::uint64_t lo = 1, count = 1;
};
Image random_image_in(std::mt19937_64& rng, Sides rows, Sides cols) {
    Image im = random_image(rng, 1, 1);
    im.info.rows = rows.lo + rng() % rows.count;
    im.info.cols = cols.lo + rng() % cols.count;
    im.pixels = ft::random_elements(im.info.dtype, im.info.rows * im.info.cols * im.info.channels, rng);
    return im;
}

/// Runs the executor from host memory to poisoned host memory.
std::vector<std::byte> run(Device& dev, const FilterSpec& spec, const Image& im, const FilterOptions& options,
                           FilterReport* report = nullptr) {
    std::vector<std::byte> out(im.pixels.size(), std::byte{0xAB});
    const io::HostImage source(static_cast<const void*>(im.pixels.data()), im.info, im.info.row_bytes());
    io::HostImage sink(static_cast<void*>(out.data()), im.info, im.info.row_bytes());
    const FilterReport r = ops::filter(dev, spec, source, sink, options);
    // The budget held, and only the image and the result crossed the link (never the
    // intermediate): exactly what the plan said.
    EXPECT_LE(r.peak_device_bytes, r.budget_bytes);
    EXPECT_LE(r.plan.device_bytes, r.budget_bytes);
    EXPECT_EQ(r.pipeline.bytes_downloaded, im.pixels.size());
    EXPECT_EQ(r.bytes_moved, r.plan.bytes_moved);
    EXPECT_GE(r.bytes_moved, r.lower_bound_bytes);
    EXPECT_EQ(r.lower_bound_bytes, 2 * im.pixels.size());
    if (report != nullptr) *report = r;
    return out;
}

std::string describe(const FilterSpec& spec, const Image& im, const FilterOptions& o) {
    return std::string(ops::to_string(spec.kind)) + " r" + std::to_string(spec.radius) + " " +
           std::string(ops::to_string(spec.edge)) + " on " + std::to_string(im.info.rows) + "x" +
           std::to_string(im.info.cols) + "x" + std::to_string(im.info.channels) + " " +
           std::string(outcore::to_string(im.info.dtype)) + ", budget " + std::to_string(o.budget_bytes) +
           ", tile " + std::to_string(o.tile_rows) + "x" + std::to_string(o.tile_cols);
}

std::vector<std::byte> reference(Device& dev, const FilterSpec& spec, const Image& im) {
    return ops::filter_whole_image_reference(dev, spec, ops::image_shape(im.info), im.pixels, im.info.dtype);
}

void expect_equal(const std::vector<std::byte>& got, const std::vector<std::byte>& want,
                  const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t i = 0; i < got.size(); ++i) {
        if (got[i] != want[i]) {
            ADD_FAILURE() << what << ": first difference at byte " << i;
            return;
        }
    }
}

TEST(FilterRun, RandomBudgetsAndTilesEqualTheWholeImageBitForBit) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = ft::cpu_device();
    int multi_tile = 0, two_d = 0, planned_multi = 0;
    for (std::uint64_t rep = 0; rep < outcore::test::scaled(2); ++rep) {
        for (FilterKind kind : {FilterKind::Gaussian, FilterKind::Box, FilterKind::Sobel, FilterKind::Conv}) {
            for (EdgeMode edge : ft::kEdgeModes) {
                const FilterSpec spec = ft::random_spec(kind, edge, rng);
                const Image im = random_image(rng, 40, 48);
                const std::vector<std::byte> want = reference(*dev, spec, im);
                const std::uint64_t minimum = ops::filter_minimum_budget(*dev, spec, im.info, {});
                const std::uint64_t roomy = 64 * im.pixels.size() + 64 * outcore::kKiB;
                // The planner's choice at the minimum, just above it, at random budgets
                // and with room for everything; then forced tiles, strips or 2-D.
                std::vector<FilterOptions> runs = {{.budget_bytes = minimum},
                                                   {.budget_bytes = minimum + 1},
                                                   {.budget_bytes = minimum + rng() % (roomy - minimum + 1)},
                                                   {.budget_bytes = roomy, .pipeline_depth = 3}};
                runs.push_back(
                    {.budget_bytes = roomy, .tile_rows = 1 + rng() % 9, .tile_cols = 1 + rng() % 12});
                runs.push_back(
                    {.budget_bytes = roomy, .tile_rows = 1 + rng() % 9, .tile_cols = im.info.cols});
                runs.push_back({.budget_bytes = roomy, .strips_only = true});
                for (const FilterOptions& o : runs) {
                    FilterReport r;
                    expect_equal(run(*dev, spec, im, o, &r), want, describe(spec, im, o));
                    if (o.tile_rows == 0) {
                        EXPECT_LE(r.plan.device_bytes, o.budget_bytes);
                    }
                    if (o.strips_only) {
                        EXPECT_TRUE(r.plan.row_strips);
                    }
                    multi_tile += r.plan.grid.count() > 1 ? 1 : 0;
                    two_d += r.plan.grid.tile_cols() > 1 && r.plan.grid.tile_rows() > 1 ? 1 : 0;
                    planned_multi += o.tile_rows == 0 && r.plan.grid.count() > 1 ? 1 : 0;
                }
            }
        }
    }
    // Not vacuous: runs really were tiled, by the planner too, and in 2-D.
    std::printf("%d multi-tile runs (%d chosen by the planner), %d with 2-D tiles\n", multi_tile,
                planned_multi, two_d);
    EXPECT_GT(multi_tile, 12);
    EXPECT_GT(planned_multi, 0);
    EXPECT_GT(two_d, 0);
}

TEST(FilterRun, TilesSmallerThanTheHaloEqualTheWholeImage) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = ft::cpu_device();
    std::vector<float> k15(225);
    std::uniform_real_distribution<float> w(-1.0F, 1.0F);
    for (float& v : k15) v = w(rng);
    for (EdgeMode edge : ft::kEdgeModes) {
        for (const FilterSpec& spec : {FilterSpec::conv(k15, 15, edge), FilterSpec::gaussian(2.2, edge)}) {
            const Image im = random_image_in(rng, {12, 10}, {14, 10});
            const std::vector<std::byte> want = reference(*dev, spec, im);
            for (const auto& [rows, cols] :
                 {std::pair<std::uint64_t, std::uint64_t>{3, 5}, {1, 1}, {2, 100}}) {
                const FilterOptions o{
                    .budget_bytes = 64 * outcore::kMiB, .tile_rows = rows, .tile_cols = cols};
                expect_equal(run(*dev, spec, im, o), want, describe(spec, im, o));
            }
        }
    }
}

TEST(FilterRun, WeightsInABufferCountAgainstTheBudget) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = ft::cpu_device(/*max_inline_bytes=*/16);
    const FilterSpec spec =
        FilterSpec::gaussian(std::uniform_real_distribution<double>(1.0, 2.0)(rng), EdgeMode::Mirror);
    ASSERT_GT(spec.kernel.size() * sizeof(float), 16U);
    const Image im = random_image(rng, 30, 30);
    const std::uint64_t minimum = ops::filter_minimum_budget(*dev, spec, im.info, {});
    FilterReport r;
    expect_equal(run(*dev, spec, im, {.budget_bytes = minimum}, &r), reference(*dev, spec, im),
                 "buffered weights");
    // The taps' buffer (more than 16 bytes) is held next to the slots, within the budget.
    EXPECT_GT(r.peak_device_bytes, r.pipeline.peak_device_bytes);
    EXPECT_EQ(dev->allocated_bytes(), 0U);
}

TEST(FilterRun, BudgetsBelowTheMinimumSayTheMinimum) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = ft::cpu_device();
    const Image im = random_image_in(rng, {40, 10}, {40, 10});
    const FilterSpec spec = FilterSpec::gaussian(3.0);
    const std::uint64_t minimum = ops::filter_minimum_budget(*dev, spec, im.info, {});
    for (std::uint64_t budget : {std::uint64_t{1}, minimum / 2, minimum - 1}) {
        try {
            (void)ops::plan_filter(*dev, spec, im.info, {.budget_bytes = budget});
            ADD_FAILURE() << "budget " << budget << " accepted below the minimum " << minimum;
        } catch (const UsageError& e) {
            EXPECT_NE(std::string(e.what()).find(std::to_string(minimum) + " bytes"), std::string::npos)
                << e.what();
        }
    }
    EXPECT_NO_THROW((void)ops::plan_filter(*dev, spec, im.info, {.budget_bytes = minimum}));
    // Forced tiles over the budget, and a plan run with a smaller budget than it was made for.
    EXPECT_THROW((void)ops::plan_filter(*dev, spec, im.info,
                                        {.budget_bytes = minimum, .tile_rows = 50, .tile_cols = 50}),
                 UsageError);
    const outcore::tile::FilterPlan plan =
        ops::plan_filter(*dev, spec, im.info, {.budget_bytes = 64 * outcore::kMiB});
    std::vector<std::byte> out(im.pixels.size());
    const io::HostImage source(static_cast<const void*>(im.pixels.data()), im.info, im.info.row_bytes());
    io::HostImage sink(static_cast<void*>(out.data()), im.info, im.info.row_bytes());
    if (plan.device_bytes > minimum) {
        EXPECT_THROW((void)ops::execute_filter(*dev, plan, spec, source, sink, {.budget_bytes = minimum}),
                     UsageError);
    }
    // A sink of another shape.
    io::ImageInfo other = im.info;
    other.cols += 1;
    std::vector<std::byte> wide(other.rows * other.row_bytes());
    io::HostImage wrong(static_cast<void*>(wide.data()), other, other.row_bytes());
    EXPECT_THROW((void)ops::filter(*dev, spec, source, wrong, {}), UsageError);
}

// ops::filter measures the link (once per process) and plans with it: the plan it runs
// is timed (model seconds > 0) and is the one plan_filter makes with the measured
// rates; with measure_rates off the link stays unknown and the plan untimed. Rates the
// caller gives are kept.
TEST(FilterRun, PlansWithTheMeasuredLinkUnlessToldNotTo) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = ft::cpu_device();
    const Image im = random_image_in(rng, {300, 50}, {200, 50});
    const FilterSpec spec = FilterSpec::gaussian(2.0);
    const FilterOptions base{.budget_bytes = 4 * ops::filter_minimum_budget(*dev, spec, im.info, {})};

    const FilterOptions measured = ops::with_measured_rates(*dev, base);
    EXPECT_GT(measured.link_bytes_per_second, 0);
    EXPECT_GT(measured.link_d2h_bytes_per_second, 0);
    FilterReport timed;
    const std::vector<std::byte> out = run(*dev, spec, im, base, &timed);
    EXPECT_GT(timed.plan.total_seconds, 0) << "ops::filter planned without the link rates";
    EXPECT_EQ(timed.plan.tile, ops::plan_filter(*dev, spec, im.info, measured).tile);

    FilterOptions off = base;
    off.measure_rates = false;
    const FilterOptions unmeasured = ops::with_measured_rates(*dev, off);
    EXPECT_EQ(unmeasured.link_bytes_per_second, 0);
    FilterReport untimed;
    expect_equal(run(*dev, spec, im, off, &untimed), out, "untimed plan");
    EXPECT_EQ(untimed.plan.total_seconds, 0);

    FilterOptions given = base;
    given.link_bytes_per_second = 1e9;
    EXPECT_EQ(ops::with_measured_rates(*dev, given).link_bytes_per_second, 1e9);
    EXPECT_EQ(ops::with_measured_rates(*dev, given).link_d2h_bytes_per_second,
              measured.link_d2h_bytes_per_second);
}

// The minimum budget is a footprint: the same whatever link rates the options carry,
// and a plan at it runs with any of them (ops::filter measures the link, and a timed
// plan at the minimum once came out over it: 640 against 512 bytes).
TEST(FilterRun, TheMinimumBudgetDoesNotDependOnTheLinkRates) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = ft::cpu_device();
    int checked = 0;
    for (int rep = 0; rep < 200; ++rep) {
        const FilterKind kind = std::array{FilterKind::Gaussian, FilterKind::Box, FilterKind::Sobel,
                                           FilterKind::Conv}[static_cast<std::size_t>(rep % 4)];
        const FilterSpec spec = ft::random_spec(kind, ft::kEdgeModes[rng() % std::size(ft::kEdgeModes)], rng);
        const Image im = random_image(rng, 40, 48);
        const std::uint64_t minimum = ops::filter_minimum_budget(*dev, spec, im.info, {});
        for (const double up : {1e6, 3e9, 55e9, 1e12}) {
            const double down = up * (0.5 + static_cast<double>(rng() % 100) / 100.0);
            FilterOptions o{.budget_bytes = minimum,
                            .link_bytes_per_second = up,
                            .link_d2h_bytes_per_second = down,
                            .link_duplex_bytes_per_second = (up + down) * 0.8};
            const std::string what = describe(spec, im, o) + ", link " + std::to_string(up);
            EXPECT_EQ(ops::filter_minimum_budget(*dev, spec, im.info, o), minimum) << what;
            try {
                EXPECT_LE(ops::plan_filter(*dev, spec, im.info, o).device_bytes, minimum) << what;
            } catch (const UsageError& e) {
                ADD_FAILURE() << what << ": " << e.what();
            }
            ++checked;
        }
    }
    EXPECT_EQ(checked, 800);
}

/// A source that fails after a number of reads.
class FailingSource final : public io::ImageSource {
public:
    FailingSource(const Image& im, int reads_before_failure) : im_(&im), left_(reads_before_failure) {}
    [[nodiscard]] const io::ImageInfo& info() const noexcept override { return im_->info; }

private:
    void do_read_rows(std::uint64_t row0, std::uint64_t rows, std::byte* dst,
                      std::uint64_t stride) const override {
        if (left_.fetch_sub(1) <= 0)
            throw outcore::IoError("test", "injected read failure", 5, "image", "pread");
        const std::uint64_t rb = im_->info.row_bytes();
        for (std::uint64_t r = 0; r < rows; ++r)
            std::memcpy(dst + r * stride, im_->pixels.data() + (row0 + r) * rb, rb);
    }
    const Image* im_;
    mutable std::atomic<int> left_;
};

TEST(FilterRun, AFailingSourceFailsTheRunAndFreesEverything) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = ft::cpu_device();
    const Image im = random_image_in(rng, {64, 1}, {32, 1});
    const FilterSpec spec = FilterSpec::box(2, EdgeMode::Clamp);
    for (int reads : {0, 1, 3}) {
        const FailingSource source(im, reads);
        std::vector<std::byte> out(im.pixels.size());
        io::HostImage sink(static_cast<void*>(out.data()), im.info, im.info.row_bytes());
        EXPECT_THROW((void)ops::filter(*dev, spec, source, sink,
                                       {.budget_bytes = 64 * outcore::kMiB, .tile_rows = 4, .tile_cols = 32}),
                     outcore::IoError);
        EXPECT_EQ(dev->allocated_bytes(), 0U);
        EXPECT_EQ(dev->allocation_count(outcore::MemoryKind::HostPinned), 0U);
    }
}

TEST(FilterRun, ReportsProgressUpToTheWholeImage) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = ft::cpu_device();
    const Image im = random_image(rng, 40, 40);
    std::vector<double> seen;
    FilterOptions o{.budget_bytes = 64 * outcore::kMiB, .tile_rows = 3, .tile_cols = 7};
    o.progress = [&](double f) { seen.push_back(f); };
    (void)run(*dev, FilterSpec::sobel(), im, o);
    ASSERT_FALSE(seen.empty());
    for (std::size_t i = 1; i < seen.size(); ++i) EXPECT_LT(seen[i - 1], seen[i]);
    EXPECT_DOUBLE_EQ(seen.back(), 1.0);
}

// --- direct sinks ------------------------------------------------------------------

/// Runs the executor into a host image whose rows are `stride` bytes apart, declared
/// device-readable (output tiles then come down straight into it, no staging) or not;
/// returns the sink's whole memory. The padding after each row starts as a random
/// pattern, kept in `memory` for the caller to compare.
struct SinkRun {
    std::vector<std::byte> memory;
    FilterReport report;
    std::vector<double> progress;
};

SinkRun run_into(Device& dev, const FilterSpec& spec, const Image& im, FilterOptions o,
                 const std::vector<std::byte>& initial, std::uint64_t stride, bool direct,
                 const io::HostImage* source = nullptr) {
    SinkRun r;
    r.memory = initial;
    const io::HostImage packed(static_cast<const void*>(im.pixels.data()), im.info, im.info.row_bytes());
    io::HostImage sink(static_cast<void*>(r.memory.data()), im.info, stride);
    sink.set_device_readable(direct);
    EXPECT_EQ(sink.direct_sink().has_value(), direct);
    o.progress = [&r](double f) { r.progress.push_back(f); };
    r.report = ops::filter(dev, spec, source != nullptr ? *source : packed, sink, o);
    return r;
}

// The same run into a packed sink and into a device-readable one with padded rows:
// every byte equal, the padding untouched, the rows equal to the whole-image
// reference, progress reaching 1; planned tiles, forced 2-D tiles (a band of tiles
// per row) and strips.
TEST(FilterRun, DeviceReadableSinkEqualsThePackedSinkBitForBit) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = ft::cpu_device();
    int two_d = 0, strips = 0;
    for (FilterKind kind : {FilterKind::Gaussian, FilterKind::Box, FilterKind::Sobel, FilterKind::Conv}) {
        const FilterSpec spec = ft::random_spec(kind, ft::kEdgeModes[rng() % 3], rng);
        const Image im = random_image(rng, 48, 56);
        const std::uint64_t row_bytes = im.info.row_bytes();
        const std::uint64_t stride = row_bytes + 1 + rng() % 40;
        std::vector<std::byte> initial(im.info.rows * stride);
        for (auto& b : initial) b = static_cast<std::byte>(rng() & 0xFF);
        const std::vector<std::byte> want = reference(*dev, spec, im);
        const std::uint64_t minimum = ops::filter_minimum_budget(*dev, spec, im.info, {});
        const std::uint64_t roomy = 64 * im.pixels.size() + 64 * outcore::kKiB;
        const FilterOptions runs[] = {
            {.budget_bytes = minimum},
            {.budget_bytes = roomy, .tile_rows = 1 + rng() % 9, .tile_cols = 1 + rng() % 12},
            {.budget_bytes = roomy, .tile_rows = 1 + rng() % 9, .tile_cols = 1 + rng() % 12},
            {.budget_bytes = roomy, .tile_rows = 1 + rng() % 9, .tile_cols = im.info.cols},
            {.budget_bytes = roomy, .strips_only = true},
        };
        for (const FilterOptions& o : runs) {
            const std::string what = describe(spec, im, o) + ", sink stride " + std::to_string(stride);
            const SinkRun packed = run_into(*dev, spec, im, o, initial, stride, false);
            const SinkRun direct = run_into(*dev, spec, im, o, initial, stride, true);
            expect_equal(direct.memory, packed.memory, what + ": direct against packed");
            std::vector<std::byte> rows;  // the image part of the direct sink, packed
            for (std::uint64_t r = 0; r < im.info.rows; ++r) {
                const auto at = direct.memory.begin() + static_cast<std::ptrdiff_t>(r * stride);
                rows.insert(rows.end(), at, at + static_cast<std::ptrdiff_t>(row_bytes));
                EXPECT_TRUE(std::equal(at + static_cast<std::ptrdiff_t>(row_bytes),
                                       at + static_cast<std::ptrdiff_t>(stride),
                                       initial.begin() + static_cast<std::ptrdiff_t>(r * stride + row_bytes)))
                    << what << ": the padding after row " << r << " changed";
            }
            expect_equal(rows, want, what + ": against the whole image");
            // Same plan, same bytes over the link; only the download staging is gone.
            const FilterReport& d = direct.report;
            EXPECT_EQ(d.plan.grid.count(), packed.report.plan.grid.count()) << what;
            EXPECT_EQ(d.pipeline.bytes_downloaded, im.pixels.size()) << what;
            EXPECT_EQ(d.bytes_moved, d.plan.bytes_moved) << what;
            EXPECT_EQ(d.pipeline.download_count, d.plan.grid.count()) << what;
            EXPECT_LT(d.pipeline.staging_bytes, packed.report.pipeline.staging_bytes) << what;
            EXPECT_LE(d.peak_device_bytes, d.budget_bytes) << what;
            ASSERT_FALSE(direct.progress.empty()) << what;
            EXPECT_DOUBLE_EQ(direct.progress.back(), 1.0) << what;
            two_d += d.plan.grid.tile_cols() > 1 && d.plan.grid.tile_rows() > 1 ? 1 : 0;
            strips += d.plan.row_strips && d.plan.grid.count() > 1 ? 1 : 0;
        }
    }
    EXPECT_GT(two_d, 0);
    EXPECT_GT(strips, 0);
    EXPECT_EQ(dev->allocated_bytes(), 0U);
    EXPECT_EQ(dev->allocation_count(outcore::MemoryKind::HostPinned), 0U);
}

// Progress into a direct sink is what it is into a packed one: the fraction of rows
// written, in (0, 1], rising, once per completed band of tiles (not once per tile).
TEST(FilterRun, DirectSinkReportsProgressOncePerBand) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = ft::cpu_device();
    const Image im =
        random_image_in(rng, {20, 20}, {20, 20});  // three tiles or more per band of 7-pixel-wide tiles
    const std::uint64_t stride = im.info.row_bytes() + 8;
    const std::vector<std::byte> initial(im.info.rows * stride, std::byte{0x11});
    for (const std::uint64_t tile_cols : {std::uint64_t{7}, im.info.cols}) {
        const FilterOptions o{.budget_bytes = 64 * outcore::kMiB, .tile_rows = 3, .tile_cols = tile_cols};
        const SinkRun packed = run_into(*dev, FilterSpec::sobel(), im, o, initial, stride, false);
        const SinkRun direct = run_into(*dev, FilterSpec::sobel(), im, o, initial, stride, true);
        SCOPED_TRACE(describe(FilterSpec::sobel(), im, o));
        ASSERT_FALSE(direct.progress.empty());
        EXPECT_GT(direct.progress.front(), 0.0);
        const auto stall = std::adjacent_find(direct.progress.begin(), direct.progress.end(),
                                              [](double x, double y) { return !(x < y); });
        EXPECT_TRUE(stall == direct.progress.end())
            << "progress did not rise after call " << (stall - direct.progress.begin()) << " of "
            << direct.progress.size() << " (at " << *stall << ")";
        EXPECT_DOUBLE_EQ(direct.progress.back(), 1.0);
        EXPECT_EQ(direct.progress, packed.progress);
    }
}

// --- direct sources ----------------------------------------------------------------

// A device-readable source (tiles uploaded straight from it with 2-D copies, the halo
// beyond the image's edge filled on the device by Kernels::pad_edges) gives the same
// bytes as the staged path, for every edge mode, with padded source rows, into a
// packed and a direct sink; no upload staging, and only the image's own pixels cross
// the link (fewer bytes than the staged path, which sends the edge fill too).
TEST(FilterRun, DeviceReadableSourceEqualsTheStagedSourceBitForBit) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = ft::cpu_device();
    int edge_tiles = 0;
    for (FilterKind kind : {FilterKind::Gaussian, FilterKind::Box, FilterKind::Sobel, FilterKind::Conv}) {
        for (EdgeMode edge : ft::kEdgeModes) {
            const FilterSpec spec = ft::random_spec(kind, edge, rng);
            const Image im = random_image(rng, 40, 48);
            const std::uint64_t row_bytes = im.info.row_bytes();
            // The source's rows sit in padded rows; the padding must never be read.
            const std::uint64_t src_stride = row_bytes + 1 + rng() % 24;
            std::vector<std::byte> src(im.info.rows * src_stride, std::byte{0x7F});
            for (std::uint64_t r = 0; r < im.info.rows; ++r) {
                std::memcpy(src.data() + r * src_stride, im.pixels.data() + r * row_bytes, row_bytes);
            }
            io::HostImage source(static_cast<const void*>(src.data()), im.info, src_stride);
            EXPECT_FALSE(source.direct_source().has_value());
            source.set_device_readable(true);
            ASSERT_TRUE(source.direct_source().has_value());
            const std::vector<std::byte> initial(im.info.rows * row_bytes, std::byte{0x5A});
            const std::uint64_t roomy = 64 * im.pixels.size() + 64 * outcore::kKiB;
            const FilterOptions runs[] = {
                {.budget_bytes = ops::filter_minimum_budget(*dev, spec, im.info, {})},
                {.budget_bytes = roomy, .tile_rows = 1 + rng() % 9, .tile_cols = 1 + rng() % 12},
                {.budget_bytes = roomy, .tile_rows = 1 + rng() % 9, .tile_cols = im.info.cols},
                {.budget_bytes = roomy},
            };
            for (const FilterOptions& o : runs) {
                const std::string what =
                    describe(spec, im, o) + ", source stride " + std::to_string(src_stride);
                const SinkRun staged = run_into(*dev, spec, im, o, initial, row_bytes, false);
                for (const bool direct_out : {false, true}) {
                    const SinkRun direct =
                        run_into(*dev, spec, im, o, initial, row_bytes, direct_out, &source);
                    expect_equal(
                        direct.memory, staged.memory,
                        what + (direct_out ? ", direct sink" : ", packed sink") + ": against staged");
                    const FilterReport& d = direct.report;
                    EXPECT_EQ(d.pipeline.upload_count, d.plan.grid.count()) << what;
                    EXPECT_LE(d.pipeline.bytes_uploaded, staged.report.pipeline.bytes_uploaded) << what;
                    EXPECT_GE(d.pipeline.bytes_uploaded, im.pixels.size()) << what;
                    EXPECT_LT(d.pipeline.staging_bytes, staged.report.pipeline.staging_bytes) << what;
                    EXPECT_LE(d.peak_device_bytes, d.budget_bytes) << what;
                    if (d.pipeline.bytes_uploaded < staged.report.pipeline.bytes_uploaded) ++edge_tiles;
                }
            }
            EXPECT_EQ(source.direct_source()->data, src.data());
        }
    }
    EXPECT_GT(edge_tiles, 0) << "no run filled an edge on the device";
    EXPECT_EQ(dev->allocated_bytes(), 0U);
    EXPECT_EQ(dev->allocation_count(outcore::MemoryKind::HostPinned), 0U);
}

// Only a writable image is offered as a direct sink.
TEST(FilterRun, ReadOnlyImagesAreNeverDirectSinks) {
    std::vector<std::byte> pixels(12 * 4);
    const io::ImageInfo info{.rows = 4, .cols = 3, .channels = 1, .dtype = DType::F32};
    io::HostImage writable(static_cast<void*>(pixels.data()), info, info.row_bytes());
    EXPECT_FALSE(writable.direct_sink().has_value());  // not declared device-readable
    writable.set_device_readable(true);
    ASSERT_TRUE(writable.direct_sink().has_value());
    EXPECT_EQ(writable.direct_sink()->data, pixels.data());
    EXPECT_EQ(writable.direct_sink()->row_stride_bytes, info.row_bytes());
    io::HostImage read_only(static_cast<const void*>(pixels.data()), info, info.row_bytes());
    read_only.set_device_readable(true);
    EXPECT_FALSE(read_only.direct_sink().has_value());
}

}  // namespace
