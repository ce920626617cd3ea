// tests/unit/cli/size_flags_cli_test.cpp — every size-taking flag of gemm, filter and
// make-image at 0, 1, 2^31, 2^32, 2^63 and 2^64-1 (and a few malformed numbers): the
// run succeeds or fails with a one-line UsageError (2) or OutOfMemory (3); it never
// crashes, hangs or wraps. --host-budget 1GiB keeps huge random inputs from being
// allocated on a shared machine: they must fail with OutOfMemory instead.
#include <gtest/gtest.h>

#ifdef OUTCORE_CLI_PATH

#include <string>
#include <vector>

#include "cli_support.hpp"

namespace outcore::cli::test {
namespace {

const std::vector<std::string> kValues = {
    "0", "1", "2147483648", "4294967296", "9223372036854775808", "18446744073709551615"};
const std::vector<std::string> kMalformed = {"-1", "18446744073709551616", "0x10", "1e3", "", "12abc"};

/// `base` with `flag`'s value replaced (or appended).
std::vector<std::string> with(std::vector<std::string> base, const std::string& flag,
                              const std::string& value) {
    for (std::size_t i = 0; i + 1 < base.size(); ++i) {
        if (base[i] == flag) {
            base[i + 1] = value;
            return base;
        }
    }
    base.push_back(flag);
    base.push_back(value);
    return base;
}

void expect_clean(const CliRun& r, const std::string& what) {
    EXPECT_FALSE(r.timed_out) << what << ": hung";
    EXPECT_FALSE(r.signaled) << what << ": crashed with signal " << r.exit_code - 128;
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 2 || r.exit_code == 3)
        << what << ": exit " << r.exit_code << "\n"
        << r.err;
    if (r.exit_code != 0) {
        EXPECT_TRUE(is_one_line_error(r)) << what;
    }
}

void sweep(const Scratch& s, const std::vector<std::string>& base, const std::vector<std::string>& flags) {
    for (const std::string& flag : flags) {
        for (const std::string& v : kValues) {
            const CliRun r = run_cli(s, with(base, flag, v));
            expect_clean(r, flag + " " + v);
            if (v == "0" && flag != "--seed") {
                EXPECT_EQ(r.exit_code, 2) << flag << " 0: " << r.err;
            }
        }
        for (const std::string& v : kMalformed) {
            const CliRun r = run_cli(s, with(base, flag, v));
            EXPECT_EQ(r.exit_code, 2) << flag << " '" << v << "': " << r.err;
            EXPECT_TRUE(is_one_line_error(r)) << flag << " '" << v << "'";
        }
    }
}

TEST(SizeFlagsCli, Gemm) {
    Scratch s;
    sweep(s,
          {"gemm", "--m", "16", "--n", "16", "--k", "16", "--budget", "1MiB", "--seed", "3", "--backend",
           "cpu", "--no-rate-probe", "--host-budget", "1GiB", "--quiet"},
          {"--m", "--n", "--k", "--budget", "--seed"});
    // A valid size of 1 in every dimension runs.
    EXPECT_EQ(
        run_cli(s, {"gemm", "--m", "1", "--n", "1", "--k", "1", "--verify", "--backend", "cpu"}).exit_code,
        0);
}

TEST(SizeFlagsCli, Filter) {
    Scratch s;
    ASSERT_EQ(
        run_cli(s, {"make-image", s.file("in.npy"), "--rows", "40", "--cols", "50", "--quiet"}).exit_code, 0);
    sweep(s,
          {"filter", "box", "--radius", "2", s.file("in.npy"), s.file("out.npy"), "--budget", "1MiB",
           "--seed", "1", "--force", "--backend", "cpu", "--quiet"},
          {"--budget", "--seed"});
    // --radius 0 is the identity box: valid.
    for (const std::string& v : kValues) {
        expect_clean(run_cli(s, {"filter", "box", "--radius", v, s.file("in.npy"), s.file("out.npy"),
                                 "--budget", "1MiB", "--force", "--backend", "cpu", "--quiet"}),
                     "--radius " + v);
    }
}

TEST(SizeFlagsCli, MakeImage) {
    Scratch s;
    // The other side is 2^22 pixels, so a huge count asks for petabytes: refused from
    // the free disk space (OutOfMemory, disk) before anything is written.
    sweep(s,
          {"make-image", s.file("x.npy"), "--rows", "1", "--cols", "4194304", "--force", "--quiet",
           "--host-budget", "1GiB"},
          {"--rows"});
    sweep(s,
          {"make-image", s.file("x.npy"), "--rows", "4194304", "--cols", "1", "--force", "--quiet",
           "--host-budget", "1GiB"},
          {"--cols"});
    sweep(s, {"make-image", s.file("x.npy"), "--rows", "5", "--cols", "6", "--force", "--quiet"},
          {"--channels", "--seed", "--tile"});
}

}  // namespace
}  // namespace outcore::cli::test

#else

TEST(SizeFlagsCli, NeedsTheCli) { GTEST_SKIP() << "the outcore CLI is not built (OUTCORE_BUILD_CLI=OFF)"; }

#endif
