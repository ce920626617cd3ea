// The tiled filter on the CUDA device from and into pinned host images (the direct
// path: tiles uploaded straight from the source with 2-D copies, halos beyond the
// image's edge filled by the edge-fill kernel, output tiles downloaded straight into
// the sink) equals the CPU backend's staged run bit for bit, for every edge mode,
// with planned, 2-D and strip tiles and a budget at the minimum.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../ops/filter_test_support.hpp"
#include "cuda_test_support.hpp"
#include "outcore/core/size.hpp"
#include "outcore/io/image.hpp"
#include "outcore/ops/filter_run.hpp"
#include "support/test_seed.hpp"

namespace {

namespace ft = outcore::filter_test;
namespace io = outcore::io;
namespace ops = outcore::ops;
using outcore::Block;
using outcore::MemoryKind;

class CudaFilterRunTest : public outcore::cuda::test::CudaTest {};

TEST_F(CudaFilterRunTest, PinnedImagesThroughTheDirectPathMatchTheCpuBitForBit) {
    std::mt19937_64 rng(outcore::test::seed());
    auto cpu = ft::cpu_device();
    int edge_filled = 0;
    for (ops::FilterKind kind :
         {ops::FilterKind::Gaussian, ops::FilterKind::Box, ops::FilterKind::Sobel, ops::FilterKind::Conv}) {
        for (ops::EdgeMode edge : ft::kEdgeModes) {
            const ops::FilterSpec spec = ft::random_spec(kind, edge, rng);
            const io::ImageInfo info{.rows = 40 + rng() % 300,
                                     .cols = 40 + rng() % 300,
                                     .channels = static_cast<std::uint32_t>(1 + rng() % 4),
                                     .dtype = ft::kPixelTypes[rng() % 3]};
            const std::vector<std::byte> pixels =
                ft::random_elements(info.dtype, info.rows * info.cols * info.channels, rng);
            const std::uint64_t bytes = pixels.size();
            Block in = dev().allocate({.bytes = bytes, .kind = MemoryKind::HostPinned, .tag = "test.in"});
            Block out = dev().allocate({.bytes = bytes, .kind = MemoryKind::HostPinned, .tag = "test.out"});
            std::memcpy(in.host(), pixels.data(), bytes);
            io::HostImage source(static_cast<const void*>(in.host()), info, info.row_bytes());
            io::HostImage sink(out.host(), info, info.row_bytes());
            source.set_device_readable(true);
            sink.set_device_readable(true);

            std::vector<std::byte> want(bytes);
            const io::HostImage cpu_source(static_cast<const void*>(pixels.data()), info, info.row_bytes());
            io::HostImage cpu_sink(static_cast<void*>(want.data()), info, info.row_bytes());
            const std::uint64_t roomy = 16 * bytes + outcore::kMiB;
            const ops::FilterOptions runs[] = {
                {.budget_bytes = std::max(ops::filter_minimum_budget(dev(), spec, info, {}),
                                          ops::filter_minimum_budget(*cpu, spec, info, {}))},
                {.budget_bytes = roomy, .tile_rows = 1 + rng() % 64, .tile_cols = 1 + rng() % 96},
                {.budget_bytes = roomy, .tile_rows = 1 + rng() % 64, .tile_cols = info.cols},
                {.budget_bytes = roomy},
            };
            for (const ops::FilterOptions& o : runs) {
                SCOPED_TRACE(std::string(ops::to_string(kind)) + " " + std::string(ops::to_string(edge)) +
                             " " + std::to_string(info.rows) + "x" + std::to_string(info.cols) + "x" +
                             std::to_string(info.channels) + " " +
                             std::string(outcore::to_string(info.dtype)) + ", tile " +
                             std::to_string(o.tile_rows) + "x" + std::to_string(o.tile_cols) + ", budget " +
                             std::to_string(o.budget_bytes));
                std::memset(out.host(), 0xA5, bytes);
                const ops::FilterReport r = ops::filter(dev(), spec, source, sink, o);
                (void)ops::filter(*cpu, spec, cpu_source, cpu_sink, o);
                ASSERT_EQ(std::memcmp(out.host(), want.data(), bytes), 0);
                EXPECT_EQ(r.pipeline.staging_bytes, 0U) << "the direct path needs no staging";
                EXPECT_LE(r.peak_device_bytes, r.budget_bytes);
                if (r.pipeline.bytes_uploaded < r.plan.bytes_to_device) ++edge_filled;
            }
        }
    }
    EXPECT_GT(edge_filled, 0);
}

}  // namespace
