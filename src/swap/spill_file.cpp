#include "outcore/swap/spill_file.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <utility>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace outcore::swap {

std::uint64_t checksum(std::span<const std::byte> bytes) noexcept {
    return XXH3_64bits(bytes.data(), bytes.size());
}

namespace {

constexpr std::string_view kComponent = "spill";
// Consecutive EINTR/EAGAIN answers or transfers without progress before giving up.
constexpr int kMaxRetries = 16;
// Bounce buffers kept for reuse; more threads allocate their own and free them after.
constexpr std::size_t kMaxPooledBounce = 2;

constexpr std::uint64_t align_up(std::uint64_t v) noexcept {
    return (v + kSpillAlignment - 1) & ~(kSpillAlignment - 1);
}
constexpr std::uint64_t align_down(std::uint64_t v) noexcept { return v & ~(kSpillAlignment - 1); }

bool is_aligned(const void* p, std::uint64_t bytes) noexcept {
    return reinterpret_cast<std::uintptr_t>(p) % kSpillAlignment == 0 && bytes % kSpillAlignment == 0;
}

bool transient(long long rc) noexcept { return rc == -EINTR || rc == -EAGAIN; }

// EAGAIN: give the kernel a moment (10 µs doubling, at most 100 µs: about 1.5 ms in
// all before giving up); EINTR: retry at once.
void back_off(long long rc, int attempt) {
    if (rc != -EAGAIN) return;
    std::this_thread::sleep_for(std::chrono::microseconds(std::min(10 << std::min(attempt, 4), 100)));
}

// What one transfer loop did, added to the statistics by the caller.
struct Tally {
    std::uint64_t retries = 0;
    double seconds = 0;
};

class Stopwatch {
public:
    explicit Stopwatch(Tally& tally) noexcept : tally_(tally), start_(std::chrono::steady_clock::now()) {}
    ~Stopwatch() {
        tally_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }
    Stopwatch(const Stopwatch&) = delete;
    Stopwatch& operator=(const Stopwatch&) = delete;

private:
    Tally& tally_;
    std::chrono::steady_clock::time_point start_;
};

// Calls `call` until it answers something other than EINTR/EAGAIN, at most kMaxRetries times.
template <class Call>
long long call_retrying(Call&& call, Tally& tally) {
    long long rc = call();
    for (int attempt = 0; transient(rc) && attempt < kMaxRetries; ++attempt) {
        ++tally.retries;
        back_off(rc, attempt);
        rc = call();
    }
    return rc;
}

[[noreturn]] void throw_io(std::string_view what, int err, const std::string& dir, FileOp op) {
    throw IoError(kComponent, what, err, dir, to_string(op));
}

// Writes [data, data + total) at `offset`, continuing short writes and retrying
// EINTR/EAGAIN. With O_DIRECT every call starts on a 4 KiB boundary: an unaligned
// short write is continued from the boundary below (rewriting the same bytes).
void write_all(FileIo& io, int fd, bool direct, const std::byte* data, std::uint64_t total,
               std::uint64_t offset, const std::string& dir, Tally& tally) {
    Stopwatch watch(tally);
    std::uint64_t done = 0;
    int stalls = 0;
    while (done < total) {
        const std::uint64_t pos = direct ? align_down(done) : done;
        const long long n = io.pwrite(fd, data + pos, total - pos, offset + pos);
        if (n < 0 && !transient(n)) {
            throw_io(fmt::format("writing {} B at offset {} of the spill file failed", total, offset),
                     static_cast<int>(-n), dir, FileOp::Write);
        }
        if (n < 0 || pos + static_cast<std::uint64_t>(n) <= done) {
            if (++stalls > kMaxRetries) {
                const int err = n < 0 ? static_cast<int>(-n) : EIO;
                throw_io(fmt::format("writing {} B at offset {} made no progress after {} tries", total,
                                     offset, stalls),
                         err, dir, FileOp::Write);
            }
            ++tally.retries;
            back_off(n, stalls);
            continue;
        }
        stalls = 0;
        done = pos + static_cast<std::uint64_t>(n);
        if (done < total) ++tally.retries;
    }
}

enum class ReadResult : unsigned char { Complete, EndOfFile };

// Reads at least `need` of the `request` bytes at `offset` into `data` (request is
// need rounded up for O_DIRECT). A read that returns nothing new is the end of the file.
ReadResult read_all(FileIo& io, int fd, bool direct, std::byte* data, std::uint64_t need,
                    std::uint64_t request, std::uint64_t offset, const std::string& dir, Tally& tally) {
    Stopwatch watch(tally);
    std::uint64_t done = 0;
    int stalls = 0;
    while (done < need) {
        const std::uint64_t pos = direct ? align_down(done) : done;
        const long long n = io.pread(fd, data + pos, request - pos, offset + pos);
        if (transient(n)) {
            if (++stalls > kMaxRetries) {
                throw_io(fmt::format("reading {} B at offset {} kept failing after {} tries", need, offset,
                                     stalls),
                         static_cast<int>(-n), dir, FileOp::Read);
            }
            ++tally.retries;
            back_off(n, stalls);
            continue;
        }
        if (n < 0) {
            throw_io(fmt::format("reading {} B at offset {} of the spill file failed", need, offset),
                     static_cast<int>(-n), dir, FileOp::Read);
        }
        if (pos + static_cast<std::uint64_t>(n) <= done) return ReadResult::EndOfFile;
        stalls = 0;
        done = pos + static_cast<std::uint64_t>(n);
        if (done < need) ++tally.retries;
    }
    return ReadResult::Complete;
}

// IoError unless `dir` is an existing directory this process may create files in.
void check_directory(const std::string& dir) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0)
        throw IoError(kComponent, "spill directory is not usable", errno, dir, "stat");
    if (!S_ISDIR(st.st_mode))
        throw IoError(kComponent, "spill directory is not usable", ENOTDIR, dir, "stat");
    if (::access(dir.c_str(), W_OK | X_OK) != 0) {
        throw IoError(kComponent, "spill directory is not writable", errno, dir, "access");
    }
}

}  // namespace

void SpillFile::AlignedFree::operator()(std::byte* p) const noexcept { std::free(p); }

SpillFile::SpillFile(SpillOptions options)
    : options_(std::move(options)), io_(options_.io != nullptr ? options_.io : &posix_file_io()) {
    if (options_.slot_bytes == 0 || options_.slot_bytes > kSpillMaxSlotBytes) {
        throw UsageError(kComponent, fmt::format("slot size {} B outside 1 B – {}", options_.slot_bytes,
                                                 format_size(kSpillMaxSlotBytes)));
    }
    stride_ = align_up(options_.slot_bytes);
    max_slots_ = options_.limit_bytes == 0 ? UINT64_MAX : options_.limit_bytes / stride_;
    dir_ = options_.dir.string();
    const std::string& dir = dir_;
    check_directory(dir);
    bounce_pool_.reserve(kMaxPooledBounce);  // return_bounce() never allocates

    Tally tally;
    bool direct = options_.direct;
    long long fd = call_retrying([&] { return io_->open_tmpfile(dir, direct); }, tally);
    if (fd == -EINVAL && direct) {
        // The filesystem refuses O_DIRECT (tmpfs before Linux 6.6, some FUSE mounts).
        direct = false;
        fd = call_retrying([&] { return io_->open_tmpfile(dir, direct); }, tally);
    }
    if (fd < 0) throw IoError(kComponent, "cannot create the spill file", static_cast<int>(-fd), dir, "open");
    fd_ = static_cast<int>(fd);
    direct_ = direct;
    stats_.retries = tally.retries;
}

SpillFile::~SpillFile() {
    if (fd_ >= 0) (void)io_->close(fd_);
}

std::uint64_t SpillFile::take_slot(std::uint64_t bytes) {
    std::lock_guard lock(mutex_);
    std::uint64_t index = 0;
    if (!free_slots_.empty()) {
        index = free_slots_.back();
        free_slots_.pop_back();
    } else if (slots_.size() >= max_slots_) {
        throw OutOfMemory(kComponent, "spill file size limit reached",
                          {.requested_bytes = bytes,
                           .tier = Tier::Disk,
                           .budget_bytes = options_.limit_bytes,
                           .in_use_bytes = stats_.slots_used * stride_,
                           .largest_free_bytes = 0});
    } else {
        // The free list gets room for every slot now, so return_slot() and free()
        // never allocate (they are noexcept).
        if (free_slots_.capacity() < slots_.size() + 1) {
            free_slots_.reserve(std::max<std::size_t>(2 * free_slots_.capacity(), slots_.size() + 1));
        }
        index = slots_.size();
        slots_.emplace_back();
    }
    slots_[index].state = SlotState::Writing;
    return index;
}

void SpillFile::return_slot(std::uint64_t index) noexcept {
    std::lock_guard lock(mutex_);
    slots_[index] = SlotRecord{};
    // push_back cannot throw: take_slot() keeps the capacity at least slots_.size().
    free_slots_.push_back(index);
}

void SpillFile::reserve_for(std::uint64_t index) {
    const std::uint64_t end = (index + 1) * stride_;
    std::lock_guard grow(grow_mutex_);
    if (!fallocate_supported_ || end <= reserved_bytes_) return;
    std::uint64_t target =
        std::max(end, reserved_bytes_ + std::max<std::uint64_t>(options_.reserve_slots, 1) * stride_);
    if (max_slots_ != UINT64_MAX) target = std::min(target, max_slots_ * stride_);
    Tally tally;
    const std::uint64_t from = reserved_bytes_;
    long long rc = call_retrying([&] { return io_->fallocate(fd_, from, target - from); }, tally);
    if (rc == -ENOSPC && target > end) {
        // The batch does not fit; the one slot may.
        target = end;
        rc = call_retrying([&] { return io_->fallocate(fd_, from, target - from); }, tally);
    }
    if (rc == -EOPNOTSUPP || rc == -ENOSYS) {
        // No reservation here (some network and FUSE filesystems): writes extend the
        // file and report ENOSPC themselves.
        fallocate_supported_ = false;
    } else if (rc < 0) {
        throw IoError(kComponent, fmt::format("reserving {} B for slot {} failed", target - from, index),
                      static_cast<int>(-rc), dir_, "fallocate");
    } else {
        reserved_bytes_ = target;
    }
    std::lock_guard lock(mutex_);
    stats_.retries += tally.retries;
    if (rc == 0) stats_.file_bytes = std::max(stats_.file_bytes, target);
}

SpillFile::AlignedBuffer SpillFile::take_bounce() {
    {
        std::lock_guard lock(mutex_);
        if (!bounce_pool_.empty()) {
            AlignedBuffer b = std::move(bounce_pool_.back());
            bounce_pool_.pop_back();
            return b;
        }
    }
    void* p = std::aligned_alloc(kSpillAlignment, stride_);
    if (p == nullptr) {
        throw OutOfMemory(kComponent, "no host memory for an O_DIRECT bounce buffer",
                          {.requested_bytes = stride_, .tier = Tier::Host});
    }
    return AlignedBuffer(static_cast<std::byte*>(p));
}

void SpillFile::return_bounce(AlignedBuffer buffer) noexcept {
    std::lock_guard lock(mutex_);
    if (bounce_pool_.size() < kMaxPooledBounce && bounce_pool_.capacity() > bounce_pool_.size()) {
        bounce_pool_.push_back(std::move(buffer));
    }
}

SpillSlot SpillFile::write(std::span<const std::byte> bytes) {
    if (bytes.size() > options_.slot_bytes) {
        throw UsageError(kComponent,
                         fmt::format("{} B do not fit a slot of {} B", bytes.size(), options_.slot_bytes));
    }
    const std::uint64_t sum = checksum(bytes);
    const std::uint64_t index = take_slot(bytes.size());
    const std::uint64_t offset = index * stride_;
    Tally tally;
    std::uint64_t written = 0;
    try {
        if (!bytes.empty()) {
            reserve_for(index);
            if (!direct_) {
                written = bytes.size();
                write_all(*io_, fd_, false, bytes.data(), written, offset, dir_, tally);
            } else if (is_aligned(bytes.data(), bytes.size())) {
                written = bytes.size();
                write_all(*io_, fd_, true, bytes.data(), written, offset, dir_, tally);
            } else {
                written = align_up(bytes.size());
                AlignedBuffer bounce = take_bounce();
                std::memcpy(bounce.get(), bytes.data(), bytes.size());
                std::memset(bounce.get() + bytes.size(), 0, written - bytes.size());
                try {
                    write_all(*io_, fd_, true, bounce.get(), written, offset, dir_, tally);
                } catch (...) {
                    return_bounce(std::move(bounce));
                    throw;
                }
                return_bounce(std::move(bounce));
            }
        }
    } catch (...) {
        return_slot(index);
        std::lock_guard lock(mutex_);
        stats_.retries += tally.retries;
        stats_.write_seconds += tally.seconds;
        throw;
    }
    std::lock_guard lock(mutex_);
    slots_[index] = {.bytes = bytes.size(), .checksum = sum, .state = SlotState::Used};
    ++stats_.slots_used;
    stats_.slots_peak = std::max(stats_.slots_peak, stats_.slots_used);
    if (written != 0) stats_.file_bytes = std::max(stats_.file_bytes, offset + written);
    stats_.bytes_written += bytes.size();
    ++stats_.write_count;
    stats_.retries += tally.retries;
    stats_.write_seconds += tally.seconds;
    return {.index = index, .bytes = bytes.size(), .checksum = sum};
}

void SpillFile::read(const SpillSlot& s, std::span<std::byte> out) {
    // Whatever happens below, a throw leaves no partial or unverified bytes in `out`.
    struct ZeroOnThrow {
        std::span<std::byte> out;
        int exceptions = std::uncaught_exceptions();
        ~ZeroOnThrow() {
            if (std::uncaught_exceptions() > exceptions && !out.empty())
                std::memset(out.data(), 0, out.size());
        }
    } guard{out};

    {
        std::lock_guard lock(mutex_);
        const bool held = s.index < slots_.size() && slots_[s.index].state == SlotState::Used &&
                          slots_[s.index].bytes == s.bytes && slots_[s.index].checksum == s.checksum;
        if (!held) {
            throw UsageError(kComponent,
                             fmt::format("slot {} ({} B) is not held by this spill file", s.index, s.bytes));
        }
    }
    if (out.size() != s.bytes) {
        throw UsageError(kComponent,
                         fmt::format("reading slot {} of {} B into {} B", s.index, s.bytes, out.size()));
    }

    const std::uint64_t offset = s.index * stride_;
    Tally tally;
    ReadResult result = ReadResult::Complete;
    std::uint64_t sum = checksum({});
    auto account = [&](bool ok) {
        std::lock_guard lock(mutex_);
        stats_.retries += tally.retries;
        stats_.read_seconds += tally.seconds;
        if (ok) {
            stats_.bytes_read += s.bytes;
            ++stats_.read_count;
        } else {
            ++stats_.checksum_failures;
        }
    };
    try {
        if (s.bytes == 0) {
            // Nothing to read; the checksum below still checks the handle.
        } else if (!direct_ || is_aligned(out.data(), out.size())) {
            result = read_all(*io_, fd_, direct_, out.data(), s.bytes, s.bytes, offset, dir_, tally);
            if (result == ReadResult::Complete) sum = checksum(out);
        } else {
            AlignedBuffer bounce = take_bounce();
            try {
                result =
                    read_all(*io_, fd_, true, bounce.get(), s.bytes, align_up(s.bytes), offset, dir_, tally);
            } catch (...) {
                return_bounce(std::move(bounce));
                throw;
            }
            // Verified before the copy, so `out` only ever receives good bytes.
            if (result == ReadResult::Complete) {
                sum = checksum({bounce.get(), s.bytes});
                if (sum == s.checksum) std::memcpy(out.data(), bounce.get(), s.bytes);
            }
            return_bounce(std::move(bounce));
        }
    } catch (const IoError&) {
        std::lock_guard lock(mutex_);
        stats_.retries += tally.retries;
        stats_.read_seconds += tally.seconds;
        throw;
    }
    if (result == ReadResult::EndOfFile) {
        account(false);
        throw CorruptionError(
            kComponent, fmt::format("spill file ends inside slot {} (offset {}, {} B): truncated", s.index,
                                    offset, s.bytes));
    }
    if (sum != s.checksum) {
        account(false);
        throw CorruptionError(
            kComponent,
            fmt::format("checksum mismatch in slot {} (offset {}, {} B): expected {:016x}, read {:016x}",
                        s.index, offset, s.bytes, s.checksum, sum));
    }
    account(true);
}

void SpillFile::free(const SpillSlot& s) noexcept {
    std::lock_guard lock(mutex_);
    if (s.index >= slots_.size()) return;
    SlotRecord& r = slots_[s.index];
    if (r.state != SlotState::Used || r.bytes != s.bytes || r.checksum != s.checksum) return;
    r = SlotRecord{};
    free_slots_.push_back(s.index);  // capacity reserved by take_slot(): never allocates
    --stats_.slots_used;
}

SpillStats SpillFile::stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
}

}  // namespace outcore::swap
