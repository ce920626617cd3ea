// cli/swap_bench_support.hpp — the pieces of `outcore swap-bench` that are not the
// command itself: access patterns, the bytes the bench stores (so every byte can be
// checked without keeping a copy), the raw baselines it compares the store against,
// arithmetic on the store's statistics, and the figures and tables it reports.
//
//   AccessSequence seq(Pattern::Zipf, blocks, seed);
//   const std::uint64_t b = seq.next();                       // the block to touch next
//   Content content(seed, unit_bytes);
//   content.expected(b, version, buffer);   // what block b (buffer.size() bytes) must read back as
//   RawDeviceBaseline raw(device, unit_bytes, footprint);     // pre-allocated, warm buffers
//   const RawRates r = raw.measure(copies);                   // upload / download bytes per second
//
// Only built with the swap store (OUTCORE_WITH_SWAP): it uses its statistics types.
#pragma once

#if OUTCORE_WITH_SWAP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "outcore/device/block.hpp"
#include "outcore/device/device.hpp"
#include "outcore/swap/store.hpp"

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
    [[nodiscard]] bool pinned() const noexcept { return pinned_; }
    [[nodiscard]] std::uint64_t buffer_count() const noexcept { return device_blocks_.size(); }

private:
    Device& device_;
    std::uint64_t unit_bytes_;
    std::unique_ptr<Queue> queue_;
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

    double loop_seconds = 0;
    double acquire_seconds = 0;
    double stamp_seconds = 0;  ///< the bench's own stamp copies (not swap work)
    swap::StoreStats delta;    ///< counters during the loop
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
