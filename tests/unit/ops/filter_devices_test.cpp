// ops::filter_on_devices on several CPU devices: every filter kind, edge mode and
// pixel type equals the single-device result bit for bit (bands carry real
// neighbour rows as their halo), every output row is written exactly once, each
// device's budget holds, an in-order sink is refused, and a failing device leaves a
// clear error and only whole correct rows.
#include "outcore/ops/filter_devices.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "devices_test_support.hpp"
#include "filter_test_support.hpp"
#include "outcore/backends/cpu.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/io/image.hpp"
#include "support/faulty_device.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::Device;
using outcore::DType;
using outcore::io::HostImage;
using outcore::io::ImageInfo;

/// A sink over host memory that counts the writes of every row.
class CountingImage final : public outcore::io::ImageSink {
public:
    CountingImage(std::vector<std::byte>& data, const ImageInfo& info, std::uint64_t stride)
        : host_(data.data(), info, stride), writes_(info.rows) {}
    [[nodiscard]] const ImageInfo& info() const noexcept override { return host_.info(); }
    [[nodiscard]] std::uint32_t writes(std::uint64_t row) const { return writes_[row].load(); }

private:
    void do_write_rows(std::uint64_t row0, std::uint64_t rows, const std::byte* src,
                       std::uint64_t stride) override {
        host_.write_rows(row0, rows, src, stride);
        for (std::uint64_t r = row0; r < row0 + rows; ++r) writes_[r].fetch_add(1);
    }

    HostImage host_;
    std::vector<std::atomic<std::uint32_t>> writes_;
};

using outcore::devices_test::cpu_devices;
using outcore::devices_test::pointers;

TEST(FilterDevices, EveryKindEqualsTheSingleDeviceResultBitForBit) {
    std::mt19937_64 rng(outcore::test::seed());
    const outcore::ops::FilterKind kinds[] = {outcore::ops::FilterKind::Gaussian,
                                              outcore::ops::FilterKind::Box, outcore::ops::FilterKind::Sobel,
                                              outcore::ops::FilterKind::Conv};
    for (const outcore::ops::FilterKind kind : kinds) {
        for (const outcore::ops::EdgeMode edge : outcore::filter_test::kEdgeModes) {
            const outcore::ops::FilterSpec spec = outcore::filter_test::random_spec(kind, edge, rng);
            ImageInfo info;
            info.rows = 40 + rng() % 200;
            info.cols = 30 + rng() % 150;
            info.channels = 1 + static_cast<std::uint32_t>(rng() % 3);
            info.dtype = outcore::filter_test::kPixelTypes[rng() % 3];
            const std::uint64_t stride = info.row_bytes();
            const std::vector<std::byte> in_data =
                outcore::filter_test::random_elements(info.dtype, info.rows * info.cols * info.channels, rng);
            const HostImage in(static_cast<const void*>(in_data.data()), info, stride);
            outcore::ops::FilterOptions o;
            o.budget_bytes = 64 * 1024 + rng() % (256 * 1024);
            o.strips_only = rng() % 2 == 0;
            try {
                (void)outcore::ops::plan_filter(*cpu_devices(1)[0], spec, info, o);
            } catch (const outcore::UsageError&) {
                o.budget_bytes = 4 * outcore::kMiB;  // below this filter's minimum: give it room
            }

            auto single = cpu_devices(1);
            std::vector<std::byte> want(info.rows * stride);
            HostImage want_img(want.data(), info, stride);
            (void)outcore::ops::filter(*single[0], spec, in, want_img, o);

            const std::size_t count = 2 + rng() % 3;
            auto owned = cpu_devices(count);
            const std::vector<Device*> devices = pointers(owned);
            std::vector<std::byte> got(info.rows * stride, std::byte{0xCD});
            CountingImage sink(got, info, stride);
            const outcore::ops::MultiFilterReport r =
                outcore::ops::filter_on_devices(devices, spec, in, sink, o);
            SCOPED_TRACE(testing::Message()
                         << "kind " << static_cast<int>(kind) << " edge " << static_cast<int>(edge)
                         << " halo " << spec.halo() << ", " << info.rows << "x" << info.cols << "x"
                         << info.channels << " " << outcore::to_string(info.dtype) << ", " << count
                         << " devices, " << r.units << " bands");
            EXPECT_EQ(got, want);
            for (std::uint64_t row = 0; row < info.rows; ++row)
                ASSERT_EQ(sink.writes(row), 1U) << "row " << row;
            std::uint64_t units = 0;
            for (const outcore::ops::DeviceShare& s : r.devices) {
                units += s.units;
                if (s.units > 0) {
                    EXPECT_LE(s.peak_device_bytes, s.budget_bytes) << s.device;
                }
            }
            EXPECT_EQ(units, r.units);
        }
    }
}

TEST(FilterDevices, AnInOrderSinkIsRefusedOnSeveralDevices) {
    auto owned = cpu_devices(2);
    std::vector<Device*> devices{owned[0].get(), owned[1].get()};
    ImageInfo info;
    info.rows = 16;
    info.cols = 16;
    std::vector<std::byte> data(info.rows * info.row_bytes());
    HostImage img(data.data(), info, info.row_bytes());
    EXPECT_THROW(
        (void)outcore::ops::filter_on_devices(devices, outcore::ops::FilterSpec::box(1), img, img, {},
                                              /*in_order_sink=*/true),
        outcore::UsageError);
}

TEST(FilterDevicesThreads, AFailingDeviceStopsTheRunAndWritesOnlyCorrectRows) {
    std::mt19937_64 rng(outcore::test::seed());
    ImageInfo info;
    info.rows = 300;
    info.cols = 120;
    info.dtype = DType::F32;
    const std::uint64_t stride = info.row_bytes();
    const std::vector<std::byte> in_data = outcore::filter_test::random_elements(DType::F32, 300 * 120, rng);
    const HostImage in(static_cast<const void*>(in_data.data()), info, stride);
    const outcore::ops::FilterSpec spec = outcore::ops::FilterSpec::gaussian(2.0);
    outcore::ops::FilterOptions o;
    o.budget_bytes = 96 * 1024;
    std::vector<std::byte> want(info.rows * stride);
    HostImage want_img(want.data(), info, stride);
    (void)outcore::ops::filter(*cpu_devices(1)[0], spec, in, want_img, o);
    int injected_runs = 0;
    for (std::uint64_t nth : {1U, 4U, 9U}) {
        auto good = outcore::cpu::make_cpu_device({.total_memory_bytes = outcore::kGiB, .index = 0});
        auto bad = outcore::test::FaultyDevice::cpu({.total_memory_bytes = outcore::kGiB, .index = 1});
        bad->fail_copy(nth, {.persistent = true});
        std::vector<Device*> devices{good.get(), bad.get()};
        std::vector<std::byte> got(info.rows * stride, std::byte{0xCD});
        CountingImage sink(got, info, stride);
        bool threw = false;
        try {
            (void)outcore::ops::filter_on_devices(devices, spec, in, sink, o);
        } catch (const outcore::BackendError& e) {
            threw = true;
            EXPECT_NE(std::string(e.what()).find("injected"), std::string::npos) << e.what();
        }
        EXPECT_EQ(threw, bad->injected() > 0) << "copy fault at " << nth;
        injected_runs += threw ? 1 : 0;
        for (std::uint64_t row = 0; row < info.rows; ++row) {
            ASSERT_LE(sink.writes(row), 1U);
            const bool written = sink.writes(row) == 1;
            if (!threw) {
                ASSERT_TRUE(written) << "a complete run writes every row";
            }
            const std::byte* g = got.data() + row * stride;
            if (written) {
                ASSERT_EQ(std::memcmp(g, want.data() + row * stride, stride), 0) << "row " << row;
            } else {
                ASSERT_TRUE(std::all_of(g, g + stride, [](std::byte b) { return b == std::byte{0xCD}; }))
                    << "row " << row << " changed without a write";
            }
        }
        bad->disarm();
    }
    EXPECT_GT(injected_runs, 0) << "no run reached the fault";
}

}  // namespace
