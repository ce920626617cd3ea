// Device-timed queue operations (outcore/monitor/device_time.hpp): the conversion from
// device stamps to steady-clock times and the per-queue log that reports them in order.
#include "outcore/monitor/device_time.hpp"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "outcore/core/error.hpp"

namespace outcore::monitor {

namespace {

constexpr double kNsPerMs = 1e6;

struct TimedDevices {
    std::mutex mutex;
    std::vector<std::uint64_t> ids;
    std::atomic<bool> any{false};
};

TimedDevices& timed_devices() {
    static TimedDevices t;
    return t;
}

thread_local std::string_view t_op_name;
thread_local bool t_op_open = false;

}  // namespace

std::int64_t device_to_steady_ns(const ClockAnchor& anchor, double ms_after_anchor) noexcept {
    if (!std::isfinite(ms_after_anchor)) return anchor.midpoint_ns();
    return anchor.midpoint_ns() + std::llround(ms_after_anchor * kNsPerMs);
}

// --- DeviceOpLog ----------------------------------------------------------------------------

DeviceOpLog::~DeviceOpLog() {
    std::lock_guard lock(mutex_);
    for (Pending& p : pending_) release_locked(p);
    pending_.clear();
    anchor_.reset();
}

void DeviceOpLog::release_locked(Pending& p) noexcept {
    source_->release(p.begin);
    source_->release(p.end);
    p.anchor.reset();
}

void DeviceOpLog::set_anchor(Stamp stamp, const ClockAnchor& anchor) {
    std::shared_ptr<Anchor> next;
    try {
        next = std::make_shared<Anchor>(*source_, stamp, anchor);
    } catch (...) {
        source_->release(stamp);
        throw;
    }
    std::lock_guard lock(mutex_);
    anchor_ = std::move(next);
}

bool DeviceOpLog::has_anchor() const {
    std::lock_guard lock(mutex_);
    return anchor_ != nullptr;
}

std::int64_t DeviceOpLog::anchor_ns() const {
    std::lock_guard lock(mutex_);
    return anchor_ ? anchor_->at.midpoint_ns() : 0;
}

std::shared_ptr<TimedOp> DeviceOpLog::add(const OpEvent& event, Stamp begin, Stamp end) {
    std::lock_guard lock(mutex_);
    if (!anchor_) {
        source_->release(begin);
        source_->release(end);
        throw UsageError("trace", "DeviceOpLog::add before set_anchor");
    }
    Pending p{.event = event, .begin = begin, .end = end, .anchor = anchor_, .op = nullptr};
    try {
        p.op = std::make_shared<TimedOp>();
        pending_.push_back(p);
    } catch (...) {
        release_locked(p);
        throw;
    }
    return p.op;
}

std::size_t DeviceOpLog::poll() noexcept {
    std::size_t reported = 0;
    std::lock_guard lock(mutex_);
    while (!pending_.empty()) {
        Pending& p = pending_.front();
        const unsigned char state = p.op->state_.load(std::memory_order_acquire);
        if (state == TimedOp::kQueued) break;
        if (state == TimedOp::kIssued) {
            if (!source_->done(p.end) || !source_->done(p.begin)) break;
            double begin_ms = 0;
            double duration_ms = 0;
            if (source_->elapsed_ms(p.anchor->stamp, p.begin, begin_ms) &&
                source_->elapsed_ms(p.begin, p.end, duration_ms)) {
                OpEvent e = p.event;
                e.begin_ns = device_to_steady_ns(p.anchor->at, begin_ms);
                // The duration from its own pair of stamps: no anchor error in it.
                e.end_ns = e.begin_ns + std::max<std::int64_t>(0, std::llround(duration_ms * kNsPerMs));
                report(e);
                ++reported;
            }
        }
        release_locked(p);
        pending_.pop_front();
    }
    return reported;
}

std::size_t DeviceOpLog::pending() const {
    std::lock_guard lock(mutex_);
    return pending_.size();
}

// --- device-timed devices, op names --------------------------------------------------------

void set_device_timed(std::uint64_t device_id) noexcept {
    TimedDevices& t = timed_devices();
    try {
        std::lock_guard lock(t.mutex);
        if (std::find(t.ids.begin(), t.ids.end(), device_id) == t.ids.end()) t.ids.push_back(device_id);
        t.any.store(true, std::memory_order_release);
    } catch (...) {
        // out of memory: the device stays host-timed (its ops may then be reported twice)
    }
}

void clear_device_timed(std::uint64_t device_id) noexcept {
    TimedDevices& t = timed_devices();
    std::lock_guard lock(t.mutex);
    std::erase(t.ids, device_id);
    t.any.store(!t.ids.empty(), std::memory_order_release);
}

bool device_timed(std::uint64_t device_id) noexcept {
    TimedDevices& t = timed_devices();
    if (!t.any.load(std::memory_order_acquire)) return false;
    std::lock_guard lock(t.mutex);
    return std::find(t.ids.begin(), t.ids.end(), device_id) != t.ids.end();
}

OpNameScope::OpNameScope(std::string_view name) noexcept : previous_(t_op_name), previous_open_(t_op_open) {
    t_op_name = name;
    t_op_open = true;
}

OpNameScope::~OpNameScope() {
    t_op_name = previous_;
    t_op_open = previous_open_;
}

bool op_scope_open() noexcept { return t_op_open; }

std::string_view current_op_name() noexcept { return t_op_name; }

}  // namespace outcore::monitor
