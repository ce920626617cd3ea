// tests/unit/cli/gemm_cli_test.cpp — `outcore gemm` run as a process: results against
// a float64 reference computed here, the --json record, and the exit code and one-line
// message of every kind of bad input.
#include <gtest/gtest.h>

#ifdef OUTCORE_CLI_PATH

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "cli_support.hpp"
#include "outcore/io/npy.hpp"
#include "support/test_seed.hpp"

namespace outcore::cli::test {
namespace {

/// A rows × cols matrix of uniform [−1, 1) values, row-major.
std::vector<double> random_matrix(std::mt19937_64& rng, std::uint64_t rows, std::uint64_t cols) {
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::vector<double> m(rows * cols);
    for (double& v : m) v = u(rng);
    return m;
}

void save_f32(const std::string& path, const std::vector<double>& m, std::uint64_t rows, std::uint64_t cols,
              io::NpyOrder order = io::NpyOrder::C) {
    std::vector<float> f(m.size());
    for (std::uint64_t i = 0; i < rows; ++i) {
        for (std::uint64_t j = 0; j < cols; ++j) {
            const std::uint64_t at = order == io::NpyOrder::C ? i * cols + j : i + j * rows;
            f[at] = static_cast<float>(m[i * cols + j]);
        }
    }
    const std::vector<std::uint64_t> shape{rows, cols};
    io::save_npy(path, std::as_bytes(std::span(f)), shape, DType::F32, true, order);
}

/// Element (i, j) of a loaded 2-D f32 .npy in either order.
double at(const io::NpyArray& a, std::uint64_t i, std::uint64_t j) {
    const std::uint64_t rows = a.header.shape[0];
    const std::uint64_t cols = a.header.shape[1];
    const std::uint64_t index = a.header.fortran_order ? i + j * rows : i * cols + j;
    float v = 0;
    std::memcpy(&v, a.data.data() + index * 4, 4);
    return v;
}

std::uint64_t stated_minimum(const std::string& message) {
    std::smatch match;
    const std::regex re(R"(minimum of [^(]*\((\d+) bytes\))");
    if (!std::regex_search(message, match, re)) return 0;
    return std::stoull(match[1].str());
}

// The rate probe (~1 s per process) only steers tile shapes; one test keeps it.
const std::vector<std::string> kCpu = {"--backend", "cpu", "--no-rate-probe"};

std::vector<std::string> args(std::initializer_list<std::string> list) {
    std::vector<std::string> v(list);
    v.insert(v.end(), kCpu.begin(), kCpu.end());
    return v;
}

TEST(GemmCli, SmallRandomProblemVerifiesAgainstFloat64) {
    Scratch s;
    std::mt19937_64 rng(outcore::test::seed());
    const std::string seed = std::to_string(rng());
    for (const char* dtype : {"f32", "f64", "tf32", "bf16"}) {
        const CliRun r = run_cli(s, args({"gemm", "--m", "67", "--n", "45", "--k", "129", "--budget", "64KiB",
                                          "--dtype", dtype, "--verify", "--seed", seed}));
        ASSERT_EQ(r.exit_code, 0) << dtype << ": " << r.err;
        EXPECT_NE(r.out.find("verify: every element"), std::string::npos) << r.out;
        EXPECT_NE(r.out.find(": ok"), std::string::npos) << r.out;
        EXPECT_NE(r.out.find("seed " + seed), std::string::npos) << "the seed is printed: " << r.out;
    }
}

// --c-dtype: bf16 and f16 inputs write a C of their own type (rounded once from f32
// sums), which verifies against float64 within the type's bound and is recorded; f16 C
// goes to .npy as float16; a bf16 C cannot (.npy has no bf16), and other pairings are
// one-line usage errors before anything runs.
TEST(GemmCli, SixteenBitInputsWriteASixteenBitCThatVerifies) {
    Scratch s;
    std::mt19937_64 rng(outcore::test::seed());
    for (const char* dtype : {"bf16", "f16"}) {
        const CliRun r = run_cli(s, args({"gemm", "--m", "67", "--n", "45", "--k", "129", "--budget", "64KiB",
                                          "--dtype", dtype, "--c-dtype", dtype, "--beta", "0.5", "--verify",
                                          "--seed", std::to_string(rng()), "--json"}));
        ASSERT_EQ(r.exit_code, 0) << dtype << ": " << r.err;
        const nlohmann::json j = nlohmann::json::parse(r.out);
        EXPECT_EQ(j["c_dtype"], dtype);
        EXPECT_EQ(j["dtype"], dtype);
        EXPECT_TRUE(j["verify_passed"].get<bool>()) << r.out;
    }
    const CliRun wide =
        run_cli(s, args({"gemm", "--m", "8", "--n", "8", "--k", "8", "--dtype", "bf16", "--json"}));
    ASSERT_EQ(wide.exit_code, 0) << wide.err;
    EXPECT_EQ(nlohmann::json::parse(wide.out)["c_dtype"], "f32");
    const CliRun f16 = run_cli(s, args({"gemm", "--m", "20", "--n", "12", "--k", "30", "--dtype", "f16",
                                        "--c-dtype", "f16", "--out", s.file("C16.npy"), "--verify"}));
    ASSERT_EQ(f16.exit_code, 0) << f16.err;
    EXPECT_EQ(io::NpyMatrixReader(s.file("C16.npy")).dtype(), DType::F16);
    const CliRun bf16_npy = run_cli(s, args({"gemm", "--m", "8", "--n", "8", "--k", "8", "--dtype", "bf16",
                                             "--c-dtype", "bf16", "--out", s.file("C.npy")}));
    EXPECT_EQ(bf16_npy.exit_code, 2) << bf16_npy.err;
    EXPECT_TRUE(is_one_line_error(bf16_npy)) << bf16_npy.err;
    for (const auto& [dtype, c_dtype] :
         {std::pair{"f32", "bf16"}, {"bf16", "f16"}, {"f64", "f32"}, {"bf16", "x"}}) {
        const CliRun e = run_cli(
            s, args({"gemm", "--m", "8", "--n", "8", "--k", "8", "--dtype", dtype, "--c-dtype", c_dtype}));
        EXPECT_EQ(e.exit_code, 2) << dtype << " " << c_dtype << ": " << e.err;
        EXPECT_TRUE(is_one_line_error(e)) << e.err;
        EXPECT_NE(e.err.find("--c-dtype"), std::string::npos) << e.err;
    }
}

// --devices: the product over several CPU devices verifies against float64, the
// record lists every device's share, and bad lists are one-line usage errors.
TEST(GemmCli, SeveralDevicesVerifyAndReportTheirShares) {
    Scratch s;
    std::mt19937_64 rng(outcore::test::seed());
    const CliRun r = run_cli(
        s, args({"gemm", "--m", "300", "--n", "200", "--k", "90", "--budget", "96KiB", "--beta", "0.5",
                 "--transb", "--verify", "--seed", std::to_string(rng()), "--devices", "0,1", "--json"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j["verify_passed"].get<bool>());
    ASSERT_EQ(j["devices"].size(), 2U);
    EXPECT_EQ(j["devices"][0]["device"], "cpu:0");
    EXPECT_EQ(j["devices"][1]["device"], "cpu:1");
    for (const auto& d : j["devices"]) EXPECT_LE(d["peak_device_bytes"].get<std::uint64_t>(), 96U * 1024U);
    for (const char* bad : {"0,0", "x", "1,", ""}) {
        const CliRun e = run_cli(s, args({"gemm", "--m", "8", "--n", "8", "--k", "8", "--devices", bad}));
        EXPECT_EQ(e.exit_code, 2) << bad << ": " << e.err;
        EXPECT_TRUE(is_one_line_error(e)) << bad;
    }
}

TEST(GemmCli, TransposesAlphaBetaVerify) {
    Scratch s;
    std::mt19937_64 rng(outcore::test::seed());
    for (const bool ta : {false, true}) {
        for (const bool tb : {false, true}) {
            std::vector<std::string> a =
                args({"gemm", "--m", "33", "--n", "70", "--k", "65", "--budget", "48KiB", "--alpha", "0.5",
                      "--beta", "-2", "--verify", "--seed", std::to_string(rng())});
            if (ta) a.push_back("--transa");
            if (tb) a.push_back("--transb");
            const CliRun r = run_cli(s, a);
            EXPECT_EQ(r.exit_code, 0) << ta << tb << ": " << r.err << r.out;
        }
    }
}

TEST(GemmCli, NpyFilesGiveTheFloat64Product) {
    Scratch s;
    std::mt19937_64 rng(outcore::test::seed());
    std::uniform_int_distribution<std::uint64_t> dim(1, 90);
    for (int trial = 0; trial < 4; ++trial) {
        const std::uint64_t m = dim(rng), n = dim(rng), k = dim(rng);
        const bool ta = (trial & 1) != 0;
        const bool tb = (trial & 2) != 0;
        // Stored shapes: A is k × m with --transa, B is n × k with --transb.
        const auto a = random_matrix(rng, ta ? k : m, ta ? m : k);
        const auto b = random_matrix(rng, tb ? n : k, tb ? k : n);
        save_f32(s.file("A.npy"), a, ta ? k : m, ta ? m : k, io::NpyOrder::C);
        save_f32(s.file("B.npy"), b, tb ? n : k, tb ? k : n, io::NpyOrder::Fortran);
        std::vector<std::string> cmd = args({"gemm", "--a", s.file("A.npy"), "--b", s.file("B.npy"), "--out",
                                             s.file("C.npy"), "--budget", "16KiB", "--force", "--verify"});
        if (ta) cmd.push_back("--transa");
        if (tb) cmd.push_back("--transb");
        const CliRun r = run_cli(s, cmd);
        ASSERT_EQ(r.exit_code, 0) << r.err << r.out;

        const io::NpyArray c = io::load_npy(s.file("C.npy"));
        ASSERT_EQ(c.header.shape, (std::vector<std::uint64_t>{m, n}));
        const io::NpyArray af = io::load_npy(s.file("A.npy"));
        const io::NpyArray bf = io::load_npy(s.file("B.npy"));
        double diff = 0, norm = 0;
        for (std::uint64_t i = 0; i < m; ++i) {
            for (std::uint64_t j = 0; j < n; ++j) {
                double ref = 0;
                for (std::uint64_t p = 0; p < k; ++p) {
                    ref += (ta ? at(af, p, i) : at(af, i, p)) * (tb ? at(bf, j, p) : at(bf, p, j));
                }
                const double got = at(c, i, j);
                ASSERT_TRUE(std::isfinite(got));
                diff += (got - ref) * (got - ref);
                norm += ref * ref;
            }
        }
        EXPECT_LT(std::sqrt(diff / norm), 1e-5) << m << "x" << n << "x" << k << " ta " << ta << " tb " << tb;
    }
}

TEST(GemmCli, JsonRecordHasTheRequiredFields) {
    Scratch s;
    const std::string seed = std::to_string(outcore::test::seed());
    // With the rate probe: the planner's timed path.
    const CliRun r = run_cli(s, {"gemm", "--m", "200", "--n", "150", "--k", "300", "--budget", "200KiB",
                                 "--verify", "--seed", seed, "--json", "--backend", "cpu"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);  // stdout holds only the record
    for (const char* key : {"budget_bytes", "peak_device_bytes", "bytes_moved", "lower_bound_bytes",
                            "seconds", "tflops", "hidden_transfer_fraction", "relative_error"}) {
        ASSERT_TRUE(j.contains(key)) << key;
        EXPECT_TRUE(j[key].is_number()) << key;
    }
    EXPECT_EQ(j["budget_bytes"].get<std::uint64_t>(), 200U * 1024U);
    EXPECT_LE(j["peak_device_bytes"].get<std::uint64_t>(), j["budget_bytes"].get<std::uint64_t>());
    EXPECT_GT(j["peak_device_bytes"].get<std::uint64_t>(), 0U);
    EXPECT_GE(j["bytes_moved"].get<std::uint64_t>(), j["lower_bound_bytes"].get<std::uint64_t>());
    EXPECT_LE(j["relative_error"].get<double>(), 1e-5);
    EXPECT_GE(j["hidden_transfer_fraction"].get<double>(), 0.0);
    EXPECT_LE(j["hidden_transfer_fraction"].get<double>(), 1.0);

    // --json=FILE: the record goes to the file, the summary stays on stdout.
    const CliRun f = run_cli(s, args({"gemm", "--m", "20", "--n", "10", "--k", "30", "--budget", "1MiB",
                                      "--json=" + s.file("run.json")}));
    ASSERT_EQ(f.exit_code, 0) << f.err;
    EXPECT_NE(f.out.find("plan:"), std::string::npos);
    const nlohmann::json jf = nlohmann::json::parse(read_all(s.file("run.json")));
    EXPECT_EQ(jf["m"].get<std::uint64_t>(), 20U);
    EXPECT_FALSE(jf.contains("relative_error")) << "only when verifying";
}

TEST(GemmCli, MissingFileIsAnIoError) {
    Scratch s;
    const CliRun r = run_cli(s, args({"gemm", "--a", s.file("nope.npy"), "--b", s.file("nope2.npy")}));
    EXPECT_EQ(r.exit_code, 4);
    EXPECT_TRUE(is_one_line_error(r));
    EXPECT_NE(r.err.find("nope.npy"), std::string::npos) << r.err;
}

TEST(GemmCli, DirectoryAsInputIsAUsageError) {
    Scratch s;
    std::filesystem::create_directory(s.file("dir.npy"));
    const CliRun r = run_cli(s, args({"gemm", "--a", s.file("dir.npy"), "--b", s.file("dir.npy")}));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(is_one_line_error(r));
}

TEST(GemmCli, WrongDtypeOrShapeInNpyIsAUsageError) {
    Scratch s;
    std::mt19937_64 rng(outcore::test::seed());
    save_f32(s.file("B.npy"), random_matrix(rng, 4, 3), 4, 3);
    // u8 elements.
    std::vector<std::uint8_t> bytes(20, 7);
    const std::vector<std::uint64_t> shape2{5, 4};
    io::save_npy(s.file("u8.npy"), std::as_bytes(std::span(bytes)), shape2, DType::U8, true);
    CliRun r = run_cli(s, args({"gemm", "--a", s.file("u8.npy"), "--b", s.file("B.npy")}));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(is_one_line_error(r));
    EXPECT_NE(r.err.find("u8"), std::string::npos) << r.err;
    // A 3-D array.
    std::vector<float> cube(2 * 2 * 2, 1.0F);
    const std::vector<std::uint64_t> shape3{2, 2, 2};
    io::save_npy(s.file("cube.npy"), std::as_bytes(std::span(cube)), shape3, DType::F32, true);
    r = run_cli(s, args({"gemm", "--a", s.file("cube.npy"), "--b", s.file("B.npy")}));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(is_one_line_error(r));
    // f32 files with --dtype f64.
    save_f32(s.file("A.npy"), random_matrix(rng, 5, 4), 5, 4);
    r = run_cli(s, args({"gemm", "--a", s.file("A.npy"), "--b", s.file("B.npy"), "--dtype", "f64"}));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(is_one_line_error(r));
    // An unknown --dtype.
    r = run_cli(s, args({"gemm", "--m", "4", "--n", "4", "--k", "4", "--dtype", "f8"}));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(is_one_line_error(r));
}

TEST(GemmCli, DisagreeingDimensionsAreAUsageError) {
    Scratch s;
    std::mt19937_64 rng(outcore::test::seed());
    save_f32(s.file("A.npy"), random_matrix(rng, 5, 7), 5, 7);
    save_f32(s.file("B.npy"), random_matrix(rng, 6, 3), 6, 3);
    CliRun r = run_cli(s, args({"gemm", "--a", s.file("A.npy"), "--b", s.file("B.npy")}));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(is_one_line_error(r));
    EXPECT_NE(r.err.find("inner"), std::string::npos) << r.err;
    // --m that disagrees with the file.
    save_f32(s.file("B.npy"), random_matrix(rng, 7, 3), 7, 3);
    r = run_cli(s, args({"gemm", "--a", s.file("A.npy"), "--b", s.file("B.npy"), "--m", "6"}));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(is_one_line_error(r));
    EXPECT_NE(r.err.find("--m 6"), std::string::npos) << r.err;
    // Flags that need each other.
    r = run_cli(s, args({"gemm", "--a", s.file("A.npy"), "--m", "5", "--n", "3", "--k", "7"}));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    r = run_cli(s, args({"gemm", "--m", "5", "--n", "3"}));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(is_one_line_error(r));
}

TEST(GemmCli, BudgetBelowTheMinimumStatesAMinimumThatWorks) {
    Scratch s;
    const std::vector<std::string> base = {"gemm",
                                           "--m",
                                           "37",
                                           "--n",
                                           "21",
                                           "--k",
                                           "45",
                                           "--seed",
                                           "1",
                                           "--verify",
                                           "--backend",
                                           "cpu",
                                           "--no-rate-probe",
                                           "--budget"};
    auto with_budget = [&](const std::string& budget) {
        std::vector<std::string> a = base;
        a.push_back(budget);
        return a;
    };
    for (const char* tiny : {"0", "1", "64"}) {
        const CliRun r = run_cli(s, with_budget(tiny));
        EXPECT_EQ(r.exit_code, 2) << tiny << ": " << r.err;
        EXPECT_TRUE(is_one_line_error(r));
        EXPECT_NE(r.err.find("minimum"), std::string::npos) << r.err;
    }
    const CliRun r = run_cli(s, with_budget("1"));
    const std::uint64_t minimum = stated_minimum(r.err);
    ASSERT_GT(minimum, 1U) << r.err;
    const CliRun at_minimum = run_cli(s, with_budget(std::to_string(minimum)));
    EXPECT_EQ(at_minimum.exit_code, 0) << at_minimum.err;
    const CliRun below = run_cli(s, with_budget(std::to_string(minimum - 1)));
    EXPECT_EQ(below.exit_code, 2) << below.err;
}

TEST(GemmCli, ExistingOutputNeedsForce) {
    Scratch s;
    { std::ofstream(s.file("C.npy")) << "keep me"; }
    const std::vector<std::string> cmd =
        args({"gemm", "--m", "8", "--n", "8", "--k", "8", "--out", s.file("C.npy"), "--budget", "1MiB"});
    const CliRun r = run_cli(s, cmd);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(is_one_line_error(r));
    EXPECT_NE(r.err.find("--force"), std::string::npos) << r.err;
    EXPECT_EQ(read_all(s.file("C.npy")), "keep me");
    EXPECT_EQ(s.entries().size(), 1U) << "no temporary file left behind";

    std::vector<std::string> forced = cmd;
    forced.push_back("--force");
    const CliRun f = run_cli(s, forced);
    EXPECT_EQ(f.exit_code, 0) << f.err;
    EXPECT_EQ(io::load_npy(s.file("C.npy")).header.shape, (std::vector<std::uint64_t>{8, 8}));
}

}  // namespace
}  // namespace outcore::cli::test

#else

TEST(GemmCli, NeedsTheCli) { GTEST_SKIP() << "the outcore CLI is not built (OUTCORE_BUILD_CLI=OFF)"; }

#endif
