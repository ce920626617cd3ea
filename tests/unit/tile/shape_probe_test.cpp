// tile::probe_gemm_shapes: shapes probed together land in the cache cached_gemm_shape_flops
// reads; shapes too slow to probe are left out.
#include <gtest/gtest.h>

#include <vector>

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

}  // namespace
}  // namespace outcore::tile
