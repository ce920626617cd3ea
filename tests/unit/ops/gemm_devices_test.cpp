// ops::gemm_on_devices on several CPU devices (each its own accounting domain and
// budget, as GPUs of one host would be): results against the float64 reference,
// every element written exactly once, each device's budget held, units handed out
// dynamically, windows over transposed and β ≠ 0 operands, and a device that fails
// mid-run (injected copy fault) leaving a clear error and only correct whole units.
#include "outcore/ops/gemm_devices.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "devices_test_support.hpp"
#include "gemm_test_support.hpp"
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

// Device 1's copies start failing mid-run: the call throws that device's error, the
// others stop, nothing stays allocated, and every element written is correct (whole
// C tiles only; the rest keep their poison).
TEST(GemmDevicesThreads, AFailingDeviceStopsTheRunAndCorruptsNothing) {
    std::mt19937_64 rng(outcore::test::seed());
    int injected_runs = 0;
    for (std::uint64_t nth : {1U, 3U, 8U}) {
        auto good = outcore::cpu::make_cpu_device({.total_memory_bytes = outcore::kGiB, .index = 0});
        auto bad = outcore::test::FaultyDevice::cpu({.total_memory_bytes = outcore::kGiB, .index = 1});
        bad->fail_copy(nth, {.persistent = true});
        std::vector<Device*> devices{good.get(), bad.get()};
        Matrix a(400, 96, DType::F64, Layout::ColMajor), b(96, 400, DType::F64, Layout::ColMajor),
            c(400, 400, DType::F64, Layout::ColMajor);
        a.randomize(rng);
        b.randomize(rng);
        c.poison();
        const outcore::io::HostMatrix ha = a.host(), hb = b.host();
        CountingSink sink(c);
        GemmOptions o;
        o.type = DType::F64;
        o.budget_bytes = 512 * 1024;
        o.measure_rates = false;
        bool threw = false;
        try {
            (void)outcore::ops::gemm_on_devices(devices, ha, hb, sink, o);
        } catch (const outcore::BackendError& e) {
            threw = true;
            EXPECT_NE(std::string(e.what()).find("injected"), std::string::npos) << e.what();
        }
        // Device 1 fails if it took a unit before device 0 finished them all (it nearly
        // always does); if it took none, the run must simply be complete.
        EXPECT_EQ(threw, bad->injected() > 0) << "copy fault at " << nth;
        injected_runs += threw ? 1 : 0;
        const std::vector<double> want = outcore::gemm_test::reference(a, b, nullptr, o);
        for (std::uint64_t j = 0; j < 400; ++j) {
            for (std::uint64_t i = 0; i < 400; ++i) {
                ASSERT_LE(sink.writes(i, j), 1U);
                if (!threw) {
                    ASSERT_EQ(sink.writes(i, j), 1U) << "a complete run writes everything";
                }
                if (sink.writes(i, j) == 1) {
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

}  // namespace
