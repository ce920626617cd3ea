// The fuzz targets (fuzz/io_fuzz_targets.cpp) on thousands of mutated valid inputs, so
// every CI build exercises them, not only clang's libFuzzer runs.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "io_fuzz_targets.hpp"
#include "outcore/io/tiff.hpp"
#include "support/test_seed.hpp"

namespace outcore::fuzz {
namespace {

// Mutations in libFuzzer's spirit: bit flips, interesting bytes and integers (sizes,
// offsets and counts are where parsers break), insertions, deletions, truncation,
// duplicated chunks.
void mutate(std::vector<std::byte>& v, std::mt19937_64& rng) {
    static constexpr std::array<std::uint8_t, 16> kBytes = {0x00, 0xff, 0x7f, 0x80, '(', ')', ',',  '\'',
                                                            '{',  '}',  ':',  ' ',  '9', '-', '\n', 'L'};
    static constexpr std::array<std::uint64_t, 10> kInts = {0,
                                                            1,
                                                            0xffff,
                                                            0x7fffffff,
                                                            0xffffffff,
                                                            std::uint64_t{1} << 31,
                                                            std::uint64_t{1} << 32,
                                                            std::uint64_t{1} << 63,
                                                            ~std::uint64_t{0},
                                                            0x10000};
    const auto pos = [&](std::size_t size) { return size == 0 ? 0 : static_cast<std::size_t>(rng() % size); };
    const int ops = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < ops; ++k) {
        switch (rng() % 8) {
            case 0:
                if (!v.empty()) v[pos(v.size())] ^= static_cast<std::byte>(1U << (rng() % 8));
                break;
            case 1:
                if (!v.empty()) v[pos(v.size())] = static_cast<std::byte>(rng());
                break;
            case 2:
                if (!v.empty()) v[pos(v.size())] = static_cast<std::byte>(kBytes[rng() % kBytes.size()]);
                break;
            case 3: {
                const std::size_t at = pos(v.size() + 1);
                const std::size_t n = 1 + rng() % 8;
                for (std::size_t i = 0; i < n; ++i) {
                    v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), static_cast<std::byte>(rng()));
                }
                break;
            }
            case 4: {
                if (v.empty()) break;
                const std::size_t at = pos(v.size());
                const std::size_t n = std::min<std::size_t>(v.size() - at, 1 + rng() % 16);
                v.erase(v.begin() + static_cast<std::ptrdiff_t>(at),
                        v.begin() + static_cast<std::ptrdiff_t>(at + n));
                break;
            }
            case 5: v.resize(pos(v.size() + 1)); break;
            case 6: {
                const int width = 1 << (1 + rng() % 3);  // 2, 4 or 8 bytes
                if (v.size() < static_cast<std::size_t>(width)) break;
                const std::size_t at = pos(v.size() - static_cast<std::size_t>(width) + 1);
                std::uint64_t value = kInts[rng() % kInts.size()];
                if (rng() % 4 == 0) value = rng() % (v.size() + 64);  // a plausible offset
                for (int i = 0; i < width; ++i) {
                    v[at + static_cast<std::size_t>(i)] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
                }
                break;
            }
            default: {
                if (v.size() < 2) break;
                const std::size_t from = pos(v.size());
                const std::size_t n = std::min<std::size_t>(v.size() - from, 1 + rng() % 32);
                const std::vector<std::byte> chunk(v.begin() + static_cast<std::ptrdiff_t>(from),
                                                   v.begin() + static_cast<std::ptrdiff_t>(from + n));
                const std::size_t to = pos(v.size() + 1);
                v.insert(v.begin() + static_cast<std::ptrdiff_t>(to), chunk.begin(), chunk.end());
                break;
            }
        }
    }
}

template <class Target>
void run_corpus(const std::vector<std::vector<std::byte>>& seeds, Target target, std::uint64_t iterations) {
    ASSERT_FALSE(seeds.empty());
    std::mt19937_64 rng(outcore::test::seed());
    for (const auto& s : seeds) {
        const FuzzOutcome o = target(std::span<const std::byte>(s));
        EXPECT_TRUE(o.accepted) << "a valid seed was rejected: " << o.error;
        EXPECT_EQ(o.violation, "");
    }
    std::uint64_t accepted = 0;
    std::uint64_t rejected = 0;
    for (std::uint64_t i = 0; i < iterations; ++i) {
        std::vector<std::byte> input = seeds[rng() % seeds.size()];
        mutate(input, rng);
        const FuzzOutcome o = target(std::span<const std::byte>(input));
        ASSERT_EQ(o.violation, "") << "iteration " << i;
        (o.accepted ? accepted : rejected) += 1;
    }
    // Mutations that keep some inputs valid and break others: both paths ran.
    EXPECT_GT(accepted, 0U);
    EXPECT_GT(rejected, 0U);
    std::printf("%llu accepted, %llu rejected\n", static_cast<unsigned long long>(accepted),
                static_cast<unsigned long long>(rejected));
}

TEST(FuzzCorpus, NpyHeaderTargetHoldsOnMutatedHeaders) {
    run_corpus(npy_seed_inputs(), npy_header_target, outcore::test::scaled(5000));
}

TEST(FuzzCorpus, TiffTargetHoldsOnMutatedFilesWithoutPrinting) {
    if (!io::tiff_supported()) GTEST_SKIP() << "TIFF support was not built (no libtiff)";
    testing::internal::CaptureStderr();
    run_corpus(tiff_seed_inputs(), tiff_target, outcore::test::scaled(3000));
    const std::string printed = testing::internal::GetCapturedStderr();
    EXPECT_EQ(printed, "") << "libtiff printed instead of reporting";
}

}  // namespace
}  // namespace outcore::fuzz
