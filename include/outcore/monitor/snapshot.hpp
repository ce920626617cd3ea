// outcore/monitor/snapshot.hpp — one reading of where the bytes are, process-wide:
// memory per tier against its budget, peaks, swap traffic, evictions, thrash, OOM
// retries. Every Device, Budget and TieredStore registers a source that adds its
// numbers; the periodic reporter, the Prometheus endpoint and the trace's counter
// tracks all read snapshot().
//
//   monitor::Snapshot s = monitor::snapshot();
//   fmt::print("device {} of {}\n", s.device.resident_bytes, s.device.budget_bytes);
//
//   // a component of one's own:
//   monitor::Source src([this](monitor::Snapshot& s) { s.host.resident_bytes += bytes_; });
//
// Thread-safe. A source's fill function runs under the registry's lock, on whichever
// thread asks for a snapshot: it must be quick, must not throw, and must not call
// snapshot() or register sources. Sources add (+=) their numbers; budgets add too
// (two budgets over one device count twice: give each tier one budget).
//
// Each byte is counted by one source only: a Device adds every allocation it made
// (a swap store's device units and pinned slots included) and the live count; an
// alloc::Budget adds its limit to its tier's budget_bytes; a TieredStore adds what only
// it knows (pageable host copies, its host budget, the whole disk tier, swap counters).
// A fill may take its component's lock, so never call snapshot() while holding one
// (from an observer hook, say).
#pragma once

#include <cstdint>
#include <functional>

namespace outcore::monitor {

struct TierGauge {
    std::uint64_t resident_bytes = 0;
    /// Sum of each source's own peak (an upper bound of the true combined peak).
    std::uint64_t peak_bytes = 0;
    std::uint64_t budget_bytes = 0;  ///< 0: no budget known
};

struct Snapshot {
    std::int64_t time_ns = 0;            ///< monitor::now_ns() when taken
    TierGauge device;                    ///< MemoryKind::Device and the swap store's device tier
    TierGauge host;                      ///< pinned + cached host memory, the swap store's host tier
    TierGauge disk;                      ///< spill files
    std::uint64_t live_allocations = 0;  ///< live Device allocations, every kind
    std::uint64_t swap_in_bytes = 0;     ///< into a faster tier
    std::uint64_t swap_in_count = 0;
    std::uint64_t swap_out_bytes = 0;  ///< down to a slower tier
    std::uint64_t swap_out_count = 0;
    std::uint64_t evictions = 0;
    std::uint64_t thrash_count = 0;
    std::uint64_t oom_retries = 0;
    std::uint64_t checksum_failures = 0;
};

using FillFunction = std::function<void(Snapshot&)>;

/// Registers `fill` for its lifetime. Move-only; empty after a move.
class Source {
public:
    Source() noexcept = default;
    explicit Source(FillFunction fill);
    ~Source() { reset(); }
    Source(Source&& other) noexcept : id_(other.id_) { other.id_ = 0; }
    Source& operator=(Source&& other) noexcept;
    Source(const Source&) = delete;
    Source& operator=(const Source&) = delete;
    /// Unregisters now; after it returns, the fill function is not running and never
    /// runs again. noexcept.
    void reset() noexcept;

private:
    std::uint64_t id_ = 0;
};

/// Every registered source added up, stamped with now_ns().
[[nodiscard]] Snapshot snapshot();

}  // namespace outcore::monitor
