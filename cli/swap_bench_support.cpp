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
#include <exception>
#include <latch>
#include <numeric>
#include <thread>

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

// --- the driver --------------------------------------------------------------------------------

Bench::Bench(Device& device, swap::TieredStore& store, const BenchShape& shape)
    : store_(store), shape_(shape), content_(shape.seed, shape.unit) {
    ids_.resize(static_cast<std::size_t>(shape.blocks));
    versions_.assign(static_cast<std::size_t>(shape.blocks), 0);
    buffer_ = allocate_host(shape.block, "a block buffer", shape.host_limit);
    want_ = allocate_host(shape.block, "a block buffer", shape.host_limit);
    const std::uint64_t units = (shape.block + shape.unit - 1) / shape.unit;
    workers_.resize(static_cast<std::size_t>(shape.threads));
    for (Worker& w : workers_) {
        w.queue = device.create_queue();
        w.stamps.resize(static_cast<std::size_t>(units * 2 * Content::kStampBytes));
    }
}

std::uint64_t Bench::block_bytes(std::uint64_t b) const {
    return std::min(shape_.block, shape_.working_set - b * shape_.block);
}

std::uint64_t Bench::owned_blocks(std::uint64_t t) const noexcept {
    return shape_.blocks / shape_.threads + (t < shape_.blocks % shape_.threads ? 1 : 0);
}

std::uint64_t Bench::ops_of(std::uint64_t t) const noexcept {
    return shape_.ops / shape_.threads + (t < shape_.ops % shape_.threads ? 1 : 0);
}

void Bench::populate() {
    for (std::uint64_t b = 0; b < shape_.blocks; ++b) {
        const std::span<std::byte> bytes(buffer_.get(), static_cast<std::size_t>(block_bytes(b)));
        content_.fill_base(b, 0, bytes);
        ids_[b] = store_.put(bytes);
    }
}

void Bench::access(std::uint64_t t, std::uint64_t b, bool read) {
    Worker& w = workers_[static_cast<std::size_t>(t)];
    const Clock::time_point start = Clock::now();
    swap::Pin pin = store_.acquire(ids_[b], read ? swap::Access::Read : swap::Access::Write);
    const Clock::time_point acquired = Clock::now();
    if (read) {
        check_head(w, b, pin);
    } else {
        stamp(w, b, pin);
    }
    const Clock::time_point done = Clock::now();
    pin.release();
    w.acquire_seconds += std::chrono::duration<double>(acquired - start).count();
    w.stamp_seconds += std::chrono::duration<double>(done - acquired).count();
}

void Bench::run_threads(const std::function<void(std::uint64_t)>& body) {
    for (Worker& w : workers_) w.acquire_seconds = w.stamp_seconds = 0;
    stop_.store(false);
    if (shape_.threads == 1) {
        body(0);
        return;
    }
    std::vector<std::exception_ptr> failures(static_cast<std::size_t>(shape_.threads));
    std::latch ready(static_cast<std::ptrdiff_t>(shape_.threads));
    std::exception_ptr start_failure;
    {
        std::vector<std::jthread> threads;
        threads.reserve(static_cast<std::size_t>(shape_.threads));
        try {
            for (std::uint64_t t = 0; t < shape_.threads; ++t) {
                threads.emplace_back([&, t] {
                    ready.arrive_and_wait();
                    if (stopped()) return;
                    try {
                        body(t);
                    } catch (...) {
                        failures[static_cast<std::size_t>(t)] = std::current_exception();
                        stop_.store(true);
                    }
                });
            }
        } catch (...) {  // no thread for the rest: release the ones started, then fail
            start_failure = std::current_exception();
            stop_.store(true);
            ready.count_down(static_cast<std::ptrdiff_t>(shape_.threads - threads.size()));
        }
    }  // joined
    if (start_failure) std::rethrow_exception(start_failure);
    for (const std::exception_ptr& e : failures) {
        if (e) std::rethrow_exception(e);
    }
}

double Bench::mean_acquire_seconds() const noexcept {
    double sum = 0;
    for (const Worker& w : workers_) sum += w.acquire_seconds;
    return sum / static_cast<double>(workers_.size());
}

double Bench::mean_stamp_seconds() const noexcept {
    double sum = 0;
    for (const Worker& w : workers_) sum += w.stamp_seconds;
    return sum / static_cast<double>(workers_.size());
}

Bench::Verdict Bench::verify() {
    Verdict v;
    const Clock::time_point start = Clock::now();
    std::vector<std::uint64_t> written(static_cast<std::size_t>(shape_.blocks));
    std::vector<std::uint64_t> read(static_cast<std::size_t>(shape_.blocks));
    for (std::uint64_t b = 0; b < shape_.blocks; ++b) {
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

std::uint64_t Bench::sum(std::uint64_t Worker::*field) const noexcept {
    std::uint64_t n = 0;
    for (const Worker& w : workers_) n += w.*field;
    return n;
}

void Bench::check_head(Worker& w, std::uint64_t b, const swap::Pin& pin) {
    const BufferView& unit0 = pin.views()[0];
    const StampRange h = Content::head(unit0.bytes);
    std::byte got[Content::kStampBytes];
    std::byte want[Content::kStampBytes];
    w.queue->download(unit0.sub(h.offset, h.bytes), got);
    w.queue->synchronize();
    const std::span<std::byte> expect(want, static_cast<std::size_t>(h.bytes));
    if (versions_[b] == 0) {
        content_.fill_base(b, 0, expect);
    } else {
        content_.fill_stamp(b, versions_[b], 0, false, expect);
    }
    ++w.stamps_checked;
    if (std::memcmp(got, want, static_cast<std::size_t>(h.bytes)) != 0) ++w.stamp_mismatches;
}

void Bench::stamp(Worker& w, std::uint64_t b, const swap::Pin& pin) {
    const std::uint64_t version = versions_[b] + 1;
    const std::span<const BufferView> views = pin.views();
    for (std::size_t u = 0; u < views.size(); ++u) {
        for (const bool is_tail : {false, true}) {
            const StampRange r = is_tail ? Content::tail(views[u].bytes) : Content::head(views[u].bytes);
            if (r.bytes == 0) continue;
            std::byte* staging = w.stamps.data() + (2 * u + (is_tail ? 1 : 0)) * Content::kStampBytes;
            content_.fill_stamp(b, version, u, is_tail, {staging, static_cast<std::size_t>(r.bytes)});
            w.queue->upload(staging, views[u].sub(r.offset, r.bytes));
        }
    }
    w.queue->synchronize();
    versions_[b] = version;  // only once the stamps are on the device
    ++w.writes;
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

double RawDeviceBaseline::time_copies(Queue& queue, bool upload, std::uint64_t copies, std::size_t first,
                                      std::size_t count) {
    const Clock::time_point start = Clock::now();
    for (std::uint64_t i = 0; i < copies; ++i) {
        // Different buffers on the two sides, as a swap-in meets a different slot each time.
        std::byte* h = host(first + static_cast<std::size_t>(i % count));
        const BufferView d(device_blocks_[first + static_cast<std::size_t>((i + 1) % count)]);
        if (upload) {
            queue.upload(h, d);
        } else {
            queue.download(d, h);
        }
        queue.synchronize();
    }
    return seconds_since(start);
}

RawRates RawDeviceBaseline::measure(std::uint64_t copies) {
    const std::size_t count = device_blocks_.size();
    RawRates r;
    r.bytes_each = copies * unit_bytes_;
    const double up = time_copies(*queue_, true, copies, 0, count);
    const double down = time_copies(*queue_, false, copies, 0, count);
    r.in_bytes_per_second = up > 0 ? static_cast<double>(r.bytes_each) / up : 0.0;
    r.out_bytes_per_second = down > 0 ? static_cast<double>(r.bytes_each) / down : 0.0;
    return r;
}

double RawDeviceBaseline::measure_both(std::uint64_t copies) {
    if (!second_queue_) second_queue_ = device_.create_queue(QueueRole::General);
    // Disjoint halves (at least one buffer each: the constructor makes at least two), so
    // the two directions never touch the same bytes.
    const std::size_t half = device_blocks_.size() / 2;
    const std::size_t rest = device_blocks_.size() - half;
    std::latch ready(2);
    std::exception_ptr failure;
    Clock::time_point down_end;
    std::thread downloads([&] {
        ready.arrive_and_wait();
        try {
            (void)time_copies(*second_queue_, false, copies, half, rest);
        } catch (...) {
            failure = std::current_exception();
        }
        down_end = Clock::now();
    });
    ready.arrive_and_wait();
    const Clock::time_point start = Clock::now();
    std::exception_ptr up_failure;
    try {
        (void)time_copies(*queue_, true, copies, 0, half);
    } catch (...) {
        up_failure = std::current_exception();
    }
    const Clock::time_point up_end = Clock::now();
    downloads.join();
    if (up_failure) std::rethrow_exception(up_failure);
    if (failure) std::rethrow_exception(failure);
    const double seconds = std::chrono::duration<double>(std::max(up_end, down_end) - start).count();
    return seconds > 0 ? static_cast<double>(2 * copies * unit_bytes_) / seconds : 0.0;
}

// --- both directions in flight --------------------------------------------------------------------

void DirectionOverlap::start(std::size_t capacity) {
    std::vector<Interval> fresh;
    fresh.reserve(capacity);
    const std::lock_guard lock(mutex_);
    intervals_ = std::move(fresh);
    dropped_ = 0;
}

void DirectionOverlap::on_swap(const monitor::SwapEvent& e) noexcept {
    const bool up = e.kind == monitor::SwapKind::SwapIn && e.from == Tier::Host && e.to == Tier::Device;
    const bool down = e.kind == monitor::SwapKind::SwapOut && e.from == Tier::Device && e.to == Tier::Host;
    if ((!up && !down) || e.end_ns <= e.begin_ns) return;
    const std::lock_guard lock(mutex_);
    if (intervals_.size() == intervals_.capacity()) {
        ++dropped_;  // never allocate here
        return;
    }
    intervals_.push_back({e.begin_ns, e.end_ns, up});
}

double DirectionOverlap::both_seconds() const {
    struct Edge {
        std::int64_t ns;
        int up;    ///< +1 / −1 / 0
        int down;  ///< +1 / −1 / 0
    };
    std::vector<Edge> edges;
    {
        const std::lock_guard lock(mutex_);
        edges.reserve(2 * intervals_.size());
        for (const Interval& i : intervals_) {
            edges.push_back({i.begin_ns, i.up ? 1 : 0, i.up ? 0 : 1});
            edges.push_back({i.end_ns, i.up ? -1 : 0, i.up ? 0 : -1});
        }
    }
    // Ends before begins at the same instant: touching intervals do not overlap.
    std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) {
        return a.ns != b.ns ? a.ns < b.ns : a.up + a.down < b.up + b.down;
    });
    std::int64_t both_ns = 0;
    int up = 0, down = 0;
    for (std::size_t k = 0; k < edges.size(); ++k) {
        up += edges[k].up;
        down += edges[k].down;
        if (up > 0 && down > 0 && k + 1 < edges.size()) both_ns += edges[k + 1].ns - edges[k].ns;
    }
    return static_cast<double>(both_ns) * 1e-9;
}

std::uint64_t DirectionOverlap::dropped() const {
    const std::lock_guard lock(mutex_);
    return dropped_;
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
        {"threads", r.threads},
        {"device_host_bytes_per_second", r.device_rate()},
        {"raw_both_ways_bytes_per_second", r.raw_device.both_bytes_per_second > 0
                                               ? nlohmann::json(r.raw_device.both_bytes_per_second)
                                               : nlohmann::json()},
        {"device_host_vs_raw_both_ways", optional_json(r.device_vs_raw_both())},
        {"both_directions_seconds", r.both_directions_seconds},
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
