// outcore/monitor/hooks.hpp — where every layer reports what it does to the monitors:
// allocations and frees (Device), copies and kernels (queues, Pipeline), swap moves
// (TieredStore). Observers (the trace recorder, the leak checker) subscribe; with none
// subscribed, a hook costs one relaxed atomic load.
//
//   class Counter final : public monitor::Observer {
//       void on_allocate(const monitor::AllocationEvent& e) noexcept override { bytes_ += e.bytes; }
//   };
//   Counter c;
//   monitor::ObserverRegistration reg(c);              // subscribed until reg dies
//   device.allocate({.bytes = kMiB, .tag = "tile.in"});  // c.on_allocate(...)
//
// Observers are called on the thread that did the work, while it does it: they must be
// quick, thread-safe and must not throw or allocate device memory. Registration is
// thread-safe; an observer must stay alive while registered.
#pragma once

#include <cstdint>
#include <string_view>

#include "outcore/core/tier.hpp"
#include "outcore/device/memory_kind.hpp"

namespace outcore::monitor {

/// Steady-clock nanoseconds, the monitors' common time base.
[[nodiscard]] std::int64_t now_ns() noexcept;

/// One allocation or free by a Device.
struct AllocationEvent {
    std::uint64_t device_id = 0;
    MemoryKind kind = MemoryKind::Device;
    std::uint64_t bytes = 0;
    /// The request's tag on allocate ("" when untagged); empty on free (match on key).
    std::string_view tag;
    /// Identifies the block between its allocate and its free: (native, offset).
    std::uintptr_t native = 0;
    std::uint64_t offset = 0;
    std::int64_t time_ns = 0;
};

/// What a queue operation does. HostRead and HostWrite are host threads' work beside the
/// queues: a tiled operation's reader filling an upload staging buffer from its source
/// (a file read, a pack, a conversion) and its writer draining a download staging buffer
/// into its sink. Their tracks are the threads ("read 0", "write 1", ...).
enum class OpKind : unsigned char { Upload, Download, DeviceCopy, Kernel, HostRead, HostWrite };

/// A queue operation that ran from begin_ns to end_ns on one queue.
struct OpEvent {
    OpKind kind = OpKind::Kernel;
    /// Names the track: "upload", "compute", "download", "read 0" (Pipeline), "swap.upload"...
    std::string_view queue;
    /// Kernel name ("gemm", "blur") or copy name; a literal.
    std::string_view name;
    std::uint64_t bytes = 0;  ///< bytes moved (copies, host reads and writes); 0 for kernels
    std::uint64_t device_id = 0;
    std::int64_t begin_ns = 0;
    std::int64_t end_ns = 0;
};

/// A swap-store move of one unit between tiers.
enum class SwapKind : unsigned char { SwapIn, SwapOut, Evict, WriteBack };
struct SwapEvent {
    SwapKind kind = SwapKind::SwapIn;
    Tier from = Tier::Host;
    Tier to = Tier::Device;
    std::uint64_t bytes = 0;
    bool dirty = false;  ///< Evict: the victim had to be written down first
    std::int64_t begin_ns = 0;
    std::int64_t end_ns = 0;  ///< == begin_ns for an instant (a clean eviction)
};

/// Subscribes to the hooks. Every default does nothing.
class Observer {
public:
    virtual ~Observer() = default;
    virtual void on_allocate(const AllocationEvent& /*event*/) noexcept {}
    virtual void on_free(const AllocationEvent& /*event*/) noexcept {}
    virtual void on_op(const OpEvent& /*event*/) noexcept {}
    virtual void on_swap(const SwapEvent& /*event*/) noexcept {}
};

void add_observer(Observer& observer);
void remove_observer(Observer& observer) noexcept;

/// add_observer for its lifetime.
class ObserverRegistration {
public:
    explicit ObserverRegistration(Observer& observer) : observer_(&observer) { add_observer(observer); }
    ~ObserverRegistration() { remove_observer(*observer_); }
    ObserverRegistration(const ObserverRegistration&) = delete;
    ObserverRegistration& operator=(const ObserverRegistration&) = delete;

private:
    Observer* observer_;
};

namespace detail {
[[nodiscard]] bool observed() noexcept;  // one relaxed load
void emit_allocate(const AllocationEvent& event) noexcept;
void emit_free(const AllocationEvent& event) noexcept;
void emit_op(const OpEvent& event) noexcept;
void emit_swap(const SwapEvent& event) noexcept;
}  // namespace detail

/// The hooks layers call: no-ops (one relaxed load) while nothing observes.
inline bool observed() noexcept { return detail::observed(); }
inline void report(const OpEvent& event) noexcept {
    if (detail::observed()) detail::emit_op(event);
}
inline void report(const SwapEvent& event) noexcept {
    if (detail::observed()) detail::emit_swap(event);
}

}  // namespace outcore::monitor
