// tests/unit/cli/bench_explore_cli_test.cpp — `outcore bench vulkan --explore` run as a
// process: every malformed plan is refused with a one-line usage error (exit code 2)
// before anything runs — out-of-range and signed numbers, spaces, a zero size or group,
// missing or extra fields, lanes other than 1 or 2, misspelt or doubled ":paced" /
// ":whole" (gpu_bench::parse_forced_tiles, shared with bench gpu). An
// outcore built without Vulkan refuses the command itself, also with exit code 2.
// Well-formed ones run, C slots and groups included. `bench gpu --blur-tiles` shapes are
// checked the same way.
#include <gtest/gtest.h>

#ifdef OUTCORE_CLI_PATH

#include <string>
#include <vector>

#include "cli_support.hpp"

namespace outcore::cli::test {
namespace {

TEST(BenchExploreCli, MalformedPlansAreRefusedBeforeAnythingRuns) {
    const Scratch s;
    for (const std::string plan : {"square-c",
                                   "square-c:1x2",
                                   "square-c:1x2x3x4",
                                   "square-c:1x2x3:",
                                   "square-c:1x2x3:g0",
                                   "square-c:1x2x3:g",
                                   "square-c:1x2x3:x2",
                                   "a-panel:1x2x3junk",
                                   "b-panel:0x2x3",
                                   "square-c:+1x2x3",
                                   "square-c: 1x2x3",
                                   "square-c:1x2x-3",
                                   "square-c:99999999999999999999x1x1",
                                   "square-c:1x2x3:g4294967297",
                                   "c-panel:1x2x3",
                                   "f32:square-c:1x2x3",
                                   "square-c:1x2x3:c0",
                                   "square-c:1x2x3:c",
                                   "square-c:1x2x3:c2:g2",
                                   "square-c:1x2x3:g2:c",
                                   "square-c:1x2x3:c3:c3",
                                   "square-c:1x2x3:g2c3",
                                   "square-c:1x2x3:g2:c3:",
                                   "square-c:1x2x3:d1",
                                   "square-c:1x2x3:d4",
                                   "square-c:1x2x3:d",
                                   "square-c:1x2x3:d3:c3",
                                   "square-c:1x2x3:l3",
                                   "square-c:1x2x3:l0",
                                   "square-c:1x2x3:l1:d2",
                                   "square-c:1x2x3:paced:l1",
                                   "square-c:1x2x3:pace",
                                   "square-c:1x2x3:whole:paced",
                                   "square-c:1x2x3:pacedx",
                                   "a-panel:1x2x3:k-1",
                                   "a-panel:1x2x3:k",
                                   "a-panel:1x2x3:k16:l1",
                                   "a-panel:1x2x3:k16:k16",
                                   "a-panel:1x2x3:k16x",
                                   "a-panel:1x2x3:r-1",
                                   "a-panel:1x2x3:r",
                                   "a-panel:1x2x3:r2:k16",
                                   "a-panel:1x2x3:r2:r2",
                                   "a-panel:1x2x3:r2x",
                                   "a-panel:1x2x3:r2:o0",
                                   "a-panel:1x2x3:r2:o",
                                   "a-panel:1x2x3:o2:r2",
                                   "a-panel:1x2x3:r2:o2:o2"}) {
        const CliRun r = run_cli(s, {"--backend", "vulkan", "bench", "vulkan", "--n", "256", "--explore",
                                     "square-c:256x256x256", "--explore", plan});
        EXPECT_EQ(r.exit_code, 2) << plan << ": " << r.err << r.out;
        EXPECT_TRUE(is_one_line_error(r)) << plan << ": " << r.err;
        const bool refused_plan = r.err.find("--explore '" + plan + "'") != std::string::npos;
        const bool no_vulkan = r.err.find("built without the Vulkan backend") != std::string::npos;
        EXPECT_TRUE(refused_plan || no_vulkan) << plan << ": " << r.err;
        EXPECT_EQ(r.out.find("in-core Vulkan GEMM"), std::string::npos) << plan << ": nothing runs first";
    }
}

// Well-formed plans go to the planner: a C ring of three slots (":c3"), rings of three
// operand chunks (":d3"), one compute lane with paced C downloads (":l1:paced") and
// whole ones (":whole") run and say so; plans it cannot make (a single panel over
// the 192 KiB budget, with ":g2:c3" parsed; more C slots than C tiles; a group of a plan
// with several panels) are a line each, and the command goes on.
TEST(BenchExploreCli, PlansWithGroupsAndCSlotsRun) {
    const Scratch s;
    const CliRun r = run_cli(s, {"--backend",
                                 "vulkan",
                                 "bench",
                                 "vulkan",
                                 "--n",
                                 "256",
                                 "--skip-copies",
                                 "--reps",
                                 "1",
                                 "--warmup",
                                 "0",
                                 "--explore",
                                 "square-c:64x64x32:c3",
                                 "--explore",
                                 "square-c:64x64x32:c3:d3",
                                 "--explore",
                                 "square-c:64x64x32:l1:paced",
                                 "--explore",
                                 "square-c:64x64x32:whole",
                                 "--explore",
                                 "a-panel:256x64x32:g2:c3",
                                 "--explore",
                                 "square-c:64x64x32:c17",
                                 "--explore",
                                 "a-panel:64x64x32:g2",
                                 "--explore",
                                 "a-panel:64x32x256:c2:k64",
                                 "--explore",
                                 "a-panel:64x32x256:r1",
                                 "--explore",
                                 "a-panel:64x32x256:o1"});
    if (r.err.find("built without the Vulkan backend") != std::string::npos ||
        r.err.find("no Vulkan") != std::string::npos) {
        GTEST_SKIP() << r.err;
    }
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    EXPECT_NE(r.out.find("explore square-c:64x64x32:c3: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("of in-core), C slots 3, depth 2"), std::string::npos) << r.out;
    // ":d3": three slots per streamed operand.
    EXPECT_NE(r.out.find("explore square-c:64x64x32:c3:d3: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("of in-core), C slots 3, depth 3"), std::string::npos) << r.out;
    // ":l1:paced": one lane, C downloads paced over the next tile's GEMMs (16 tiles of 8
    // chunks: 15 tiles in 7 pieces each); ":whole": none paced.
    EXPECT_NE(r.out.find("explore square-c:64x64x32:l1:paced: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("depth 2, paced downloads 105"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("explore square-c:64x64x32:whole: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("depth 2, paced downloads 0"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("explore a-panel:256x64x32:g2:c3: [tile] GEMM 256x256x256 f32 with a-panel tiles "
                         "256x64x32 does not fit"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("17 C slots asked, but there are 16 C tiles"), std::string::npos) << r.out;
    // ":k64": the A panel in chunks of 64 columns, with what the budget left ahead.
    EXPECT_NE(r.out.find("explore a-panel:64x32x256:c2:k64: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("paced downloads 0, A panel in chunks of 64 ("), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("a group of 2 tiles needs a single panel"), std::string::npos) << r.out;
    // ":r1": parsed, and refused by the planner (k = 256 has no chunk of 2048 or more).
    EXPECT_NE(r.out.find("explore a-panel:64x32x256:r1: [tile]"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("1 retained B chunks do not fit"), std::string::npos) << r.out;
    // ":o1": parsed, and refused where nothing is retained.
    EXPECT_NE(r.out.find("explore a-panel:64x32x256:o1: [tile]"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("need a plan that retains B chunks"), std::string::npos) << r.out;
}

// `bench gpu --blur-tiles ROWSxCOLS` is parsed before the device is opened: a malformed
// shape is a one-line usage error naming it on any machine, a well-formed one is not.
TEST(BenchGpuCli, MalformedBlurTilesAreRefusedBeforeAnythingRuns) {
    const Scratch s;
    for (const std::string shape : {"", "1536", "1536x", "x32768", "0x32768", "1536x0", "1536x32768x1",
                                    "-1x5", "1536 x32768", "1536x+5", "99999999999999999999x1"}) {
        const CliRun r = run_cli(s, {"bench", "gpu", "--skip-blur", "--blur-tiles", shape});
        EXPECT_EQ(r.exit_code, 2) << shape << ": " << r.err << r.out;
        EXPECT_TRUE(is_one_line_error(r)) << shape << ": " << r.err;
        EXPECT_NE(r.err.find("--blur-tiles '" + shape + "'"), std::string::npos) << shape << ": " << r.err;
        EXPECT_EQ(r.out.find("outcore bench gpu:"), std::string::npos) << shape << ": nothing runs first";
    }
    const CliRun ok = run_cli(s, {"--backend", "cpu", "bench", "gpu", "--blur-tiles", "1536x32768"});
    EXPECT_EQ(ok.err.find("--blur-tiles"), std::string::npos) << ok.err;
}

}  // namespace
}  // namespace outcore::cli::test

#endif  // OUTCORE_CLI_PATH
