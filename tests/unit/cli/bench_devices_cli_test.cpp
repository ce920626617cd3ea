// tests/unit/cli/bench_devices_cli_test.cpp — `outcore bench devices` run as a process
// on CPU devices (the scaling benchmark of issue 8 before any machine with several
// GPUs): every device count and type runs and checks its own result, every device
// holds its budget, and malformed options are one-line usage errors before anything
// runs.
#include <gtest/gtest.h>

#ifdef OUTCORE_CLI_PATH

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_support.hpp"

namespace outcore::cli::test {
namespace {

// n = 320 is no multiple of the tiles a 256 KiB budget allows: uneven edge units.
TEST(BenchDevicesCli, RunsEveryCountAndTypeOnCpuDevicesWithinEachBudget) {
    const Scratch s;
    const std::string json = s.file("devices.json");
    const CliRun r =
        run_cli(s, {"--backend", "cpu",     "bench",    "devices", "--devices", "0,1,2",    "--counts",
                    "1,3",       "--types", "f32,bf16", "--n",     "320",       "--budget", "256KiB",
                    "--reps",    "1",       "--warmup", "0",       "--json",    json});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    EXPECT_NE(r.out.find("cuBLASXt not run"), std::string::npos) << r.out;
    const nlohmann::json j = nlohmann::json::parse(read_all(json));
    ASSERT_EQ(j["devices"].size(), 3U);
    ASSERT_EQ(j["runs"].size(), 4U);  // f32 and bf16, each on 1 and 3 devices
    const std::vector<std::pair<std::string, std::uint64_t>> expected{
        {"f32", 1}, {"f32", 3}, {"bf16", 1}, {"bf16", 3}};
    for (std::size_t i = 0; i < expected.size(); ++i) {
        const nlohmann::json& run = j["runs"][i];
        EXPECT_EQ(run["type"], expected[i].first);
        EXPECT_EQ(run["devices"].get<std::uint64_t>(), expected[i].second);
        EXPECT_TRUE(run["error_ok"].get<bool>()) << run.dump();
        EXPECT_EQ(run["budget_bytes"].get<std::uint64_t>(), 256U * 1024U);
        ASSERT_EQ(run["shares"].size(), expected[i].second);
        std::uint64_t units = 0;
        for (const nlohmann::json& share : run["shares"]) {
            EXPECT_LE(share["peak_device_bytes"].get<std::uint64_t>(), 256U * 1024U) << share.dump();
            units += share["units"].get<std::uint64_t>();
            // Each device's queues, busy while it ran its units.
            EXPECT_GT(share["busy_s"]["upload"].get<double>(), 0.0) << share.dump();
            EXPECT_GT(share["busy_s"]["compute"].get<double>(), 0.0) << share.dump();
            EXPECT_GT(share["busy_s"]["download"].get<double>(), 0.0) << share.dump();
            const double hidden = share["hidden_transfer_fraction"].get<double>();
            EXPECT_GE(hidden, 0.0);
            EXPECT_LE(hidden, 1.0);
            EXPECT_GE(share["runs"].get<std::uint64_t>(), 1U);
            EXPECT_LE(share["runs"].get<std::uint64_t>(), share["units"].get<std::uint64_t>());
        }
        EXPECT_EQ(units, run["units"].get<std::uint64_t>());
        EXPECT_GT(run["tflops"].get<double>(), 0.0);
    }
    // Efficiency: T(1) / (3·T(3)) from each run's median, per type.
    for (const std::size_t base : {0U, 2U}) {
        const double t1 = j["runs"][base]["timing"]["median_s"].get<double>();
        const double t3 = j["runs"][base + 1]["timing"]["median_s"].get<double>();
        EXPECT_DOUBLE_EQ(j["runs"][base]["efficiency"].get<double>(), 1.0);
        EXPECT_NEAR(j["runs"][base + 1]["efficiency"].get<double>(), t1 / (3 * t3), 1e-12);
    }
    EXPECT_EQ(j["table"].size(), 4U);
}

// A bare --json sends the record alone to stdout; the text, the shares included, goes
// to stderr.
TEST(BenchDevicesCli, BareJsonLeavesStdoutToTheRecord) {
    const Scratch s;
    const CliRun r =
        run_cli(s, {"--backend", "cpu", "bench", "devices", "--devices", "0,1", "--types", "f32", "--n",
                    "192", "--budget", "256KiB", "--reps", "1", "--warmup", "0", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);  // throws (fails) on anything else
    EXPECT_EQ(j["runs"].size(), 2U);
    EXPECT_NE(r.err.find("outcore bench devices:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("cpu:1: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("vs cuBLASXt"), std::string::npos) << r.err;
}

TEST(BenchDevicesCli, MalformedOptionsAreRefusedBeforeAnythingRuns) {
    const Scratch s;
    const std::vector<std::vector<std::string>> bad{
        {"--counts", "0"},  {"--counts", "3"},  {"--counts", "2,1"},  {"--counts", "1,1"},
        {"--counts", "1,"}, {"--counts", "x"},  {"--types", "f64"},   {"--xt-blocks", "-1"},
        {"--n", "10"},      {"--n", "-5"},      {"--devices", "0,0"}, {"--budget", "lots"},
        {"--budget", "64"}, {"--n", "4000000"}, {"--n", "99999999"},
    };
    for (const std::vector<std::string>& extra : bad) {
        std::vector<std::string> args{"--backend", "cpu", "bench", "devices",
                                      "--devices", "0,1", "--n",   "128"};
        if (extra[0] == "--devices" || extra[0] == "--n") {
            args = {"--backend", "cpu", "bench", "devices"};
            if (extra[0] == "--n") args.insert(args.end(), {"--devices", "0,1"});
        }
        args.insert(args.end(), extra.begin(), extra.end());
        const CliRun r = run_cli(s, args);
        EXPECT_EQ(r.exit_code, 2) << extra[0] << " " << extra[1] << ": " << r.err << r.out;
        EXPECT_TRUE(is_one_line_error(r)) << extra[0] << " " << extra[1];
        EXPECT_EQ(r.out.find("outcore bench devices:"), std::string::npos)
            << extra[0] << ": nothing runs first";
    }
}

}  // namespace
}  // namespace outcore::cli::test

#endif  // OUTCORE_CLI_PATH
