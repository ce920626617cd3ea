// cli/swap_bench_support.cpp — access patterns, content, raw baselines and statistics
// arithmetic of `outcore swap-bench` (see swap_bench_support.hpp).
#include "swap_bench_support.hpp"

#if OUTCORE_WITH_SWAP

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/swap/file_io.hpp"
#include "outcore/swap/spill_file.hpp"
#include "run_support.hpp"

namespace outcore::cli::swap_bench {

namespace {

constexpr const char* kComponent = "swap-bench";
/// Salt separating the stamp stream from the base stream.
constexpr std::uint64_t kStampSalt = 0x5354414d50ULL;  // "STAMP"
/// EINTR / EAGAIN answers or transfers without progress tolerated in a row.
constexpr int kMaxRetries = 16;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

/// splitmix64's finalizer: a bijective mix, so distinct inputs give distinct words.
constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

/// Bytes [offset, offset + out.size()) of the stream whose 8-byte word i is mix64(key + i).
void fill_stream(std::uint64_t key, std::uint64_t offset, std::span<std::byte> out) noexcept {
    std::size_t done = 0;
    std::uint64_t pos = offset;
    while (done < out.size()) {
        const std::uint64_t word = pos / 8;
        const std::uint64_t skip = pos % 8;
        const std::size_t left = out.size() - done;
        if (skip == 0 && left >= 8) {
            const std::size_t words = left / 8;
            std::byte* p = out.data() + done;
            for (std::size_t k = 0; k < words; ++k) {
                const std::uint64_t v = mix64(key + word + k);
                std::memcpy(p + 8 * k, &v, 8);
            }
            done += words * 8;
            pos += words * 8;
            continue;
        }
        const std::uint64_t v = mix64(key + word);
        const std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(8 - skip), left);
        std::memcpy(out.data() + done, reinterpret_cast<const std::byte*>(&v) + skip, n);
        done += n;
        pos += n;
    }
}

}  // namespace

// --- patterns ----------------------------------------------------------------------------

std::optional<Pattern> parse_pattern(std::string_view text) noexcept {
    if (text == "sequential") return Pattern::Sequential;
    if (text == "random") return Pattern::Random;
    if (text == "zipf") return Pattern::Zipf;
    if (text == "tile-sweep") return Pattern::TileSweep;
    return std::nullopt;
}

std::string_view to_string(Pattern pattern) noexcept {
    switch (pattern) {
        case Pattern::Sequential: return "sequential";
        case Pattern::Random: return "random";
        case Pattern::Zipf: return "zipf";
        case Pattern::TileSweep: return "tile-sweep";
    }
    return "?";
}

AccessSequence::AccessSequence(Pattern pattern, std::uint64_t blocks, std::uint64_t seed)
    : pattern_(pattern), blocks_(std::max<std::uint64_t>(blocks, 1)), rng_(seed) {
    if (pattern_ == Pattern::Zipf) {
        zipf_cdf_.resize(static_cast<std::size_t>(blocks_));
        double sum = 0;
        for (std::uint64_t r = 0; r < blocks_; ++r) {
            sum += 1.0 / std::pow(static_cast<double>(r + 1), kZipfExponent);
            zipf_cdf_[static_cast<std::size_t>(r)] = sum;
        }
        rank_.resize(static_cast<std::size_t>(blocks_));
        std::iota(rank_.begin(), rank_.end(), std::uint64_t{0});
        std::shuffle(rank_.begin(), rank_.end(), rng_);
    }
    if (pattern_ == Pattern::TileSweep) {
        // The squarest grid that holds every block: cols = ⌈√n⌉, rows = ⌈n / cols⌉.
        std::uint64_t cols = static_cast<std::uint64_t>(std::sqrt(static_cast<double>(blocks_)));
        while (cols * cols < blocks_) ++cols;
        while (cols > 1 && (cols - 1) * (cols - 1) >= blocks_) --cols;
        grid_cols_ = std::max<std::uint64_t>(cols, 1);
        grid_rows_ = (blocks_ + grid_cols_ - 1) / grid_cols_;
    }
}

std::uint64_t AccessSequence::next() {
    switch (pattern_) {
        case Pattern::Sequential: return position_++ % blocks_;
        case Pattern::Random: return std::uniform_int_distribution<std::uint64_t>(0, blocks_ - 1)(rng_);
        case Pattern::Zipf: {
            const double u = std::uniform_real_distribution<double>(0.0, zipf_cdf_.back())(rng_);
            const auto it = std::upper_bound(zipf_cdf_.begin(), zipf_cdf_.end(), u);
            const auto r =
                std::min<std::size_t>(static_cast<std::size_t>(it - zipf_cdf_.begin()), zipf_cdf_.size() - 1);
            return rank_[r];
        }
        case Pattern::TileSweep: {
            const std::uint64_t cells = grid_rows_ * grid_cols_;
            for (;;) {
                const std::uint64_t p = position_++ % (2 * cells);
                std::uint64_t r = 0;
                std::uint64_t c = 0;
                if (p < cells) {  // row-wise: along each row of tiles
                    r = p / grid_cols_;
                    c = p % grid_cols_;
                } else {  // column-wise: down each column of tiles
                    c = (p - cells) / grid_rows_;
                    r = (p - cells) % grid_rows_;
                }
                const std::uint64_t block = r * grid_cols_ + c;
                if (block < blocks_) return block;  // the last row of tiles may be short
            }
        }
    }
    return 0;
}

// --- content -----------------------------------------------------------------------------

void Content::fill_base(std::uint64_t block, std::uint64_t offset, std::span<std::byte> out) const noexcept {
    fill_stream(mix64(seed_ ^ mix64(block)), offset, out);
}

StampRange Content::head(std::uint64_t unit_bytes) noexcept { return {0, std::min(kStampBytes, unit_bytes)}; }

StampRange Content::tail(std::uint64_t unit_bytes) noexcept {
    const std::uint64_t bytes = std::min(kStampBytes, unit_bytes - head(unit_bytes).bytes);
    return {unit_bytes - bytes, bytes};
}

void Content::fill_stamp(std::uint64_t block, std::uint64_t version, std::uint64_t unit, bool is_tail,
                         std::span<std::byte> out) const noexcept {
    std::uint64_t key = mix64(seed_ ^ kStampSalt);
    key = mix64(key ^ block);
    key = mix64(key ^ version);
    key = mix64(key ^ (2 * unit + (is_tail ? 1 : 0)));
    fill_stream(key, 0, out);
}

void Content::expected(std::uint64_t block, std::uint64_t version, std::span<std::byte> out) const noexcept {
    fill_base(block, 0, out);
    if (version == 0) return;
    const std::uint64_t bytes = out.size();
    for (std::uint64_t u = 0; u * unit_bytes_ < bytes; ++u) {
        const std::uint64_t start = u * unit_bytes_;
        const std::uint64_t unit = std::min(unit_bytes_, bytes - start);
        for (const bool is_tail : {false, true}) {
            const StampRange s = is_tail ? tail(unit) : head(unit);
            if (s.bytes != 0) fill_stamp(block, version, u, is_tail, out.subspan(start + s.offset, s.bytes));
        }
    }
}

// --- raw device copies ----------------------------------------------------------------------

RawDeviceBaseline::RawDeviceBaseline(Device& device, std::uint64_t unit_bytes, std::uint64_t footprint_bytes)
    : device_(device), unit_bytes_(unit_bytes), queue_(device.create_queue(QueueRole::General)) {
    constexpr std::uint64_t kMinBuffers = 2;
    constexpr std::uint64_t kMaxBuffers = 64;
    const std::uint64_t count = std::clamp(footprint_bytes / unit_bytes, kMinBuffers, kMaxBuffers);
    for (std::uint64_t i = 0; i < count; ++i) {
        device_blocks_.push_back(
            device.allocate({.bytes = unit_bytes, .kind = MemoryKind::Device, .tag = "swap-bench.raw"}));
        if (pinned_) {
            try {
                host_blocks_.push_back(device.allocate(
                    {.bytes = unit_bytes, .kind = MemoryKind::HostPinned, .tag = "swap-bench.raw"}));
            } catch (const Error&) {
                // No pinned memory here: the baseline copies from pageable memory, as the
                // store's host tier does beyond its pinned pool.
                pinned_ = false;
                host_blocks_.clear();
            }
        }
    }
    if (!pinned_) {
        for (std::uint64_t i = 0; i < count; ++i) {
            pageable_.push_back(
                std::make_unique_for_overwrite<std::byte[]>(static_cast<std::size_t>(unit_bytes)));
        }
    }
    // Touch every page once, on both sides, so the timed copies meet warm memory.
    for (std::uint64_t i = 0; i < count; ++i) {
        std::byte* host = pinned_ ? host_blocks_[i].host() : pageable_[i].get();
        std::memset(host, static_cast<int>(i + 1), static_cast<std::size_t>(unit_bytes));
        queue_->upload(host, BufferView(device_blocks_[i]));
    }
    queue_->synchronize();
}

RawRates RawDeviceBaseline::measure(std::uint64_t copies) {
    const std::size_t count = device_blocks_.size();
    auto host = [&](std::size_t i) { return pinned_ ? host_blocks_[i].host() : pageable_[i].get(); };
    RawRates r;
    r.bytes_each = copies * unit_bytes_;
    Clock::time_point start = Clock::now();
    for (std::uint64_t i = 0; i < copies; ++i) {
        // Different buffers on the two sides, as a swap-in meets a different slot each time.
        queue_->upload(host(i % count), BufferView(device_blocks_[(i + 1) % count]));
        queue_->synchronize();
    }
    const double up = seconds_since(start);
    start = Clock::now();
    for (std::uint64_t i = 0; i < copies; ++i) {
        queue_->download(BufferView(device_blocks_[(i + 1) % count]), host(i % count));
        queue_->synchronize();
    }
    const double down = seconds_since(start);
    r.in_bytes_per_second = up > 0 ? static_cast<double>(r.bytes_each) / up : 0.0;
    r.out_bytes_per_second = down > 0 ? static_cast<double>(r.bytes_each) / down : 0.0;
    return r;
}

// --- raw disk I/O ------------------------------------------------------------------------------

RawDiskBaseline::RawDiskBaseline(const std::filesystem::path& dir, bool want_direct, std::uint64_t unit_bytes,
                                 std::uint64_t slots)
    : dir_(dir.string()),
      unit_bytes_(unit_bytes),
      stride_(align_up(unit_bytes, swap::kSpillAlignment)),
      slots_(std::max<std::uint64_t>(slots, 1)) {
    swap::FileIo& io = swap::posix_file_io();
    bool direct = want_direct;
    int fd = io.open_tmpfile(dir_, direct);
    if (fd == -EINVAL && direct) {  // the filesystem refuses O_DIRECT: as the spill file does
        direct = false;
        fd = io.open_tmpfile(dir_, false);
    }
    if (fd < 0) throw IoError(kComponent, "cannot create the raw baseline file", -fd, dir_, "open");
    fd_ = fd;
    direct_ = direct;
    buffer_ = static_cast<std::byte*>(std::aligned_alloc(swap::kSpillAlignment, stride_));
    if (buffer_ == nullptr) {
        throw OutOfMemory(kComponent, "no memory for the raw baseline's buffer",
                          {.requested_bytes = stride_, .tier = Tier::Host});
    }
    fill_stream(mix64(kStampSalt), 0, {buffer_, static_cast<std::size_t>(stride_)});
    order_.resize(static_cast<std::size_t>(slots_));
    std::iota(order_.begin(), order_.end(), std::uint64_t{0});
    std::shuffle(order_.begin(), order_.end(), std::mt19937_64(mix64(slots_)));
    const int rc = io.fallocate(fd_, 0, 2 * slots_ * stride_);
    if (rc < 0 && rc != -EOPNOTSUPP && rc != -ENOSYS) {
        throw IoError(
            kComponent,
            fmt::format("reserving {} for the raw baseline failed", format_size(2 * slots_ * stride_)), -rc,
            dir_, "fallocate");
    }
    // One untimed pass, so the timed one overwrites written blocks as spill slots are reused.
    for (std::uint64_t s = 0; s < 2 * slots_; ++s) write_slot(s);
}

RawDiskBaseline::~RawDiskBaseline() {
    if (fd_ >= 0) (void)swap::posix_file_io().close(fd_);
    std::free(buffer_);  // NOLINT(cppcoreguidelines-no-malloc): pairs with aligned_alloc
}

void RawDiskBaseline::write_slot(std::uint64_t slot) {
    const std::uint64_t total = direct_ ? stride_ : unit_bytes_;
    std::uint64_t done = 0;
    int stalls = 0;
    while (done < total) {
        const ssize_t n =
            swap::posix_file_io().pwrite(fd_, buffer_ + done, total - done, slot * stride_ + done);
        if (n > 0) {
            done += static_cast<std::uint64_t>(n);
            stalls = 0;
            continue;
        }
        if ((n == 0 || n == -EINTR || n == -EAGAIN) && ++stalls <= kMaxRetries) continue;
        throw IoError(kComponent,
                      fmt::format("raw baseline write of {} at slot {} failed", format_size(total), slot),
                      n < 0 ? static_cast<int>(-n) : EIO, dir_, "pwrite");
    }
}

void RawDiskBaseline::read_slot(std::uint64_t slot) {
    const std::uint64_t total = direct_ ? stride_ : unit_bytes_;
    std::uint64_t done = 0;
    int stalls = 0;
    while (done < total) {
        const ssize_t n =
            swap::posix_file_io().pread(fd_, buffer_ + done, total - done, slot * stride_ + done);
        if (n > 0) {
            done += static_cast<std::uint64_t>(n);
            stalls = 0;
            continue;
        }
        if ((n == -EINTR || n == -EAGAIN) && ++stalls <= kMaxRetries) continue;
        throw IoError(kComponent,
                      fmt::format("raw baseline read of {} at slot {} failed", format_size(total), slot),
                      n < 0 ? static_cast<int>(-n) : EIO, dir_, "pread");
    }
}

RawRates RawDiskBaseline::measure() {
    RawRates r;
    r.bytes_each = slots_ * unit_bytes_;
    const std::uint64_t write_half = (measured_++ % 2) * slots_;
    const std::uint64_t read_half = slots_ - write_half;
    Clock::time_point start = Clock::now();
    for (std::uint64_t s = 0; s < slots_; ++s) write_slot(write_half + s);
    const double write = seconds_since(start);
    start = Clock::now();
    for (const std::uint64_t s : order_) read_slot(read_half + s);
    const double read = seconds_since(start);
    r.in_bytes_per_second = write > 0 ? static_cast<double>(r.bytes_each) / write : 0.0;
    r.out_bytes_per_second = read > 0 ? static_cast<double>(r.bytes_each) / read : 0.0;
    return r;
}

// --- statistics ------------------------------------------------------------------------------------

swap::TierStats counters_since(const swap::TierStats& a, const swap::TierStats& b) noexcept {
    swap::TierStats d = a;
    d.swap_in_bytes -= b.swap_in_bytes;
    d.swap_in_count -= b.swap_in_count;
    d.swap_out_bytes -= b.swap_out_bytes;
    d.swap_out_count -= b.swap_out_count;
    d.hits -= b.hits;
    d.misses -= b.misses;
    d.clean_evictions -= b.clean_evictions;
    d.dirty_evictions -= b.dirty_evictions;
    d.write_back_bytes -= b.write_back_bytes;
    d.swap_in_seconds -= b.swap_in_seconds;
    d.swap_out_seconds -= b.swap_out_seconds;
    return d;
}

swap::StoreStats counters_since(const swap::StoreStats& a, const swap::StoreStats& b) noexcept {
    swap::StoreStats d = a;
    d.device = counters_since(a.device, b.device);
    d.host = counters_since(a.host, b.host);
    d.disk = counters_since(a.disk, b.disk);
    d.checksum_failures -= b.checksum_failures;
    d.thrash_count -= b.thrash_count;
    d.oom_retries -= b.oom_retries;
    d.prefetch_count -= b.prefetch_count;
    d.prefetch_failures -= b.prefetch_failures;
    d.wash_failures -= b.wash_failures;
    return d;
}

double hit_rate(const swap::TierStats& t) noexcept {
    const std::uint64_t all = t.hits + t.misses;
    return all == 0 ? 0.0 : static_cast<double>(t.hits) / static_cast<double>(all);
}

double median(std::vector<double> values) {
    if (values.empty()) return 0;
    std::sort(values.begin(), values.end());
    const std::size_t mid = values.size() / 2;
    return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

std::string rate(double bytes_per_second) { return fmt::format("{:.2f} GB/s", bytes_per_second / 1e9); }

// --- reporting -----------------------------------------------------------------------------------

nlohmann::json tier_json(const swap::TierStats& t) {
    return {{"resident_bytes", t.resident_bytes},
            {"peak_bytes", t.peak_bytes},
            {"budget_bytes", t.budget_bytes},
            {"swap_in_bytes", t.swap_in_bytes},
            {"swap_in_count", t.swap_in_count},
            {"swap_out_bytes", t.swap_out_bytes},
            {"swap_out_count", t.swap_out_count},
            {"hits", t.hits},
            {"misses", t.misses},
            {"hit_rate", swap_bench::hit_rate(t)},
            {"clean_evictions", t.clean_evictions},
            {"dirty_evictions", t.dirty_evictions},
            {"write_back_bytes", t.write_back_bytes},
            {"swap_in_seconds", t.swap_in_seconds},
            {"swap_out_seconds", t.swap_out_seconds}};
}

nlohmann::json optional_json(const std::optional<double>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json();
}

nlohmann::json repetition_json(const Repetition& r) {
    nlohmann::json j = {
        {"loop_seconds", r.loop_seconds},
        {"acquire_seconds", r.acquire_seconds},
        {"stamp_seconds", r.stamp_seconds},
        {"swap_seconds", r.swap_seconds()},
        {"device_host_bytes", r.device_bytes()},
        {"disk_bytes", r.disk_bytes()},
        {"swap_bytes_per_second", r.swap_rate()},
        {"raw_bytes_per_second", r.raw_rate()},
        {"swap_vs_raw", r.swap_vs_raw()},
        {"raw_upload_bytes_per_second", r.raw_device.in_bytes_per_second},
        {"raw_download_bytes_per_second", r.raw_device.out_bytes_per_second},
        {"raw_pwrite_bytes_per_second",
         r.raw_disk ? nlohmann::json(r.raw_disk->in_bytes_per_second) : nlohmann::json()},
        {"raw_pread_bytes_per_second",
         r.raw_disk ? nlohmann::json(r.raw_disk->out_bytes_per_second) : nlohmann::json()},
        {"device_host_store_vs_raw", optional_json(r.device_store_vs_raw())},
        {"host_disk_store_vs_raw", optional_json(r.disk_store_vs_raw())},
        {"device_hit_rate", swap_bench::hit_rate(r.delta.device)},
        {"host_hit_rate", swap_bench::hit_rate(r.delta.host)},
        {"thrash_count", r.delta.thrash_count},
    };
    return j;
}

std::string format_spread(const Spread& s, bool percent) {
    if (!s.median) return "n/a";
    auto f = [&](double x) { return percent ? format_percent(x) : rate(x); };
    if (*s.min == *s.max) return f(*s.median);
    return fmt::format("{} ({} – {})", f(*s.median), f(*s.min), f(*s.max));
}

void print_tiers(const swap::StoreStats& st) {
    fmt::print(
        "tiers (whole run):   budget      peak      hits / misses  hit rate   swapped in (count)    "
        "swapped out (count)   evictions clean/dirty\n");
    const std::pair<const char*, const swap::TierStats*> tiers[] = {
        {"device", &st.device}, {"host", &st.host}, {"disk", &st.disk}};
    for (const auto& [name, t] : tiers) {
        fmt::print("  {:<8} {:>12} {:>10} {:>9} / {:<7} {:>7}  {:>11} ({:>6})  {:>11} ({:>6})  {:>8} / {}\n",
                   name, t->budget_bytes == 0 ? std::string("unlimited") : format_size(t->budget_bytes),
                   format_size(t->peak_bytes), t->hits, t->misses, format_percent(swap_bench::hit_rate(*t)),
                   format_size(t->swap_in_bytes), t->swap_in_count, format_size(t->swap_out_bytes),
                   t->swap_out_count, t->clean_evictions, t->dirty_evictions);
    }
    fmt::print(
        "  host write-back by the washer {}; thrash {}; prefetched {} units ({} gave up); oom retries {}; "
        "checksum failures {}; wash failures {}\n",
        format_size(st.host.write_back_bytes), st.thrash_count, st.prefetch_count, st.prefetch_failures,
        st.oom_retries, st.checksum_failures, st.wash_failures);
}

}  // namespace outcore::cli::swap_bench

#endif  // OUTCORE_WITH_SWAP
