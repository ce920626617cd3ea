// tests/unit/cli/bench_explore_cli_test.cpp — `outcore bench vulkan --explore` run as a
// process: every malformed plan is refused with a one-line usage error (exit code 2)
// before anything runs — out-of-range and signed numbers, spaces, a zero size or group,
// missing or extra fields (gpu_bench::parse_forced_tiles, shared with bench gpu). An
// outcore built without Vulkan refuses the command itself, also with exit code 2.
#include <gtest/gtest.h>

#ifdef OUTCORE_CLI_PATH

#include <string>
#include <vector>

#include "cli_support.hpp"

namespace outcore::cli::test {
namespace {

TEST(BenchExploreCli, MalformedPlansAreRefusedBeforeAnythingRuns) {
    const Scratch s;
    for (const std::string plan :
         {"square-c", "square-c:1x2", "square-c:1x2x3x4", "square-c:1x2x3:", "square-c:1x2x3:g0",
          "square-c:1x2x3:g", "square-c:1x2x3:x2", "a-panel:1x2x3junk", "b-panel:0x2x3", "square-c:+1x2x3",
          "square-c: 1x2x3", "square-c:1x2x-3", "square-c:99999999999999999999x1x1",
          "square-c:1x2x3:g4294967297", "c-panel:1x2x3", "f32:square-c:1x2x3"}) {
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

}  // namespace
}  // namespace outcore::cli::test

#endif  // OUTCORE_CLI_PATH
