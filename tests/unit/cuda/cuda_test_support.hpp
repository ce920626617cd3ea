// cuda_test_support.hpp — what the CUDA backend's tests share: finding out whether a
// GPU is present, and a fixture that skips the test where none is.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "outcore/device/device.hpp"
#include "outcore/device/registry.hpp"

namespace outcore::cuda::test {

/// The CUDA backend's probe (it is compiled in whenever these tests are).
inline BackendProbe cuda_probe() {
    for (BackendProbe& p : probe_backends()) {
        if (p.backend == "cuda") return p;
    }
    ADD_FAILURE() << "the CUDA backend is not registered";
    return {};
}

/// Opens cuda:0 for each test, or skips the test where the backend found no GPU.
class CudaTest : public ::testing::Test {
protected:
    void SetUp() override {
        const BackendProbe probe = cuda_probe();
        if (!probe.available) GTEST_SKIP() << "CUDA unavailable: " << probe.reason;
        dev_ = open_device("cuda:0");
        ASSERT_NE(dev_, nullptr);
    }
    Device& dev() { return *dev_; }

    std::unique_ptr<Device> dev_;
};

}  // namespace outcore::cuda::test
