// The CUDA backend's registration: with a GPU it lists devices whose DeviceInfo is
// coherent with the card; without one (CI) it says why, refuses to open, and the
// default device falls back to the CPU. These run everywhere the backend is built.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "cuda_test_support.hpp"
#include "outcore/backends/cuda.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"

namespace {

using outcore::cuda::test::cuda_probe;

TEST(CudaBackend, IsRegisteredAsAGpuBackendBeforeTheCpu) {
    const auto& entries = outcore::registered_backends();
    std::size_t cuda = entries.size(), cpu = entries.size();
    for (std::size_t i = 0; i < entries.size(); ++i) {
        if (entries[i].name == "cuda") cuda = i;
        if (entries[i].name == "cpu") cpu = i;
    }
    ASSERT_LT(cuda, entries.size());
    EXPECT_TRUE(entries[cuda].is_gpu);
    EXPECT_LT(cuda, cpu);
}

TEST(CudaBackend, ProbeListsDevicesOrSaysWhyNot) {
    const outcore::BackendProbe probe = cuda_probe();
    EXPECT_EQ(probe.backend, "cuda");
    if (!probe.available) {
        EXPECT_EQ(probe.reason.rfind("no CUDA device: ", 0), 0U) << probe.reason;
        EXPECT_GT(probe.reason.size(), std::string("no CUDA device: ").size());
        EXPECT_TRUE(probe.devices.empty());
        return;
    }
    ASSERT_FALSE(probe.devices.empty());
    for (std::size_t i = 0; i < probe.devices.size(); ++i) {
        const outcore::DeviceInfo& info = probe.devices[i];
        EXPECT_EQ(info.backend, "cuda");
        EXPECT_EQ(info.index, i);
        EXPECT_FALSE(info.name.empty());
        EXPECT_GT(info.total_memory_bytes, 0U);
        EXPECT_GT(info.recommended_working_set_bytes, 0U);
        EXPECT_LE(info.recommended_working_set_bytes +
                      outcore::cuda::default_reserve_bytes(info.total_memory_bytes),
                  info.total_memory_bytes)
            << "the working set leaves the reserve out";
        EXPECT_EQ(info.min_offset_alignment, 256U);
        EXPECT_EQ(info.max_inline_bytes, 4096U);
        EXPECT_EQ(info.max_allocation_bytes, info.total_memory_bytes);
    }
}

TEST(CudaBackend, WithoutADeviceOpeningIsAUsageErrorThatSaysWhy) {
    const outcore::BackendProbe probe = cuda_probe();
    if (probe.available) GTEST_SKIP() << "a CUDA device is present";
    try {
        (void)outcore::open_device("cuda");
        ADD_FAILURE() << "opened a CUDA device that the probe did not find";
    } catch (const outcore::UsageError& e) {
        EXPECT_NE(std::string(e.what()).find(probe.reason), std::string::npos) << e.what();
    }
    EXPECT_THROW((void)outcore::cuda::make_cuda_device(), outcore::BackendError);
}

TEST(CudaBackend, DefaultDeviceIsTheGpuWhenThereIsOne) {
    if (const char* env = std::getenv("OUTCORE_BACKEND"); env != nullptr && *env != '\0') {
        GTEST_SKIP() << "OUTCORE_BACKEND is set";
    }
    const bool gpu = cuda_probe().available;
    const auto dev = outcore::open_device();
    EXPECT_EQ(dev->info().backend, gpu ? "cuda" : "cpu");
}

TEST(CudaBackend, DefaultReserveIsFivePercentButAtLeastHalfAGiB) {
    EXPECT_EQ(outcore::cuda::default_reserve_bytes(4 * outcore::kGiB), 512 * outcore::kMiB);
    EXPECT_EQ(outcore::cuda::default_reserve_bytes(100 * outcore::kGiB), 5 * outcore::kGiB);
    EXPECT_EQ(outcore::cuda::default_reserve_bytes(0), 512 * outcore::kMiB);
}

}  // namespace
