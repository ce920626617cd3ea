// outcore/swap/spill_file.hpp — the cold tier: one unnamed file in spill_dir, cut
// into equal slots of one swap unit, each written with its XXH3-64 checksum kept in
// memory and verified on every read.
//
//   swap::SpillFile spill({.dir = "/var/tmp", .slot_bytes = 16 * kMiB, .limit_bytes = 64 * kGiB});
//   swap::SpillSlot s = spill.write(bytes);     // reserves a slot, writes, checksums
//   spill.read(s, out);                         // CorruptionError if the bytes changed
//   spill.free(s);
//
// The file is created unnamed (O_TMPFILE, else mkstemp + unlink at once), mode 0600,
// so nothing is left on disk after exit or a kill and no other user can read it. It
// uses O_DIRECT with 4 KiB-aligned bounce buffers where the filesystem allows, plain
// pread/pwrite otherwise. Space is reserved ahead with fallocate where supported.
//
// Errors: a missing, non-directory or read-only dir is an IoError from the
// constructor. write(): EINTR/EAGAIN retried (a bounded number of times, EAGAIN after
// a short sleep), short writes continued; ENOSPC, EIO or the size limit make it throw
// (IoError, or OutOfMemory{tier Disk} for the limit) with nothing changed — slots
// already written stay readable. read(): short reads continued; a checksum mismatch or
// a read past the end of the file is CorruptionError; wrong bytes are never returned
// (on any throw `out` is zero-filled).
//
// Thread safety: every function may be called from several threads at once; reads
// and writes of different slots run concurrently (positional I/O, no lock held
// during a read or write system call; growing the file takes a second lock that only
// other growing writers wait for).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "outcore/swap/file_io.hpp"

namespace outcore::swap {

/// XXH3-64 of `bytes` (libxxhash, seed 0).
[[nodiscard]] std::uint64_t checksum(std::span<const std::byte> bytes) noexcept;

/// Alignment of O_DIRECT transfers and of every slot's offset.
inline constexpr std::uint64_t kSpillAlignment = 4096;
/// Largest slot SpillFile accepts (one bounce buffer per transfer in flight).
inline constexpr std::uint64_t kSpillMaxSlotBytes = 1ULL << 30;

struct SpillOptions {
    std::filesystem::path dir;
    /// Every slot's size (the swap unit), 1 B – 1 GiB; a multiple of 4096 is best for O_DIRECT.
    std::uint64_t slot_bytes = 16ULL << 20;
    /// Most bytes the file may grow to; 0 = unlimited (the filesystem's free space).
    std::uint64_t limit_bytes = 0;
    /// Try O_DIRECT (falls back to buffered I/O when the filesystem refuses it).
    bool direct = true;
    /// Slots reserved with fallocate at a time when the file grows (0 counts as 1).
    std::uint32_t reserve_slots = 4;
    /// The system calls; null = posix_file_io(). Must outlive the file.
    FileIo* io = nullptr;
};

/// A written slot: where, how many bytes, and the checksum of what was written.
struct SpillSlot {
    std::uint64_t index = UINT64_MAX;
    std::uint64_t bytes = 0;
    std::uint64_t checksum = 0;
    [[nodiscard]] bool valid() const noexcept { return index != UINT64_MAX; }
};

struct SpillStats {
    std::uint64_t slots_used = 0;
    std::uint64_t slots_peak = 0;
    std::uint64_t file_bytes = 0;  ///< length the file has been given (written or reserved)
    std::uint64_t bytes_written = 0;
    std::uint64_t bytes_read = 0;
    std::uint64_t write_count = 0;        ///< successful write() calls
    std::uint64_t read_count = 0;         ///< successful read() calls
    std::uint64_t checksum_failures = 0;  ///< reads that threw CorruptionError (mismatch or early end)
    std::uint64_t retries = 0;            ///< EINTR/EAGAIN retries and short-transfer continuations
    double write_seconds = 0;             ///< time inside write system calls, all threads
    double read_seconds = 0;
};

class SpillFile {
public:
    /// Opens the unnamed file in options.dir. IoError (with the path) when the
    /// directory is missing, not a directory or not writable, or the file cannot be
    /// created; UsageError for slot_bytes 0 or above kSpillMaxSlotBytes.
    explicit SpillFile(SpillOptions options);
    ~SpillFile();  ///< closes the file (the kernel frees its blocks)
    SpillFile(const SpillFile&) = delete;
    SpillFile& operator=(const SpillFile&) = delete;

    /// Writes `bytes` (at most slot_bytes) to a free slot and returns it. Throws as
    /// described above (UsageError when too large); on a throw no slot is taken.
    [[nodiscard]] SpillSlot write(std::span<const std::byte> bytes);
    /// Reads slot `s` into `out` (exactly s.bytes) and verifies the checksum:
    /// CorruptionError on mismatch or when the file ends early, IoError on a failed
    /// read, UsageError when `s` is not a slot this file holds now (freed, stale) or
    /// `out` has the wrong size. On a throw `out` is zero-filled.
    void read(const SpillSlot& s, std::span<std::byte> out);
    /// Returns the slot to the free list; ignores a slot that is not in use. noexcept.
    /// Do not free a slot while another thread reads it.
    void free(const SpillSlot& s) noexcept;

    [[nodiscard]] SpillStats stats() const;
    [[nodiscard]] const SpillOptions& options() const noexcept { return options_; }
    /// Whether O_DIRECT is in use.
    [[nodiscard]] bool direct() const noexcept { return direct_; }
    /// The file descriptor (tests corrupt the file through it).
    [[nodiscard]] int fd() const noexcept { return fd_; }
    /// Byte offset of a slot in the file.
    [[nodiscard]] std::uint64_t offset_of(const SpillSlot& s) const noexcept { return s.index * stride_; }
    /// Distance between slots: slot_bytes rounded up to kSpillAlignment.
    [[nodiscard]] std::uint64_t stride_bytes() const noexcept { return stride_; }

private:
    enum class SlotState : unsigned char { Free, Writing, Used };
    struct SlotRecord {
        std::uint64_t bytes = 0;
        std::uint64_t checksum = 0;
        SlotState state = SlotState::Free;
    };
    struct AlignedFree {
        void operator()(std::byte* p) const noexcept;
    };
    using AlignedBuffer = std::unique_ptr<std::byte[], AlignedFree>;

    [[nodiscard]] std::uint64_t take_slot(std::uint64_t bytes);
    void return_slot(std::uint64_t index) noexcept;
    void reserve_for(std::uint64_t index);
    [[nodiscard]] AlignedBuffer take_bounce();
    void return_bounce(AlignedBuffer buffer) noexcept;

    SpillOptions options_;
    std::string dir_;  ///< options_.dir as text, for error messages
    FileIo* io_ = nullptr;
    int fd_ = -1;
    bool direct_ = false;
    std::uint64_t stride_ = 0;     ///< slot_bytes rounded up to kSpillAlignment
    std::uint64_t max_slots_ = 0;  ///< from limit_bytes; UINT64_MAX when unlimited

    mutable std::mutex mutex_;  ///< guards everything below, never held during I/O
    std::vector<std::uint64_t> free_slots_;
    std::vector<SlotRecord> slots_;  ///< one per slot index handed out so far
    std::vector<AlignedBuffer> bounce_pool_;
    SpillStats stats_{};

    std::mutex grow_mutex_;             ///< held while fallocate extends the file
    std::uint64_t reserved_bytes_ = 0;  ///< guarded by grow_mutex_
    bool fallocate_supported_ = true;   ///< guarded by grow_mutex_
};

}  // namespace outcore::swap
