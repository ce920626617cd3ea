// Tiled filtering equals whole-image filtering bit for bit: random images, filters,
// edge modes, pixel types and tile shapes (tiles of 1 pixel, tiles smaller than the
// halo, tiles larger than the image), checked two ways — tiles cut out of the one
// padded image (the kernels alone), and tiles whose halo fill_halo builds from the
// image (the executor's path) — against ops::filter_whole_image_reference.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "filter_test_support.hpp"
#include "ops/filter_tile.hpp"
#include "outcore/device/kernel_params.hpp"
#include "outcore/tile/grid.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::Block;
using outcore::BufferView;
using outcore::Device;
using outcore::DType;
using outcore::KernelParams;
using outcore::ops::EdgeMode;
using outcore::ops::FilterKind;
using outcore::ops::FilterSpec;
using outcore::ops::ImageShape;
using outcore::tile::Extent;
using outcore::tile::TileGrid;
using outcore::tile::TileRect;
namespace ft = outcore::filter_test;
namespace ops = outcore::ops;
namespace detail = outcore::ops::detail;

struct Case {
    FilterSpec spec;
    ImageShape image;
    DType out_type = DType::F32;
    std::vector<std::byte> pixels;

    [[nodiscard]] std::string describe() const {
        return std::string(ops::to_string(spec.kind)) + " r" + std::to_string(spec.radius) + " " +
               std::string(ops::to_string(spec.edge)) + " " + std::to_string(image.extent.rows) + "x" +
               std::to_string(image.extent.cols) + "x" + std::to_string(image.channels) + " " +
               std::string(outcore::to_string(image.type)) + "->" + std::string(outcore::to_string(out_type));
    }
    [[nodiscard]] std::uint64_t out_pixel_bytes() const {
        return std::uint64_t{outcore::dtype_bytes(out_type)} * image.channels;
    }
};

Case random_case(FilterKind kind, EdgeMode edge, std::mt19937_64& rng) {
    Case c;
    c.spec = ft::random_spec(kind, edge, rng);
    c.image.extent = Extent{.rows = 1 + rng() % 23, .cols = 1 + rng() % 29};
    if (rng() % 6 == 0) c.image.extent.rows = 1;  // 1×N and N×1 images
    if (rng() % 6 == 0) c.image.extent.cols = 1;
    c.image.channels = static_cast<std::uint32_t>(1 + rng() % 4);
    c.image.type = ft::kPixelTypes[rng() % 3];
    c.out_type = ft::kPixelTypes[rng() % 3];
    c.pixels =
        ft::random_elements(c.image.type, c.image.extent.rows * c.image.extent.cols * c.image.channels, rng);
    return c;
}

/// Tiles cut out of one padded image: each tile's input is a view into the padded
/// block (its stride), each output a view into the one output block.
std::vector<std::byte> tiles_of_padded_image(Device& dev, const Case& c, Extent shape) {
    auto q = dev.create_queue(outcore::QueueRole::Compute);
    const std::uint32_t h = c.spec.halo();
    const std::uint64_t pix = c.image.pixel_bytes();
    const std::uint64_t padded_cols = c.image.extent.cols + 2 * h;
    const std::uint64_t padded_stride = padded_cols * pix;
    std::vector<std::byte> padded((c.image.extent.rows + 2 * h) * padded_stride);
    const std::uint64_t row_bytes = c.image.row_bytes();
    ops::fill_halo(
        c.image, {.row = 0, .col = 0, .size = c.image.extent}, h, c.spec.edge,
        [&](std::uint64_t r0, std::uint64_t n, std::uint64_t c0, std::uint64_t m, std::byte* dst,
            std::uint64_t s) {
            for (std::uint64_t r = 0; r < n; ++r) {
                std::memcpy(dst + r * s, c.pixels.data() + (r0 + r) * row_bytes + c0 * pix, m * pix);
            }
        },
        padded.data(), padded_stride);
    const std::uint64_t out_stride = c.image.extent.cols * c.out_pixel_bytes();
    std::vector<std::byte> out(c.image.extent.rows * out_stride);
    Block in_block = ft::upload(dev, *q, padded);
    Block out_block = dev.allocate({.bytes = out.size(), .kind = outcore::MemoryKind::Device});
    q->fill(BufferView(out_block), std::byte{0xAB});  // poison: every pixel must be written
    std::vector<Block> intermediates;
    const KernelParams weights = detail::make_weights(dev, *q, c.spec);
    const TileGrid grid(c.image.extent, shape);
    for (std::uint64_t i = 0; i < grid.count(); ++i) {
        const TileRect t = grid.tile(i);
        const std::uint64_t in_bytes =
            (t.size.rows + 2 * h - 1) * padded_stride + (t.size.cols + 2 * h) * pix;
        const std::uint64_t out_bytes = (t.size.rows - 1) * out_stride + t.size.cols * c.out_pixel_bytes();
        detail::FilterTileViews v{
            .in = BufferView(in_block, t.row * padded_stride + t.col * pix, in_bytes),
            .in_stride = padded_stride,
            .intermediate = {},
            .intermediate_stride = 0,
            .out = BufferView(out_block, t.row * out_stride + t.col * c.out_pixel_bytes(), out_bytes),
            .out_stride = out_stride};
        if (c.spec.separable()) {
            intermediates.push_back(
                dev.allocate({.bytes = detail::intermediate_bytes(c.spec, c.image.channels, t.size),
                              .kind = outcore::MemoryKind::Device}));
            v.intermediate = BufferView(intermediates.back());
            v.intermediate_stride = detail::intermediate_row_bytes(c.image.channels, t.size.cols);
        }
        detail::enqueue_filter_tile(dev.kernels(), *q, c.spec, weights, c.image, c.out_type, t.size, v);
    }
    q->download(BufferView(out_block), out.data());
    q->synchronize();
    return out;
}

/// Tiles whose input fill_halo builds from the image alone, as the executor does.
std::vector<std::byte> tiles_with_own_halo(Device& dev, const Case& c, Extent shape) {
    auto q = dev.create_queue(outcore::QueueRole::Compute);
    const std::uint32_t h = c.spec.halo();
    const std::uint64_t pix = c.image.pixel_bytes();
    const std::uint64_t row_bytes = c.image.row_bytes();
    const std::uint64_t out_stride = c.image.extent.cols * c.out_pixel_bytes();
    std::vector<std::byte> out(c.image.extent.rows * out_stride, std::byte{0xAB});
    const KernelParams weights = detail::make_weights(dev, *q, c.spec);
    const TileGrid grid(c.image.extent, shape);
    for (std::uint64_t i = 0; i < grid.count(); ++i) {
        const TileRect t = grid.tile(i);
        const std::uint64_t staging_stride = (t.size.cols + 2 * h) * pix;
        std::vector<std::byte> staging((t.size.rows + 2 * h) * staging_stride);
        ops::fill_halo(
            c.image, t, h, c.spec.edge,
            [&](std::uint64_t r0, std::uint64_t n, std::uint64_t c0, std::uint64_t m, std::byte* dst,
                std::uint64_t s) {
                // Reads must stay inside the image and inside this tile's halo.
                EXPECT_LE(r0 + n, c.image.extent.rows);
                EXPECT_LE(c0 + m, c.image.extent.cols);
                EXPECT_GE(r0 + h, t.row);
                EXPECT_LE(r0 + n, t.row + t.size.rows + h);
                for (std::uint64_t r = 0; r < n; ++r) {
                    std::memcpy(dst + r * s, c.pixels.data() + (r0 + r) * row_bytes + c0 * pix, m * pix);
                }
            },
            staging.data(), staging_stride);
        Block in_block = ft::upload(dev, *q, staging);
        const std::uint64_t tile_out_stride = t.size.cols * c.out_pixel_bytes();
        Block out_block =
            dev.allocate({.bytes = t.size.rows * tile_out_stride, .kind = outcore::MemoryKind::Device});
        Block mid;
        detail::FilterTileViews v{.in = BufferView(in_block),
                                  .in_stride = staging_stride,
                                  .intermediate = {},
                                  .intermediate_stride = 0,
                                  .out = BufferView(out_block),
                                  .out_stride = tile_out_stride};
        if (c.spec.separable()) {
            mid = dev.allocate({.bytes = detail::intermediate_bytes(c.spec, c.image.channels, t.size),
                                .kind = outcore::MemoryKind::Device});
            v.intermediate = BufferView(mid);
            v.intermediate_stride = detail::intermediate_row_bytes(c.image.channels, t.size.cols);
        }
        detail::enqueue_filter_tile(dev.kernels(), *q, c.spec, weights, c.image, c.out_type, t.size, v);
        std::vector<std::byte> tile_out(t.size.rows * tile_out_stride);
        q->download(BufferView(out_block), tile_out.data());
        q->synchronize();  // staging and the tile's blocks die at the end of this iteration
        for (std::uint64_t r = 0; r < t.size.rows; ++r) {
            std::memcpy(out.data() + (t.row + r) * out_stride + t.col * c.out_pixel_bytes(),
                        tile_out.data() + r * tile_out_stride, tile_out_stride);
        }
    }
    return out;
}

/// Index of the first differing output element, for the failure message.
std::string first_difference(const std::vector<std::byte>& got, const std::vector<std::byte>& want,
                             const Case& c) {
    for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
        if (got[i] != want[i]) {
            const std::size_t e = i / outcore::dtype_bytes(c.out_type);
            return "element " + std::to_string(e) + ": " +
                   std::to_string(ft::load(got.data(), c.out_type, e)) + " vs " +
                   std::to_string(ft::load(want.data(), c.out_type, e));
        }
    }
    return "sizes " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
}

void expect_tiled_equals_whole(Device& dev, const Case& c, Extent shape) {
    const std::vector<std::byte> whole =
        ops::filter_whole_image_reference(dev, c.spec, c.image, c.pixels, c.out_type);
    const std::vector<std::byte> cut = tiles_of_padded_image(dev, c, shape);
    EXPECT_TRUE(cut == whole) << c.describe() << ", tiles cut from the padded image " << shape.rows << "x"
                              << shape.cols << ": " << first_difference(cut, whole, c);
    const std::vector<std::byte> own = tiles_with_own_halo(dev, c, shape);
    EXPECT_TRUE(own == whole) << c.describe() << ", tiles with their own halo " << shape.rows << "x"
                              << shape.cols << ": " << first_difference(own, whole, c);
}

TEST(FilterTiling, RandomTilesEqualTheWholeImageBitForBit) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = ft::cpu_device();
    for (std::uint64_t rep = 0; rep < outcore::test::scaled(4); ++rep) {
        for (FilterKind kind : {FilterKind::Gaussian, FilterKind::Box, FilterKind::Sobel, FilterKind::Conv}) {
            for (EdgeMode edge : ft::kEdgeModes) {
                const Case c = random_case(kind, edge, rng);
                for (int s = 0; s < 3; ++s) {
                    const Extent shape{.rows = 1 + rng() % (c.image.extent.rows + 3),
                                       .cols = 1 + rng() % (c.image.extent.cols + 3)};
                    expect_tiled_equals_whole(*dev, c, shape);
                }
            }
        }
    }
}

TEST(FilterTiling, TilesSmallerThanTheHaloEqualTheWholeImage) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = ft::cpu_device();
    std::uniform_real_distribution<float> w(-1.0F, 1.0F);
    std::vector<float> k15(225);
    for (float& v : k15) v = w(rng);
    for (EdgeMode edge : ft::kEdgeModes) {
        // Radius 7 with 3×5 tiles and 1×1 tiles; Gaussian σ = 2.2 also has radius 7.
        for (const FilterSpec& spec : {FilterSpec::conv(k15, 15, edge), FilterSpec::gaussian(2.2, edge)}) {
            for (DType type : ft::kPixelTypes) {
                Case c;
                c.spec = spec;
                c.image = ImageShape{.extent = {.rows = 11 + rng() % 9, .cols = 13 + rng() % 9},
                                     .channels = static_cast<std::uint32_t>(1 + rng() % 4),
                                     .type = type};
                c.out_type = type;
                c.pixels = ft::random_elements(
                    type, c.image.extent.rows * c.image.extent.cols * c.image.channels, rng);
                ASSERT_EQ(c.spec.halo(), 7U);
                expect_tiled_equals_whole(*dev, c, {.rows = 3, .cols = 5});
                expect_tiled_equals_whole(*dev, c, {.rows = 1, .cols = 1});
            }
        }
    }
}

}  // namespace
