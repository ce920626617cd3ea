// src/alloc/live_set.hpp (private) — the table of live allocations behind every leak
// report. alloc::Tracking (the blocks of one allocator) and monitor::LeakChecker (the
// native allocations of every device) each keep one: it records a block with its tag,
// size, kind, time and, when asked, the raw allocating stack; it forgets it on free; and
// it groups what is still live by tag into an alloc::LeakReport.
//
//   LiveSet live;
//   live.add(BlockKey::of(raw), {.tag = "tile.in", .bytes = raw.bytes, .kind = raw.kind,
//                                .allocated_at = std::chrono::steady_clock::now(),
//                                .frames = capture_stack(16)});
//   live.leak_report();             // one group "tile.in"
//   live.remove(BlockKey::of(raw));
//
// Thread-safe: one lock around the table. Stacks are kept as return addresses and only
// symbolized when a report asks for them (rare, slow).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "alloc/block_key.hpp"
#include "outcore/alloc/tracking.hpp"

namespace outcore::alloc::detail {

/// Whether stacks are captured when the options leave it open: on in debug builds of
/// outcore (no NDEBUG), off in release builds.
#ifdef NDEBUG
inline constexpr bool kStacksByDefault = false;
#else
inline constexpr bool kStacksByDefault = true;
#endif

/// The caller's stack as at most `depth` return addresses, innermost first (this
/// function's own frame left out). Empty when the platform gives none. Throws
/// std::bad_alloc.
[[gnu::noinline]] std::vector<void*> capture_stack(std::size_t depth);

/// Symbolized, demangled frames ("module(function+0x1f) [0x...]"), in order.
[[nodiscard]] std::vector<std::string> symbolize(const std::vector<void*>& frames);

class LiveSet {
public:
    /// What is known of one live block.
    struct Entry {
        /// The request's tag; must outlive the record (tags are string literals).
        std::string_view tag;
        std::uint64_t bytes = 0;
        MemoryKind kind = MemoryKind::Device;
        std::uint64_t device_id = 0;
        std::chrono::steady_clock::time_point allocated_at{};
        /// Raw return addresses from capture_stack(); empty when stacks are off.
        std::vector<void*> frames;
    };

    /// Records `key` as live and gives it the next sequence number. Returns false, and
    /// changes nothing, when `key` is already live. Throws std::bad_alloc.
    bool add(const BlockKey& key, Entry entry);
    /// Forgets `key`; false when it was not live.
    bool remove(const BlockKey& key) noexcept;
    [[nodiscard]] std::uint64_t size() const;

    /// Every live block in allocation order, stacks symbolized.
    [[nodiscard]] std::vector<LiveAllocation> live_allocations() const;
    /// What is live now, grouped by tag (largest bytes first, ties by tag), each group
    /// with the age and symbolized stack of its oldest block.
    [[nodiscard]] LeakReport leak_report() const;

private:
    struct Record {
        Entry entry;
        std::uint64_t sequence = 0;
    };
    mutable std::mutex mutex_;
    std::uint64_t next_sequence_ = 0;
    std::unordered_map<BlockKey, Record, BlockKeyHash> live_;
};

}  // namespace outcore::alloc::detail
