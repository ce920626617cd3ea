// Tests of device-timed queue operations (outcore/monitor/device_time.hpp) without a
// GPU: the conversion from device milliseconds to steady-clock nanoseconds, and the
// DeviceOpLog over a fake stamp source whose clock the test sets — ops are reported
// in order, only once their stamps are done, with the device's times, abandoned ops
// are dropped, every stamp goes back to the source, and the events reach a
// TraceRecorder's JSON on the queue's track. Also the device-timed registry and the
// per-thread op names. *Threads suites run under TSan.
#include "outcore/monitor/device_time.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "outcore/core/error.hpp"
#include "outcore/monitor/trace.hpp"
#include "support/op_collector.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::monitor::ClockAnchor;
using outcore::monitor::device_to_steady_ns;
using outcore::monitor::DeviceOpLog;
using outcore::monitor::ObserverRegistration;
using outcore::monitor::OpEvent;
using outcore::monitor::OpKind;
using outcore::monitor::StampSource;

constexpr double kNsPerMs = 1e6;

/// A device clock the test drives: each stamp has a device time (ms) and a done flag.
class FakeStamps final : public StampSource {
public:
    Stamp make(double device_ms, bool done = false) {
        std::lock_guard lock(mutex_);
        const Stamp s = next_++;
        stamps_[s] = {device_ms, done};
        live_.insert(s);
        return s;
    }
    void finish(Stamp s) {
        std::lock_guard lock(mutex_);
        stamps_.at(s).done = true;
    }
    void make_unmeasurable(Stamp s) {
        std::lock_guard lock(mutex_);
        stamps_.at(s).measurable = false;
    }
    bool done(Stamp s) noexcept override {
        std::lock_guard lock(mutex_);
        return stamps_.at(s).done;
    }
    bool elapsed_ms(Stamp from, Stamp to, double& ms) noexcept override {
        std::lock_guard lock(mutex_);
        if (!stamps_.at(from).measurable || !stamps_.at(to).measurable) return false;
        ms = stamps_.at(to).ms - stamps_.at(from).ms;
        return true;
    }
    void release(Stamp s) noexcept override {
        std::lock_guard lock(mutex_);
        if (live_.erase(s) == 0) ++double_releases_;
    }
    std::size_t live() {
        std::lock_guard lock(mutex_);
        return live_.size();
    }
    std::size_t double_releases() {
        std::lock_guard lock(mutex_);
        return double_releases_;
    }

private:
    struct State {
        double ms = 0;
        bool done = false;
        bool measurable = true;
    };
    std::mutex mutex_;
    Stamp next_ = 1;
    std::map<Stamp, State> stamps_;
    std::set<Stamp> live_;
    std::size_t double_releases_ = 0;
};

using Collector = outcore::test::OpCollector;

OpEvent copy_event(std::uint64_t bytes) {
    return OpEvent{
        .kind = OpKind::Upload, .queue = "upload", .name = "upload", .bytes = bytes, .device_id = 7};
}

TEST(DeviceTime, ConvertsMillisecondsAfterTheAnchorToSteadyNanoseconds) {
    const ClockAnchor at{.before_ns = 1'000'000, .after_ns = 1'004'000};
    EXPECT_EQ(at.midpoint_ns(), 1'002'000);
    EXPECT_EQ(at.uncertainty_ns(), 2'000);
    EXPECT_EQ(device_to_steady_ns(at, 0.0), at.midpoint_ns());
    EXPECT_EQ(device_to_steady_ns(at, 1.5), at.midpoint_ns() + 1'500'000);
    EXPECT_EQ(device_to_steady_ns(at, -0.25), at.midpoint_ns() - 250'000);
    // cudaEventElapsedTime's resolution is about half a microsecond: sub-ns parts round.
    EXPECT_EQ(device_to_steady_ns(at, 0.0000004), at.midpoint_ns());
    EXPECT_EQ(device_to_steady_ns(at, 0.0000006), at.midpoint_ns() + 1);
    EXPECT_EQ(device_to_steady_ns(at, std::numeric_limits<double>::quiet_NaN()), at.midpoint_ns());

    std::mt19937_64 rng(outcore::test::seed());
    std::uniform_real_distribution<double> ms(-1000.0, 1000.0);
    for (int i = 0; i < 1000; ++i) {
        const double m = ms(rng);
        const std::int64_t t = device_to_steady_ns(at, m);
        EXPECT_LE(std::abs(static_cast<double>(t - at.midpoint_ns()) - m * kNsPerMs), 0.5 + 1e-6) << m;
    }
}

TEST(DeviceTime, ReportsDoneOpsInOrderWithTheDeviceTimes) {
    FakeStamps stamps;
    Collector collector;
    const ObserverRegistration reg(collector);
    {
        DeviceOpLog log(stamps);
        EXPECT_FALSE(log.has_anchor());
        EXPECT_THROW((void)log.add(copy_event(1), stamps.make(0), stamps.make(0)), outcore::UsageError);
        const ClockAnchor at{.before_ns = 10'000'000, .after_ns = 10'000'100};
        log.set_anchor(stamps.make(100.0, true), at);  // the device passed 100 ms at at.midpoint
        ASSERT_TRUE(log.has_anchor());
        EXPECT_EQ(log.anchor_ns(), at.midpoint_ns());

        // Three ops: [101, 102.5) ms, [103, 103.25) ms, [104, 110) ms on the device.
        const auto b0 = stamps.make(101.0), e0 = stamps.make(102.5);
        const auto b1 = stamps.make(103.0), e1 = stamps.make(103.25);
        const auto b2 = stamps.make(104.0), e2 = stamps.make(110.0);
        auto op0 = log.add(copy_event(10), b0, e0);
        auto op1 = log.add(
            OpEvent{.kind = OpKind::Kernel, .queue = "compute", .name = "gemm", .device_id = 7}, b1, e1);
        auto op2 = log.add(copy_event(30), b2, e2);
        EXPECT_EQ(log.pending(), 3U);

        // Not issued yet: a stamp that was never recorded must not count as done.
        stamps.finish(b0);
        stamps.finish(e0);
        EXPECT_EQ(log.poll(), 0U);
        op0->issued();
        op1->issued();
        op2->issued();
        EXPECT_EQ(log.poll(), 1U);  // op1's end is not done: it and op2 wait
        stamps.finish(b2);
        stamps.finish(e2);
        EXPECT_EQ(log.poll(), 0U) << "op2 is done but op1 before it is not: order is kept";
        stamps.finish(b1);
        stamps.finish(e1);
        EXPECT_EQ(log.poll(), 2U);
        EXPECT_EQ(log.pending(), 0U);

        const auto seen = collector.seen();
        ASSERT_EQ(seen.size(), 3U);
        const std::int64_t base = at.midpoint_ns();
        EXPECT_EQ(seen[0].begin_ns, base + 1'000'000);
        EXPECT_EQ(seen[0].end_ns, base + 2'500'000);
        EXPECT_EQ(seen[0].bytes, 10U);
        EXPECT_EQ(seen[0].queue, "upload");
        EXPECT_EQ(seen[1].kind, OpKind::Kernel);
        EXPECT_EQ(seen[1].name, "gemm");
        EXPECT_EQ(seen[1].begin_ns, base + 3'000'000);
        EXPECT_EQ(seen[1].end_ns, base + 3'250'000);
        EXPECT_EQ(seen[2].begin_ns, base + 4'000'000);
        EXPECT_EQ(seen[2].end_ns, base + 10'000'000);
        for (const auto& s : seen) EXPECT_EQ(s.device_id, 7U);
    }
    EXPECT_EQ(stamps.live(), 0U) << "every stamp, the anchor's included, goes back to the source";
    EXPECT_EQ(stamps.double_releases(), 0U);
}

TEST(DeviceTime, DropsAbandonedAndUnmeasurableOpsAndReleasesEverything) {
    FakeStamps stamps;
    Collector collector;
    const ObserverRegistration reg(collector);
    {
        DeviceOpLog log(stamps);
        log.set_anchor(stamps.make(0.0, true), ClockAnchor{.before_ns = 0, .after_ns = 0});
        auto skipped = log.add(copy_event(1), stamps.make(1.0), stamps.make(2.0));
        const auto b = stamps.make(3.0, true), e = stamps.make(4.0, true);
        auto broken = log.add(copy_event(2), b, e);
        auto kept = log.add(copy_event(3), stamps.make(5.0, true), stamps.make(6.0, true));
        skipped->abandon();  // never ran (a failed queue skipped it): its stamps never complete
        stamps.make_unmeasurable(e);
        broken->issued();
        kept->issued();
        kept->abandon();  // issued first: abandon does nothing
        EXPECT_EQ(log.poll(), 1U);
        EXPECT_EQ(log.pending(), 0U);
        const auto seen = collector.seen();
        ASSERT_EQ(seen.size(), 1U);
        EXPECT_EQ(seen.back().bytes, 3U);
        for (const auto& s : seen) EXPECT_NE(s.bytes, 2U) << "an op the device cannot measure is dropped";
        // A fresh anchor: later ops use it, earlier ones keep theirs.
        log.set_anchor(stamps.make(1000.0, true),
                       ClockAnchor{.before_ns = 5'000'000'000, .after_ns = 5'000'000'000});
        auto late = log.add(copy_event(4), stamps.make(1001.0, true), stamps.make(1002.0, true));
        late->issued();
        EXPECT_EQ(log.poll(), 1U);
        EXPECT_EQ(collector.seen().back().begin_ns, 5'001'000'000);
        // Pending at destruction: released, not reported.
        auto never = log.add(copy_event(5), stamps.make(1003.0), stamps.make(1004.0));
        never->issued();
        EXPECT_EQ(log.pending(), 1U);
    }
    for (const auto& s : collector.seen()) EXPECT_NE(s.bytes, 5U);
    EXPECT_EQ(stamps.live(), 0U);
    EXPECT_EQ(stamps.double_releases(), 0U);
}

TEST(DeviceTime, ReportsNothingWhileNoObserverIsRegistered) {
    FakeStamps stamps;
    DeviceOpLog log(stamps);
    log.set_anchor(stamps.make(0.0, true), ClockAnchor{});
    auto op = log.add(copy_event(1), stamps.make(1.0, true), stamps.make(2.0, true));
    op->issued();
    Collector late;
    EXPECT_EQ(log.poll(), 1U);  // handled (and its stamps released) ...
    const ObserverRegistration reg(late);
    EXPECT_TRUE(late.seen().empty());  // ... but reported to no one
    EXPECT_EQ(stamps.live(), 1U);      // the anchor only
}

TEST(DeviceTime, TheTraceShowsDeviceTimedOpsOnTheQueuesTrack) {
    FakeStamps stamps;
    outcore::monitor::TraceRecorder recorder;
    {
        const ObserverRegistration reg(recorder);
        DeviceOpLog log(stamps);
        const std::int64_t now = outcore::monitor::now_ns();
        log.set_anchor(stamps.make(50.0, true), ClockAnchor{.before_ns = now, .after_ns = now});
        auto op = log.add(copy_event(4096), stamps.make(50.5, true), stamps.make(50.75, true));
        op->issued();
        ASSERT_EQ(log.poll(), 1U);
    }
    const nlohmann::json trace = nlohmann::json::parse(recorder.to_json());
    int found = 0;
    for (const auto& e : trace.at("traceEvents")) {
        if (e.at("ph") != "X" || e.value("cat", "") != "copy") continue;
        ++found;
        EXPECT_EQ(e.at("name"), "upload");
        EXPECT_EQ(e.at("args").at("bytes"), 4096);
        EXPECT_NEAR(e.at("dur").get<double>(), 250.0, 1e-3);  // µs
    }
    EXPECT_EQ(found, 1);
}

TEST(DeviceTime, MarksDevicesAndNamesOpsPerThread) {
    constexpr std::uint64_t kId = 0xDE71CE'0000ULL;
    EXPECT_FALSE(outcore::monitor::device_timed(kId));
    outcore::monitor::set_device_timed(kId);
    outcore::monitor::set_device_timed(kId);
    EXPECT_TRUE(outcore::monitor::device_timed(kId));
    EXPECT_FALSE(outcore::monitor::device_timed(kId + 1));

    using outcore::monitor::current_op_name;
    using outcore::monitor::op_scope_open;
    EXPECT_FALSE(op_scope_open());
    EXPECT_EQ(current_op_name(), "");
    {
        const outcore::monitor::OpNameScope outer("gemm");
        EXPECT_TRUE(op_scope_open());
        EXPECT_EQ(current_op_name(), "gemm");
        {
            const outcore::monitor::OpNameScope inner("");  // claimed, unnamed (a kernel: "compute")
            EXPECT_TRUE(op_scope_open());
            EXPECT_EQ(current_op_name(), "");
        }
        EXPECT_EQ(current_op_name(), "gemm");
        std::thread other([] {
            EXPECT_FALSE(op_scope_open());
            EXPECT_EQ(current_op_name(), "");
        });
        other.join();
    }
    EXPECT_FALSE(op_scope_open());
    EXPECT_EQ(current_op_name(), "");
}

TEST(DeviceTimeThreads, OpsAddedOnOneThreadAndIssuedOnAnotherAreReportedOnce) {
    FakeStamps stamps;
    Collector collector;
    const ObserverRegistration reg(collector);
    const auto n = static_cast<std::uint64_t>(outcore::test::scaled(2000));
    {
        DeviceOpLog log(stamps);
        log.set_anchor(stamps.make(0.0, true), ClockAnchor{});
        std::mutex mutex;
        std::vector<std::shared_ptr<outcore::monitor::TimedOp>> queue;
        std::vector<std::pair<StampSource::Stamp, StampSource::Stamp>> pairs;
        std::atomic<bool> submitted{false};
        std::thread worker([&] {  // the queue's worker: issues ops, the device finishes them
            std::size_t next = 0;
            for (;;) {
                std::shared_ptr<outcore::monitor::TimedOp> op;
                std::pair<StampSource::Stamp, StampSource::Stamp> p;
                {
                    std::lock_guard lock(mutex);
                    if (next < queue.size()) {
                        op = queue[next];
                        p = pairs[next];
                        ++next;
                    } else if (submitted.load()) {
                        break;
                    }
                }
                if (!op) {
                    std::this_thread::yield();
                    continue;
                }
                op->issued();
                stamps.finish(p.first);
                stamps.finish(p.second);
            }
        });
        for (std::uint64_t i = 0; i < n; ++i) {
            const auto b = stamps.make(static_cast<double>(2 * i + 1));
            const auto e = stamps.make(static_cast<double>(2 * i + 2));
            auto op = log.add(copy_event(i), b, e);
            {
                std::lock_guard lock(mutex);
                queue.push_back(op);
                pairs.emplace_back(b, e);
            }
            (void)log.poll();
        }
        submitted.store(true);
        worker.join();
        (void)log.poll();
        EXPECT_EQ(log.pending(), 0U);
    }
    const auto seen = collector.seen();
    ASSERT_EQ(seen.size(), n);
    for (std::uint64_t i = 0; i < n; ++i) {
        EXPECT_EQ(seen[i].bytes, i);
        EXPECT_EQ(seen[i].end_ns - seen[i].begin_ns, 1'000'000);
    }
    EXPECT_EQ(stamps.live(), 0U);
}

}  // namespace
