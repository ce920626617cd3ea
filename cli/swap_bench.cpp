// cli/swap_bench.cpp — `outcore swap-bench`: an access pattern over a working set many
// times the device budget (and, when larger than the host budget, reaching the spill
// file), through the tiered swap store. It prints the achieved swap bandwidth next to
// the raw bandwidth of the same transfers measured in the same run (unit-sized copies
// through a Queue of the same device; pwrite/pread of a file in the spill directory),
// hit rates and per-tier statistics, and verifies every byte at the end.
//
//   outcore swap-bench --pattern random --working-set 4GiB --device-budget 512MiB
//       --host-budget 2GiB --spill-dir /var/tmp --unit 16MiB --json run.json   (one line)
//
// Each access acquires one block (Read or Write, by --read-fraction) and releases it.
// A write puts a 64-byte stamp, unique to (block, write number, unit), at the head and
// the tail of every unit through a Queue; a read downloads the block's first stamp and
// checks it. The stamp copies are the bench's own work: their time is subtracted from
// the swap time. After an untimed warm-up repetition come --repeat timed ones, each
// followed by the raw baselines; figures are medians over the repetitions. At the end
// every block is read back and compared with what it must hold (regenerated, see
// Content): a mismatch is a CorruptionError (exit 5).
// Exit codes: main.cpp.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "commands.hpp"
#include "outcore/core/error.hpp"

#if OUTCORE_WITH_SWAP
#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "outcore/backends/cpu.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/registry.hpp"
#include "outcore/swap/spill_file.hpp"
#include "outcore/swap/store.hpp"
#include "run_support.hpp"
#include "swap_bench_support.hpp"
#endif

namespace outcore::cli {
namespace {

constexpr const char* kComponent = "swap-bench";

struct SwapBenchFlags {
    std::string pattern;
    std::string working_set;
    std::optional<std::string> unit, block, spill_dir, ops, seed, read_fraction, repeat, wash_units, pinned,
        json;
    bool prefetch = false;
    bool buffered_io = false;
    bool force = false;
    bool quiet = false;
};

#if OUTCORE_WITH_SWAP

using swap_bench::AccessSequence;
using swap_bench::Content;
using swap_bench::format_spread;
using swap_bench::Pattern;
using swap_bench::print_tiers;
using swap_bench::rate;
using swap_bench::RawRates;
using swap_bench::Repetition;
using swap_bench::repetition_json;
using swap_bench::Spread;
using swap_bench::spread;
using swap_bench::tier_json;
using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kMinUnitBytes = 1 * kMiB;
constexpr std::uint64_t kMaxUnitBytes = 64 * kMiB;
/// More objects than this make the store's table, not its transfers, the subject.
constexpr std::uint64_t kMaxBlocks = std::uint64_t{1} << 20;
constexpr std::uint64_t kDefaultRepeat = 3;
constexpr double kDefaultReadFraction = 0.5;
/// The raw device baseline cycles over this many bytes of buffers on each side (less for
/// a smaller working set), so caches help it no more than they help the store.
constexpr std::uint64_t kRawDeviceFootprint = 256 * kMiB;
/// The raw disk baseline writes and reads this many bytes per repetition (less for a
/// smaller working set); its file holds twice as much.
constexpr std::uint64_t kRawDiskFootprint = 512 * kMiB;
/// Unit copies timed per direction for the raw device baseline, per repetition: this
/// many bytes' worth, within the bounds below.
constexpr std::uint64_t kRawDeviceCopyBytes = 512 * kMiB;
constexpr std::uint64_t kRawDeviceMinCopies = 8;
constexpr std::uint64_t kRawDeviceMaxCopies = 256;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Everything the flags and the configuration decide.
struct Settings {
    Pattern pattern = Pattern::Random;
    std::uint64_t working_set = 0;
    std::uint64_t unit = 0;
    std::uint64_t block = 0;
    std::uint64_t blocks = 0;
    std::uint64_t ops = 0;
    std::uint64_t repeat = kDefaultRepeat;
    std::uint64_t seed = 0;
    double read_fraction = kDefaultReadFraction;
    std::filesystem::path spill_dir;
    bool prefetch = false;
    bool direct_io = true;
    std::uint32_t wash_units = swap::StoreOptions{}.wash_queue_units;
    std::uint64_t pinned_pool = swap::StoreOptions{}.pinned_pool_bytes;
    std::uint64_t host_budget = 0;  ///< 0: the store's default
    std::uint64_t host_limit = 0;   ///< the bench's own host buffers, each
};

Settings parse_settings(const SwapBenchFlags& f, const Config& config) {
    Settings s;
    const std::optional<Pattern> pattern = swap_bench::parse_pattern(f.pattern);
    if (!pattern) {
        throw UsageError(kComponent,
                         fmt::format("--pattern '{}': expected sequential, random, zipf or tile-sweep",
                                     io::printable(f.pattern)));
    }
    s.pattern = *pattern;
    s.working_set = parse_bytes(f.working_set, "--working-set");
    if (s.working_set == 0) throw UsageError(kComponent, "--working-set of 0 bytes");
    s.unit = f.unit ? parse_bytes(*f.unit, "--unit") : config.block_bytes;
    if (s.unit < kMinUnitBytes || s.unit > kMaxUnitBytes) {
        throw UsageError(kComponent, fmt::format("--unit {} ({} bytes) outside 1 MiB – 64 MiB",
                                                 format_size(s.unit), s.unit));
    }
    s.block = f.block ? parse_bytes(*f.block, "--block") : s.unit;
    if (s.block == 0) throw UsageError(kComponent, "--block of 0 bytes");
    if (s.block > s.working_set) {
        throw UsageError(kComponent, fmt::format("--block {} is larger than the working set of {}",
                                                 format_size(s.block), format_size(s.working_set)));
    }
    s.blocks = s.working_set / s.block + (s.working_set % s.block != 0 ? 1 : 0);
    s.ops = f.ops ? parse_count("--ops", *f.ops) : std::max<std::uint64_t>(16, 2 * s.blocks);
    if (s.ops == 0) throw UsageError(kComponent, "--ops 0: at least one access");
    s.repeat = f.repeat ? parse_count("--repeat", *f.repeat) : kDefaultRepeat;
    if (s.repeat == 0) throw UsageError(kComponent, "--repeat 0: at least one repetition");
    s.seed = f.seed ? parse_count("--seed", *f.seed)
                    : (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
    if (f.read_fraction) {
        s.read_fraction = parse_real("--read-fraction", *f.read_fraction);
        if (!(s.read_fraction >= 0.0 && s.read_fraction <= 1.0)) {
            throw UsageError(kComponent, fmt::format("--read-fraction {} outside 0 – 1", *f.read_fraction));
        }
    }
    s.spill_dir = f.spill_dir ? std::filesystem::path(*f.spill_dir) : std::filesystem::path(config.spill_dir);
    s.prefetch = f.prefetch;
    if (f.wash_units) {
        const std::uint64_t w = parse_count("--wash-units", *f.wash_units);
        if (w > UINT32_MAX) throw UsageError(kComponent, fmt::format("--wash-units {} is over 2^32-1", w));
        s.wash_units = static_cast<std::uint32_t>(w);
    }
    if (f.pinned) s.pinned_pool = parse_bytes(*f.pinned, "--pinned");
    s.direct_io = !f.buffered_io;
    // --host-budget (global) is the store's host tier; auto leaves the store's default.
    const std::uint64_t ram = cpu::physical_memory_bytes();
    s.host_budget = config.host_budget.resolve(ram, 0);
    if (config.host_budget.kind != SizeSpec::Kind::Auto && s.host_budget == 0) {
        throw UsageError(kComponent, "a host budget of 0 bytes");
    }
    s.host_limit = host_limit_bytes(config);
    return s;
}

/// Free bytes of the spill directory's filesystem (0 when it cannot be read).
std::uint64_t free_disk_bytes(const std::filesystem::path& dir) {
    struct statvfs fs {};
    if (::statvfs(dir.c_str(), &fs) != 0) return 0;
    return static_cast<std::uint64_t>(fs.f_bavail) * static_cast<std::uint64_t>(fs.f_frsize);
}

/// Drives the store: one access, the population, verification. Holds what each block must contain.
class Bench {
public:
    Bench(Device& device, swap::TieredStore& store, const Settings& s)
        : store_(store), s_(s), content_(s.seed, s.unit), queue_(device.create_queue()) {
        ids_.resize(static_cast<std::size_t>(s.blocks));
        versions_.assign(static_cast<std::size_t>(s.blocks), 0);
        buffer_ = allocate_host(s.block, "a block buffer", s.host_limit);
        want_ = allocate_host(s.block, "a block buffer", s.host_limit);
        const std::uint64_t units = (s.block + s.unit - 1) / s.unit;
        stamps_.resize(static_cast<std::size_t>(units * 2 * Content::kStampBytes));
    }

    [[nodiscard]] std::uint64_t block_bytes(std::uint64_t b) const {
        return std::min(s_.block, s_.working_set - b * s_.block);
    }

    /// Puts every block's initial bytes.
    void populate() {
        for (std::uint64_t b = 0; b < s_.blocks; ++b) {
            const std::span<std::byte> bytes(buffer_.get(), static_cast<std::size_t>(block_bytes(b)));
            content_.fill_base(b, 0, bytes);
            ids_[b] = store_.put(bytes);
        }
    }

    /// One access: acquire, check or stamp, release.
    void access(std::uint64_t b, bool read, Repetition* rep) {
        const Clock::time_point start = Clock::now();
        swap::Pin pin = store_.acquire(ids_[b], read ? swap::Access::Read : swap::Access::Write);
        const Clock::time_point acquired = Clock::now();
        if (read) {
            check_head(b, pin);
        } else {
            stamp(b, pin);
        }
        const Clock::time_point done = Clock::now();
        pin.release();
        if (rep != nullptr) {
            rep->acquire_seconds += std::chrono::duration<double>(acquired - start).count();
            rep->stamp_seconds += std::chrono::duration<double>(done - acquired).count();
        }
    }

    /// Reads every block back and compares it with what it must hold.
    struct Verdict {
        std::uint64_t blocks = 0;
        std::uint64_t bytes = 0;
        std::uint64_t mismatched_blocks = 0;
        std::uint64_t first_mismatch = 0;
        std::uint64_t checksum_written = 0;  ///< XXH3 of the blocks' checksums, in block order
        std::uint64_t checksum_read = 0;
        double seconds = 0;
    };
    Verdict verify() {
        Verdict v;
        const Clock::time_point start = Clock::now();
        std::vector<std::uint64_t> written(static_cast<std::size_t>(s_.blocks));
        std::vector<std::uint64_t> read(static_cast<std::size_t>(s_.blocks));
        for (std::uint64_t b = 0; b < s_.blocks; ++b) {
            const auto n = static_cast<std::size_t>(block_bytes(b));
            const std::span<std::byte> got(buffer_.get(), n);
            const std::span<std::byte> want(want_.get(), n);
            store_.read(ids_[b], got);
            content_.expected(b, versions_[b], want);
            written[b] = swap::checksum(want);
            read[b] = swap::checksum(got);
            if (written[b] != read[b] || std::memcmp(got.data(), want.data(), n) != 0) {
                if (v.mismatched_blocks++ == 0) v.first_mismatch = b;
            }
            ++v.blocks;
            v.bytes += n;
        }
        v.checksum_written = swap::checksum(std::as_bytes(std::span(written)));
        v.checksum_read = swap::checksum(std::as_bytes(std::span(read)));
        v.seconds = seconds_since(start);
        return v;
    }

    [[nodiscard]] const std::vector<swap::BlockId>& ids() const noexcept { return ids_; }
    [[nodiscard]] std::uint64_t stamps_checked() const noexcept { return stamps_checked_; }
    [[nodiscard]] std::uint64_t stamp_mismatches() const noexcept { return stamp_mismatches_; }
    [[nodiscard]] std::uint64_t writes() const noexcept { return writes_; }

private:
    /// A read: unit 0's head must be the block's latest stamp (or its initial bytes).
    void check_head(std::uint64_t b, const swap::Pin& pin) {
        const BufferView& unit0 = pin.views()[0];
        const swap_bench::StampRange h = Content::head(unit0.bytes);
        std::byte got[Content::kStampBytes];
        std::byte want[Content::kStampBytes];
        queue_->download(unit0.sub(h.offset, h.bytes), got);
        queue_->synchronize();
        const std::span<std::byte> w(want, static_cast<std::size_t>(h.bytes));
        if (versions_[b] == 0) {
            content_.fill_base(b, 0, w);
        } else {
            content_.fill_stamp(b, versions_[b], 0, false, w);
        }
        ++stamps_checked_;
        if (std::memcmp(got, want, static_cast<std::size_t>(h.bytes)) != 0) ++stamp_mismatches_;
    }

    /// A write: the next version's stamps at the head and tail of every unit.
    void stamp(std::uint64_t b, const swap::Pin& pin) {
        const std::uint64_t version = versions_[b] + 1;
        const std::span<const BufferView> views = pin.views();
        for (std::size_t u = 0; u < views.size(); ++u) {
            for (const bool is_tail : {false, true}) {
                const swap_bench::StampRange r =
                    is_tail ? Content::tail(views[u].bytes) : Content::head(views[u].bytes);
                if (r.bytes == 0) continue;
                std::byte* staging = stamps_.data() + (2 * u + (is_tail ? 1 : 0)) * Content::kStampBytes;
                content_.fill_stamp(b, version, u, is_tail, {staging, static_cast<std::size_t>(r.bytes)});
                queue_->upload(staging, views[u].sub(r.offset, r.bytes));
            }
        }
        queue_->synchronize();
        versions_[b] = version;  // only once the stamps are on the device
        ++writes_;
    }

    swap::TieredStore& store_;
    const Settings& s_;
    Content content_;
    std::unique_ptr<Queue> queue_;
    std::vector<swap::BlockId> ids_;
    std::vector<std::uint64_t> versions_;  ///< writes each block has had
    HostBuffer buffer_;
    HostBuffer want_;
    std::vector<std::byte> stamps_;  ///< staging of one write's stamps
    std::uint64_t stamps_checked_ = 0;
    std::uint64_t stamp_mismatches_ = 0;
    std::uint64_t writes_ = 0;
};

int run_swap_bench(const SwapBenchFlags& f, const GlobalOptions& globals) {
    const Config config = make_config(globals);
    const Settings s = parse_settings(f, config);
    const std::unique_ptr<Device> device = open_device(device_selector(globals), config);
    const std::uint64_t device_budget = resolve_budget(std::nullopt, config, device->info());
    if (device_budget < s.block) {
        throw UsageError(kComponent,
                         fmt::format("a device budget of {} is below one block of {} (set --device-budget "
                                     "or a smaller --block)",
                                     format_size(device_budget), format_size(s.block)));
    }
    JsonDestination json(f.json, f.force);
    const bool text = !f.quiet && !json.to_stdout();

    swap::TieredStore store(*device, {.device_budget_bytes = device_budget,
                                      .host_budget_bytes = s.host_budget,
                                      .pinned_pool_bytes = s.pinned_pool,
                                      .unit_bytes = s.unit,
                                      .spill_dir = s.spill_dir,
                                      .direct_io = s.direct_io,
                                      .wash_queue_units = s.wash_units});
    const swap::StoreStats initial = store.stats();
    const std::uint64_t host_budget = initial.host.budget_bytes;
    // put() starts every block in the host tier, spilling to disk: refuse what cannot fit before any work.
    const std::uint64_t disk_room = s.spill_dir.empty() ? 0 : free_disk_bytes(s.spill_dir);
    if (s.working_set > host_budget && s.working_set - host_budget > disk_room) {
        throw OutOfMemory(
            kComponent,
            s.spill_dir.empty()
                ? "the working set does not fit the host budget and there is no spill directory"
                : fmt::format("the working set does not fit the host budget plus the free space of {}",
                              io::printable(s.spill_dir.string())),
            OutOfMemoryInfo{.requested_bytes = s.working_set,
                            .tier = s.spill_dir.empty() ? Tier::Host : Tier::Disk,
                            .budget_bytes = host_budget + disk_room});
    }
    if (s.blocks > kMaxBlocks) {
        throw UsageError(kComponent,
                         fmt::format("a working set of {} in blocks of {} makes {} blocks, more than the {} "
                                     "this bench takes (use a larger --block)",
                                     format_size(s.working_set), format_size(s.block), s.blocks, kMaxBlocks));
    }
    const bool reaches_disk = s.working_set > host_budget;

    AccessSequence shape(s.pattern, s.blocks, s.seed);
    if (text) {
        fmt::print(
            "swap-bench: {} over {} = {} block{} of {} (unit {}), {} accesses x {} repetitions, {} reads, "
            "seed {}{}\n",
            to_string(s.pattern), format_size(s.working_set), s.blocks, s.blocks == 1 ? "" : "s",
            format_size(s.block), format_size(s.unit), s.ops, s.repeat, format_percent(s.read_fraction),
            s.seed,
            s.pattern == Pattern::TileSweep
                ? fmt::format(", tiles {} x {}", shape.grid_rows(), shape.grid_cols())
                : std::string());
        fmt::print("device: {} ({}); budgets: device {} ({} of the working set), host {}, disk {}{}\n",
                   device->info().id(), device->info().name, format_size(device_budget),
                   format_ratio(device_budget, s.working_set), format_size(host_budget),
                   s.spill_dir.empty() ? std::string("none") : io::printable(s.spill_dir.string()),
                   reaches_disk ? "" : " (the working set fits the host tier)");
        std::fflush(stdout);
    }

    Bench bench(*device, store, s);
    Clock::time_point start = Clock::now();
    bench.populate();
    const double populate_seconds = seconds_since(start);
    const swap::StoreStats populated = store.stats();
    if (text) {
        fmt::print("populate: put {} in {} ({} of it in the spill file)\n", format_size(s.working_set),
                   format_seconds(populate_seconds), format_size(populated.disk.resident_bytes));
    }

    // Warm-up: one untimed repetition, so allocators and caches reach their steady state.
    std::mt19937_64 rng(s.seed ^ 0x5357415042454e43ULL);
    std::bernoulli_distribution is_read(s.read_fraction);
    {
        AccessSequence warm(s.pattern, s.blocks, rng());
        for (std::uint64_t i = 0; i < s.ops; ++i) bench.access(warm.next(), is_read(rng), nullptr);
    }

    swap_bench::RawDeviceBaseline raw_device(*device, s.unit, std::min(kRawDeviceFootprint, s.working_set));
    const std::uint64_t raw_copies =
        std::clamp(kRawDeviceCopyBytes / s.unit, kRawDeviceMinCopies, kRawDeviceMaxCopies);
    std::unique_ptr<swap_bench::RawDiskBaseline> raw_disk;

    std::vector<Repetition> reps;
    for (std::uint64_t r = 0; r < s.repeat; ++r) {
        AccessSequence seq(s.pattern, s.blocks, rng());
        std::vector<std::pair<std::uint64_t, bool>> plan;
        std::vector<swap::BlockId> order;
        if (s.prefetch) {
            // The whole order up front, handed to the store's prefetcher.
            plan.reserve(static_cast<std::size_t>(s.ops));
            order.reserve(static_cast<std::size_t>(s.ops));
            for (std::uint64_t i = 0; i < s.ops; ++i) {
                plan.emplace_back(seq.next(), is_read(rng));
                order.push_back(bench.ids()[plan.back().first]);
            }
        }
        store.drain();
        Repetition rep;
        const swap::StoreStats before = store.stats();
        start = Clock::now();
        if (s.prefetch) store.prefetch(order);
        for (std::uint64_t i = 0; i < s.ops; ++i) {
            if (s.prefetch) {
                bench.access(plan[i].first, plan[i].second, &rep);
            } else {
                const std::uint64_t b = seq.next();
                bench.access(b, is_read(rng), &rep);
            }
        }
        rep.loop_seconds = seconds_since(start);
        rep.delta = swap_bench::counters_since(store.stats(), before);
        store.drain();  // the washer finishes outside the timed loop
        rep.raw_device = raw_device.measure(raw_copies);
        if (rep.disk_bytes() != 0 && !s.spill_dir.empty()) {
            if (!raw_disk) {
                raw_disk = std::make_unique<swap_bench::RawDiskBaseline>(
                    s.spill_dir, s.direct_io, s.unit,
                    std::max<std::uint64_t>(std::min(kRawDiskFootprint, s.working_set) / s.unit, 2));
            }
            rep.raw_disk = raw_disk->measure();
        }
        if (text) {
            fmt::print(
                "rep {}: {} accesses in {} (acquire {}, stamps {}); moved device<->host {}, host<->disk {}; "
                "swap {} vs raw {}: {}\n",
                r + 1, s.ops, format_seconds(rep.loop_seconds), format_seconds(rep.acquire_seconds),
                format_seconds(rep.stamp_seconds), format_size(rep.device_bytes()),
                format_size(rep.disk_bytes()), rate(rep.swap_rate()), rate(rep.raw_rate()),
                format_percent(rep.swap_vs_raw()));
            std::fflush(stdout);
        }
        reps.push_back(rep);
    }

    store.drain();
    const swap::StoreStats final_stats = store.stats();
    const Bench::Verdict verdict = bench.verify();
    const bool passed = verdict.mismatched_blocks == 0 && bench.stamp_mismatches() == 0;

    // Hit rates over the timed loops only.
    std::uint64_t dev_hits = 0, dev_misses = 0, host_hits = 0, host_misses = 0;
    for (const Repetition& r : reps) {
        dev_hits += r.delta.device.hits;
        dev_misses += r.delta.device.misses;
        host_hits += r.delta.host.hits;
        host_misses += r.delta.host.misses;
    }
    auto ratio_of = [](std::uint64_t a, std::uint64_t b) {
        return a + b == 0 ? 0.0 : static_cast<double>(a) / static_cast<double>(a + b);
    };

    const Spread swap_rate = spread(reps, [](const Repetition& r) { return std::optional(r.swap_rate()); });
    const Spread raw_rate = spread(reps, [](const Repetition& r) { return std::optional(r.raw_rate()); });
    const Spread swap_vs_raw =
        spread(reps, [](const Repetition& r) { return std::optional(r.swap_vs_raw()); });
    const Spread device_vs_raw = spread(reps, [](const Repetition& r) { return r.device_store_vs_raw(); });
    const Spread disk_vs_raw = spread(reps, [](const Repetition& r) { return r.disk_store_vs_raw(); });
    const Spread raw_up =
        spread(reps, [](const Repetition& r) { return std::optional(r.raw_device.in_bytes_per_second); });
    const Spread raw_down =
        spread(reps, [](const Repetition& r) { return std::optional(r.raw_device.out_bytes_per_second); });
    const Spread raw_write = spread(reps, [](const Repetition& r) {
        return r.raw_disk ? std::optional(r.raw_disk->in_bytes_per_second) : std::nullopt;
    });
    const Spread raw_read = spread(reps, [](const Repetition& r) {
        return r.raw_disk ? std::optional(r.raw_disk->out_bytes_per_second) : std::nullopt;
    });
    auto store_tier_rate = [](std::uint64_t bytes, double seconds) -> std::optional<double> {
        if (bytes == 0 || seconds <= 0) return std::nullopt;
        return static_cast<double>(bytes) / seconds;
    };
    const Spread device_store_rate = spread(reps, [&](const Repetition& r) {
        return store_tier_rate(r.device_bytes(),
                               r.delta.device.swap_in_seconds + r.delta.device.swap_out_seconds);
    });
    const Spread disk_store_rate = spread(reps, [&](const Repetition& r) {
        return store_tier_rate(r.disk_bytes(), r.delta.disk.swap_in_seconds + r.delta.disk.swap_out_seconds);
    });

    nlohmann::json runs = nlohmann::json::array();
    for (const Repetition& r : reps) runs.push_back(repetition_json(r));
    auto opt = [](const std::optional<double>& v) { return swap_bench::optional_json(v); };
    nlohmann::json record = {
        {"command", "swap-bench"},
        {"device", device->info().id()},
        {"pattern", to_string(s.pattern)},
        {"working_set_bytes", s.working_set},
        {"block_bytes", s.block},
        {"block_count", s.blocks},
        {"unit_bytes", s.unit},
        {"ops", s.ops},
        {"repetitions", s.repeat},
        {"read_fraction", s.read_fraction},
        {"seed", s.seed},
        {"prefetch", s.prefetch},
        {"direct_io", s.direct_io},
        {"wash_units", s.wash_units},
        {"pinned_pool_bytes", s.pinned_pool},
        {"spill_dir", s.spill_dir.string()},
        {"device_budget_bytes", device_budget},
        {"host_budget_bytes", host_budget},
        {"reaches_disk", reaches_disk},
        {"populate_seconds", populate_seconds},
        {"raw_device_pinned", raw_device.pinned()},
        {"raw_device_copies", raw_copies},
        {"raw_disk_direct", raw_disk ? nlohmann::json(raw_disk->direct()) : nlohmann::json()},
        {"runs", runs},
        {"swap_bytes_per_second", opt(swap_rate.median)},
        {"raw_bytes_per_second", opt(raw_rate.median)},
        {"swap_vs_raw", opt(swap_vs_raw.median)},
        {"swap_vs_raw_min", opt(swap_vs_raw.min)},
        {"swap_vs_raw_max", opt(swap_vs_raw.max)},
        {"device_host_store_bytes_per_second", opt(device_store_rate.median)},
        {"device_host_store_vs_raw", opt(device_vs_raw.median)},
        {"host_disk_store_bytes_per_second", opt(disk_store_rate.median)},
        {"host_disk_store_vs_raw", opt(disk_vs_raw.median)},
        {"raw_upload_bytes_per_second", opt(raw_up.median)},
        {"raw_download_bytes_per_second", opt(raw_down.median)},
        {"raw_pwrite_bytes_per_second", opt(raw_write.median)},
        {"raw_pread_bytes_per_second", opt(raw_read.median)},
        {"device_hit_rate", ratio_of(dev_hits, dev_misses)},
        {"host_hit_rate", ratio_of(host_hits, host_misses)},
        {"stats",
         {{"device", tier_json(final_stats.device)},
          {"host", tier_json(final_stats.host)},
          {"disk", tier_json(final_stats.disk)},
          {"objects", final_stats.objects},
          {"units", final_stats.units},
          {"thrash_count", final_stats.thrash_count},
          {"oom_retries", final_stats.oom_retries},
          {"prefetch_count", final_stats.prefetch_count},
          {"prefetch_failures", final_stats.prefetch_failures},
          {"wash_failures", final_stats.wash_failures},
          {"checksum_failures", final_stats.checksum_failures}}},
        {"writes", bench.writes()},
        {"stamps_checked", bench.stamps_checked()},
        {"stamp_mismatches", bench.stamp_mismatches()},
        {"verified_blocks", verdict.blocks},
        {"verified_bytes", verdict.bytes},
        {"mismatched_blocks", verdict.mismatched_blocks},
        {"checksum_written", fmt::format("{:016x}", verdict.checksum_written)},
        {"checksum_read", fmt::format("{:016x}", verdict.checksum_read)},
        {"verify_seconds", verdict.seconds},
        {"verify_passed", passed},
    };
    if (s.pattern == Pattern::TileSweep) {
        record["grid_rows"] = shape.grid_rows();
        record["grid_cols"] = shape.grid_cols();
    }

    if (text) {
        print_tiers(final_stats);
        fmt::print("hit rates in the timed loops: device {}, host {} (of the device misses)\n",
                   format_percent(ratio_of(dev_hits, dev_misses)),
                   format_percent(ratio_of(host_hits, host_misses)));
        fmt::print(
            "verify: {} blocks ({}) read back in {}; checksum of everything written {:016x}, read back "
            "{:016x}; {} mismatching block{}; {} head stamps checked during the run, {} wrong: {}\n",
            verdict.blocks, format_size(verdict.bytes), format_seconds(verdict.seconds),
            verdict.checksum_written, verdict.checksum_read, verdict.mismatched_blocks,
            verdict.mismatched_blocks == 1 ? "" : "s", bench.stamps_checked(), bench.stamp_mismatches(),
            passed ? "ok" : "FAILED");
        fmt::print("\nthroughput, median (min – max) of {} repetition{}; GB/s = 1e9 bytes/s:\n", s.repeat,
                   s.repeat == 1 ? "" : "s");
        fmt::print("  end to end: swap {} vs raw {} for the same transfers: {} of raw\n",
                   format_spread(swap_rate, false), format_spread(raw_rate, false),
                   format_spread(swap_vs_raw, true));
        fmt::print(
            "  device<->host, as the store timed its copies: {} = {} of raw; raw upload {}, download {} ({} "
            "host memory)\n",
            format_spread(device_store_rate, false), format_spread(device_vs_raw, true),
            format_spread(raw_up, false), format_spread(raw_down, false),
            raw_device.pinned() ? "pinned" : "pageable");
        if (raw_disk) {
            fmt::print(
                "  host<->disk, as the store timed its I/O: {} = {} of raw; raw pwrite {}, pread {} ({})\n",
                format_spread(disk_store_rate, false), format_spread(disk_vs_raw, true),
                format_spread(raw_write, false), format_spread(raw_read, false),
                raw_disk->direct() ? "O_DIRECT" : "buffered");
        } else {
            fmt::print("  host<->disk: nothing moved in the timed loops\n");
        }
    }
    json.write(record);
    std::fflush(stdout);
    if (!passed) {
        throw CorruptionError(
            kComponent, verdict.mismatched_blocks != 0
                            ? fmt::format("{} of {} blocks read back wrong (first: block {})",
                                          verdict.mismatched_blocks, verdict.blocks, verdict.first_mismatch)
                            : fmt::format("{} of {} reads saw a stale or wrong head stamp",
                                          bench.stamp_mismatches(), bench.stamps_checked()));
    }
    return 0;
}

#else  // !OUTCORE_WITH_SWAP

int run_swap_bench(const SwapBenchFlags& /*f*/, const GlobalOptions& /*globals*/) {
    throw UsageError(kComponent,
                     "this build lacks the swap store (xxhash.h was not found when outcore was "
                     "configured: install libxxhash-dev and reconfigure)");
}

#endif

}  // namespace

void add_swap_bench_command(CLI::App& app, const GlobalOptions& globals, CommandList& commands) {
    auto* sub = app.add_subcommand(
        "swap-bench",
        "Access patterns through the tiered swap store against raw copies and disk I/O, verified "
        "(budgets: the global --device-budget and --host-budget)");
    auto f = std::make_shared<SwapBenchFlags>();
    sub->add_option("--pattern", f->pattern, "sequential, random, zipf or tile-sweep")
        ->required()
        ->type_name("NAME");
    sub->add_option("--working-set", f->working_set, "Bytes the blocks add up to: 4GiB, 512MiB")
        ->required()
        ->type_name("SIZE");
    sub->add_option("--unit", f->unit, "Swap unit, 1 MiB – 64 MiB (default: OUTCORE_CONF block, 16 MiB)")
        ->type_name("SIZE");
    sub->add_option("--block", f->block, "Size of each stored object (default: one unit)")->type_name("SIZE");
    sub->add_option("--spill-dir", f->spill_dir,
                    "Directory of the spill file; '' for no disk tier (default: OUTCORE_CONF spill_dir)")
        ->type_name("DIR");
    sub->add_option("--ops", f->ops, "Accesses per repetition (default: twice the block count, at least 16)")
        ->type_name("N");
    sub->add_option("--repeat", f->repeat,
                    "Timed repetitions, each followed by the raw baselines (default 3)")
        ->type_name("N");
    sub->add_option("--seed", f->seed, "Seed of the pattern and the data (default: random, printed)")
        ->type_name("N");
    sub->add_option("--read-fraction", f->read_fraction, "Fraction of accesses that only read (default 0.5)")
        ->type_name("F");
    sub->add_flag("--prefetch", f->prefetch, "Hand each repetition's access order to the store's prefetcher");
    sub->add_option("--wash-units", f->wash_units,
                    "Dirty host units the background washer writes per batch; 0 = no washer (default 8)")
        ->type_name("N");
    sub->add_option("--pinned", f->pinned,
                    "Of the host budget, bytes kept as pinned unit slots (default 64MiB); on a GPU, "
                    "copies from pageable memory are slower")
        ->type_name("SIZE");
    sub->add_flag("--buffered-io", f->buffered_io,
                  "No O_DIRECT for the spill file and the raw disk baseline");
    sub->add_option("--json", f->json, "Write a JSON record to stdout, or to FILE (--json=FILE)")
        ->expected(0, 1)
        ->type_name("[FILE]");
    sub->add_flag("--force", f->force, "Overwrite an existing --json FILE");
    sub->add_flag("--quiet", f->quiet, "No summary (errors and --json only)");
    commands.push_back({sub, [&globals, f] { return run_swap_bench(*f, globals); }});
}

}  // namespace outcore::cli
