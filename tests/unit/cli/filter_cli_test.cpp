// tests/unit/cli/filter_cli_test.cpp — `outcore filter` and `outcore make-image` run as
// processes: outputs equal the in-core whole-image filter bit for bit (computed here,
// not by the CLI's own --verify), the --json record, and bad input.
#include <gtest/gtest.h>

#ifdef OUTCORE_CLI_PATH

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "cli_support.hpp"
#include "outcore/device/registry.hpp"
#include "outcore/io/image.hpp"
#include "outcore/io/tiff.hpp"
#include "outcore/ops/filter.hpp"
#include "outcore/ops/filter_run.hpp"
#include "support/test_seed.hpp"

namespace outcore::cli::test {
namespace {

std::vector<std::byte> read_image(const std::string& path) {
    const auto in = io::open_image(path);
    std::vector<std::byte> pixels(in->info().bytes());
    in->read_rows(0, in->info().rows, pixels.data(), in->info().row_bytes());
    return pixels;
}

/// The whole-image filter of IN, in core, with this process's CPU device.
std::vector<std::byte> reference(const std::string& in_path, const ops::FilterSpec& spec) {
    const auto in = io::open_image(in_path);
    const std::vector<std::byte> pixels = read_image(in_path);
    const auto cpu = open_device("cpu");
    return ops::filter_whole_image_reference(*cpu, spec, ops::image_shape(in->info()), pixels,
                                             in->info().dtype);
}

std::uint64_t stated_minimum(const std::string& message) {
    std::smatch match;
    const std::regex re(R"(minimum of [^(]*\((\d+) bytes\))");
    if (!std::regex_search(message, match, re)) return 0;
    return std::stoull(match[1].str());
}

CliRun make_image(const Scratch& s, const std::string& name, const std::string& rows, const std::string& cols,
                  const std::string& dtype, const std::string& channels, std::uint64_t seed,
                  const std::string& tile = "256") {
    return run_cli(
        s, {"make-image", s.file(name), "--rows", rows, "--cols", cols, "--dtype", dtype, "--channels",
            channels, "--seed", std::to_string(seed), "--tile", tile, "--force", "--quiet"});
}

TEST(FilterCli, EveryFilterAndEdgeEqualsTheWholeImageFilter) {
    Scratch s;
    std::mt19937_64 rng(outcore::test::seed());
    std::uniform_int_distribution<int> dim(40, 160);
    {
        std::ofstream k(s.file("k.txt"));
        k << "# 5x5\n";
        std::uniform_real_distribution<float> w(-1.0F, 1.0F);
        for (int i = 0; i < 25; ++i) k << w(rng) << (i % 5 == 4 ? "\n" : " ");
    }
    const std::vector<std::pair<const char*, const char*>> types = {{"f32", "1"}, {"u8", "3"}, {"u16", "2"}};
    for (const auto& [dtype, channels] : types) {
        const std::string rows = std::to_string(dim(rng));
        const std::string cols = std::to_string(dim(rng));
        ASSERT_EQ(make_image(s, "in.npy", rows, cols, dtype, channels, rng()).exit_code, 0);
        for (const char* edge : {"clamp", "mirror", "zero"}) {
            const ops::EdgeMode mode = *ops::parse_edge_mode(edge);
            struct Case {
                std::vector<std::string> flags;
                ops::FilterSpec spec;
            };
            const std::vector<Case> cases = {
                {{"gaussian", "--sigma", "2.5"}, ops::FilterSpec::gaussian(2.5, mode)},
                {{"box", "--radius", "3"}, ops::FilterSpec::box(3, mode)},
                {{"sobel"}, ops::FilterSpec::sobel(mode)},
                {{"conv", "--kernel", s.file("k.txt")}, ops::load_kernel_file(s.file("k.txt"), mode)},
            };
            for (const Case& c : cases) {
                std::vector<std::string> cmd = {"filter"};
                cmd.insert(cmd.end(), c.flags.begin(), c.flags.end());
                cmd.insert(cmd.end(),
                           {s.file("in.npy"), s.file("out.npy"), "--edge", edge, "--force", "--verify",
                            "--backend", "cpu", "--json=" + s.file("run.json"), "--budget"});
                // A budget of twice the image forces several tiles (one tile would need
                // its input, output and staging at once), unless that is below the minimum.
                std::vector<std::string> probe = cmd;
                probe.push_back("1");
                const std::uint64_t minimum = stated_minimum(run_cli(s, probe).err);
                ASSERT_GT(minimum, 0U);
                const std::uint64_t image_bytes = io::open_image(s.file("in.npy"))->info().bytes();
                cmd.push_back(std::to_string(std::max(minimum, 2 * image_bytes)));
                const CliRun r = run_cli(s, cmd);
                ASSERT_EQ(r.exit_code, 0) << c.flags[0] << " " << edge << " " << dtype << ": " << r.err;
                EXPECT_NE(r.out.find(" 0 mismatching pixels: ok"), std::string::npos) << r.out;
                const nlohmann::json j = nlohmann::json::parse(read_all(s.file("run.json")));
                std::filesystem::remove(s.file("run.json"));
                EXPECT_GE(j["tile_count"].get<std::uint64_t>(), 2U) << "the budget should force tiling";
                EXPECT_EQ(read_image(s.file("out.npy")), reference(s.file("in.npy"), c.spec))
                    << c.flags[0] << " " << edge << " " << dtype << " " << rows << "x" << cols;
            }
        }
    }
}

TEST(FilterCli, TiffInAndOutOrAOneLineErrorWithoutTiff) {
    Scratch s;
    const std::uint64_t seed = outcore::test::seed();
    if (!io::tiff_supported()) {
        const CliRun r = make_image(s, "in.npy", "30", "40", "f32", "1", seed);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const CliRun f =
            run_cli(s, {"filter", "sobel", s.file("in.npy"), s.file("out.tif"), "--budget", "1MiB"});
        EXPECT_EQ(f.exit_code, 2);
        EXPECT_TRUE(is_one_line_error(f));
        EXPECT_NE(f.err.find("TIFF support was not built"), std::string::npos) << f.err;
        return;
    }
    // 32-row tiles: the reader and writer buffers the budget must also hold stay small.
    ASSERT_EQ(make_image(s, "in.tif", "300", "260", "u16", "2", seed, "32").exit_code, 0);
    const CliRun r = run_cli(s, {"filter", "gaussian", "--sigma", "3", s.file("in.tif"), s.file("out.tif"),
                                 "--budget", "512KiB", "--verify", "--backend", "cpu"});
    EXPECT_NE(r.out.find("row strips"), std::string::npos) << r.out;
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(read_image(s.file("out.tif")), reference(s.file("in.tif"), ops::FilterSpec::gaussian(3.0)));
}

TEST(FilterCli, LargeImageIsVerifiedOnSampledRegions) {
    Scratch s;
    // Over the whole-image check's 4 Mpixel: the CLI samples regions.
    ASSERT_EQ(make_image(s, "in.npy", "2100", "2050", "u8", "1", outcore::test::seed()).exit_code, 0);
    const CliRun r = run_cli(s, {"filter", "box", "--radius", "5", s.file("in.npy"), s.file("out.npy"),
                                 "--budget", "2MiB", "--verify", "--backend", "cpu"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("regions"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" 0 mismatching pixels: ok"), std::string::npos) << r.out;
}

// --devices: bands over several CPU devices give the whole-image filter bit for bit
// (--verify), the record lists every device and its share, and a TIFF output (which
// takes rows only in order) is a one-line usage error.
TEST(FilterCli, SeveralDevicesVerifyAndReportTheirShares) {
    Scratch s;
    ASSERT_EQ(make_image(s, "in.npy", "400", "150", "u16", "2", outcore::test::seed()).exit_code, 0);
    const CliRun r =
        run_cli(s, {"filter", "box", "--radius", "3", s.file("in.npy"), s.file("out.npy"), "--budget",
                    "256KiB", "--verify", "--backend", "cpu", "--devices", "0,1,2", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["mismatched_pixels"].get<std::uint64_t>(), 0U);
    ASSERT_EQ(j["devices"].size(), 3U);
    std::uint64_t units = 0;
    for (const auto& d : j["devices"]) {
        units += d["units"].get<std::uint64_t>();
        EXPECT_LE(d["peak_device_bytes"].get<std::uint64_t>(), 256U * 1024U);
    }
    EXPECT_GE(units, 3U);
    const CliRun tif = run_cli(s, {"filter", "box", "--radius", "3", s.file("in.npy"), s.file("out.tif"),
                                   "--backend", "cpu", "--devices", "0,1", "--force"});
    EXPECT_EQ(tif.exit_code, 2) << tif.err;
    EXPECT_TRUE(is_one_line_error(tif));
}

TEST(FilterCli, JsonRecordHasTheRequiredFields) {
    Scratch s;
    ASSERT_EQ(make_image(s, "in.npy", "200", "300", "f32", "1", outcore::test::seed()).exit_code, 0);
    const CliRun r = run_cli(s, {"filter", "gaussian", "--sigma", "4", s.file("in.npy"), s.file("out.npy"),
                                 "--budget", "512KiB", "--verify", "--backend", "cpu", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    for (const char* key :
         {"budget_bytes", "peak_device_bytes", "bytes_moved", "lower_bound_bytes", "seconds", "tflops",
          "hidden_transfer_fraction", "relative_error", "mismatched_pixels"}) {
        ASSERT_TRUE(j.contains(key)) << key;
        EXPECT_TRUE(j[key].is_number()) << key;
    }
    EXPECT_EQ(j["budget_bytes"].get<std::uint64_t>(), 512U * 1024U);
    EXPECT_LE(j["peak_device_bytes"].get<std::uint64_t>(), j["budget_bytes"].get<std::uint64_t>());
    EXPECT_GE(j["bytes_moved"].get<std::uint64_t>(), j["lower_bound_bytes"].get<std::uint64_t>());
    EXPECT_EQ(j["mismatched_pixels"].get<std::uint64_t>(), 0U);
    EXPECT_EQ(j["relative_error"].get<double>(), 0.0);
}

TEST(FilterCli, BudgetBelowTheMinimumStatesAMinimumThatWorks) {
    Scratch s;
    ASSERT_EQ(make_image(s, "in.npy", "90", "120", "f32", "1", outcore::test::seed()).exit_code, 0);
    auto cmd = [&](const std::string& budget) {
        return std::vector<std::string>{"filter",         "gaussian",        "--sigma",   "2",
                                        s.file("in.npy"), s.file("out.npy"), "--budget",  budget,
                                        "--force",        "--verify",        "--backend", "cpu"};
    };
    const CliRun r = run_cli(s, cmd("1"));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(is_one_line_error(r));
    const std::uint64_t minimum = stated_minimum(r.err);
    ASSERT_GT(minimum, 1U) << r.err;
    EXPECT_EQ(run_cli(s, cmd("0")).exit_code, 2);
    const CliRun at = run_cli(s, cmd(std::to_string(minimum)));
    EXPECT_EQ(at.exit_code, 0) << at.err;
    EXPECT_EQ(run_cli(s, cmd(std::to_string(minimum - 1))).exit_code, 2);
}

TEST(FilterCli, BadInputGetsOneLineAndTheDocumentedCode) {
    Scratch s;
    ASSERT_EQ(make_image(s, "in.npy", "20", "30", "f32", "1", outcore::test::seed()).exit_code, 0);
    const std::string in = s.file("in.npy");
    const std::string out = s.file("out.npy");
    struct Case {
        std::vector<std::string> args;
        int code;
    };
    {
        std::ofstream(s.file("bad.txt")) << "1 2 3\n";  // not a square of an odd side
        std::ofstream(s.file("exists.npy")) << "keep";
    }
    std::vector<float> cube(2 * 3 * 5 * 1, 0.5F);
    std::vector<std::uint64_t> shape4{2, 3, 5, 1};
    io::save_npy(s.file("4d.npy"), std::as_bytes(std::span(cube)), shape4, DType::F32, true);
    std::vector<double> f64(12, 1.0);
    std::vector<std::uint64_t> shape2{3, 4};
    io::save_npy(s.file("f64.npy"), std::as_bytes(std::span(f64)), shape2, DType::F64, true);
    const std::vector<Case> cases = {
        {{"filter", "gaussian", "--sigma", "2", s.file("missing.npy"), out}, 4},
        {{"filter", "conv", "--kernel", s.file("missing.txt"), in, out}, 4},
        {{"filter", "conv", "--kernel", s.file("bad.txt"), in, out}, 2},
        {{"filter", "gaussian", in, out}, 2},                              // no --sigma
        {{"filter", "box", "--sigma", "2", "--radius", "1", in, out}, 2},  // --sigma on box
        {{"filter", "blur", in, out}, 2},
        {{"filter", "sobel", "--edge", "wrap", in, out}, 2},
        {{"filter", "gaussian", "--sigma", "-1", in, out}, 2},
        {{"filter", "gaussian", "--sigma", "nan", in, out}, 2},
        {{"filter", "sobel", s.file("4d.npy"), out}, 2},   // wrong shape
        {{"filter", "sobel", s.file("f64.npy"), out}, 2},  // wrong dtype
        {{"filter", "sobel", in, s.file("out.png")}, 2},
        {{"filter", "sobel", in, s.file("exists.npy")}, 2},
        {{"filter", "sobel", in, out, "--budget", "1TiB"}, 2},  // over the device
        {{"filter", "sobel", in, s.file("no/such/dir/out.npy")}, 4},
    };
    for (const Case& c : cases) {
        std::vector<std::string> a = c.args;
        a.insert(a.end(), {"--backend", "cpu"});
        const CliRun r = run_cli(s, a);
        std::string joined;
        for (const auto& x : c.args) joined += x + " ";
        EXPECT_EQ(r.exit_code, c.code) << joined << "\n" << r.err;
        EXPECT_TRUE(is_one_line_error(r)) << joined;
    }
    EXPECT_EQ(read_all(s.file("exists.npy")), "keep");
    for (const auto& name : s.entries()) {
        EXPECT_EQ(name.find(".tmp"), std::string::npos) << "temporary file left: " << name;
    }
}

}  // namespace
}  // namespace outcore::cli::test

#else

TEST(FilterCli, NeedsTheCli) { GTEST_SKIP() << "the outcore CLI is not built (OUTCORE_BUILD_CLI=OFF)"; }

#endif
