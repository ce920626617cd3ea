// devices_test_support.hpp — several CPU devices for the multi-device tests: separate
// accounting domains (cpu:0, cpu:1, ...) over the same memory, as GPUs of a host.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <utility>
#include <vector>

#include "outcore/backends/cpu.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/device.hpp"

namespace outcore::devices_test {

/// cpu:0 .. cpu:n-1, 1 GiB each.
inline std::vector<std::unique_ptr<Device>> cpu_devices(std::size_t n) {
    std::vector<std::unique_ptr<Device>> out;
    for (std::size_t i = 0; i < n; ++i) {
        out.push_back(
            cpu::make_cpu_device({.total_memory_bytes = kGiB, .index = static_cast<std::uint32_t>(i)}));
    }
    return out;
}

/// The devices as the pointers gemm_on_devices / filter_on_devices take.
inline std::vector<Device*> pointers(const std::vector<std::unique_ptr<Device>>& owned) {
    std::vector<Device*> out;
    for (const auto& d : owned) out.push_back(d.get());
    return out;
}

/// Runs `fn` on another thread; a call that has not returned after a minute is a hang:
/// the process aborts (a hung test would otherwise stall the whole suite silently).
template <typename F>
auto within_a_minute(F&& fn) {
    auto future = std::async(std::launch::async, std::forward<F>(fn));
    if (future.wait_for(std::chrono::minutes(1)) != std::future_status::ready) {
        std::fprintf(stderr, "FATAL: the call did not return within a minute (a hang)\n");
        std::abort();
    }
    return future.get();
}

}  // namespace outcore::devices_test
