// tile::probe_gemm_shapes: shapes probed together land in the cache cached_gemm_shape_flops
// reads; shapes too slow to probe are left out. tile::fill_probe_values: what the probes'
// operands hold (random values, not the zeros that ran 20–25 % fast on an H100).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include "outcore/core/size.hpp"
#include "outcore/tile/rates.hpp"
#include "support/faulty_device.hpp"

namespace outcore::tile {
namespace {

TEST(ShapeProbes, ShapesProbedTogetherAreCachedForLaterAsks) {
    auto device = test::FaultyDevice::cpu();
    // Shapes no other test asks for (the cache is per process and physical device).
    const GemmShape a{.type = DType::F32, .m = 97, .n = 83, .k = 61};
    GemmShape b = a;
    b.k = 59;
    GemmShape slow = a;
    slow.k = 4099;  // one call expected to take 2·97·83·4099 / 1e9 s = 66 ms: not probed
    probe_gemm_shapes(*device, {a, b, slow, a}, 1e9);
    // From now on no probe can run (every device allocation fails): what the asks below
    // return was measured by probe_gemm_shapes.
    device->fail_allocation(MemoryKind::Device, 1, true);
    const double ra = cached_gemm_shape_flops(*device, a, 1e9);
    EXPECT_GT(ra, 0.0);
    EXPECT_GT(cached_gemm_shape_flops(*device, b, 1e9), 0.0);
    EXPECT_EQ(cached_gemm_shape_flops(*device, slow, 1e9), 0.0);
    probe_gemm_shapes(*device, {a}, 1e9);  // cached: not probed again
    EXPECT_EQ(cached_gemm_shape_flops(*device, a, 1e9), ra);
}

/// The values fill_probe_values leaves in a device block of `count` elements of `type`
/// (decoded to double), the block holding NaN bytes (0xFF) before.
std::vector<double> probe_values(Device& device, DType type, std::uint64_t count) {
    const std::uint64_t size = dtype_bytes(type);
    Block block = device.allocate({.bytes = count * size, .kind = MemoryKind::Device, .tag = "test.probe"});
    auto q = device.create_queue(QueueRole::Compute);
    q->fill(BufferView(block), std::byte{0xFF});
    fill_probe_values(*q, BufferView(block), type);
    std::vector<std::byte> bytes(count * size);
    q->download(BufferView(block), bytes.data());
    q->synchronize();
    std::vector<double> out(count);
    for (std::uint64_t i = 0; i < count; ++i) {
        const std::byte* p = bytes.data() + i * size;
        float f = 0;
        double d = 0;
        std::uint16_t h = 0;
        switch (type) {
            case DType::F32: std::memcpy(&f, p, 4), d = f; break;
            case DType::F64: std::memcpy(&d, p, 8); break;
            case DType::BF16: std::memcpy(&h, p, 2), d = bf16_to_f32(h); break;
            case DType::F16: std::memcpy(&h, p, 2), d = f16_to_f32(h); break;
            default: ADD_FAILURE() << "no float type";
        }
        out[i] = d;
    }
    return out;
}

TEST(ShapeProbes, OperandsHoldRandomValuesInEveryElement) {
    auto device = test::FaultyDevice::cpu();
    for (const DType type : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
        SCOPED_TRACE(std::string(to_string(type)));
        // Past the 1 MiB pattern and not a power of two of it: the copies that repeat it
        // must reach the last element.
        const std::uint64_t count = (3 * kMiB + 4096) / dtype_bytes(type) + 3;
        const std::vector<double> v = probe_values(*device, type, count);
        std::uint64_t zeros = 0;
        std::set<double> distinct;
        for (std::uint64_t i = 0; i < count; ++i) {
            ASSERT_TRUE(v[i] >= -1.0 && v[i] <= 1.0) << "element " << i << " = " << v[i];
            zeros += v[i] == 0.0 ? 1 : 0;
            if (i < 4096) distinct.insert(v[i]);
        }
        EXPECT_LT(zeros, count / 100);
        EXPECT_GT(distinct.size(), 1000U);  // bf16 has 2^14 values in [-1, 1]
    }
    EXPECT_EQ(probe_values(*device, DType::F32, 1000),
              probe_values(*device, DType::F32, 1000));  // repeatable
}

}  // namespace
}  // namespace outcore::tile
