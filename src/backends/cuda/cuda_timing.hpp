// cuda_timing.hpp — CUDA events as device timestamps for traced queue operations
// (private to the CUDA backend; see outcore/monitor/device_time.hpp and docs/tracing.md).
//
//   TimingEvents stamps(ordinal);                  // one per traced queue
//   cudaEvent_t e = stamps.acquire();              // timing-enabled, pooled
//   monitor::ClockAnchor at = take_anchor(e, idle_stream);
//
// Events are made once with cudaEventCreateWithFlags(cudaEventDefault) (timing on, as
// cudaEventElapsedTime needs) and reused; none is created per operation once the pool
// has grown to the number of operations in flight.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda_device.hpp"
#include "outcore/monitor/device_time.hpp"

namespace outcore::cuda {

/// A pool of timing-enabled events of one device, and the StampSource over them.
class TimingEvents final : public monitor::StampSource {
public:
    explicit TimingEvents(int ordinal) noexcept : pool_(ordinal, cudaEventDefault) {}
    ~TimingEvents() override = default;
    TimingEvents(const TimingEvents&) = delete;
    TimingEvents& operator=(const TimingEvents&) = delete;

    /// A free event, created if none is. Throws BackendError.
    [[nodiscard]] cudaEvent_t acquire() { return pool_.acquire(); }
    [[nodiscard]] static Stamp stamp(cudaEvent_t event) noexcept { return reinterpret_cast<Stamp>(event); }

    [[nodiscard]] bool done(Stamp stamp) noexcept override;
    [[nodiscard]] bool elapsed_ms(Stamp from, Stamp to, double& ms) noexcept override;
    void release(Stamp stamp) noexcept override;

private:
    EventPool pool_;  ///< timing-enabled events
};

/// Records `event` on `idle_stream` (a stream with nothing queued), waits for it, and
/// returns the steady-clock window in which the GPU passed it; re-records (up to `tries`
/// times) while that window is wider than 20 µs. Throws BackendError.
[[nodiscard]] monitor::ClockAnchor take_anchor(cudaEvent_t event, cudaStream_t idle_stream, int tries = 10);

}  // namespace outcore::cuda
