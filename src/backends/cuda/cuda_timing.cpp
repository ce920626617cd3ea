#include "cuda_timing.hpp"

#include <cstdint>

#include "cuda_check.hpp"

namespace outcore::cuda {

bool TimingEvents::done(Stamp stamp) noexcept {
    const cudaError_t rc = cudaEventQuery(reinterpret_cast<cudaEvent_t>(stamp));
    if (rc == cudaSuccess) return true;
    (void)cudaGetLastError();  // cudaErrorNotReady, or an error wait()/synchronize report
    return false;
}

bool TimingEvents::elapsed_ms(Stamp from, Stamp to, double& ms) noexcept {
    float elapsed = 0;
    const cudaError_t rc = cudaEventElapsedTime(&elapsed, reinterpret_cast<cudaEvent_t>(from),
                                                reinterpret_cast<cudaEvent_t>(to));
    if (rc != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    ms = static_cast<double>(elapsed);
    return true;
}

void TimingEvents::release(Stamp stamp) noexcept { pool_.release(reinterpret_cast<cudaEvent_t>(stamp)); }

monitor::ClockAnchor take_anchor(cudaEvent_t event, cudaStream_t idle_stream, int tries) {
    // The event keeps only its last record, so the last window is the one returned: try
    // again while the window is wide (the thread was descheduled, the driver was busy).
    constexpr std::int64_t kNarrowNs = 20'000;
    monitor::ClockAnchor at{};
    for (int i = 0; i < tries; ++i) {
        at.before_ns = monitor::now_ns();
        OUTCORE_CUDA_CHECK(cudaEventRecord(event, idle_stream));
        OUTCORE_CUDA_CHECK(cudaEventSynchronize(event));
        at.after_ns = monitor::now_ns();
        if (at.after_ns - at.before_ns <= kNarrowNs) break;
    }
    return at;
}

}  // namespace outcore::cuda
