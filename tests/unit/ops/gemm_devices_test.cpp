// ops::gemm_on_devices on several CPU devices (each its own accounting domain and
// budget, as GPUs of one host would be): results against the float64 reference,
// every element written exactly once, each device's budget held, units handed out
// dynamically, windows over transposed and β ≠ 0 operands, and a device that fails
// mid-run (injected copy fault) leaving a clear error and only correct whole units;
// a split panel kept resident on each device that works on it (uploaded once per
// visit, C bit for bit the single-device result). The panel hand-out policy itself:
// panel_queue_test.cpp.
#include "outcore/ops/gemm_devices.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "devices_test_support.hpp"
#include "gemm_test_support.hpp"
#include "ops/unit_scheduler.hpp"
#include "outcore/backends/cpu.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "support/faulty_device.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::Device;
using outcore::DType;
using outcore::kMiB;
using outcore::gemm_test::Matrix;
using outcore::io::Layout;
using outcore::ops::GemmOptions;

/// A sink over a Matrix that counts the writes of every element.
class CountingSink final : public outcore::io::MatrixSink {
public:
    explicit CountingSink(Matrix& m) : m_(m), host_(m.host()), writes_(m.rows * m.cols) {}
    [[nodiscard]] std::uint64_t rows() const noexcept override { return m_.rows; }
    [[nodiscard]] std::uint64_t cols() const noexcept override { return m_.cols; }
    [[nodiscard]] DType dtype() const noexcept override { return m_.type; }
    [[nodiscard]] std::uint32_t writes(std::uint64_t i, std::uint64_t j) const {
        return writes_[i + j * m_.rows].load();
    }

private:
    void do_write(std::uint64_t row0, std::uint64_t col0, std::uint64_t rows, std::uint64_t cols,
                  const std::byte* src, std::uint64_t ld) override {
        host_.write(row0, col0, rows, cols, src, ld);
        for (std::uint64_t j = col0; j < col0 + cols; ++j)
            for (std::uint64_t i = row0; i < row0 + rows; ++i) writes_[i + j * m_.rows].fetch_add(1);
    }

    Matrix& m_;
    outcore::io::HostMatrix host_;
    std::vector<std::atomic<std::uint32_t>> writes_;
};

using outcore::devices_test::cpu_devices;
using outcore::devices_test::pointers;
using outcore::devices_test::within_a_minute;

/// f64 options with forced tiles and no rate probe (the tests that pin a plan's shape).
GemmOptions forced_f64(std::uint64_t budget, outcore::tile::GemmSchedule schedule, std::uint64_t tile_m,
                       std::uint64_t tile_n, std::uint64_t tile_k) {
    GemmOptions o;
    o.type = DType::F64;
    o.budget_bytes = budget;
    o.measure_rates = false;
    o.schedule = schedule;
    o.tile_m = tile_m;
    o.tile_n = tile_n;
    o.tile_k = tile_k;
    return o;
}

TEST(GemmDevices, MatchesTheReferenceWritesEachElementOnceAndHoldsEveryBudget) {
    std::mt19937_64 rng(outcore::test::seed());
    for (int trial = 0; trial < 6; ++trial) {
        const std::size_t count = 1 + rng() % 4;
        auto owned = cpu_devices(count);
        GemmOptions o;
        o.type = DType::F64;
        o.trans_a = rng() % 2 == 0;
        o.trans_b = rng() % 2 == 0;
        o.alpha = 1.5;
        o.beta = rng() % 2 == 0 ? 0.0 : -0.5;
        o.budget_bytes = (1 + rng() % 4) * 256 * 1024;
        o.measure_rates = false;
        const std::uint64_t m = 100 + rng() % 300, n = 100 + rng() % 300, k = 50 + rng() % 200;
        Matrix a(o.trans_a ? k : m, o.trans_a ? m : k, DType::F64, Layout::ColMajor);
        Matrix b(o.trans_b ? n : k, o.trans_b ? k : n, DType::F64, Layout::RowMajor);
        Matrix c0(m, n, DType::F64, Layout::ColMajor);
        Matrix c(m, n, DType::F64, Layout::ColMajor);
        a.randomize(rng);
        b.randomize(rng);
        c0.randomize(rng);
        c.poison();
        outcore::io::HostMatrix ha = a.host(), hb = b.host(), hc0 = c0.host();
        // Column-major operands offered as device-readable memory go through the
        // windows' direct() offsets (the CPU backend reads host memory directly).
        const bool direct = rng() % 2 == 0;
        ha.set_device_readable(direct);
        hc0.set_device_readable(direct);
        o.c_in = o.beta != 0.0 ? &hc0 : nullptr;
        CountingSink sink(c);
        std::atomic<int> progress_calls{0};
        o.progress = [&](double) { progress_calls.fetch_add(1); };
        const outcore::ops::MultiGemmReport r =
            outcore::ops::gemm_on_devices(pointers(owned), ha, hb, sink, o);
        SCOPED_TRACE(testing::Message()
                     << count << " devices, " << m << "x" << n << "x" << k << " ta " << o.trans_a << " tb "
                     << o.trans_b << " beta " << o.beta << ", " << r.units << " units");
        const std::vector<double> want =
            outcore::gemm_test::reference(a, b, o.beta != 0.0 ? &c0 : nullptr, o);
        EXPECT_LT(outcore::gemm_test::relative_error(c, want),
                  outcore::gemm_test::error_bound(DType::F64, {}, k));
        for (std::uint64_t j = 0; j < n; ++j)
            for (std::uint64_t i = 0; i < m; ++i)
                ASSERT_EQ(sink.writes(i, j), 1U) << "(" << i << ", " << j << ")";
        std::uint64_t units = 0;
        for (const outcore::ops::DeviceShare& s : r.devices) {
            units += s.units;
            if (s.units > 0) {
                EXPECT_LE(s.peak_device_bytes, o.budget_bytes) << s.device;
            }
        }
        EXPECT_EQ(units, r.units);
        // Units: at least two per device where C has that many tiles along the cut.
        EXPECT_GE(r.units, std::min<std::uint64_t>(2 * count, r.plan.c_grid().count()));
        EXPECT_EQ(progress_calls.load(), static_cast<int>(r.units));
        for (const auto& d : owned) outcore::gemm_test::expect_nothing_held(*d);
    }
}

// Units go to whichever device asks next: with enough units every device gets some.
TEST(GemmDevices, EveryDeviceTakesUnits) {
    std::mt19937_64 rng(outcore::test::seed());
    auto owned = cpu_devices(3);
    Matrix a(600, 64, DType::F32, Layout::ColMajor), b(64, 600, DType::F32, Layout::ColMajor),
        c(600, 600, DType::F32, Layout::ColMajor);
    a.randomize(rng);
    b.randomize(rng);
    const outcore::io::HostMatrix ha = a.host(), hb = b.host();
    outcore::io::HostMatrix hc = c.host();
    GemmOptions o;
    o.budget_bytes = 256 * 1024;
    o.measure_rates = false;
    const outcore::ops::MultiGemmReport r = outcore::ops::gemm_on_devices(pointers(owned), ha, hb, hc, o);
    ASSERT_GE(r.units, 6U);
    for (const outcore::ops::DeviceShare& s : r.devices) EXPECT_GT(s.units, 0U) << s.device;
}

TEST(GemmDevices, ADeviceListedTwiceOrNoneIsAUsageError) {
    auto owned = cpu_devices(1);
    Matrix a(8, 8, DType::F32, Layout::ColMajor), b(8, 8, DType::F32, Layout::ColMajor),
        c(8, 8, DType::F32, Layout::ColMajor);
    const outcore::io::HostMatrix ha = a.host(), hb = b.host();
    outcore::io::HostMatrix hc = c.host();
    std::vector<Device*> twice{owned[0].get(), owned[0].get()};
    EXPECT_THROW((void)outcore::ops::gemm_on_devices(twice, ha, hb, hc, {}), outcore::UsageError);
    EXPECT_THROW((void)outcore::ops::gemm_on_devices({}, ha, hb, hc, {}), outcore::UsageError);
}

// Devices share a panel's tiles run by run, so an A panel in chunks is refused up front
// rather than by every device's plan (GemmOptions::panel_chunk_k); 0 is the default here.
TEST(GemmDevices, AnAPanelInChunksIsForOneDeviceOnly) {
    auto owned = cpu_devices(2);
    std::vector<Device*> devices{owned[0].get(), owned[1].get()};
    Matrix a(64, 64, DType::F32, Layout::ColMajor), b(64, 64, DType::F32, Layout::ColMajor),
        c(64, 64, DType::F32, Layout::ColMajor);
    const outcore::io::HostMatrix ha = a.host(), hb = b.host();
    outcore::io::HostMatrix hc = c.host();
    outcore::ops::GemmOptions o;
    o.budget_bytes = 64 * kMiB;
    o.panel_chunk_k = 16;
    EXPECT_THROW((void)outcore::ops::gemm_on_devices(devices, ha, hb, hc, o), outcore::UsageError);
    o.panel_chunk_k = 0;
    EXPECT_EQ(outcore::ops::gemm_on_devices(devices, ha, hb, hc, o).plan.a_chunk_k, 0U);
}

// Device 1's copies start failing mid-run: the call throws that device's error, the
// others stop, nothing stays allocated, and every element written is correct (whole
// C tiles only; the rest keep their poison). With every operand and C in
// device-readable memory no host thread of the failing device ever sees the failure
// (no staging buffer waits for a failed copy): the run must still end.
TEST(GemmDevicesThreads, AFailingDeviceStopsTheRunAndCorruptsNothing) {
    std::mt19937_64 rng(outcore::test::seed());
    for (const bool direct : {false, true}) {
        int injected_runs = 0;
        for (std::uint64_t nth : {1U, 3U, 8U, 200U}) {
            SCOPED_TRACE(testing::Message() << (direct ? "direct" : "staged") << " C, copy fault at " << nth);
            auto good = outcore::cpu::make_cpu_device({.total_memory_bytes = outcore::kGiB, .index = 0});
            auto bad = outcore::test::FaultyDevice::cpu({.total_memory_bytes = outcore::kGiB, .index = 1});
            bad->fail_copy(nth, {.persistent = true});
            std::vector<Device*> devices{good.get(), bad.get()};
            Matrix a(400, 96, DType::F64, Layout::ColMajor), b(96, 400, DType::F64, Layout::ColMajor),
                c(400, 400, DType::F64, Layout::ColMajor);
            a.randomize(rng);
            b.randomize(rng);
            c.poison();
            outcore::io::HostMatrix ha = a.host(), hb = b.host(), hc = c.host();
            ha.set_device_readable(direct);
            hb.set_device_readable(direct);
            hc.set_device_readable(direct);
            CountingSink counting(c);
            outcore::io::MatrixSink& sink = direct ? static_cast<outcore::io::MatrixSink&>(hc) : counting;
            // Small tiles: units of several C tiles, so a device waits between units.
            GemmOptions o = forced_f64(512 * 1024, outcore::tile::GemmSchedule::APanelResident, 40, 40, 32);
            bool threw = false;
            within_a_minute([&] {
                try {
                    (void)outcore::ops::gemm_on_devices(devices, ha, hb, sink, o);
                } catch (const outcore::BackendError& e) {
                    threw = true;
                    EXPECT_NE(std::string(e.what()).find("injected"), std::string::npos) << e.what();
                }
            });
            // Device 1 fails if it took a unit before device 0 finished them all (it
            // always does: every device claims a unit before any claims a second).
            EXPECT_EQ(threw, bad->injected() > 0);
            injected_runs += threw ? 1 : 0;
            const std::vector<double> want = outcore::gemm_test::reference(a, b, nullptr, o);
            for (std::uint64_t j = 0; j < 400; ++j) {
                for (std::uint64_t i = 0; i < 400; ++i) {
                    // A direct sink is written by the device: no writes to count, but
                    // every element is still either untouched or right.
                    const std::uint32_t writes =
                        direct ? (std::isnan(c.get(i, j)) ? 0 : 1) : counting.writes(i, j);
                    ASSERT_LE(writes, 1U);
                    if (!threw) {
                        ASSERT_EQ(writes, 1U) << "a complete run writes everything";
                    }
                    if (writes == 1) {
                        ASSERT_NEAR(c.get(i, j), want[i + j * 400], 1e-12) << "(" << i << ", " << j << ")";
                    } else {
                        ASSERT_TRUE(std::isnan(c.get(i, j))) << "an element changed without a write";
                    }
                }
            }
            bad->disarm();
            outcore::gemm_test::expect_nothing_held(*good);
            outcore::gemm_test::expect_nothing_held(*bad);
        }
        EXPECT_GT(injected_runs, 0) << "no run reached the fault";
    }
}

// ops::gemm fed its tiles run by run (GemmOptions::next_tiles), with A, B and C in
// device-readable memory: a failure only the device's queues see (a copy fault, or a
// progress callback throwing on the download queue's host thread) ends the call with
// that failure instead of leaving it waiting for tiles that will never be written.
TEST(GemmDevicesClaimed, AFailureOnlyTheQueuesSeeEndsTheCall) {
    std::mt19937_64 rng(outcore::test::seed());
    Matrix a(80, 96, DType::F64, Layout::ColMajor), b(96, 640, DType::F64, Layout::ColMajor),
        c(80, 640, DType::F64, Layout::ColMajor);
    a.randomize(rng);
    b.randomize(rng);
    outcore::io::HostMatrix ha = a.host(), hb = b.host(), hc = c.host();
    ha.set_device_readable(true);
    hb.set_device_readable(true);
    hc.set_device_readable(true);
    GemmOptions o = forced_f64(4 * kMiB, outcore::tile::GemmSchedule::APanelResident, 40, 40, 32);
    // 2 × 16 tiles, handed out four at a time: every run but the first waits for the
    // device to catch up (more tiles than the plan's C slots are described).
    auto hand_out = [](std::uint64_t& next) {
        return [&next]() -> std::pair<std::uint64_t, std::uint64_t> {
            if (next >= 32) return {0, 0};
            next += 4;
            return {next - 4, next};
        };
    };
    for (const std::uint64_t nth : {1U, 50U, 400U}) {
        SCOPED_TRACE(testing::Message() << "copy fault at " << nth);
        auto dev = outcore::test::FaultyDevice::cpu({.total_memory_bytes = outcore::kGiB});
        dev->fail_copy(nth, {.persistent = true});
        c.poison();
        std::uint64_t next = 0;
        GemmOptions claimed = o;
        claimed.next_tiles = hand_out(next);
        within_a_minute([&] {
            EXPECT_THROW((void)outcore::ops::gemm(*dev, ha, hb, hc, claimed), outcore::BackendError);
        });
        EXPECT_GT(dev->injected(), 0U);
        dev->disarm();
        outcore::gemm_test::expect_nothing_held(*dev);
    }
    {
        auto dev = outcore::gemm_test::make_device();
        std::uint64_t next = 0;
        GemmOptions claimed = o;
        claimed.next_tiles = hand_out(next);
        claimed.progress = [](double) { throw std::runtime_error("progress refused"); };
        within_a_minute([&] {
            try {
                (void)outcore::ops::gemm(*dev, ha, hb, hc, claimed);
                ADD_FAILURE() << "the progress callback's exception was lost";
            } catch (const std::runtime_error& e) {
                EXPECT_STREQ(e.what(), "progress refused");
            }
        });
        outcore::gemm_test::expect_nothing_held(*dev);
    }
}

// Tiles handed out in any order are computed exactly as a plain call computes them,
// each reported to tile_written once; tiles never handed out are left alone; a range
// past the grid or one repeating a tile is a UsageError.
TEST(GemmDevicesClaimed, RunsTheTilesHandedOutAndReportsEachWritten) {
    std::mt19937_64 rng(outcore::test::seed());
    Matrix a(80, 96, DType::F64, Layout::ColMajor), b(96, 640, DType::F64, Layout::ColMajor);
    a.randomize(rng);
    b.randomize(rng);
    const outcore::io::HostMatrix ha = a.host(), hb = b.host();
    GemmOptions o = forced_f64(4 * kMiB, outcore::tile::GemmSchedule::APanelResident, 40, 40, 32);
    o.writer_threads = 3;
    auto dev = outcore::gemm_test::make_device();
    Matrix whole(80, 640, DType::F64, Layout::ColMajor);
    outcore::io::HostMatrix hw = whole.host();
    (void)outcore::ops::gemm(*dev, ha, hb, hw, o);

    // 2 × 16 tiles, row-major: tile t is C rows 40·(t / 16), columns 40·(t % 16).
    const std::vector<std::pair<std::uint64_t, std::uint64_t>> runs = {{20, 26}, {3, 5}, {16, 17}, {30, 32}};
    std::set<std::uint64_t> handed;
    for (const auto& [begin, end] : runs)
        for (std::uint64_t t = begin; t < end; ++t) handed.insert(t);
    Matrix c(80, 640, DType::F64, Layout::ColMajor);
    c.poison();
    outcore::io::HostMatrix hc = c.host();
    std::size_t next = 0;
    std::mutex mutex;
    std::multiset<std::uint64_t> written;
    GemmOptions claimed = o;
    claimed.next_tiles = [&]() -> std::pair<std::uint64_t, std::uint64_t> {
        return next < runs.size() ? runs[next++] : std::pair<std::uint64_t, std::uint64_t>{0, 0};
    };
    claimed.tile_written = [&](std::uint64_t t) {
        std::lock_guard lock(mutex);
        written.insert(t);
    };
    (void)outcore::ops::gemm(*dev, ha, hb, hc, claimed);
    EXPECT_EQ(written, (std::multiset<std::uint64_t>(handed.begin(), handed.end())));
    for (std::uint64_t j = 0; j < 640; ++j) {
        for (std::uint64_t i = 0; i < 80; ++i) {
            const std::uint64_t t = (i / 40) * 16 + j / 40;
            if (handed.count(t) != 0) {
                ASSERT_EQ(c.get(i, j), whole.get(i, j)) << "(" << i << ", " << j << ")";
            } else {
                ASSERT_TRUE(std::isnan(c.get(i, j))) << "tile " << t << " was never handed out";
            }
        }
    }

    for (const auto& bad : std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>>{
             {{0, 4}, {30, 33}}, {{0, 4}, {8, 12}, {3, 5}}}) {
        std::size_t i = 0;
        GemmOptions wrong = o;
        wrong.next_tiles = [&]() -> std::pair<std::uint64_t, std::uint64_t> {
            return i < bad.size() ? bad[i++] : std::pair<std::uint64_t, std::uint64_t>{0, 0};
        };
        EXPECT_THROW((void)outcore::ops::gemm(*dev, ha, hb, hc, wrong), outcore::UsageError);
    }
    outcore::gemm_test::expect_nothing_held(*dev);
}

/// A CountingSink whose writes of some C tiles take a while, and which notes the
/// threads it is written from.
class SlowSink final : public outcore::io::MatrixSink {
public:
    SlowSink(Matrix& m, std::uint64_t slow_every_col)
        : counting_(m), m_(m), slow_every_col_(slow_every_col) {}
    [[nodiscard]] std::uint64_t rows() const noexcept override { return m_.rows; }
    [[nodiscard]] std::uint64_t cols() const noexcept override { return m_.cols; }
    [[nodiscard]] DType dtype() const noexcept override { return m_.type; }
    [[nodiscard]] std::uint32_t writes(std::uint64_t i, std::uint64_t j) const {
        return counting_.writes(i, j);
    }
    [[nodiscard]] std::set<std::thread::id> threads() const {
        std::lock_guard lock(mutex_);
        return threads_;
    }

private:
    void do_write(std::uint64_t row0, std::uint64_t col0, std::uint64_t rows, std::uint64_t cols,
                  const std::byte* src, std::uint64_t ld) override {
        {
            std::lock_guard lock(mutex_);
            threads_.insert(std::this_thread::get_id());
        }
        if (col0 % slow_every_col_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(30));
        counting_.write(row0, col0, rows, cols, src, ld);
    }

    CountingSink counting_;
    Matrix& m_;
    std::uint64_t slow_every_col_;
    mutable std::mutex mutex_;
    std::set<std::thread::id> threads_;
};

// Progress is called once per unit only after every tile of that unit is written,
// though drains finish out of order (several writer threads, each unit's first tile
// slow to write), and on the devices' own threads, never on a pipeline thread.
TEST(GemmDevicesReuse, ProgressComesFromTheDeviceThreadsOnceAUnitIsWritten) {
    std::mt19937_64 rng(outcore::test::seed());
    // One A panel of 16 tiles, split for 2 devices into 4 units of 4 tiles: unit u is
    // C columns [256·u, 256·u + 256).
    Matrix a(64, 64, DType::F64, Layout::ColMajor), b(64, 1024, DType::F64, Layout::ColMajor),
        c(64, 1024, DType::F64, Layout::ColMajor);
    a.randomize(rng);
    b.randomize(rng);
    c.poison();
    const outcore::io::HostMatrix ha = a.host(), hb = b.host();
    SlowSink sink(c, 256);
    GemmOptions o = forced_f64(4 * kMiB, outcore::tile::GemmSchedule::APanelResident, 64, 64, 64);
    o.writer_threads = 4;
    std::mutex mutex;
    std::set<std::thread::id> progress_threads;
    int calls = 0;
    o.progress = [&](double f) {
        std::lock_guard lock(mutex);
        ++calls;
        progress_threads.insert(std::this_thread::get_id());
        std::uint64_t whole_units = 0;
        for (std::uint64_t u = 0; u < 4; ++u) {
            bool all = true;
            for (std::uint64_t j = 256 * u; j < 256 * (u + 1) && all; ++j)
                for (std::uint64_t i = 0; i < 64 && all; ++i) all = sink.writes(i, j) == 1;
            whole_units += all ? 1 : 0;
        }
        EXPECT_GE(whole_units, static_cast<std::uint64_t>(std::llround(f * 4))) << "a unit reported early";
    };
    auto owned = cpu_devices(2);
    const outcore::ops::MultiGemmReport r = outcore::ops::gemm_on_devices(pointers(owned), ha, hb, sink, o);
    ASSERT_EQ(r.units, 4U);
    EXPECT_EQ(calls, 4);
    for (const std::thread::id& t : sink.threads())
        EXPECT_EQ(progress_threads.count(t), 0U) << "progress ran on a writer thread";
}

// One panel cut into units (fewer panels than two per device): each device that works
// on it uploads the panel once, not once per unit — one device taking every unit moves
// exactly the single-device bytes — and C is the single-device result bit for bit.
TEST(GemmDevicesReuse, ASplitPanelIsUploadedOncePerDeviceThatWorksOnIt) {
    std::mt19937_64 rng(outcore::test::seed());
    for (const auto schedule :
         {outcore::tile::GemmSchedule::APanelResident, outcore::tile::GemmSchedule::BPanelResident}) {
        const bool a_panel = schedule == outcore::tile::GemmSchedule::APanelResident;
        // A single panel of 8 tiles: 64 rows of C (A panel) or 64 columns (B panel).
        const std::uint64_t m = a_panel ? 64 : 512, n = a_panel ? 512 : 64, k = 256;
        Matrix a(m, k, DType::F64, Layout::ColMajor), b(k, n, DType::F64, Layout::ColMajor);
        a.randomize(rng);
        b.randomize(rng);
        const outcore::io::HostMatrix ha = a.host(), hb = b.host();
        const GemmOptions o = forced_f64(4 * kMiB, schedule, 64, 64, 64);
        Matrix single(m, n, DType::F64, Layout::ColMajor);
        single.poison();
        outcore::io::HostMatrix hs = single.host();
        auto one = cpu_devices(1);
        const outcore::ops::GemmReport s = outcore::ops::gemm(*one[0], ha, hb, hs, o);
        const std::uint64_t panel_bytes = (a_panel ? m : n) * k * sizeof(double);
        for (const std::size_t count : {1U, 2U, 3U}) {
            auto owned = cpu_devices(count);
            Matrix c(m, n, DType::F64, Layout::ColMajor);
            c.poison();
            CountingSink sink(c);
            const outcore::ops::MultiGemmReport r =
                outcore::ops::gemm_on_devices(pointers(owned), ha, hb, sink, o);
            SCOPED_TRACE(testing::Message() << (a_panel ? "A" : "B") << " panel, " << count << " devices, "
                                            << r.units << " units");
            ASSERT_EQ(r.plan.c_grid().count(), 8U);
            ASSERT_GE(r.units, 2 * count) << "the panel is split";
            // Without reuse every unit uploads the panel: (units - 1) more than one device.
            EXPECT_LE(r.bytes_moved, s.bytes_moved + (count - 1) * panel_bytes);
            if (count == 1) {
                EXPECT_EQ(r.bytes_moved, s.bytes_moved);
            }
            std::uint64_t runs = 0;
            for (const outcore::ops::DeviceShare& d : r.devices) {
                runs += d.runs;
                EXPECT_LE(d.runs, d.units) << d.device;
                EXPECT_LE(d.peak_device_bytes, o.budget_bytes) << d.device;
            }
            EXPECT_LE(runs, count);
            EXPECT_EQ(r.bytes_moved, s.bytes_moved + (runs - 1) * panel_bytes) << "one upload per visit";
            EXPECT_TRUE(c.storage == single.storage) << "C differs from the single-device result";
            for (std::uint64_t j = 0; j < n; ++j)
                for (std::uint64_t i = 0; i < m; ++i)
                    ASSERT_EQ(sink.writes(i, j), 1U) << "(" << i << ", " << j << ")";
            for (const auto& d : owned) outcore::gemm_test::expect_nothing_held(*d);
        }
    }
}

// Whatever the plan (planner's choice or a forced schedule), several devices compute
// C bit for bit as one device does, and move no byte beyond one panel upload per
// extra visit of a panel (square-tile plans: exactly the single-device bytes).
TEST(GemmDevicesReuse, EqualsTheSingleDeviceResultBitForBit) {
    std::mt19937_64 rng(outcore::test::seed());
    using outcore::tile::GemmSchedule;
    const std::optional<GemmSchedule> schedules[] = {
        std::nullopt, GemmSchedule::SquareC, GemmSchedule::APanelResident, GemmSchedule::BPanelResident};
    for (int trial = 0; trial < 8; ++trial) {
        const std::size_t count = 1 + rng() % 4;
        GemmOptions o;
        o.type = rng() % 2 == 0 ? DType::F64 : DType::F32;
        o.trans_a = rng() % 2 == 0;
        o.trans_b = rng() % 2 == 0;
        o.beta = rng() % 2 == 0 ? 0.0 : 0.75;
        o.budget_bytes = (1 + rng() % 4) * 192 * 1024;
        o.measure_rates = false;
        o.schedule = schedules[trial % 4];
        const std::uint64_t m = 60 + rng() % 300, n = 60 + rng() % 300, k = 40 + rng() % 200;
        Matrix a(o.trans_a ? k : m, o.trans_a ? m : k, o.type, Layout::ColMajor);
        Matrix b(o.trans_b ? n : k, o.trans_b ? k : n, o.type, Layout::RowMajor);
        Matrix c0(m, n, o.type, Layout::ColMajor);
        a.randomize(rng);
        b.randomize(rng);
        c0.randomize(rng);
        outcore::io::HostMatrix ha = a.host(), hb = b.host(), hc0 = c0.host();
        ha.set_device_readable(rng() % 2 == 0);
        o.c_in = o.beta != 0.0 ? &hc0 : nullptr;
        Matrix single(m, n, o.type, Layout::ColMajor), c(m, n, o.type, Layout::ColMajor);
        single.poison();
        c.poison();
        outcore::io::HostMatrix hs = single.host(), hc = c.host();
        auto owned = cpu_devices(count);
        GemmOptions one_call = o;  // what gemm_on_devices promises to equal
        one_call.one_call_per_chunk = true;
        const outcore::ops::GemmReport s = outcore::ops::gemm(*owned[0], ha, hb, hs, one_call);
        const outcore::ops::MultiGemmReport r = outcore::ops::gemm_on_devices(pointers(owned), ha, hb, hc, o);
        SCOPED_TRACE(testing::Message()
                     << count << " devices, " << m << "x" << n << "x" << k << " "
                     << to_string(r.plan.schedule) << " tiles " << r.plan.tile_m << "x" << r.plan.tile_n
                     << "x" << r.plan.tile_k << ", " << r.units << " units");
        EXPECT_TRUE(c.storage == single.storage) << "C differs from the single-device result";
        const bool a_panel = r.plan.schedule == GemmSchedule::APanelResident;
        const bool b_panel = r.plan.schedule == GemmSchedule::BPanelResident;
        const std::uint64_t panels = a_panel ? r.plan.c_grid().tile_rows() : r.plan.c_grid().tile_cols();
        std::uint64_t runs = 0;
        for (const outcore::ops::DeviceShare& d : r.devices) runs += d.runs;
        EXPECT_LE(runs, r.units);
        if (a_panel || b_panel) {
            const std::uint64_t w = outcore::dtype_bytes(o.type);
            const std::uint64_t panel_bytes = (a_panel ? r.plan.tile_m : r.plan.tile_n) * k * w;
            ASSERT_GE(runs, panels);
            EXPECT_GE(r.bytes_moved, s.bytes_moved);
            EXPECT_LE(r.bytes_moved, s.bytes_moved + (runs - panels) * panel_bytes);
        } else {
            EXPECT_EQ(r.bytes_moved, s.bytes_moved);
        }
        for (const auto& d : owned) outcore::gemm_test::expect_nothing_held(*d);
    }
}

// DeviceCaches passed to gemm_on_devices keep each device's slot memory and queues
// across calls: a second call gives the same C bit for bit and allocates no more device
// memory; the caches hold it until they go, and caches made for other devices (or the
// same ones in another order) are refused.
TEST(GemmDevicesReuse, CachesKeptAcrossCallsGiveTheSameResult) {
    std::mt19937_64 rng(outcore::test::seed());
    GemmOptions o;
    o.type = DType::F32;
    o.budget_bytes = 256 * 1024;
    o.measure_rates = false;
    const std::uint64_t m = 300, n = 260, k = 170;
    Matrix a(m, k, o.type, Layout::ColMajor);
    Matrix b(k, n, o.type, Layout::ColMajor);
    a.randomize(rng);
    b.randomize(rng);
    outcore::io::HostMatrix ha = a.host(), hb = b.host();
    auto owned = cpu_devices(3);
    const std::vector<Device*> devices = pointers(owned);
    Matrix first(m, n, o.type, Layout::ColMajor), second(m, n, o.type, Layout::ColMajor);
    first.poison();
    second.poison();
    outcore::io::HostMatrix h1 = first.host(), h2 = second.host();
    {
        outcore::ops::DeviceCaches caches(devices);
        (void)outcore::ops::gemm_on_devices(devices, ha, hb, h1, o, &caches);
        std::vector<std::uint64_t> held;
        for (const auto& d : owned) held.push_back(d->allocated_bytes());
        EXPECT_GT(std::accumulate(held.begin(), held.end(), std::uint64_t{0}), 0U) << "the caches hold slots";
        (void)outcore::ops::gemm_on_devices(devices, ha, hb, h2, o, &caches);
        for (std::size_t d = 0; d < owned.size(); ++d) {
            EXPECT_LE(owned[d]->allocated_bytes(), held[d]) << owned[d]->info().id();
        }
        EXPECT_TRUE(first.storage == second.storage);
        const std::vector<Device*> reversed{devices[2], devices[1], devices[0]};
        const std::vector<Device*> fewer{devices[0], devices[1]};
        Matrix c(m, n, o.type, Layout::ColMajor);
        outcore::io::HostMatrix hc = c.host();
        EXPECT_THROW((void)outcore::ops::gemm_on_devices(reversed, ha, hb, hc, o, &caches),
                     outcore::UsageError);
        EXPECT_THROW((void)outcore::ops::gemm_on_devices(fewer, ha, hb, hc, o, &caches), outcore::UsageError);
    }
    for (const auto& d : owned) outcore::gemm_test::expect_nothing_held(*d);
}

// Tiles where one device's run would split GEMMs (the first chunk in k-pieces, the
// last tile's last chunk in column parts): windows of a multi-device run are not the
// problem, so its runs make one call per chunk, and C equals a single-device run with
// one_call_per_chunk bit for bit, whichever device took which panel.
TEST(GemmDevicesReuse, TilesThatOneRunWouldSplitStayBitExact) {
    std::mt19937_64 rng(outcore::test::seed());
    using outcore::tile::GemmSchedule;
    for (const GemmSchedule schedule : {GemmSchedule::APanelResident, GemmSchedule::SquareC}) {
        GemmOptions o;
        o.type = DType::F32;
        o.budget_bytes = 16 * kMiB;
        o.measure_rates = false;
        o.schedule = schedule;
        o.tile_m = 128, o.tile_n = 256, o.tile_k = 1024;  // pieces of 256, drain parts of 128
        Matrix a(384, 1024, DType::F32, Layout::ColMajor), b(1024, 768, DType::F32, Layout::ColMajor);
        a.randomize(rng);
        b.randomize(rng);
        const outcore::io::HostMatrix ha = a.host(), hb = b.host();
        Matrix split(384, 768, DType::F32, Layout::ColMajor), whole = split, multi = split;
        outcore::io::HostMatrix hsplit = split.host(), hwhole = whole.host(), hmulti = multi.host();
        auto owned = cpu_devices(3);
        const outcore::ops::GemmReport r = outcore::ops::gemm(*owned[0], ha, hb, hsplit, o);
        EXPECT_EQ(r.drain_parts, 2U) << "one run drains its last tile in parts";
        GemmOptions one_call = o;
        one_call.one_call_per_chunk = true;
        const outcore::ops::GemmReport w = outcore::ops::gemm(*owned[0], ha, hb, hwhole, one_call);
        EXPECT_EQ(w.drain_parts, 1U);
        EXPECT_EQ(w.pipeline.compute_count, w.plan.kernel_calls);
        EXPECT_GT(r.pipeline.compute_count, w.pipeline.compute_count);  // pieces and parts
        (void)outcore::ops::gemm_on_devices(pointers(owned), ha, hb, hmulti, o);
        EXPECT_TRUE(multi.storage == whole.storage) << to_string(schedule);
        for (const auto& d : owned) outcore::gemm_test::expect_nothing_held(*d);
    }
}

// A device whose budget cannot hold the first device's tiles runs each unit as its own
// GEMM, planned for its budget (one run per unit), next to a device that keeps its
// panels resident; C is still right, written once, and each budget held.
TEST(GemmDevicesReuse, ADeviceThatCannotHoldThePlansTilesRunsPlainUnits) {
    std::mt19937_64 rng(outcore::test::seed());
    std::vector<std::unique_ptr<Device>> owned;
    owned.push_back(outcore::cpu::make_cpu_device({.total_memory_bytes = 2 * kMiB, .index = 0}));
    owned.push_back(outcore::cpu::make_cpu_device({.total_memory_bytes = 160 * 1024, .index = 1}));
    Matrix a(512, 256, DType::F64, Layout::ColMajor), b(256, 512, DType::F64, Layout::ColMajor),
        c(512, 512, DType::F64, Layout::ColMajor);
    a.randomize(rng);
    b.randomize(rng);
    c.poison();
    const outcore::io::HostMatrix ha = a.host(), hb = b.host();
    CountingSink sink(c);
    GemmOptions o;
    o.type = DType::F64;
    o.measure_rates = false;  // budget 0: each device's own working set
    const outcore::ops::MultiGemmReport r = outcore::ops::gemm_on_devices(pointers(owned), ha, hb, sink, o);
    SCOPED_TRACE(testing::Message() << to_string(r.plan.schedule) << " tiles " << r.plan.tile_m << "x"
                                    << r.plan.tile_n << "x" << r.plan.tile_k << ", " << r.units << " units");
    const outcore::ops::DeviceShare& small = r.devices[1];
    ASSERT_GT(small.units, 0U) << "the small device took no unit";
    EXPECT_EQ(small.runs, small.units);
    EXPECT_LE(small.peak_device_bytes, small.budget_bytes);
    EXPECT_LE(r.devices[0].peak_device_bytes, r.devices[0].budget_bytes);
    // What makes the second device run plain units: the plan's tiles, forced on a
    // window of the first (largest) panel as a resident run would be, do not fit its
    // budget — while they fit the first device's.
    {
        const bool b_panel = r.plan.schedule == outcore::tile::GemmSchedule::BPanelResident;
        const std::uint64_t rows = b_panel ? 512 : std::min<std::uint64_t>(r.plan.tile_m, 512);
        const std::uint64_t cols = b_panel ? std::min<std::uint64_t>(r.plan.tile_n, 512) : 512;
        Matrix wa(rows, 256, DType::F64, Layout::ColMajor), wb(256, cols, DType::F64, Layout::ColMajor),
            wc(rows, cols, DType::F64, Layout::ColMajor);
        const outcore::io::HostMatrix hwa = wa.host(), hwb = wb.host();
        outcore::io::HostMatrix hwc = wc.host();
        GemmOptions forced = o;
        forced.schedule = r.plan.schedule;
        forced.tile_m = r.plan.tile_m;
        forced.tile_n = r.plan.tile_n;
        forced.tile_k = r.plan.tile_k;
        forced.group = r.plan.group;
        EXPECT_NO_THROW((void)outcore::ops::plan_gemm(*owned[0], hwa, hwb, hwc, forced));
        EXPECT_THROW((void)outcore::ops::plan_gemm(*owned[1], hwa, hwb, hwc, forced), outcore::UsageError)
            << "the small device could hold the plan's tiles: the fallback is not exercised";
    }
    const std::vector<double> want = outcore::gemm_test::reference(a, b, nullptr, o);
    EXPECT_LT(outcore::gemm_test::relative_error(c, want),
              outcore::gemm_test::error_bound(DType::F64, {}, 256));
    for (std::uint64_t j = 0; j < 512; ++j)
        for (std::uint64_t i = 0; i < 512; ++i)
            ASSERT_EQ(sink.writes(i, j), 1U) << "(" << i << ", " << j << ")";
    for (const auto& d : owned) outcore::gemm_test::expect_nothing_held(*d);
}

}  // namespace
