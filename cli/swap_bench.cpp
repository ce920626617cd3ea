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
// With --threads N, N threads issue accesses at once: thread t owns the blocks b with
// b mod N = t and runs the pattern over its own blocks (its own seed), doing its share
// of --ops; no two threads ever touch the same block, so every block's write count,
// and thus its expected bytes, stays exact. With N > 1 the raw baselines also time
// uploads and downloads at once on two queues (both ways).
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
        threads, json;
    bool prefetch = false;
    bool buffered_io = false;
    bool force = false;
    bool quiet = false;
};

#if OUTCORE_WITH_SWAP

using swap_bench::AccessSequence;
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
/// --threads at most this many.
constexpr std::uint64_t kMaxThreads = 64;
/// Device <-> host moves the overlap monitor keeps per repetition: a few per access
/// (a swap-in and a dirty eviction per unit), at most this many.
constexpr std::uint64_t kMaxOverlapEvents = std::uint64_t{1} << 22;

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
    std::uint64_t threads = 1;
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
    s.threads = f.threads ? parse_count("--threads", *f.threads) : 1;
    if (s.threads == 0 || s.threads > kMaxThreads) {
        throw UsageError(kComponent, fmt::format("--threads {} outside 1 – {}", s.threads, kMaxThreads));
    }
    if (s.threads > s.blocks) {
        throw UsageError(kComponent, fmt::format("--threads {} is more than the {} block{} (each thread owns "
                                                 "its own blocks)",
                                                 s.threads, s.blocks, s.blocks == 1 ? "" : "s"));
    }
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

/// One thread's accesses of one repetition: its pattern over its own blocks and its
/// read/write draws, each from its own seed.
struct ThreadPlan {
    std::uint64_t sequence_seed = 0;
    std::uint64_t read_seed = 0;
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
    if (device_budget / s.block < s.threads) {
        // Each thread holds one block pinned at a time.
        throw UsageError(
            kComponent,
            fmt::format("a device budget of {} is below {} blocks of {}, one for each of --threads "
                        "{}",
                        format_size(device_budget), s.threads, format_size(s.block), s.threads));
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

    swap_bench::Bench bench(*device, store,
                            {.working_set = s.working_set,
                             .block = s.block,
                             .blocks = s.blocks,
                             .unit = s.unit,
                             .threads = s.threads,
                             .ops = s.ops,
                             .seed = s.seed,
                             .host_limit = s.host_limit});
    Clock::time_point start = Clock::now();
    bench.populate();
    const double populate_seconds = seconds_since(start);
    const swap::StoreStats populated = store.stats();
    if (text) {
        fmt::print("populate: put {} in {} ({} of it in the spill file)\n", format_size(s.working_set),
                   format_seconds(populate_seconds), format_size(populated.disk.resident_bytes));
    }

    // Each repetition's plan: per thread, the seed of its pattern and of its reads.
    std::mt19937_64 rng(s.seed ^ 0x5357415042454e43ULL);
    auto draw_plans = [&] {
        std::vector<ThreadPlan> plans(static_cast<std::size_t>(s.threads));
        for (ThreadPlan& p : plans) {
            p.sequence_seed = rng();
            p.read_seed = rng();
        }
        return plans;
    };
    // Thread t's accesses under `plan`: (block, read) pairs, streamed or listed up front.
    auto make_accesses = [&](std::uint64_t t, const ThreadPlan& plan) {
        return [seq = AccessSequence(s.pattern, bench.owned_blocks(t), plan.sequence_seed),
                reads = std::mt19937_64(plan.read_seed),
                is_read = std::bernoulli_distribution(s.read_fraction), t, &bench]() mutable {
            const std::uint64_t b = bench.global_block(t, seq.next());
            return std::pair<std::uint64_t, bool>(b, is_read(reads));
        };
    };
    // One loop: every thread issues its share of the accesses.
    auto run_loop = [&](const std::vector<ThreadPlan>& plans,
                        const std::vector<std::vector<std::pair<std::uint64_t, bool>>>* listed) {
        bench.run_threads([&](std::uint64_t t) {
            auto next = make_accesses(t, plans[static_cast<std::size_t>(t)]);
            const std::uint64_t n = bench.ops_of(t);
            for (std::uint64_t i = 0; i < n && !bench.stopped(); ++i) {
                const auto [b, read] = listed != nullptr ? (*listed)[static_cast<std::size_t>(t)][i] : next();
                bench.access(t, b, read);
            }
        });
    };

    // Warm-up: one untimed repetition, so allocators and caches reach their steady state.
    run_loop(draw_plans(), nullptr);

    swap_bench::RawDeviceBaseline raw_device(*device, s.unit, std::min(kRawDeviceFootprint, s.working_set));
    const std::uint64_t raw_copies =
        std::clamp(kRawDeviceCopyBytes / s.unit, kRawDeviceMinCopies, kRawDeviceMaxCopies);
    std::unique_ptr<swap_bench::RawDiskBaseline> raw_disk;
    swap_bench::DirectionOverlap overlap;
    std::uint64_t overlap_dropped = 0;
    const std::uint64_t units_per_block = (s.block + s.unit - 1) / s.unit;
    const std::uint64_t overlap_events =
        s.ops > kMaxOverlapEvents / (4 * units_per_block) ? kMaxOverlapEvents : 4 * units_per_block * s.ops;

    std::vector<Repetition> reps;
    for (std::uint64_t r = 0; r < s.repeat; ++r) {
        const std::vector<ThreadPlan> plans = draw_plans();
        std::vector<std::vector<std::pair<std::uint64_t, bool>>> listed;
        std::vector<swap::BlockId> order;
        if (s.prefetch) {
            // The whole order up front, handed to the store's prefetcher: the threads'
            // accesses interleaved round robin, as they roughly run.
            listed.resize(static_cast<std::size_t>(s.threads));
            for (std::uint64_t t = 0; t < s.threads; ++t) {
                auto next = make_accesses(t, plans[static_cast<std::size_t>(t)]);
                auto& list = listed[static_cast<std::size_t>(t)];
                list.reserve(static_cast<std::size_t>(bench.ops_of(t)));
                for (std::uint64_t i = 0; i < bench.ops_of(t); ++i) list.push_back(next());
            }
            order.reserve(static_cast<std::size_t>(s.ops));
            for (std::uint64_t i = 0; i < bench.ops_of(0); ++i) {
                for (std::uint64_t t = 0; t < s.threads; ++t) {
                    const auto& list = listed[static_cast<std::size_t>(t)];
                    if (i < list.size())
                        order.push_back(bench.ids()[list[static_cast<std::size_t>(i)].first]);
                }
            }
        }
        store.drain();
        Repetition rep;
        rep.threads = s.threads;
        overlap.start(static_cast<std::size_t>(overlap_events));
        const swap::StoreStats before = store.stats();
        start = Clock::now();
        if (s.prefetch) store.prefetch(order);
        run_loop(plans, s.prefetch ? &listed : nullptr);
        rep.loop_seconds = seconds_since(start);
        rep.delta = swap_bench::counters_since(store.stats(), before);
        rep.acquire_seconds = bench.mean_acquire_seconds();
        rep.stamp_seconds = bench.mean_stamp_seconds();
        rep.both_directions_seconds = overlap.both_seconds();
        overlap_dropped += overlap.dropped();
        store.drain();  // the washer finishes outside the timed loop
        rep.raw_device = raw_device.measure(raw_copies);
        if (s.threads > 1) rep.raw_device.both_bytes_per_second = raw_device.measure_both(raw_copies);
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
                "rep {}: {} accesses in {} (acquire {}, stamps {}{}); moved device<->host {}, host<->disk "
                "{}; "
                "swap {} vs raw {}: {}{}\n",
                r + 1, s.ops, format_seconds(rep.loop_seconds), format_seconds(rep.acquire_seconds),
                format_seconds(rep.stamp_seconds), s.threads > 1 ? ", per thread" : "",
                format_size(rep.device_bytes()), format_size(rep.disk_bytes()), rate(rep.swap_rate()),
                rate(rep.raw_rate()), format_percent(rep.swap_vs_raw()),
                rep.device_vs_raw_both()
                    ? fmt::format("; device<->host {} vs raw both ways {}: {}", rate(rep.device_rate()),
                                  rate(rep.raw_device.both_bytes_per_second),
                                  format_percent(*rep.device_vs_raw_both()))
                    : std::string());
            std::fflush(stdout);
        }
        reps.push_back(rep);
    }
    if (overlap_dropped != 0 && text) {
        fmt::print("note: {} device<->host moves were not timed for the overlap figure\n", overlap_dropped);
    }

    store.drain();
    const swap::StoreStats final_stats = store.stats();
    const swap_bench::Bench::Verdict verdict = bench.verify();
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
    const Spread device_rate =
        spread(reps, [](const Repetition& r) { return std::optional(r.device_rate()); });
    const Spread raw_both = spread(reps, [](const Repetition& r) {
        return r.raw_device.both_bytes_per_second > 0 ? std::optional(r.raw_device.both_bytes_per_second)
                                                      : std::nullopt;
    });
    const Spread device_vs_raw_both =
        spread(reps, [](const Repetition& r) { return r.device_vs_raw_both(); });
    const Spread both_directions = spread(reps, [](const Repetition& r) {
        return std::optional(r.both_directions_seconds / std::max(r.loop_seconds, 1e-9));
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
        {"threads", s.threads},
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
        {"device_host_bytes_per_second", opt(device_rate.median)},
        {"raw_both_ways_bytes_per_second", opt(raw_both.median)},
        {"device_host_vs_raw_both_ways", opt(device_vs_raw_both.median)},
        {"device_host_vs_raw_both_ways_min", opt(device_vs_raw_both.min)},
        {"device_host_vs_raw_both_ways_max", opt(device_vs_raw_both.max)},
        {"both_directions_fraction", opt(both_directions.median)},
        {"overlap_moves_dropped", overlap_dropped},
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
        if (s.threads > 1) {
            fmt::print(
                "  both ways at once, {} threads: device<->host {} vs raw both ways {} (two queues): {} of "
                "raw; "
                "both directions in flight {} of the loop\n",
                s.threads, format_spread(device_rate, false), format_spread(raw_both, false),
                format_spread(device_vs_raw_both, true), format_spread(both_directions, true));
        }
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
    sub->add_option("--threads", f->threads,
                    "Threads issuing accesses at once, 1 – 64 (default 1): thread t owns the blocks b with "
                    "b mod N = t and runs the pattern over them with its own seed, doing its share of --ops; "
                    "with N > 1 the raw baseline also times uploads and downloads at once (both ways). The "
                    "device budget must hold N blocks")
        ->type_name("N");
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
