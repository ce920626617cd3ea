// The out-of-core GEMM on the Vulkan backend with two compute lanes (skipped where no
// Vulkan device is found; CI has Mesa's lavapipe, whose one VkQueue both lanes
// share): each C tile is two column parts in regions of its slot, the right part's B
// columns at an offset inside the B chunk. Operands in this device's HostPinned
// memory go up and down directly, B chunks in short runs packed on the host while C
// parts go down into the same pinned block, so this also exercises packing beside
// pending downloads. f32 and bf16 (whose right part must start on a 4-byte word of
// B), every transpose; compared with a float64 reference.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "outcore/backends/vulkan.hpp"
#include "outcore/io/matrix.hpp"
#include "outcore/ops/gemm.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::Block;
using outcore::DType;
using outcore::MemoryKind;
using outcore::io::HostMatrix;
using outcore::io::Layout;
using outcore::tile::GemmSchedule;

/// A column-major matrix of small multiples of 1/8 (exact in bf16 and f32) in one
/// HostPinned block, with its values as doubles.
struct PinnedMatrix {
    std::uint64_t rows, cols;
    DType type;
    Block block;
    std::vector<double> values;

    PinnedMatrix(outcore::Device& dev, std::uint64_t r, std::uint64_t c, DType t, std::mt19937_64& rng)
        : rows(r), cols(c), type(t), values(r * c) {
        const std::uint64_t w = t == DType::BF16 ? 2 : 4;
        block = dev.allocate({.bytes = r * c * w, .kind = MemoryKind::HostPinned});
        for (std::uint64_t i = 0; i < r * c; ++i) {
            const auto v = static_cast<float>(static_cast<int>(rng() % 33) - 16) / 8.0F;
            values[i] = v;
            const auto bits = std::bit_cast<std::uint32_t>(v);
            if (t == DType::BF16) {
                const auto half = static_cast<std::uint16_t>(bits >> 16);  // exact: low bits are zero
                std::memcpy(block.host() + i * 2, &half, 2);
            } else {
                std::memcpy(block.host() + i * 4, &bits, 4);
            }
        }
    }
    [[nodiscard]] HostMatrix host() {
        HostMatrix m(block.host(), rows, cols, rows, Layout::ColMajor, type);
        m.set_device_readable(true);
        return m;
    }
};

TEST(VulkanGemmLanes, TwoLanesSplitEachTileIntoColumnParts) {
    const outcore::vulkan::VulkanProbe probe = outcore::vulkan::probe_vulkan();
    if (probe.devices.empty()) GTEST_SKIP() << "no Vulkan device: " << probe.reason;
    auto dev = outcore::vulkan::make_vulkan_device();
    std::mt19937_64 rng(outcore::test::seed());
    const std::uint64_t m = 96, n = 70, k = 200;
    for (const DType type : {DType::F32, DType::BF16}) {
        for (int t = 0; t < 4; ++t) {
            const bool ta = (t & 1) != 0, tb = (t & 2) != 0;
            SCOPED_TRACE(testing::Message() << outcore::to_string(type) << " ta=" << ta << " tb=" << tb);
            PinnedMatrix a(*dev, ta ? k : m, ta ? m : k, type, rng);
            PinnedMatrix b(*dev, tb ? n : k, tb ? k : n, type, rng);
            PinnedMatrix c(*dev, m, n, DType::F32, rng);
            HostMatrix ha = a.host(), hb = b.host(), hc = c.host();
            outcore::ops::GemmOptions o{.type = type, .trans_a = ta, .trans_b = tb};
            o.budget_bytes = 64 << 20;
            o.schedule = GemmSchedule::SquareC;
            o.tile_m = 64, o.tile_n = 35, o.tile_k = 64;  // tiles 35 wide (odd), 4 k chunks
            o.measure_rates = false;
            o.compute_lanes = 2;
            o.split_c_tiles = true;
            const outcore::ops::GemmReport r = outcore::ops::gemm(*dev, ha, hb, hc, o);
            EXPECT_TRUE(r.c_tiles_split);
            std::vector<float> got(m * n);
            std::memcpy(got.data(), c.block.host(), m * n * sizeof(float));
            for (std::uint64_t j = 0; j < n; ++j) {
                for (std::uint64_t i = 0; i < m; ++i) {
                    double want = 0;
                    for (std::uint64_t p = 0; p < k; ++p) {
                        const double av = ta ? a.values[p + i * k] : a.values[i + p * m];
                        const double bv = tb ? b.values[j + p * n] : b.values[p + j * k];
                        want += av * bv;
                    }
                    // Every product and partial sum is a multiple of 1/64 below 2^24/64:
                    // exact in f32, whatever the order.
                    ASSERT_EQ(got[i + j * m], static_cast<float>(want)) << "C(" << i << ", " << j << ")";
                }
            }
        }
    }
}

}  // namespace
