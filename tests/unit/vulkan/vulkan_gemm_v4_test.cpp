// The vectorized float32 GEMM shader (GemmTile::vectorized, shaders/gemm_v4.comp)
// against a float64 reference: sizes that leave partial 128×128 blocks and partial
// k slices, all four transposes, beta 0 (C is not read: it holds NaN) and beta 1,
// element offsets and leading dimensions that make 16-byte quads possible (the
// shader's vec4 loads and stores) and ones that do not (its scalar fallback), and
// elements between the columns of C left as they were; a 16-bit C is refused. Skipped
// where no Vulkan device is found.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "outcore/backends/vulkan.hpp"
#include "outcore/core/error.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::Block;
using outcore::BufferView;
using outcore::DType;
using outcore::GemmCompute;
using outcore::GemmTileArgs;
using outcore::vulkan::GemmTile;

struct Shape {
    std::uint64_t m, n, k;
};

/// Where a matrix sits: `offset` elements into its block, `pad` rows of slack per column.
struct Layout {
    std::uint64_t offset;
    std::uint64_t pad;
    const char* what;
};

// Column-major rows × cols matrix with leading dimension ld, offset elements in.
struct Matrix {
    std::uint64_t rows, cols, ld, offset;
    std::vector<float> data;  // offset + ld · cols elements
    Matrix(std::uint64_t r, std::uint64_t c, const Layout& l, float fill)
        : rows(r), cols(c), ld(r + l.pad), offset(l.offset), data(l.offset + (r + l.pad) * c, fill) {}
    float& at(std::uint64_t i, std::uint64_t j) { return data[offset + i + j * ld]; }
    [[nodiscard]] float at(std::uint64_t i, std::uint64_t j) const { return data[offset + i + j * ld]; }
};

class VulkanGemmV4Test : public ::testing::TestWithParam<std::uint32_t> {
protected:
    void SetUp() override {
        const outcore::vulkan::VulkanProbe probe = outcore::vulkan::probe_vulkan();
        if (probe.devices.empty()) GTEST_SKIP() << "no Vulkan device: " << probe.reason;
        dev_ = outcore::vulkan::make_vulkan_device({.index = 0,
                                                    .gemm_tile = GemmTile{.workgroup = 16,
                                                                          .per_thread = 8,
                                                                          .depth = GetParam(),
                                                                          .contiguous = false,
                                                                          .vectorized = true}});
    }
    outcore::Device& dev() { return *dev_; }

    /// C = alpha · op(A) · op(B) + beta · C on the device; returns C's whole storage.
    std::vector<float> run(const Matrix& a, const Matrix& b, const Matrix& c, bool ta, bool tb,
                           const Shape& s, double alpha, double beta) {
        auto q = dev().create_queue();
        auto upload = [&](const Matrix& x) {
            Block block = dev().allocate({.bytes = x.data.size() * 4});
            q->upload(x.data.data(), block);
            return block;
        };
        Block ba = upload(a);
        Block bb = upload(b);
        Block bc = upload(c);
        auto view = [](const Block& block, const Matrix& x) {
            return BufferView(block, x.offset * 4, (x.data.size() - x.offset) * 4);
        };
        dev().kernels().gemm(*q, GemmTileArgs{.trans_a = ta,
                                              .trans_b = tb,
                                              .m = s.m,
                                              .n = s.n,
                                              .k = s.k,
                                              .a = view(ba, a),
                                              .lda = a.ld,
                                              .b = view(bb, b),
                                              .ldb = b.ld,
                                              .c = view(bc, c),
                                              .ldc = c.ld,
                                              .alpha = alpha,
                                              .beta = beta});
        std::vector<float> out(c.data.size());
        q->download(bc, out.data());
        q->synchronize();
        return out;
    }

private:
    std::unique_ptr<outcore::Device> dev_;
};

TEST_P(VulkanGemmV4Test, MatchesAFloat64ReferenceForEveryTransposeAndEdge) {
    std::mt19937_64 rng(outcore::test::seed());
    std::uniform_real_distribution<float> uni(-1.0F, 1.0F);
    constexpr float kSlack = 7.0F;  // between C's columns and before its first element
    const Shape shapes[] = {{1, 1, 1}, {129, 67, 33}, {200, 300, 17}, {256, 128, 64}, {131, 260, 100}};
    // Quads of 16 bytes (offset and ld multiples of 4 elements) and not.
    const Layout layouts[] = {{4, 4, "quad-aligned"}, {3, 1, "unaligned"}};
    for (const Shape& s : shapes) {
        for (const Layout& layout : layouts) {
            for (int t = 0; t < 4; ++t) {
                const bool ta = (t & 1) != 0, tb = (t & 2) != 0;
                Matrix a(ta ? s.k : s.m, ta ? s.m : s.k, layout, 0.0F);
                Matrix b(tb ? s.n : s.k, tb ? s.k : s.n, layout, 0.0F);
                for (float& x : a.data) x = uni(rng);
                for (float& x : b.data) x = uni(rng);
                for (const double beta : {0.0, 1.0}) {
                    const double alpha = 1.5;
                    Matrix c(s.m, s.n, layout, kSlack);
                    for (std::uint64_t j = 0; j < s.n; ++j) {
                        for (std::uint64_t i = 0; i < s.m; ++i)
                            c.at(i, j) = beta == 0.0 ? std::numeric_limits<float>::quiet_NaN() : uni(rng);
                    }
                    const std::vector<float> got = run(a, b, c, ta, tb, s, alpha, beta);
                    const std::string where = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
                                              std::to_string(s.k) + " " + layout.what + " ta " +
                                              std::to_string(ta) + " tb " + std::to_string(tb) + " beta " +
                                              std::to_string(beta);
                    std::vector<bool> inside(c.data.size(), false);
                    for (std::uint64_t j = 0; j < s.n; ++j) {
                        for (std::uint64_t i = 0; i < s.m; ++i) {
                            double want = 0;
                            for (std::uint64_t l = 0; l < s.k; ++l) {
                                want += static_cast<double>(ta ? a.at(l, i) : a.at(i, l)) *
                                        static_cast<double>(tb ? b.at(j, l) : b.at(l, j));
                            }
                            want = alpha * want + (beta == 0.0 ? 0.0 : beta * c.at(i, j));
                            const std::uint64_t at = c.offset + i + j * c.ld;
                            inside[at] = true;
                            ASSERT_NEAR(got[at], want, 1e-5 * static_cast<double>(s.k + 1))
                                << where << " at (" << i << ", " << j << ")";
                        }
                    }
                    for (std::size_t e = 0; e < got.size(); ++e) {
                        if (inside[e]) continue;
                        ASSERT_EQ(got[e], kSlack) << where << ": element " << e << " outside C";
                    }
                }
            }
        }
    }
}

// The other types have no vectorized shader: they run gemm.comp at 16x4x16, adjacent
// (64×64 blocks, so a dispatch counts its workgroups by the type's blocking).
TEST_P(VulkanGemmV4Test, OtherTypesRunTheScalarShaderAtItsOwnBlocking) {
    if (!dev().kernels().supports_gemm(DType::F64, GemmCompute::Exact)) GTEST_SKIP() << "no float64 GEMM";
    std::mt19937_64 rng(outcore::test::seed());
    std::uniform_real_distribution<double> uni(-1.0, 1.0);
    const std::uint64_t m = 150, n = 131, k = 45;
    std::vector<double> a(m * k), b(k * n), c(m * n);
    for (double& x : a) x = uni(rng);
    for (double& x : b) x = uni(rng);
    auto q = dev().create_queue();
    Block ba = dev().allocate({.bytes = a.size() * 8});
    Block bb = dev().allocate({.bytes = b.size() * 8});
    Block bc = dev().allocate({.bytes = c.size() * 8});
    q->upload(a.data(), ba);
    q->upload(b.data(), bb);
    dev().kernels().gemm(*q, GemmTileArgs{.type = DType::F64,
                                          .m = m,
                                          .n = n,
                                          .k = k,
                                          .a = ba,
                                          .lda = m,
                                          .b = bb,
                                          .ldb = k,
                                          .c = bc,
                                          .ldc = m});
    q->download(bc, c.data());
    q->synchronize();
    for (std::uint64_t j = 0; j < n; ++j) {
        for (std::uint64_t i = 0; i < m; ++i) {
            double want = 0;
            for (std::uint64_t l = 0; l < k; ++l) want += a[i + l * m] * b[l + j * k];
            ASSERT_NEAR(c[i + j * m], want, 1e-12) << "(" << i << ", " << j << ")";
        }
    }
}

// No 16-bit C on Vulkan (the shaders store f32): supports_narrow_c says so and gemm
// refuses one.
TEST_P(VulkanGemmV4Test, RefusesASixteenBitC) {
    EXPECT_FALSE(dev().kernels().supports_narrow_c(DType::BF16));
    EXPECT_FALSE(dev().kernels().supports_narrow_c(DType::F16));
    auto q = dev().create_queue();
    Block b = dev().allocate({.bytes = 64});
    EXPECT_THROW(dev().kernels().gemm(*q, GemmTileArgs{.type = DType::BF16,
                                                       .m = 2,
                                                       .n = 2,
                                                       .k = 2,
                                                       .a = b,
                                                       .lda = 2,
                                                       .b = b,
                                                       .ldb = 2,
                                                       .c = b,
                                                       .ldc = 2,
                                                       .narrow_c = true}),
                 outcore::UsageError);
}

INSTANTIATE_TEST_SUITE_P(Depth, VulkanGemmV4Test, ::testing::Values(8U, 16U),
                         [](const ::testing::TestParamInfo<std::uint32_t>& param) {
                             return "Bk" + std::to_string(param.param);
                         });

// Only the blocking the shader is written for: 16×16 threads, 8×8 each, 8 or 16 deep.
TEST(VulkanGemmV4Blocking, OtherBlockingsAreRefusedWhenTheDeviceOpens) {
    const outcore::vulkan::VulkanProbe probe = outcore::vulkan::probe_vulkan();
    if (probe.devices.empty()) GTEST_SKIP() << "no Vulkan device: " << probe.reason;
    for (const GemmTile bad :
         {GemmTile{16, 4, 8, false, true}, GemmTile{8, 8, 8, false, true}, GemmTile{16, 8, 32, false, true},
          GemmTile{16, 8, 4, false, true}, GemmTile{16, 8, 8, true, true}}) {
        EXPECT_THROW((void)outcore::vulkan::make_vulkan_device({.index = 0, .gemm_tile = bad}),
                     outcore::UsageError)
            << bad.workgroup << "x" << bad.per_thread << "x" << bad.depth << (bad.contiguous ? "c" : "")
            << "v";
    }
}

}  // namespace
