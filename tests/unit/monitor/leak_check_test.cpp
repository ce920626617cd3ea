// Tests of the leak checker (outcore/monitor/leak_check.hpp): on demand, the report
// groups exactly the live Device allocations by tag and frees remove them; and at exit,
// a program that leaks prints the report and exits 8 while one that does not exits 0
// (leak_child, a program of its own, run with OUTCORE_LEAK_CHECK=1).
#include "outcore/monitor/leak_check.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "monitor/environment.hpp"
#include "outcore/backends/cpu.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::Block;
using outcore::MemoryKind;
using outcore::UsageError;
using outcore::alloc::LeakGroup;
using outcore::alloc::LeakReport;
using outcore::alloc::LiveAllocation;
namespace monitor = outcore::monitor;

constexpr std::array<std::string_view, 4> kTags = {"tile.in", "tile.out", "staging", ""};
constexpr std::array<MemoryKind, 3> kKinds = {MemoryKind::Device, MemoryKind::HostPinned,
                                              MemoryKind::HostCached};

std::unique_ptr<outcore::Device> make_device() {
    return outcore::cpu::make_cpu_device({.total_memory_bytes = 256 * outcore::kMiB});
}

// Tracking on for one test, off after it whatever happens.
class TrackingOn {
public:
    explicit TrackingOn(const monitor::LeakCheckOptions& options) { monitor::start_leak_tracking(options); }
    ~TrackingOn() { monitor::stop_leak_tracking(); }
    TrackingOn(const TrackingOn&) = delete;
    TrackingOn& operator=(const TrackingOn&) = delete;
};

struct Tagged {
    Block block;
    std::string_view tag;
};

// The groups a report must have for `live`: tag -> (count, bytes).
std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> expected_groups(
    const std::vector<Tagged>& live) {
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> want;
    for (const Tagged& t : live) {
        auto& g = want[std::string(t.tag)];
        g.first += 1;
        g.second += t.block.bytes();
    }
    return want;
}

void expect_report_matches(const LeakReport& report, const std::vector<Tagged>& live) {
    const auto want = expected_groups(live);
    EXPECT_EQ(report.count, live.size());
    ASSERT_EQ(report.groups.size(), want.size());
    std::uint64_t bytes = 0;
    for (const LeakGroup& g : report.groups) {
        const auto it = want.find(g.tag);
        ASSERT_NE(it, want.end()) << "unexpected tag '" << g.tag << "'";
        EXPECT_EQ(g.count, it->second.first) << g.tag;
        EXPECT_EQ(g.bytes, it->second.second) << g.tag;
        bytes += g.bytes;
    }
    EXPECT_EQ(report.bytes, bytes);
    for (std::size_t i = 1; i < report.groups.size(); ++i) {
        EXPECT_GE(report.groups[i - 1].bytes, report.groups[i].bytes);
    }
}

TEST(LeakCheck, ReportGroupsTheLiveDeviceAllocationsByTagAndFreesRemoveThem) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    // Made before tracking starts: never known, and its free later changes nothing.
    Block before = device->allocate({.bytes = 777, .tag = "before.start"});

    const TrackingOn on({.capture_stack_traces = false});
    EXPECT_TRUE(monitor::leak_tracking());
    EXPECT_TRUE(monitor::leak_report().empty());

    std::vector<Tagged> live;
    for (int i = 0; i < 80; ++i) {
        const std::string_view tag =
            kTags[std::uniform_int_distribution<std::size_t>(0, kTags.size() - 1)(rng)];
        const MemoryKind kind = kKinds[std::uniform_int_distribution<std::size_t>(0, kKinds.size() - 1)(rng)];
        const std::uint64_t bytes = std::uniform_int_distribution<std::uint64_t>(1, 64 * outcore::kKiB)(rng);
        live.push_back({device->allocate({.bytes = bytes, .kind = kind, .tag = tag}), tag});
    }
    expect_report_matches(monitor::leak_report(), live);

    // Free a random half, and the block from before tracking.
    std::shuffle(live.begin(), live.end(), rng);
    live.resize(live.size() / 2);
    before.reset();
    const LeakReport report = monitor::leak_report();
    expect_report_matches(report, live);
    for (const LeakGroup& g : report.groups) EXPECT_TRUE(g.oldest_stack.empty());

    const std::string text = outcore::alloc::format_leak_report(report);
    for (const auto& [tag, g] : expected_groups(live)) {
        EXPECT_NE(text.find(tag.empty() ? "(untagged)" : tag), std::string::npos) << text;
    }
    EXPECT_EQ(text.find("before.start"), std::string::npos) << text;

    live.clear();
    EXPECT_TRUE(monitor::leak_report().empty());
}

TEST(LeakCheck, KeepsEachAllocationsDeviceKindBytesAndTimeInOrder) {
    auto a = make_device();
    auto b = make_device();
    monitor::LeakChecker checker({.capture_stack_traces = false});
    const monitor::ObserverRegistration reg(checker);

    const std::int64_t t0 = monitor::now_ns();
    const Block x = a->allocate({.bytes = 100, .kind = MemoryKind::HostPinned, .tag = "x"});
    const Block y = b->allocate({.bytes = 200, .tag = "y"});
    const std::int64_t t1 = monitor::now_ns();

    const std::vector<LiveAllocation> live = checker.live_allocations();
    ASSERT_EQ(live.size(), 2U);
    EXPECT_EQ(checker.live_count(), 2U);
    const auto expect = [&](const LiveAllocation& got, std::string_view tag, const outcore::Device& dev,
                            const Block& block) {
        EXPECT_EQ(got.tag, tag);
        EXPECT_EQ(got.device_id, dev.id());
        EXPECT_EQ(got.kind, block.kind());
        EXPECT_EQ(got.bytes, block.bytes());
        const std::int64_t at = got.allocated_at.time_since_epoch().count();
        EXPECT_GE(at, t0);
        EXPECT_LE(at, t1);
    };
    expect(live[0], "x", *a, x);  // allocation order
    expect(live[1], "y", *b, y);
    EXPECT_LT(live[0].sequence, live[1].sequence);
    EXPECT_EQ(checker.dropped_count(), 0U);
}

[[gnu::noinline]] Block allocate_with_a_stack(outcore::Device& device) {
    return device.allocate({.bytes = 64, .tag = "traced"});
}

TEST(LeakCheck, CapturesTheAllocatingStackWhenAsked) {
    auto device = make_device();
    constexpr std::size_t kDepth = 12;
    const TrackingOn on({.capture_stack_traces = true, .stack_depth = kDepth});
    const Block b = allocate_with_a_stack(*device);
    const LeakReport report = monitor::leak_report();
    ASSERT_EQ(report.groups.size(), 1U);
    EXPECT_FALSE(report.groups[0].oldest_stack.empty());
    EXPECT_LE(report.groups[0].oldest_stack.size(), kDepth);
    EXPECT_NE(outcore::alloc::format_leak_report(report).find("      at "), std::string::npos);
}

TEST(LeakCheck, MisuseIsAUsageErrorAndStopForgets) {
    EXPECT_FALSE(monitor::leak_tracking());
    EXPECT_THROW((void)monitor::leak_report(), UsageError);
    EXPECT_EQ(monitor::check_leaks_now(), std::nullopt);
    EXPECT_EQ(monitor::leak_check_exit_code(0), 0);
    EXPECT_EQ(monitor::leak_check_exit_code(3), 3);

    auto device = make_device();
    monitor::start_leak_tracking({.capture_stack_traces = false});
    EXPECT_THROW(monitor::start_leak_tracking(), UsageError);
    const Block b = device->allocate({.bytes = 10, .tag = "kept"});
    EXPECT_EQ(monitor::leak_report().count, 1U);
    monitor::stop_leak_tracking();
    monitor::stop_leak_tracking();  // a no-op when off
    EXPECT_FALSE(monitor::leak_tracking());

    // A fresh start knows nothing of what the earlier one saw.
    const TrackingOn on({.capture_stack_traces = false});
    EXPECT_TRUE(monitor::leak_report().empty());
}

TEST(LeakCheck, ExitCodeForTheEndOfMain) {
    auto device = make_device();
    const TrackingOn on({.capture_stack_traces = false});
    testing::internal::CaptureStderr();
    EXPECT_EQ(monitor::leak_check_exit_code(0), 0);
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");

    Block leaked = device->allocate({.bytes = 3 * outcore::kKiB, .tag = "end.of.main"});
    testing::internal::CaptureStderr();
    EXPECT_EQ(monitor::leak_check_exit_code(0), monitor::kLeakExitCode);
    EXPECT_EQ(monitor::leak_check_exit_code(2), 2);  // a failure's own code wins
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("[leak_check]"), std::string::npos) << err;
    EXPECT_NE(err.find("end.of.main: 1 block(s), " + outcore::format_size(3 * outcore::kKiB)),
              std::string::npos)
        << err;

    const std::optional<LeakReport> now = monitor::check_leaks_now();
    ASSERT_TRUE(now.has_value());
    EXPECT_EQ(now->count, 1U);
    leaked.reset();
    EXPECT_TRUE(monitor::check_leaks_now()->empty());
}

TEST(LeakCheck, EnvironmentValuesOtherThan01OrStacksAreAUsageError) {
    const char* saved = std::getenv("OUTCORE_LEAK_CHECK");
    const std::string restore = saved == nullptr ? "" : saved;
    ::setenv("OUTCORE_LEAK_CHECK", "yes please", 1);
    EXPECT_THROW(monitor::detail::start_leak_check_from_environment(), UsageError);
    ::setenv("OUTCORE_LEAK_CHECK", "0", 1);
    monitor::detail::start_leak_check_from_environment();
    EXPECT_FALSE(monitor::leak_tracking());
    if (saved == nullptr) {
        ::unsetenv("OUTCORE_LEAK_CHECK");
    } else {
        ::setenv("OUTCORE_LEAK_CHECK", restore.c_str(), 1);
    }
}

// ----- The check at exit, in a process of its own ----------------------------------------

struct ChildRun {
    int exit_code = -1;  ///< -1 when it did not exit normally (a signal)
    std::string err;
};

// Runs leak_child with OUTCORE_LEAK_CHECK=`setting`; stdout is dropped, stderr kept.
ChildRun run_child(const std::string& args, const std::string& setting = "1") {
#ifdef OUTCORE_LEAK_CHILD_PATH
    const std::filesystem::path err_path = std::filesystem::temp_directory_path() /
                                           ("outcore-leak-child-" + std::to_string(::getpid()) + ".err");
    const std::string command = "OUTCORE_LEAK_CHECK=" + setting + " '" + OUTCORE_LEAK_CHILD_PATH + "' " +
                                args + " >/dev/null 2>'" + err_path.string() + "'";
    const int status = std::system(command.c_str());
    ChildRun r;
    if (status != -1 && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    std::ifstream in(err_path);
    std::ostringstream s;
    s << in.rdbuf();
    r.err = s.str();
    std::filesystem::remove(err_path);
    return r;
#else
    (void)args;
    (void)setting;
    return {};
#endif
}

std::size_t count_of(const std::string& text, std::string_view what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

class LeakCheckAtExit : public testing::Test {
protected:
    void SetUp() override {
#ifndef OUTCORE_LEAK_CHILD_PATH
        GTEST_SKIP() << "leak_child was not built";
#endif
    }
};

TEST_F(LeakCheckAtExit, AProgramThatFreesEverythingExits0WithoutAReport) {
    const ChildRun r = run_child("clean");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err.find("leak"), std::string::npos) << r.err;
}

TEST_F(LeakCheckAtExit, AProgramThatLeaksPrintsTheReportAndExits8) {
    for (const std::string setting : {"1", "stacks"}) {
        const ChildRun r = run_child("leak", setting);
        EXPECT_EQ(r.exit_code, monitor::kLeakExitCode) << r.err;
        // leak_child leaves one block of 3 KiB tagged "child.leaked".
        const std::string size = outcore::format_size(3 * outcore::kKiB);
        EXPECT_NE(r.err.find("[leak_check] 1 block(s), " + size + " still allocated at exit"),
                  std::string::npos)
            << r.err;
        EXPECT_NE(r.err.find("child.leaked: 1 block(s), " + size), std::string::npos) << r.err;
        EXPECT_EQ(r.err.find("child.freed"), std::string::npos) << r.err;
        if (setting == "stacks") {
            EXPECT_NE(r.err.find("      at "), std::string::npos) << r.err;
        }
    }
}

TEST_F(LeakCheckAtExit, ExitWithACodeStillEndsWith8WhenItLeaked) {
    const ChildRun r = run_child("exit 0");
    EXPECT_EQ(r.exit_code, monitor::kLeakExitCode) << r.err;
    EXPECT_EQ(count_of(r.err, "child.leaked"), 1U) << r.err;
}

TEST_F(LeakCheckAtExit, EndOfMainCheckReportsOnceAndKeepsAFailuresCode) {
    ChildRun r = run_child("end-of-main 0");
    EXPECT_EQ(r.exit_code, monitor::kLeakExitCode) << r.err;
    EXPECT_EQ(count_of(r.err, "child.leaked"), 1U) << r.err;
    r = run_child("end-of-main 3");
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_EQ(count_of(r.err, "child.leaked"), 1U) << r.err;
}

TEST_F(LeakCheckAtExit, StaticsMadeAfterTrackingStartedAreDestroyedBeforeTheCheck) {
    const ChildRun late = run_child("late-static");
    EXPECT_EQ(late.exit_code, 0) << late.err;
    EXPECT_EQ(late.err.find("child.late"), std::string::npos) << late.err;
    // The documented other side: a static made before tracking outlives the check.
    const ChildRun early = run_child("early-static");
    EXPECT_EQ(early.exit_code, monitor::kLeakExitCode) << early.err;
    EXPECT_NE(early.err.find("child.early: 1 block(s), " + outcore::format_size(6 * outcore::kKiB)),
              std::string::npos)
        << early.err;
}

TEST_F(LeakCheckAtExit, OffWhenTheVariableIs0) {
    const ChildRun r = run_child("leak", "0");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
}

}  // namespace
