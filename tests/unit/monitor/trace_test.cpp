// Tests of the trace recorder (outcore/monitor/trace.hpp): the JSON parses and carries
// what Perfetto needs; events of one track never overlap on a real Pipeline run and a
// real GEMM, whose copy bytes add up to the pipeline's own counts; resident bytes stay
// under the budget; swap-store moves match StoreStats; the global API's errors; the
// max_events bound; and nothing is recorded while no observer is registered. Suites
// named *Threads also run under TSan.
#include "outcore/monitor/trace.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "monitor/environment.hpp"
#include "outcore/backends/cpu.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/ops/gemm.hpp"
#include "outcore/tile/gemm_plan.hpp"
#include "outcore/tile/pipeline.hpp"
#include "support/test_seed.hpp"
#include "unit/ops/gemm_test_support.hpp"
#if OUTCORE_WITH_SWAP
#include "unit/swap/store_test_support.hpp"
#endif

namespace {

using nlohmann::json;
using outcore::Device;
using outcore::kKiB;
using outcore::kMiB;
using outcore::MemoryKind;
using outcore::Queue;
using outcore::monitor::ObserverRegistration;
using outcore::monitor::TraceOptions;
using outcore::monitor::TraceRecorder;

std::unique_ptr<Device> make_device() {
    return outcore::cpu::make_cpu_device({.total_memory_bytes = 512 * kMiB});
}

/// A fresh folder under the temp directory, removed with everything in it.
class TempDir {
public:
    TempDir() {
        std::string pattern = (std::filesystem::temp_directory_path() / "outcore-trace-test-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
        path_ = pattern;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    [[nodiscard]] const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

/// Microseconds with three decimals back to integer nanoseconds.
std::int64_t ns(const json& micros) { return std::llround(micros.get<double>() * 1000.0); }

/// Parses a trace and checks the shape every consumer relies on (trace_format.md).
void check_shape(const json& doc) {
    EXPECT_EQ(doc.at("displayTimeUnit"), "ns");
    EXPECT_EQ(doc.at("otherData").at("producer"), "outcore");
    EXPECT_EQ(doc.at("otherData").at("trace_format"), 1);
    EXPECT_TRUE(doc.at("otherData").at("dropped_events").is_number_unsigned());
    std::set<std::int64_t> named;  // tids with thread_name metadata
    std::set<std::int64_t> used;
    bool metadata_done = false;
    for (const json& e : doc.at("traceEvents")) {
        ASSERT_TRUE(e.contains("ph") && e.contains("name") && e.contains("pid") && e.contains("ts"))
            << e.dump();
        EXPECT_EQ(e.at("pid"), 1);
        const std::string ph = e.at("ph");
        if (ph == "M") {
            EXPECT_FALSE(metadata_done) << "metadata after other events: " << e.dump();
            if (e.at("name") == "thread_name") named.insert(e.at("tid").get<std::int64_t>());
            continue;
        }
        metadata_done = true;
        EXPECT_GE(e.at("ts").get<double>(), 0.0) << e.dump();
        if (ph == "X") {
            ASSERT_TRUE(e.contains("dur") && e.contains("tid")) << e.dump();
            EXPECT_GE(e.at("dur").get<double>(), 0.0);
            used.insert(e.at("tid").get<std::int64_t>());
        } else if (ph == "i") {
            ASSERT_TRUE(e.contains("tid")) << e.dump();
            EXPECT_EQ(e.at("s"), "t");
            used.insert(e.at("tid").get<std::int64_t>());
        } else if (ph == "C") {
            for (const auto& [key, value] : e.at("args").items()) EXPECT_TRUE(value.is_number()) << key;
        } else {
            ADD_FAILURE() << "unexpected phase " << ph;
        }
    }
    for (std::int64_t tid : used) EXPECT_TRUE(named.contains(tid)) << "tid " << tid << " has no thread_name";
}

json parse_checked(const std::string& text) {
    json doc = json::parse(text);  // throws (fails the test) on invalid JSON
    check_shape(doc);
    return doc;
}

std::map<std::int64_t, std::string> track_names(const json& doc) {
    std::map<std::int64_t, std::string> out;
    for (const json& e : doc.at("traceEvents")) {
        if (e.at("ph") == "M" && e.at("name") == "thread_name") out[e.at("tid")] = e.at("args").at("name");
    }
    return out;
}

/// No two X events of one track overlap; returns the X events per track name.
std::map<std::string, std::vector<json>> expect_no_overlap(const json& doc) {
    const auto names = track_names(doc);
    std::map<std::int64_t, std::vector<json>> by_tid;
    for (const json& e : doc.at("traceEvents")) {
        if (e.at("ph") == "X") by_tid[e.at("tid")].push_back(e);
    }
    std::map<std::string, std::vector<json>> out;
    for (auto& [tid, events] : by_tid) {
        std::sort(events.begin(), events.end(),
                  [](const json& x, const json& y) { return ns(x["ts"]) < ns(y["ts"]); });
        for (std::size_t i = 1; i < events.size(); ++i) {
            EXPECT_GE(ns(events[i]["ts"]), ns(events[i - 1]["ts"]) + ns(events[i - 1]["dur"]))
                << "overlap on track " << names.at(tid) << ": " << events[i - 1].dump() << " then "
                << events[i].dump();
        }
        out[names.at(tid)] = events;
    }
    return out;
}

std::uint64_t sum_bytes(const std::vector<json>& events) {
    std::uint64_t total = 0;
    for (const json& e : events) total += e.at("args").value("bytes", std::uint64_t{0});
    return total;
}

std::vector<json> events_named(const json& doc, std::string_view ph, std::string_view name) {
    std::vector<json> out;
    for (const json& e : doc.at("traceEvents")) {
        if (e.at("ph") == ph && e.at("name") == name) out.push_back(e);
    }
    return out;
}

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// --- a pipeline on the CPU device ----------------------------------------------------------

outcore::tile::PipelineStats run_pipeline(Device& device, std::mt19937_64& rng, std::size_t tiles,
                                          bool measure) {
    constexpr std::uint64_t kSlot = 64 * kKiB;
    outcore::tile::PipelineOptions o;
    o.budget_bytes = 4 * kSlot;
    for (int i = 0; i < 4; ++i) o.slots.push_back({kSlot, "trace.slot"});
    o.upload_staging = {.bytes = kSlot, .count = 3};
    o.download_staging = {.bytes = kSlot, .count = 2};
    o.measure_busy = measure;
    std::vector<std::byte> input(kSlot);
    for (auto& b : input) b = static_cast<std::byte>(rng() & 0xFF);
    std::vector<std::vector<std::byte>> outputs(tiles);
    outcore::tile::Pipeline p(device, o);
    for (std::size_t t = 0; t < tiles; ++t) {
        const outcore::tile::SlotId in{static_cast<std::uint32_t>(t % 2)};
        const outcore::tile::SlotId out{static_cast<std::uint32_t>(2 + t % 2)};
        const std::uint64_t bytes = 1 + rng() % kSlot;
        p.upload(in, 0, bytes,
                 [&input](std::span<std::byte> s) { std::memcpy(s.data(), input.data(), s.size()); });
        p.compute(
            {outcore::tile::reads(in), outcore::tile::writes(out)},
            [&](Queue& q) { q.copy(p.view(in).sub(0, bytes), p.view(out).sub(0, bytes)); }, "blur");
        p.download(out, 0, bytes,
                   [&outputs, t](std::span<const std::byte> s) { outputs[t].assign(s.begin(), s.end()); });
    }
    const outcore::tile::PipelineStats stats = p.finish();
    for (std::size_t t = 0; t < tiles; ++t) {
        EXPECT_TRUE(std::equal(outputs[t].begin(), outputs[t].end(), input.begin())) << "tile " << t;
    }
    return stats;
}

void expect_pipeline_trace(const json& doc, const outcore::tile::PipelineStats& stats) {
    auto tracks = expect_no_overlap(doc);
    ASSERT_TRUE(tracks.contains("upload") && tracks.contains("compute") && tracks.contains("download"));
    EXPECT_EQ(tracks["upload"].size(), stats.upload_count);
    EXPECT_EQ(tracks["compute"].size(), stats.compute_count);
    EXPECT_EQ(tracks["download"].size(), stats.download_count);
    EXPECT_EQ(sum_bytes(tracks["upload"]), stats.bytes_uploaded);
    EXPECT_EQ(sum_bytes(tracks["download"]), stats.bytes_downloaded);
    for (const json& e : tracks["upload"]) {
        EXPECT_EQ(e["cat"], "copy");
        EXPECT_EQ(e["name"], "upload");
        EXPECT_EQ(e["args"]["direction"], "h2d");
    }
    for (const json& e : tracks["download"]) EXPECT_EQ(e["args"]["direction"], "d2h");
    for (const json& e : tracks["compute"]) {
        EXPECT_EQ(e["cat"], "kernel");
        EXPECT_EQ(e["name"], "blur");
    }
    // Every upload here is staged: one fill per upload, on the reader threads' tracks
    // ("read 0", "read 1", ...), and one drain per download on the writers'.
    for (const char* role : {"read", "write"}) {
        std::size_t fills = 0;
        std::uint64_t bytes = 0;
        for (const auto& [name, events] : tracks) {
            if (!name.starts_with(std::string(role) + " ")) continue;
            for (const json& e : events) {
                EXPECT_EQ(e["cat"], "host");
                EXPECT_EQ(e["name"], role);
            }
            fills += events.size();
            bytes += sum_bytes(events);
        }
        const bool read = std::string_view(role) == "read";
        EXPECT_EQ(fills, read ? stats.upload_count : stats.download_count) << role;
        EXPECT_EQ(bytes, read ? stats.bytes_uploaded : stats.bytes_downloaded) << role;
    }
}

/// run_pipeline of `tiles` tiles under a recorder: its statistics and the checked trace.
struct TracedPipeline {
    outcore::tile::PipelineStats stats;
    json doc;
};
TracedPipeline traced_pipeline(std::size_t tiles, bool measure) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    TraceRecorder rec;
    TracedPipeline out;
    {
        ObserverRegistration reg(rec);
        out.stats = run_pipeline(*device, rng, tiles, measure);
    }
    out.doc = parse_checked(rec.to_json());
    expect_pipeline_trace(out.doc, out.stats);
    return out;
}

TEST(Trace, PipelineTracksDoNotOverlapAndBytesAddUp) {
    const json doc = traced_pipeline(40, true).doc;
    // The slots and staging buffers were allocated and freed under the recorder.
    const auto allocs = events_named(doc, "i", "allocate");
    const auto frees = events_named(doc, "i", "free");
    EXPECT_FALSE(allocs.empty());
    EXPECT_EQ(allocs.size(), frees.size());
    for (const json& a : allocs) {
        EXPECT_TRUE(a["args"].contains("tag"));
        EXPECT_EQ(a["cat"], "alloc");
    }
    EXPECT_FALSE(events_named(doc, "C", "resident bytes").empty());
}

TEST(Trace, PipelineIsTracedWithMeasureBusyOff) {
    const outcore::tile::PipelineStats stats = traced_pipeline(12, false).stats;
    EXPECT_EQ(stats.upload_busy_seconds, 0.0);  // the statistics stay as measure_busy says
    EXPECT_EQ(stats.compute_busy_seconds, 0.0);
}

TEST(Trace, NothingIsRecordedWithoutRegistration) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    TraceRecorder rec;
    (void)run_pipeline(*device, rng, 4, false);
    { outcore::Block b = device->allocate({.bytes = kKiB, .tag = "trace.unobserved"}); }
    EXPECT_EQ(rec.event_count(), 0U);
    const json doc = parse_checked(rec.to_json());
    for (const json& e : doc["traceEvents"]) EXPECT_EQ(e["ph"], "M");
    // Registered then unregistered: what happens after is not recorded either.
    { ObserverRegistration reg(rec); }
    { outcore::Block b = device->allocate({.bytes = kKiB, .tag = "trace.unobserved"}); }
    EXPECT_EQ(rec.event_count(), 0U);
}

// --- GEMM --------------------------------------------------------------------------------

TEST(Trace, GemmTracksAndResidentBytesUnderBudget) {
    using outcore::gemm_test::Matrix;
    std::mt19937_64 rng(outcore::test::seed());
    auto device = outcore::cpu::make_cpu_device({.total_memory_bytes = 1024 * kMiB});
    const std::uint64_t m = 150 + rng() % 60, n = 140 + rng() % 60, k = 130 + rng() % 60;
    Matrix a(m, k, outcore::DType::F32, outcore::io::Layout::ColMajor);
    Matrix b(k, n, outcore::DType::F32, outcore::io::Layout::ColMajor);
    Matrix c(m, n, outcore::DType::F32, outcore::io::Layout::ColMajor);
    a.randomize(rng);
    b.randomize(rng);
    c.poison();
    outcore::io::HostMatrix ha = a.host(), hb = b.host(), hc = c.host();
    outcore::ops::GemmOptions o;
    o.type = outcore::DType::F32;
    o.measure_rates = false;
    o.budget_bytes = 1;  // gemm_limits only reads the device here
    const auto problem = outcore::ops::gemm_problem(ha, hb, hc, o);
    const std::uint64_t minimum =
        outcore::tile::gemm_minimum_budget(problem, outcore::ops::gemm_limits(*device, o));
    // A quarter of the operands: many tiles, so all three queues are busy.
    o.budget_bytes = std::max<std::uint64_t>(minimum, (m * k + k * n + m * n) * sizeof(float) / 4);

    TraceRecorder rec;
    outcore::ops::GemmReport r;
    {
        ObserverRegistration reg(rec);
        r = outcore::ops::gemm(*device, ha, hb, hc, o);
        // The counters are read by the recorder's sampler thread whenever it runs, not at
        // each allocation: it may not run at all while the GEMM's slots are live (0.7% of
        // runs on an idle 2-core machine; its only reading then shows 0). A block held
        // across flush_counters() is read for certain.
        outcore::Block held = device->allocate({.bytes = kKiB, .tag = "trace.held"});
        rec.flush_counters();
    }
    const std::vector<double> ref = outcore::gemm_test::reference(a, b, nullptr, o);
    EXPECT_LE(outcore::gemm_test::relative_error(c, ref),
              outcore::gemm_test::error_bound(o.type, o.compute, k));

    const json doc = parse_checked(rec.to_json());
    if (const char* dump = std::getenv("OUTCORE_TRACE_TEST_DUMP")) (void)rec.write(dump);  // to look at it
    auto tracks = expect_no_overlap(doc);
    ASSERT_TRUE(tracks.contains("upload") && tracks.contains("compute") && tracks.contains("download"));
    EXPECT_GT(tracks["compute"].size(), 1U);  // several tiles, or the overlap check proves little
    EXPECT_FALSE(tracks["upload"].empty());
    EXPECT_FALSE(tracks["compute"].empty());
    EXPECT_FALSE(tracks["download"].empty());
    EXPECT_EQ(sum_bytes(tracks["upload"]), r.pipeline.bytes_uploaded);
    EXPECT_EQ(sum_bytes(tracks["download"]), r.pipeline.bytes_downloaded);
    EXPECT_EQ(tracks["compute"].size(), r.pipeline.compute_count);
    for (const json& e : tracks["compute"]) EXPECT_EQ(e["name"], "gemm");
    // Host matrices on the CPU device go up staged: the readers packed every byte.
    std::uint64_t read = 0;
    for (const auto& [name, events] : tracks) {
        if (name.starts_with("read ")) read += sum_bytes(events);
    }
    EXPECT_EQ(read, r.pipeline.bytes_uploaded);

    const auto resident = events_named(doc, "C", "resident bytes");
    ASSERT_FALSE(resident.empty());
    std::uint64_t peak = 0;
    for (const json& e : resident) {
        const std::uint64_t dev = e["args"]["device"];
        EXPECT_LE(dev, o.budget_bytes) << e.dump();
        peak = std::max(peak, dev);
    }
    EXPECT_GT(peak, 0U);  // the counter carries device bytes (at least the held block)
}

// --- swap store ----------------------------------------------------------------------------

#if OUTCORE_WITH_SWAP
TEST(Trace, SwapMovesMatchStoreStats) {
    namespace st = outcore::swap::store_test;
    std::mt19937_64 rng(outcore::test::seed());
    auto device = st::make_device();
    st::TempDir dir;
    TraceRecorder rec;
    outcore::swap::StoreStats stats;
    {
        outcore::swap::TieredStore store(*device, {.device_budget_bytes = 2 * st::kUnit,
                                                   .host_budget_bytes = 3 * st::kUnit,
                                                   .pinned_pool_bytes = 0,
                                                   .unit_bytes = st::kUnit,
                                                   .spill_dir = dir.path(),
                                                   .direct_io = false,
                                                   .wash_queue_units = 0});
        ObserverRegistration reg(rec);
        std::vector<outcore::swap::BlockId> ids;
        std::vector<std::vector<std::byte>> data;
        for (int i = 0; i < 6; ++i) {
            data.push_back(st::random_bytes(rng, st::kUnit));
            ids.push_back(store.put(data.back()));
        }
        for (int round = 0; round < 2; ++round) {
            for (std::size_t i = 0; i < ids.size(); ++i) {
                // Odd objects are written: their device copies are dirty when evicted.
                const auto access = i % 2 == 1 ? outcore::swap::Access::Write : outcore::swap::Access::Read;
                outcore::swap::Pin pin = store.acquire(ids[i], access);
            }
        }
        for (std::size_t i = 0; i < ids.size(); ++i)
            EXPECT_TRUE(st::same_bytes(st::read_all(store, ids[i]), data[i]));
        stats = store.stats();
    }
    const json doc = parse_checked(rec.to_json());
    auto tracks = expect_no_overlap(doc);
    std::uint64_t in_device = 0, in_host = 0, out_device = 0, out_host = 0, clean_device = 0;
    std::uint64_t swap_events = 0;
    for (const json& e : doc["traceEvents"]) {
        if (e.value("cat", "") != "swap") continue;
        ++swap_events;
        EXPECT_EQ(track_names(doc).at(e["tid"]), "swap");
        const std::string name = e["name"], from = e["args"]["from"], to = e["args"]["to"];
        const std::uint64_t bytes = e["args"]["bytes"];
        if (name == "swap_in" && to == "device") in_device += bytes;
        if (name == "swap_in" && to == "host") in_host += bytes;
        if (name == "swap_out" && from == "device") out_device += bytes;
        if (name == "swap_out" && from == "host") out_host += bytes;
        if (name == "evict") {
            EXPECT_EQ(e["ph"], "i");
            EXPECT_FALSE(e["args"]["dirty"].get<bool>());
            if (from == "device") ++clean_device;
        }
        if (name == "swap_out") {
            EXPECT_TRUE(e["args"]["dirty"].get<bool>());
        }
    }
    EXPECT_GT(swap_events, 0U);
    EXPECT_GT(stats.device.swap_in_bytes, 0U);
    EXPECT_GT(stats.device.clean_evictions, 0U);
    EXPECT_GT(stats.device.swap_out_bytes, 0U);
    EXPECT_EQ(in_device, stats.device.swap_in_bytes);
    EXPECT_EQ(in_host, stats.host.swap_in_bytes);
    EXPECT_EQ(out_device, stats.device.swap_out_bytes);
    EXPECT_EQ(out_host, stats.host.swap_out_bytes);
    EXPECT_EQ(clean_device, stats.device.clean_evictions);
}
#endif

// --- bounds and the global API -----------------------------------------------------------------

TEST(Trace, MaxEventsDropsAndCounts) {
    auto device = make_device();
    TraceRecorder rec(TraceOptions{.max_events = 10});
    constexpr int kAllocations = 20;
    {
        ObserverRegistration reg(rec);
        for (int i = 0; i < kAllocations; ++i) {
            outcore::Block b = device->allocate({.bytes = kKiB, .tag = "trace.bounded"});
        }
    }
    rec.flush_counters();
    EXPECT_EQ(rec.event_count(), 10U);
    EXPECT_GE(rec.dropped_events(), 2U * kAllocations - 10U);  // counters are dropped too
    const json doc = parse_checked(rec.to_json());
    EXPECT_EQ(doc["otherData"]["dropped_events"].get<std::uint64_t>(), rec.dropped_events());
    std::uint64_t kept = 0;
    for (const json& e : doc["traceEvents"]) kept += e["ph"] != "M" ? 1 : 0;
    EXPECT_EQ(kept, rec.event_count());
}

TEST(Trace, StartTwiceIsUsageErrorAndStopWritesTheFile) {
    TempDir dir;
    const auto file = dir.path() / "run.trace.json";
    ASSERT_FALSE(outcore::monitor::tracing());
    outcore::monitor::start_trace(file);
    EXPECT_TRUE(outcore::monitor::tracing());
    EXPECT_THROW(outcore::monitor::start_trace(dir.path() / "other.json"), outcore::UsageError);
    auto device = make_device();
    { outcore::Block b = device->allocate({.bytes = kKiB, .tag = "trace.global"}); }
    const std::uint64_t written = outcore::monitor::stop_trace();
    EXPECT_FALSE(outcore::monitor::tracing());
    EXPECT_GE(written, 2U);  // the allocation and its free, at least
    const json doc = parse_checked(read_file(file));
    std::uint64_t events = 0;
    for (const json& e : doc["traceEvents"]) events += e["ph"] != "M" ? 1 : 0;
    EXPECT_EQ(events, written);
    EXPECT_EQ(events_named(doc, "i", "allocate").at(0)["args"]["tag"], "trace.global");
    // Nothing but the trace is left in the folder (the temporary was renamed).
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
    EXPECT_EQ(outcore::monitor::stop_trace(), 0U);  // not tracing: a no-op
}

TEST(Trace, UnwritablePathIsIoErrorAtStart) {
    TempDir dir;
    EXPECT_THROW(outcore::monitor::start_trace(dir.path() / "missing" / "run.json"), outcore::IoError);
    EXPECT_FALSE(outcore::monitor::tracing());
    EXPECT_THROW(outcore::monitor::start_trace(dir.path()), outcore::IoError);  // a directory
    EXPECT_FALSE(outcore::monitor::tracing());
    EXPECT_THROW(outcore::monitor::start_trace(""), outcore::UsageError);
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 0);
}

TEST(Trace, EnvironmentStartsTheTrace) {
    TempDir dir;
    const auto file = dir.path() / "env.trace.json";
    ::unsetenv("OUTCORE_TRACE");
    outcore::monitor::detail::start_trace_from_environment();
    EXPECT_FALSE(outcore::monitor::tracing());
    ::setenv("OUTCORE_TRACE", file.c_str(), 1);
    outcore::monitor::detail::start_trace_from_environment();
    ::unsetenv("OUTCORE_TRACE");
    EXPECT_TRUE(outcore::monitor::tracing());
    (void)outcore::monitor::stop_trace();
    EXPECT_NO_THROW((void)parse_checked(read_file(file)));
}

TEST(Trace, RunningTraceIsWrittenAtExit) {
    TempDir dir;
    const auto file = dir.path() / "exit.trace.json";
    std::fflush(nullptr);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {  // the child: start a trace, allocate, exit without stopping it
        try {
            outcore::monitor::start_trace(file);
            auto device = make_device();
            outcore::Block b = device->allocate({.bytes = kKiB, .tag = "trace.at_exit"});
        } catch (...) {
            std::_Exit(3);
        }
        std::exit(0);  // runs the atexit hook
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);
    const json doc = parse_checked(read_file(file));
    EXPECT_EQ(events_named(doc, "i", "allocate").at(0)["args"]["tag"], "trace.at_exit");
}

TEST(Trace, WriteReplacesAtomically) {
    TempDir dir;
    const auto file = dir.path() / "t.json";
    {
        std::ofstream old(file);
        old << "old contents";
    }
    auto device = make_device();
    TraceRecorder rec;
    {
        ObserverRegistration reg(rec);
        outcore::Block b = device->allocate({.bytes = kKiB, .tag = "with \"quotes\" and \\ and \n"});
    }
    const std::uint64_t n = rec.write(file);
    EXPECT_GE(n, 2U);
    const json doc = parse_checked(read_file(file));
    EXPECT_EQ(events_named(doc, "i", "allocate").at(0)["args"]["tag"], "with \"quotes\" and \\ and \n");
    EXPECT_THROW((void)rec.write(dir.path() / "missing" / "t.json"), outcore::IoError);
}

// --- threads -----------------------------------------------------------------------------------

TEST(TraceThreads, FourThreadsAllocating) {
    auto device = make_device();
    TraceRecorder rec;
    constexpr int kThreads = 4;
    const auto per_thread = static_cast<int>(outcore::test::scaled(200));
    {
        ObserverRegistration reg(rec);
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([&] {
                for (int i = 0; i < per_thread; ++i) {
                    outcore::Block b = device->allocate({.bytes = kKiB, .tag = "trace.thread"});
                }
            });
        }
        // Writing while others record is allowed.
        const std::string mid = rec.to_json();
        EXPECT_TRUE(json::accept(mid));
        for (std::thread& th : threads) th.join();
    }
    const json doc = parse_checked(rec.to_json());
    EXPECT_EQ(events_named(doc, "i", "allocate").size(), static_cast<std::size_t>(kThreads * per_thread));
    EXPECT_EQ(events_named(doc, "i", "free").size(), static_cast<std::size_t>(kThreads * per_thread));
    const auto resident = events_named(doc, "C", "resident bytes");
    ASSERT_FALSE(resident.empty());
    EXPECT_EQ(resident.back()["args"]["device"], 0);  // the last value: everything freed
}

// The pipeline's reader and writer threads report their fills and drains while the
// queues report theirs (run under TSan by scripts/test): each on its own track, adding up.
TEST(TraceThreads, PipelineReadersAndWritersReportBesideTheQueues) {
    (void)traced_pipeline(static_cast<std::size_t>(outcore::test::scaled(60)), true);
}

}  // namespace
