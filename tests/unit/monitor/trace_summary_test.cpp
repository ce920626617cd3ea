// TraceSummary (outcore report's numbers) and the interval arithmetic it shares with
// tile::PipelineStats: exact results on small hand-made traces (bytes and bandwidth
// per direction, hidden transfer, peaks, busy time per track, swaps, allocations,
// bins), unknown events ignored, both JSON layouts, random traces checked against a
// brute-force count, and the error for every kind of bad input.
#include "outcore/monitor/trace_summary.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "outcore/core/error.hpp"
#include "outcore/monitor/intervals.hpp"
#include "support/test_seed.hpp"

namespace outcore::monitor {
namespace {

constexpr double kUs = 1e-6;

// The trace's boilerplate around `events` (comma-separated JSON objects).
std::string trace_of(const std::string& events) {
    return R"({"displayTimeUnit":"ns","otherData":{"producer":"outcore","version":"9.9.9","trace_format":1,)"
           R"("dropped_events":3},"traceEvents":[)" +
           events + "]}";
}

std::string copy(int tid, double ts, double dur, std::uint64_t bytes, const std::string& direction,
                 const std::string& name = "upload") {
    return R"({"ph":"X","cat":"copy","name":")" + name + R"(","pid":1,"tid":)" + std::to_string(tid) +
           R"(,"ts":)" + std::to_string(ts) + R"(,"dur":)" + std::to_string(dur) + R"(,"args":{"bytes":)" +
           std::to_string(bytes) + R"(,"direction":")" + direction + R"("}})";
}

std::string kernel(int tid, double ts, double dur) {
    return R"({"ph":"X","cat":"kernel","name":"gemm","pid":1,"tid":)" + std::to_string(tid) + R"(,"ts":)" +
           std::to_string(ts) + R"(,"dur":)" + std::to_string(dur) + R"(,"args":{}})";
}

std::string thread_name(int tid, const std::string& name) {
    return R"({"ph":"M","name":"thread_name","pid":1,"tid":)" + std::to_string(tid) +
           R"(,"ts":0,"args":{"name":")" + name + R"("}})";
}

// upload [0,10) 1000 B and [20,30) 3000 B on tid 1; gemm [5,25) on tid 2; download
// [25,35) 500 B on tid 3; a device copy [40,41) 100 B on tid 4 (µs).
std::string pipeline_events() {
    return thread_name(1, "upload") + "," + thread_name(2, "compute") + "," + thread_name(3, "download") +
           "," + copy(1, 0, 10, 1000, "h2d") + "," + copy(1, 20, 10, 3000, "h2d") + "," + kernel(2, 5, 20) +
           "," + copy(3, 25, 10, 500, "d2h", "download") + "," + copy(4, 40, 1, 100, "d2d", "copy");
}

TEST(TraceSummary, BytesAndBandwidthPerDirection) {
    const TraceSummary s = summarize_trace_text(trace_of(pipeline_events()));
    EXPECT_EQ(s.producer, "outcore");
    EXPECT_EQ(s.version, "9.9.9");
    EXPECT_EQ(s.trace_format, 1);
    EXPECT_EQ(s.dropped_events, 3U);
    EXPECT_EQ(s.event_count, 8U);
    EXPECT_EQ(s.unknown_event_count, 0U);
    EXPECT_DOUBLE_EQ(s.wall_seconds, 41 * kUs);

    ASSERT_GE(s.directions.size(), 3U);
    EXPECT_EQ(s.directions[0].direction, "h2d");
    EXPECT_EQ(s.directions[1].direction, "d2h");
    EXPECT_EQ(s.directions[2].direction, "d2d");
    const DirectionSummary h2d = s.direction("h2d");
    EXPECT_EQ(h2d.bytes, 4000U);
    EXPECT_EQ(h2d.count, 2U);
    EXPECT_NEAR(h2d.busy_seconds, 20 * kUs, 1e-15);
    EXPECT_NEAR(h2d.busy_bytes_per_second, 4000 / (20 * kUs), 1e-3);
    EXPECT_NEAR(h2d.wall_bytes_per_second, 4000 / (41 * kUs), 1e-3);
    EXPECT_EQ(s.direction("d2h").bytes, 500U);
    EXPECT_NEAR(s.direction("d2h").busy_bytes_per_second, 500 / (10 * kUs), 1e-3);
    EXPECT_EQ(s.direction("d2d").bytes, 100U);
    EXPECT_EQ(s.direction("d2d").count, 1U);
    EXPECT_EQ(s.kernel_count, 1U);
}

TEST(TraceSummary, HiddenTransferFollowsPipelineDefinition) {
    const TraceSummary s = summarize_trace_text(trace_of(pipeline_events()));
    // transfer = 20 (uploads) + 10 (download) + 1 (d2d) µs; hidden: [5,10) and [20,25).
    EXPECT_NEAR(s.compute_busy_seconds, 20 * kUs, 1e-15);
    EXPECT_NEAR(s.transfer_seconds, 31 * kUs, 1e-15);
    EXPECT_NEAR(s.exposed_transfer_seconds, 21 * kUs, 1e-15);
    EXPECT_DOUBLE_EQ(s.hidden_transfer_fraction, 10.0 / 31.0);

    // No copies at all: nothing to hide, the fraction is 1 (as in PipelineStats).
    const TraceSummary k = summarize_trace_text(trace_of(kernel(2, 0, 5)));
    EXPECT_EQ(k.transfer_seconds, 0.0);
    EXPECT_EQ(k.hidden_transfer_fraction, 1.0);
}

TEST(TraceSummary, CopiesOnTheComputeTrackAreNotHiddenByThemselves) {
    // One queue doing both: its copy [10,20) cannot overlap its own kernel [0,10); a
    // kernel on another track [15,30) hides half of it.
    const TraceSummary s = summarize_trace_text(
        trace_of(kernel(1, 0, 10) + "," + copy(1, 10, 10, 64, "h2d") + "," + kernel(2, 15, 15)));
    EXPECT_NEAR(s.transfer_seconds, 10 * kUs, 1e-15);
    EXPECT_DOUBLE_EQ(s.hidden_transfer_fraction, 0.5);
    EXPECT_NEAR(s.compute_busy_seconds, 25 * kUs, 1e-15);  // [0,10) ∪ [15,30)
}

TEST(TraceSummary, BusyTimePerTrackIsTheUnionOfItsEvents) {
    const TraceSummary s = summarize_trace_text(
        trace_of(pipeline_events() + "," + kernel(7, 0, 4) + "," + kernel(7, 2, 4) + "," + kernel(7, 10, 1)));
    ASSERT_EQ(s.tracks.size(), 5U);
    EXPECT_EQ(s.tracks[0].name, "upload");
    EXPECT_EQ(s.tracks[0].event_count, 2U);
    EXPECT_NEAR(s.tracks[0].busy_seconds, 20 * kUs, 1e-15);
    EXPECT_EQ(s.tracks[1].name, "compute");
    EXPECT_EQ(s.tracks[3].name, "tid 4");  // no metadata: named by tid
    EXPECT_EQ(s.tracks[4].tid, 7);
    // [0,4) ∪ [2,6) ∪ [10,11) = 7 µs, although the events sum to 9.
    EXPECT_NEAR(s.tracks[4].busy_seconds, 7 * kUs, 1e-15);
    EXPECT_NEAR(s.tracks[4].busy_fraction, 7.0 / 41.0, 1e-12);
}

TEST(TraceSummary, HostEventsCountBytesOnTheirTrackOnly) {
    // A reader thread's fills [0,10) 400 B and [10,30) 600 B on tid 5: its track moved
    // 1000 B in 30 µs of busy time; no direction, transfer or hidden time changes.
    const std::string host = R"({"ph":"X","cat":"host","name":"read","pid":1,"tid":5,"ts":0,"dur":10,)"
                             R"("args":{"bytes":400}},)"
                             R"({"ph":"X","cat":"host","name":"read","pid":1,"tid":5,"ts":10,"dur":20,)"
                             R"("args":{"bytes":600}})";
    const TraceSummary base = summarize_trace_text(trace_of(pipeline_events()));
    const TraceSummary s =
        summarize_trace_text(trace_of(thread_name(5, "read 0") + "," + host + "," + pipeline_events()));
    EXPECT_EQ(s.unknown_event_count, 0U);
    EXPECT_EQ(s.direction("h2d").bytes, base.direction("h2d").bytes);
    EXPECT_EQ(s.transfer_seconds, base.transfer_seconds);
    EXPECT_EQ(s.hidden_transfer_fraction, base.hidden_transfer_fraction);
    EXPECT_EQ(s.kernel_count, base.kernel_count);
    const TrackSummary* reader = nullptr;
    for (const TrackSummary& t : s.tracks) {
        if (t.tid == 5) reader = &t;
    }
    ASSERT_NE(reader, nullptr);
    EXPECT_EQ(reader->name, "read 0");
    EXPECT_EQ(reader->bytes, 1000U);
    EXPECT_NEAR(reader->busy_seconds, 30 * kUs, 1e-15);
    EXPECT_NEAR(reader->busy_bytes_per_second, 1000 / (30 * kUs), 1e-3);
    // Copy tracks carry their bytes too; kernel tracks none.
    EXPECT_EQ(s.tracks[0].bytes, 4000U);
    EXPECT_NEAR(s.tracks[0].busy_bytes_per_second, 4000 / (20 * kUs), 1e-3);
    EXPECT_EQ(s.tracks[1].bytes, 0U);
    EXPECT_EQ(s.tracks[1].busy_bytes_per_second, 0.0);
}

TEST(TraceSummary, BinsSpreadBytesAndBusyTimeExactly) {
    // Wall [0,40): 4 bins of 10 µs. The copy [5,25) of 2000 B: 500 B in bin 0, 1000 in
    // bin 1, 500 in bin 2.
    const TraceSummary s =
        summarize_trace_text(trace_of(copy(1, 5, 20, 2000, "h2d") + "," + kernel(2, 0, 40)), {.bins = 4});
    ASSERT_EQ(s.bin_count, 4U);
    EXPECT_NEAR(s.bin_seconds, 10 * kUs, 1e-18);
    const std::vector<double>& bw = s.direction("h2d").bytes_per_second_bins;
    ASSERT_EQ(bw.size(), 4U);
    EXPECT_NEAR(bw[0], 500 / (10 * kUs), 1e-3);
    EXPECT_NEAR(bw[1], 1000 / (10 * kUs), 1e-3);
    EXPECT_NEAR(bw[2], 500 / (10 * kUs), 1e-3);
    EXPECT_NEAR(bw[3], 0, 1e-3);
    const std::vector<double>& busy = s.tracks[0].busy_fraction_bins;
    EXPECT_NEAR(busy[0], 0.5, 1e-12);
    EXPECT_NEAR(busy[1], 1.0, 1e-12);
    EXPECT_NEAR(busy[2], 0.5, 1e-12);
    EXPECT_NEAR(busy[3], 0.0, 1e-12);
    for (double b : s.tracks[1].busy_fraction_bins) EXPECT_NEAR(b, 1.0, 1e-12);
}

TEST(TraceSummary, PeaksAndBudgetsPerTier) {
    const std::string events =
        R"({"ph":"C","name":"resident bytes","pid":1,"tid":0,"ts":1,"args":{"device":100,"host":50,"disk":0}},)"
        R"({"ph":"C","name":"resident bytes","pid":1,"ts":2,"args":{"device":300,"host":40,"disk":7}},)"
        R"({"ph":"C","name":"resident bytes","pid":1,"ts":3,"args":{"device":200,"host":60,"disk":0,"nvme":9}},)"
        R"({"ph":"C","name":"budget bytes","pid":1,"ts":1,"args":{"device":1000}})";
    const TraceSummary s = summarize_trace_text(trace_of(events));
    EXPECT_EQ(s.tier("device").peak_bytes, 300U);
    EXPECT_NEAR(s.tier("device").peak_time_seconds, 2 * kUs, 1e-15);
    EXPECT_EQ(s.tier("device").budget_bytes, 1000U);
    EXPECT_EQ(s.tier("device").resident.size(), 3U);
    EXPECT_EQ(s.tier("host").peak_bytes, 60U);
    EXPECT_EQ(s.tier("host").budget_bytes, 0U);  // never recorded: none
    EXPECT_EQ(s.tier("disk").peak_bytes, 7U);
    EXPECT_EQ(s.tier("nvme").peak_bytes, 9U);  // a tier the format does not name yet
    ASSERT_GE(s.tiers.size(), 4U);
    EXPECT_EQ(s.tiers[0].tier, "device");
    EXPECT_EQ(s.tiers[3].tier, "nvme");
    EXPECT_EQ(s.tracks.size(), 0U);  // counters are not tracks
}

TEST(TraceSummary, ExtremeValuesStayDefined) {
    // Negative and enormous counter values are clamped to [0, 2^64); the largest
    // accepted times do not overflow ts + dur.
    const std::string events =
        R"({"ph":"C","name":"resident bytes","ts":1,"args":{"device":-5,"host":1e30,"disk":"n/a"}},)"
        R"({"ph":"C","name":"budget bytes","ts":2,"args":{"device":-1}},)"
        R"({"ph":"X","cat":"kernel","name":"k","tid":1,"ts":2.9e15,"dur":2.9e15})";
    const TraceSummary s = summarize_trace_text(trace_of(events));
    EXPECT_EQ(s.tier("device").peak_bytes, 0U);
    EXPECT_EQ(s.tier("device").budget_bytes, 0U);
    EXPECT_GT(s.tier("host").peak_bytes, 1ULL << 63);
    EXPECT_NEAR(s.compute_busy_seconds, 2.9e9, 1.0);
    EXPECT_THROW((void)summarize_trace_text(trace_of(events), {.bins = 2000000}), UsageError);
}

TEST(TraceSummary, SwapsAndAllocations) {
    const std::string events =
        R"({"ph":"X","cat":"swap","name":"swap_in","pid":1,"tid":5,"ts":0,"dur":3,)"
        R"("args":{"from":"host","to":"device","bytes":4096,"dirty":false}},)"
        R"({"ph":"X","cat":"swap","name":"swap_in","pid":1,"tid":5,"ts":4,"dur":1,"args":{"bytes":1024}},)"
        R"({"ph":"i","s":"t","cat":"swap","name":"evict","pid":1,"tid":5,"ts":6,"args":{"bytes":512,"dirty":false}},)"
        R"({"ph":"i","s":"t","cat":"alloc","name":"allocate","pid":1,"tid":6,"ts":1,)"
        R"("args":{"kind":"device","bytes":100,"tag":"a"}},)"
        R"({"ph":"i","s":"t","cat":"alloc","name":"allocate","pid":1,"tid":6,"ts":2,)"
        R"("args":{"kind":"host-pinned","bytes":28,"tag":"b"}},)"
        R"({"ph":"i","s":"t","cat":"alloc","name":"free","pid":1,"tid":6,"ts":3,"args":{"kind":"device","bytes":100}})";
    const TraceSummary s = summarize_trace_text(trace_of(events));
    EXPECT_EQ(s.swap("swap_in").count, 2U);
    EXPECT_EQ(s.swap("swap_in").bytes, 5120U);
    EXPECT_EQ(s.swap("evict").count, 1U);
    EXPECT_EQ(s.swap("evict").bytes, 512U);
    EXPECT_EQ(s.swap("write_back").count, 0U);
    EXPECT_EQ(s.allocation_count, 2U);
    EXPECT_EQ(s.free_count, 1U);
    EXPECT_EQ(s.allocated_bytes, 128U);
    // Swap moves are not copies: they do not count as transfer time.
    EXPECT_EQ(s.transfer_seconds, 0.0);
    ASSERT_EQ(s.tracks.size(), 2U);
    EXPECT_NEAR(s.tracks[0].busy_seconds, 4 * kUs, 1e-15);
    EXPECT_EQ(s.tracks[1].busy_seconds, 0.0);
    EXPECT_EQ(s.tracks[1].event_count, 3U);
}

TEST(TraceSummary, UnknownEventsAreCountedAndIgnored) {
    const std::string unknown =
        R"({"ph":"B","name":"begin","pid":1,"tid":1,"ts":3},)"
        R"({"ph":"C","name":"temperature","pid":1,"ts":4,"args":{"gpu":71}},)"
        R"({"ph":"i","s":"t","cat":"mystery","name":"x","pid":1,"tid":1,"ts":5},)"
        R"({"ph":"X","cat":"future","name":"y","pid":1,"tid":1,"ts":12,"dur":2,"args":{"bytes":"lots"}},)"
        R"(42,["not","an","event"],{"no_ph":true},)";
    const TraceSummary base = summarize_trace_text(trace_of(pipeline_events()));
    const TraceSummary s = summarize_trace_text(trace_of(unknown + pipeline_events()));
    EXPECT_EQ(s.unknown_event_count, 7U);
    EXPECT_EQ(s.event_count, base.event_count + 7);
    EXPECT_EQ(s.direction("h2d").bytes, base.direction("h2d").bytes);
    EXPECT_EQ(s.transfer_seconds, base.transfer_seconds);
    EXPECT_EQ(s.hidden_transfer_fraction, base.hidden_transfer_fraction);
    EXPECT_EQ(s.tier("device").peak_bytes, 0U);
    // An X event of an unknown category is still busy time on its track.
    EXPECT_NEAR(s.tracks[0].busy_seconds, 22 * kUs, 1e-15);
}

TEST(TraceSummary, MetadataIsOptionalAndTheArrayFormatIsAccepted) {
    const TraceSummary s = summarize_trace_text("[" + copy(3, 1, 2, 10, "h2d") + "]");
    EXPECT_EQ(s.direction("h2d").bytes, 10U);
    ASSERT_EQ(s.tracks.size(), 1U);
    EXPECT_EQ(s.tracks[0].name, "tid 3");
    EXPECT_EQ(s.producer, "");
    const TraceSummary empty = summarize_trace_text(R"({"traceEvents":[]})");
    EXPECT_EQ(empty.event_count, 0U);
    EXPECT_EQ(empty.wall_seconds, 0.0);
    EXPECT_EQ(empty.bin_count, 0U);
    // Direction missing: derived from the copy's name.
    const TraceSummary named = summarize_trace_text(trace_of(
        R"({"ph":"X","cat":"copy","name":"download","pid":1,"tid":1,"ts":0,"dur":1,"args":{"bytes":8}})"));
    EXPECT_EQ(named.direction("d2h").bytes, 8U);
}

// Randomly placed copies and kernels on integer µs, against a count µs by µs.
TEST(TraceSummary, RandomTracesMatchABruteForceCount) {
    std::mt19937_64 rng(test::seed());
    constexpr int kSpan = 400;
    for (std::uint64_t trial = 0; trial < test::scaled(50); ++trial) {
        std::vector<std::vector<bool>> copy_busy(3, std::vector<bool>(kSpan, false));
        std::vector<bool> kernel_busy(kSpan, false);
        std::string events;
        std::uniform_int_distribution<int> start(0, kSpan - 1);
        std::uniform_int_distribution<int> length(0, 40);
        std::uniform_int_distribution<int> track(0, 3);  // 0-2 copies, 3 kernels
        for (int e = 0; e < 60; ++e) {
            const int b = start(rng);
            const int len = std::min(length(rng), kSpan - b);
            const int t = track(rng);
            if (e > 0) events += ",";
            events += t == 3 ? kernel(10 + e % 2, b, len) : copy(t, b, len, 1, "h2d");
            for (int x = b; x < b + len; ++x) (t == 3 ? kernel_busy[x] : copy_busy[t][x]) = true;
        }
        int transfer = 0;
        int hidden = 0;
        int compute = 0;
        for (int x = 0; x < kSpan; ++x) {
            compute += kernel_busy[x] ? 1 : 0;
            for (const auto& c : copy_busy) {
                transfer += c[x] ? 1 : 0;
                hidden += c[x] && kernel_busy[x] ? 1 : 0;
            }
        }
        const TraceSummary s = summarize_trace_text(trace_of(events));
        SCOPED_TRACE(events);
        EXPECT_NEAR(s.transfer_seconds, transfer * kUs, 1e-12);
        EXPECT_NEAR(s.exposed_transfer_seconds, (transfer - hidden) * kUs, 1e-12);
        EXPECT_NEAR(s.compute_busy_seconds, compute * kUs, 1e-12);
        double bytes = 0;
        for (double r : s.direction("h2d").bytes_per_second_bins) bytes += r * s.bin_seconds;
        if (s.bin_count > 0) {
            EXPECT_NEAR(bytes, static_cast<double>(s.direction("h2d").bytes), 1e-6);
        }
    }
}

TEST(Intervals, MergeBusyAndOverlap) {
    std::vector<Interval> v{{30, 40}, {0, 10}, {5, 15}, {15, 20}, {50, 50}, {60, 55}};
    merge_intervals(v);
    EXPECT_EQ(v, (std::vector<Interval>{{0, 20}, {30, 40}}));
    EXPECT_EQ(busy_ns(v), 30);
    const std::vector<Interval> c{{-5, 2}, {8, 35}, {39, 100}};
    EXPECT_EQ(overlap_ns(v, c), 2 + 12 + 5 + 1);
    EXPECT_EQ(overlap_ns(c, v), overlap_ns(v, c));
    EXPECT_EQ(overlap_ns(v, std::vector<Interval>{}), 0);
    EXPECT_EQ(hidden_fraction(0, 0), 1.0);
    EXPECT_EQ(hidden_fraction(1, 4), 0.25);
}

// ---- bad input ---------------------------------------------------------------------

template <typename E>
void expect_error(const std::string& text, const std::string& needle) {
    SCOPED_TRACE(text);
    try {
        (void)summarize_trace_text(text, {}, "t.json");
        ADD_FAILURE() << "no exception";
    } catch (const E& e) {
        const std::string what = e.what();
        EXPECT_EQ(what.rfind("[trace] ", 0), 0U) << what;
        EXPECT_NE(what.find(needle), std::string::npos) << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    } catch (const std::exception& e) {
        ADD_FAILURE() << "wrong exception: " << e.what();
    }
}

TEST(TraceSummaryErrors, NotATrace) {
    expect_error<UsageError>("hello, world", "t.json is not a trace: not JSON");
    expect_error<UsageError>("", "not JSON");
    expect_error<UsageError>(R"({"rows":[1,2,3]})", "without a \"traceEvents\" array");
    expect_error<UsageError>(R"({"traceEvents":{"ph":"X"}})", "traceEvents");
    expect_error<UsageError>("17", "traceEvents");
}

TEST(TraceSummaryErrors, TruncatedOrMalformedTrace) {
    const std::string full = trace_of(pipeline_events());
    expect_error<CorruptionError>(full.substr(0, full.size() / 2), "malformed or truncated trace after");
    expect_error<CorruptionError>(full.substr(0, full.size() - 2), "t.json");
    expect_error<CorruptionError>(trace_of(R"({"ph":"X","name":"u","tid":1,"ts":"soon","dur":1})"),
                                  "event 0 (ph \"X\", name \"u\"): \"ts\" is missing or not a number");
    expect_error<CorruptionError>(trace_of(R"({"ph":"X","name":"u","tid":1,"ts":1})"), "\"dur\" is missing");
    expect_error<CorruptionError>(
        trace_of(kernel(1, 0, 1) + R"(,{"ph":"X","name":"u","tid":1,"ts":1,"dur":-2})"),
        "event 1 (ph \"X\", name \"u\"): \"dur\" is negative");
    expect_error<CorruptionError>(trace_of(R"({"ph":"i","name":"allocate","cat":"alloc","ts":1e300})"),
                                  "out of range");
    expect_error<CorruptionError>(trace_of(R"({"ph":"X","cat":"copy","name":"upload","ts":1,"dur":1,)"
                                           R"("args":{"bytes":-5,"direction":"h2d"}})"),
                                  "\"args.bytes\" is not a non-negative number");
}

TEST(TraceSummaryErrors, Files) {
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("outcore-trace-summary-" + std::to_string(test::seed()));
    std::filesystem::create_directories(dir);
    try {
        (void)summarize_trace(dir / "missing.json");
        ADD_FAILURE() << "no exception";
    } catch (const IoError& e) {
        EXPECT_EQ(e.errno_value(), ENOENT);
        EXPECT_EQ(e.operation(), "open");
        EXPECT_NE(std::string(e.what()).find("missing.json"), std::string::npos);
    }
    EXPECT_THROW((void)summarize_trace(dir), UsageError);
    { std::ofstream(dir / "empty.json").flush(); }
    EXPECT_THROW((void)summarize_trace(dir / "empty.json"), UsageError);
    { std::ofstream(dir / "ok.json") << trace_of(pipeline_events()); }
    const TraceSummary s = summarize_trace(dir / "ok.json");
    EXPECT_EQ(s.direction("h2d").bytes, 4000U);
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace outcore::monitor
