// outcore/monitor/device_time.hpp — queue operations timed by the device itself (CUDA
// events), converted to the monitors' steady clock and reported through the hooks.
//
// A backend that can stamp its streams implements StampSource; its queue keeps one
// DeviceOpLog, takes a ClockAnchor (a stamp whose steady-clock time is known), and for
// each copy or kernel records a stamp before and after it on the device:
//
//   monitor::DeviceOpLog log(stamps);                   // stamps: a StampSource
//   log.set_anchor(anchor_stamp, anchor);               // anchor: when the device passed it
//   auto op = log.add({.kind = OpKind::Upload, .queue = "upload", .name = "upload",
//                      .bytes = n, .device_id = id}, begin_stamp, end_stamp);
//   ... record begin_stamp, run the copy, record end_stamp on the stream ...
//   op->issued();                                       // or op->abandon() if it never ran
//   log.poll();   // reports every op whose stamps the device has passed, in order
//
// Names in the OpEvent given to add() are string literals (they are reported later).
// Layers that time queue work themselves (Pipeline's host tasks) skip devices marked
// with set_device_timed(), so an operation is reported once; they open an OpNameScope
// around what they submit, which is what such a queue reports. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string_view>

#include "outcore/monitor/hooks.hpp"

namespace outcore::monitor {

/// When the device passed an anchor stamp, on the steady clock: the host read the clock
/// just before the stamp was recorded (before_ns) and just after it knew the device had
/// passed it (after_ns). The midpoint is off by at most half the window.
struct ClockAnchor {
    std::int64_t before_ns = 0;
    std::int64_t after_ns = 0;
    [[nodiscard]] std::int64_t midpoint_ns() const noexcept { return before_ns + (after_ns - before_ns) / 2; }
    [[nodiscard]] std::int64_t uncertainty_ns() const noexcept { return (after_ns - before_ns + 1) / 2; }
};

/// Steady-clock nanoseconds of a device stamp `ms_after_anchor` milliseconds (the unit
/// of cudaEventElapsedTime; negative when before it) after `anchor`, rounded to the
/// nearest nanosecond.
[[nodiscard]] std::int64_t device_to_steady_ns(const ClockAnchor& anchor, double ms_after_anchor) noexcept;

/// Opaque device timestamps of one device, as a backend provides them.
class StampSource {
public:
    using Stamp = std::uintptr_t;
    virtual ~StampSource() = default;
    /// Whether the device has passed `stamp` (never blocks; false on error).
    [[nodiscard]] virtual bool done(Stamp stamp) noexcept = 0;
    /// Milliseconds from `from` to `to` (both done); false when the device cannot tell.
    [[nodiscard]] virtual bool elapsed_ms(Stamp from, Stamp to, double& ms) noexcept = 0;
    /// Takes a stamp back for reuse; it is not referred to again.
    virtual void release(Stamp stamp) noexcept = 0;
};

/// One operation added to a DeviceOpLog: the backend says whether its stamps were recorded.
class TimedOp {
public:
    /// Both stamps are recorded on the stream (the op ran or is queued on the device).
    void issued() noexcept { state_.store(kIssued, std::memory_order_release); }
    /// The op will never run (the queue had failed, its submission threw): not reported.
    void abandon() noexcept {
        unsigned char queued = kQueued;
        state_.compare_exchange_strong(queued, kAbandoned, std::memory_order_acq_rel);
    }

private:
    friend class DeviceOpLog;
    static constexpr unsigned char kQueued = 0;
    static constexpr unsigned char kIssued = 1;
    static constexpr unsigned char kAbandoned = 2;
    std::atomic<unsigned char> state_{kQueued};
};

/// The operations of one queue waiting for their device stamps, reported in order.
class DeviceOpLog {
public:
    using Stamp = StampSource::Stamp;

    explicit DeviceOpLog(StampSource& source) noexcept : source_(&source) {}
    /// Releases every stamp still held, reporting nothing more.
    ~DeviceOpLog();
    DeviceOpLog(const DeviceOpLog&) = delete;
    DeviceOpLog& operator=(const DeviceOpLog&) = delete;

    /// Ops added from now on are placed relative to `stamp` (done, passed at `anchor`).
    /// The log owns the stamp and releases it once no op refers to it.
    void set_anchor(Stamp stamp, const ClockAnchor& anchor);
    /// Whether an anchor was set, and when the current one was taken (steady ns).
    [[nodiscard]] bool has_anchor() const;
    [[nodiscard]] std::int64_t anchor_ns() const;

    /// Adds an op whose device interval is [begin, end); `event`'s times are ignored and
    /// its names must be literals. The log owns both stamps. Throws UsageError without
    /// an anchor, std::bad_alloc.
    [[nodiscard]] std::shared_ptr<TimedOp> add(const OpEvent& event, Stamp begin, Stamp end);

    /// Reports (monitor::report) every op at the front whose stamps are done, drops the
    /// abandoned ones; stops at the first op still running. Returns how many it reported.
    std::size_t poll() noexcept;
    /// Ops not reported yet.
    [[nodiscard]] std::size_t pending() const;

private:
    struct Anchor {
        Anchor(StampSource& s, Stamp st, const ClockAnchor& a) noexcept : source(&s), stamp(st), at(a) {}
        Anchor(const Anchor&) = delete;  // owns its stamp: released once
        Anchor& operator=(const Anchor&) = delete;
        ~Anchor() { source->release(stamp); }
        StampSource* source;
        Stamp stamp;
        ClockAnchor at;
    };
    struct Pending {
        OpEvent event;
        Stamp begin = 0;
        Stamp end = 0;
        std::shared_ptr<Anchor> anchor;
        std::shared_ptr<TimedOp> op;
    };
    void release_locked(Pending& p) noexcept;

    StampSource* source_;
    mutable std::mutex mutex_;
    std::shared_ptr<Anchor> anchor_;
    std::deque<Pending> pending_;
};

/// Marks `device_id` as a device whose queues report their own operations with device
/// times (set by the backend once, when its first queue traces).
void set_device_timed(std::uint64_t device_id) noexcept;
/// Undoes set_device_timed (a backend whose timing failed): layers time its work again.
void clear_device_timed(std::uint64_t device_id) noexcept;
/// Whether set_device_timed(device_id) was called. One relaxed load when none was.
[[nodiscard]] bool device_timed(std::uint64_t device_id) noexcept;

/// Claims the queue operations this thread submits while it lives for the trace, and
/// names its kernels: a device-timed queue reports only the copies and kernels
/// submitted under an open scope (Pipeline opens one around each upload, compute step
/// and download, so traces show pipeline work as on host-timed devices, not the rate
/// probe's or a user's own queue work). `name` ("gemm", "upload") must be a literal or
/// outlive the trace; it names kernels (copies are named by direction).
class OpNameScope {
public:
    explicit OpNameScope(std::string_view name) noexcept;
    ~OpNameScope();
    OpNameScope(const OpNameScope&) = delete;
    OpNameScope& operator=(const OpNameScope&) = delete;

private:
    std::string_view previous_;
    bool previous_open_;
};
/// Whether an OpNameScope is open on this thread.
[[nodiscard]] bool op_scope_open() noexcept;
/// The innermost open OpNameScope's name on this thread ("" when none is open, or when
/// it was given an empty name).
[[nodiscard]] std::string_view current_op_name() noexcept;

}  // namespace outcore::monitor
