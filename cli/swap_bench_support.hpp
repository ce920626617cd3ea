// cli/swap_bench_support.hpp — the pieces of `outcore swap-bench` that are not the
// command itself: access patterns, the bytes the bench stores (so every byte can be
// checked without keeping a copy), the driver of the accesses (Bench: one or several
// issuing threads, verification), the raw baselines it compares the store against,
// arithmetic on the store's statistics, and the figures and tables it reports.
//
//   AccessSequence seq(Pattern::Zipf, blocks, seed);
//   const std::uint64_t b = seq.next();                       // the block to touch next
//   Content content(seed, unit_bytes);
//   content.expected(b, version, buffer);   // what block b (buffer.size() bytes) must read back as
//   RawDeviceBaseline raw(device, unit_bytes, footprint);     // pre-allocated, warm buffers
//   const RawRates r = raw.measure(copies);                   // upload / download bytes per second
//   const double both = raw.measure_both(copies);             // both ways at once, bytes per second
//   Bench bench(device, store, shape);                        // thread t owns blocks b ≡ t (mod N)
//   bench.populate();
//   bench.run_threads([&](std::uint64_t t) { bench.access(t, bench.global_block(t, 0), true); });
//   const Bench::Verdict v = bench.verify();                  // every byte against Content
//   DirectionOverlap overlap;                                 // a monitor::Observer of swap moves
//   overlap.start(capacity);  /* ...the loop... */  overlap.both_seconds();  // both directions in flight
//
// Only built with the swap store (OUTCORE_WITH_SWAP): it uses its statistics types.
#pragma once

#if OUTCORE_WITH_SWAP

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "outcore/device/block.hpp"
#include "outcore/device/device.hpp"
#include "outcore/monitor/hooks.hpp"
#include "outcore/swap/store.hpp"
#include "run_support.hpp"

namespace outcore::cli::swap_bench {

enum class Pattern : unsigned char { Sequential, Random, Zipf, TileSweep };

/// "sequential", "random", "zipf", "tile-sweep"; nullopt for anything else.
[[nodiscard]] std::optional<Pattern> parse_pattern(std::string_view text) noexcept;
[[nodiscard]] std::string_view to_string(Pattern pattern) noexcept;

/// Zipf exponent of the zipf pattern (YCSB's default).
inline constexpr double kZipfExponent = 0.99;

/// The block indices one access pattern visits, endlessly.
///   sequential: 0, 1, ..., n−1, 0, 1, ...
///   random:     uniform over the blocks
///   zipf:       block of rank r drawn with probability ∝ 1 / r^kZipfExponent; ranks are
///               a random permutation of the blocks, so hot blocks are scattered
///   tile-sweep: the blocks as a grid_rows × grid_cols grid of tiles (row-major, the
///               last row possibly short), swept row by row, then column by column, as
///               a tiled GEMM walks the rows of A and the columns of B; repeated
class AccessSequence {
public:
    /// `blocks` ≥ 1. Deterministic for a given seed.
    AccessSequence(Pattern pattern, std::uint64_t blocks, std::uint64_t seed);
    [[nodiscard]] std::uint64_t next();
    [[nodiscard]] std::uint64_t grid_rows() const noexcept { return grid_rows_; }
    [[nodiscard]] std::uint64_t grid_cols() const noexcept { return grid_cols_; }

private:
    Pattern pattern_;
    std::uint64_t blocks_;
    std::mt19937_64 rng_;
    std::uint64_t position_ = 0;       ///< sequential and tile-sweep: the step within one sweep
    std::vector<double> zipf_cdf_;     ///< zipf: cumulative probability of ranks 1..n
    std::vector<std::uint64_t> rank_;  ///< zipf: block of each rank
    std::uint64_t grid_rows_ = 1;
    std::uint64_t grid_cols_ = 1;
};

/// Byte range of a stamp inside a unit.
struct StampRange {
    std::uint64_t offset = 0;
    std::uint64_t bytes = 0;
};

/// The bytes the bench stores. Block b starts as a pseudo-random stream keyed by
/// (seed, b); write number v (v ≥ 1) of a block puts a stamp keyed by (seed, b, v,
/// unit, head/tail) at the head and at the tail of every unit. So a block's bytes at
/// any version can be regenerated, and a stale, misplaced or torn copy differs.
class Content {
public:
    /// Bytes of each of the two stamps of a full unit.
    static constexpr std::uint64_t kStampBytes = 64;

    Content(std::uint64_t seed, std::uint64_t unit_bytes) noexcept : seed_(seed), unit_bytes_(unit_bytes) {}
    /// Block `block`'s initial bytes [offset, offset + out.size()).
    void fill_base(std::uint64_t block, std::uint64_t offset, std::span<std::byte> out) const noexcept;
    /// Head stamp of a unit of `unit_bytes` bytes: its first min(64, unit_bytes) bytes.
    [[nodiscard]] static StampRange head(std::uint64_t unit_bytes) noexcept;
    /// Tail stamp: its last min(64, unit_bytes − head) bytes (empty for units ≤ 64 B).
    [[nodiscard]] static StampRange tail(std::uint64_t unit_bytes) noexcept;
    /// The stamp bytes (out.size() = the range's bytes) of write `version` ≥ 1.
    void fill_stamp(std::uint64_t block, std::uint64_t version, std::uint64_t unit, bool is_tail,
                    std::span<std::byte> out) const noexcept;
    /// Block `block` (of `block_bytes`, out.size() == block_bytes) after `version` writes.
    void expected(std::uint64_t block, std::uint64_t version, std::span<std::byte> out) const noexcept;

private:
    std::uint64_t seed_;
    std::uint64_t unit_bytes_;
};

/// Upload and download rates, bytes per second.
struct RawRates {
    double in_bytes_per_second = 0;   ///< host → device (upload) or pwrite
    double out_bytes_per_second = 0;  ///< device → host (download) or pread
    std::uint64_t bytes_each = 0;     ///< bytes timed in each direction
    /// Both directions at once (RawDeviceBaseline::measure_both): bytes moved host → device
    /// plus device → host per second; 0 when not measured.
    double both_bytes_per_second = 0;
};

/// Raw device ↔ host copies of one unit at a time through a Queue of the device, each
/// waited for (as the store waits for each unit), between pre-allocated, warm buffers:
/// HostPinned host memory (pageable when the device refuses it) and Device memory,
/// cycled over `footprint_bytes` so caches help no more than they help the store.
class RawDeviceBaseline {
public:
    /// OutOfMemory / BackendError from the device.
    RawDeviceBaseline(Device& device, std::uint64_t unit_bytes, std::uint64_t footprint_bytes);
    /// `copies` uploads, then `copies` downloads, each synchronized.
    [[nodiscard]] RawRates measure(std::uint64_t copies);
    /// Both directions at once: `copies` uploads on one queue and `copies` downloads on a
    /// second one, each issued and synchronized copy by copy from its own thread, over
    /// disjoint halves of the buffers. Bytes moved both ways per second of the wall time.
    [[nodiscard]] double measure_both(std::uint64_t copies);
    [[nodiscard]] bool pinned() const noexcept { return pinned_; }
    [[nodiscard]] std::uint64_t buffer_count() const noexcept { return device_blocks_.size(); }

private:
    /// Seconds for `copies` synchronized copies on `queue` (upload: host → device) over
    /// buffers [first, first + count): host buffer i and device buffer i + 1, cyclically.
    [[nodiscard]] double time_copies(Queue& queue, bool upload, std::uint64_t copies, std::size_t first,
                                     std::size_t count);
    [[nodiscard]] std::byte* host(std::size_t i) noexcept {
        return pinned_ ? host_blocks_[i].host() : pageable_[i].get();
    }

    Device& device_;
    std::uint64_t unit_bytes_;
    std::unique_ptr<Queue> queue_;
    std::unique_ptr<Queue> second_queue_;  ///< measure_both's downloads (made on first use)
    std::vector<Block> device_blocks_;
    std::vector<Block> host_blocks_;                      ///< pinned
    std::vector<std::unique_ptr<std::byte[]>> pageable_;  ///< when pinned memory is refused
    bool pinned_ = true;
};

/// Raw pwrite / pread of unit-sized slots of an unnamed file in the spill directory,
/// opened as the spill file opens its own (swap::posix_file_io().open_tmpfile, O_DIRECT
/// unless the filesystem refuses it or `want_direct` is false), from a 4 KiB-aligned buffer.
/// The file has two halves of `slots` slots; each measure() writes one half and reads the
/// other in a shuffled order, so reads never meet data just written (which a disk or the
/// host under a virtual disk may still cache), as the store's reads of its spill file don't.
class RawDiskBaseline {
public:
    /// Creates the file, reserves and writes its 2 × `slots` slots once (untimed). IoError.
    RawDiskBaseline(const std::filesystem::path& dir, bool want_direct, std::uint64_t unit_bytes,
                    std::uint64_t slots);
    ~RawDiskBaseline();
    RawDiskBaseline(const RawDiskBaseline&) = delete;
    RawDiskBaseline& operator=(const RawDiskBaseline&) = delete;
    /// Writes `slots` slots of one half, then reads those of the other half. IoError.
    [[nodiscard]] RawRates measure();
    [[nodiscard]] bool direct() const noexcept { return direct_; }

private:
    void write_slot(std::uint64_t slot);
    void read_slot(std::uint64_t slot);

    std::string dir_;
    std::uint64_t unit_bytes_;
    std::uint64_t stride_;
    std::uint64_t slots_;               ///< per half
    std::vector<std::uint64_t> order_;  ///< shuffled 0 .. slots_ − 1: the read order
    std::uint64_t measured_ = 0;        ///< measure() calls so far: picks the halves
    int fd_ = -1;
    bool direct_ = false;
    std::byte* buffer_ = nullptr;  ///< aligned_alloc'd, stride_ bytes
};

/// Watches the store's device ↔ host moves (monitor::SwapEvent: dirty evictions device →
/// host, swap-ins host → device) and measures how long both directions were in flight at
/// once: the evidence that concurrent threads overlap swap-outs with swap-ins. Keeps at
/// most `capacity` moves per start() (the rest are counted in dropped()); thread-safe.
class DirectionOverlap final : public monitor::Observer {
public:
    DirectionOverlap() : registration_(*this) {}
    /// Forgets what was recorded; room for `capacity` moves (allocated here, not in on_swap).
    void start(std::size_t capacity);
    void on_swap(const monitor::SwapEvent& event) noexcept override;
    /// Seconds during which at least one move of each direction was in flight.
    [[nodiscard]] double both_seconds() const;
    [[nodiscard]] std::uint64_t dropped() const;

private:
    struct Interval {
        std::int64_t begin_ns = 0;
        std::int64_t end_ns = 0;
        bool up = false;  ///< host → device
    };
    mutable std::mutex mutex_;
    std::vector<Interval> intervals_;
    std::uint64_t dropped_ = 0;
    monitor::ObserverRegistration registration_;  ///< last: unregisters first
};

/// What the bench's driver needs of its settings.
struct BenchShape {
    std::uint64_t working_set = 0;
    std::uint64_t block = 0;   ///< bytes of each block (the last may be shorter)
    std::uint64_t blocks = 0;  ///< ⌈working_set / block⌉
    std::uint64_t unit = 0;
    std::uint64_t threads = 1;
    std::uint64_t ops = 0;  ///< accesses per loop, all threads together
    std::uint64_t seed = 0;
    std::uint64_t host_limit = 0;  ///< the bench's own host buffers, each
};

/// Drives the store: the population, the accesses of each issuing thread, verification.
/// Holds what each block must contain (its write count; see Content). Thread t of N owns
/// the blocks b with b mod N = t: only it writes their counts, so verification stays
/// exact with any N.
class Bench {
public:
    /// One issuing thread's own state.
    struct Worker {
        std::unique_ptr<Queue> queue;   ///< the stamps' copies
        std::vector<std::byte> stamps;  ///< staging of one write's stamps
        std::uint64_t stamps_checked = 0;
        std::uint64_t stamp_mismatches = 0;
        std::uint64_t writes = 0;
        double acquire_seconds = 0;  ///< of the current loop
        double stamp_seconds = 0;
    };
    /// What verify() found.
    struct Verdict {
        std::uint64_t blocks = 0;
        std::uint64_t bytes = 0;
        std::uint64_t mismatched_blocks = 0;
        std::uint64_t first_mismatch = 0;
        std::uint64_t checksum_written = 0;  ///< XXH3 of the blocks' checksums, in block order
        std::uint64_t checksum_read = 0;
        double seconds = 0;
    };

    /// OutOfMemory (host) for its block buffers; BackendError for a queue.
    Bench(Device& device, swap::TieredStore& store, const BenchShape& shape);

    [[nodiscard]] std::uint64_t block_bytes(std::uint64_t b) const;
    /// Blocks thread t owns (t, t + N, t + 2N, ...).
    [[nodiscard]] std::uint64_t owned_blocks(std::uint64_t t) const noexcept;
    /// Thread t's local block index → the block.
    [[nodiscard]] std::uint64_t global_block(std::uint64_t t, std::uint64_t local) const noexcept {
        return local * shape_.threads + t;
    }
    /// Thread t's share of the ops (the first ops mod N threads do one more).
    [[nodiscard]] std::uint64_t ops_of(std::uint64_t t) const noexcept;

    /// Puts every block's initial bytes.
    void populate();
    /// One access by thread `t` (which must own block b): acquire, check or stamp, release.
    void access(std::uint64_t t, std::uint64_t b, bool read);
    /// Runs `body(t)` for every thread t, on N threads at once (inline for one), all
    /// released together; rethrows the first failure once all have stopped (the others
    /// stop at their next access: see stopped()). Resets the workers' loop seconds.
    void run_threads(const std::function<void(std::uint64_t)>& body);
    /// Another thread failed: stop issuing.
    [[nodiscard]] bool stopped() const noexcept { return stop_.load(std::memory_order_relaxed); }
    /// The last loop's acquire and stamp seconds, the mean over the threads.
    [[nodiscard]] double mean_acquire_seconds() const noexcept;
    [[nodiscard]] double mean_stamp_seconds() const noexcept;
    /// Reads every block back and compares it with what it must hold.
    [[nodiscard]] Verdict verify();

    [[nodiscard]] const std::vector<swap::BlockId>& ids() const noexcept { return ids_; }
    [[nodiscard]] std::uint64_t stamps_checked() const noexcept { return sum(&Worker::stamps_checked); }
    [[nodiscard]] std::uint64_t stamp_mismatches() const noexcept { return sum(&Worker::stamp_mismatches); }
    [[nodiscard]] std::uint64_t writes() const noexcept { return sum(&Worker::writes); }

private:
    [[nodiscard]] std::uint64_t sum(std::uint64_t Worker::*field) const noexcept;
    /// A read: unit 0's head must be the block's latest stamp (or its initial bytes).
    void check_head(Worker& w, std::uint64_t b, const swap::Pin& pin);
    /// A write: the next version's stamps at the head and tail of every unit.
    void stamp(Worker& w, std::uint64_t b, const swap::Pin& pin);

    swap::TieredStore& store_;
    BenchShape shape_;
    Content content_;
    std::vector<swap::BlockId> ids_;
    /// Writes each block has had; element b only touched by the thread owning b.
    std::vector<std::uint64_t> versions_;
    HostBuffer buffer_;  ///< a block's bytes read back
    HostBuffer want_;    ///< a block's expected bytes
    std::vector<Worker> workers_;
    std::atomic<bool> stop_{false};
};

/// a − b for every counter of a TierStats (resident, peak and budget are a's).
[[nodiscard]] swap::TierStats counters_since(const swap::TierStats& a, const swap::TierStats& b) noexcept;
/// a − b for every counter of a StoreStats.
[[nodiscard]] swap::StoreStats counters_since(const swap::StoreStats& a, const swap::StoreStats& b) noexcept;

/// hits / (hits + misses); 0 when there were none.
[[nodiscard]] double hit_rate(const swap::TierStats& t) noexcept;

/// Median of a non-empty list (the mean of the middle two for an even count).
[[nodiscard]] double median(std::vector<double> values);

/// What one repetition measured: the timed loop, the store's counters during it, and
/// the raw baselines measured right after it.
struct Repetition {
    /// Seconds `bytes` take at `bytes_per_second` (0 for an unmeasured rate).
    [[nodiscard]] static double seconds_at(std::uint64_t bytes, double bytes_per_second) noexcept {
        return bytes_per_second > 0 ? static_cast<double>(bytes) / bytes_per_second : 0.0;
    }

    std::uint64_t threads = 1;  ///< threads that issued the accesses
    double loop_seconds = 0;
    /// Per issuing thread (the mean over the threads).
    double acquire_seconds = 0;
    double stamp_seconds = 0;            ///< the bench's own stamp copies (not swap work)
    double both_directions_seconds = 0;  ///< device → host and host → device moves in flight at once
    swap::StoreStats delta;              ///< counters during the loop
    RawRates raw_device;
    std::optional<RawRates> raw_disk;

    [[nodiscard]] double swap_seconds() const { return std::max(loop_seconds - stamp_seconds, 1e-9); }
    [[nodiscard]] std::uint64_t device_bytes() const {
        return delta.device.swap_in_bytes + delta.device.swap_out_bytes;
    }
    [[nodiscard]] std::uint64_t disk_bytes() const {
        return delta.disk.swap_in_bytes + delta.disk.swap_out_bytes;
    }
    /// Time the raw baselines need for the same transfers.
    [[nodiscard]] double raw_device_seconds() const {
        const auto& d = delta.device;
        return seconds_at(d.swap_in_bytes, raw_device.in_bytes_per_second) +
               seconds_at(d.swap_out_bytes, raw_device.out_bytes_per_second);
    }
    [[nodiscard]] double raw_disk_seconds() const {
        if (!raw_disk) return 0;
        const auto& d = delta.disk;
        return seconds_at(d.swap_in_bytes, raw_disk->in_bytes_per_second) +
               seconds_at(d.swap_out_bytes, raw_disk->out_bytes_per_second);
    }
    [[nodiscard]] double swap_rate() const {
        return static_cast<double>(device_bytes() + disk_bytes()) / swap_seconds();
    }
    [[nodiscard]] double raw_rate() const {
        const double t = raw_device_seconds() + raw_disk_seconds();
        return t > 0 ? static_cast<double>(device_bytes() + disk_bytes()) / t : 0.0;
    }
    [[nodiscard]] double swap_vs_raw() const {
        return (raw_device_seconds() + raw_disk_seconds()) / swap_seconds();
    }
    /// Device ↔ host bytes (both directions) per second of the loop, end to end.
    [[nodiscard]] double device_rate() const { return static_cast<double>(device_bytes()) / swap_seconds(); }
    /// device_rate() against the raw both-ways rate (nullopt: not measured, as with one thread).
    [[nodiscard]] std::optional<double> device_vs_raw_both() const {
        if (raw_device.both_bytes_per_second <= 0) return std::nullopt;
        return device_rate() / raw_device.both_bytes_per_second;
    }
    /// The store's own transfer time for a tier's bytes against the raw time (nullopt: none moved).
    [[nodiscard]] std::optional<double> device_store_vs_raw() const {
        const double t = delta.device.swap_in_seconds + delta.device.swap_out_seconds;
        if (device_bytes() == 0 || t <= 0) return std::nullopt;
        return raw_device_seconds() / t;
    }
    [[nodiscard]] std::optional<double> disk_store_vs_raw() const {
        const double t = delta.disk.swap_in_seconds + delta.disk.swap_out_seconds;
        if (disk_bytes() == 0 || t <= 0 || !raw_disk) return std::nullopt;
        return raw_disk_seconds() / t;
    }
};

/// Median and range of a per-repetition figure.
struct Spread {
    std::optional<double> median, min, max;
};
/// `figure` of every repetition that has it (nullopt entries are skipped).
template <typename F>
[[nodiscard]] Spread spread(const std::vector<Repetition>& reps, F&& figure) {
    std::vector<double> v;
    for (const Repetition& r : reps) {
        const std::optional<double> x = figure(r);
        if (x) v.push_back(*x);
    }
    if (v.empty()) return {};
    return {median(v), *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())};
}

/// "1.23 GB/s" (1e9 bytes per second).
[[nodiscard]] std::string rate(double bytes_per_second);
/// "84.1% (61.7% – 85.6%)" or "1.57 GB/s (1.32 GB/s – 1.63 GB/s)"; "n/a" when empty.
[[nodiscard]] std::string format_spread(const Spread& s, bool percent);
/// A number, or null.
[[nodiscard]] nlohmann::json optional_json(const std::optional<double>& v);
[[nodiscard]] nlohmann::json tier_json(const swap::TierStats& t);
[[nodiscard]] nlohmann::json repetition_json(const Repetition& r);
/// The per-tier table of the text summary.
void print_tiers(const swap::StoreStats& st);

}  // namespace outcore::cli::swap_bench

#endif  // OUTCORE_WITH_SWAP
