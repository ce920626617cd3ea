// outcore/swap/file_io.hpp — the system calls of the disk tier behind one small
// interface, so tests can fail any one of them (fault sweeps) without touching the
// kernel.
//
//   swap::PosixFileIo io;                                   // the real thing
//   int fd = io.open_tmpfile("/var/tmp/outcore", true);     // unnamed, mode 0600, O_DIRECT
//   io.pwrite(fd, data, bytes, offset);                     // may be short: the caller loops
//
//   swap::FaultyFileIo faulty(io);                          // tests: wraps another FileIo
//   faulty.arm({.op = FileOp::Write, .nth = 3, .error = EIO, .persistent = true});
//
// Every function returns what the system call returns (bytes transferred, 0, a file
// descriptor) or −errno; none throws. Callers (SpillFile) retry EINTR and EAGAIN,
// continue short transfers and turn the rest into IoError.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

namespace outcore::swap {

enum class FileOp : unsigned char { Open, Read, Write, Allocate, Truncate, Sync, Close };
inline constexpr std::size_t kFileOpCount = 7;

/// "open", "pread", "pwrite", "fallocate", "ftruncate", "fdatasync", "close".
[[nodiscard]] std::string_view to_string(FileOp op) noexcept;

class FileIo {
public:
    virtual ~FileIo() = default;
    /// An unnamed file in `dir` (O_TMPFILE | O_EXCL; else mkstemp + immediate unlink),
    /// mode 0600, opened read-write and close-on-exec; with `direct`, O_DIRECT
    /// (returns −EINVAL where the filesystem refuses it, and the caller retries without).
    virtual int open_tmpfile(const std::string& dir, bool direct) = 0;
    virtual ssize_t pread(int fd, void* buf, std::size_t bytes, std::uint64_t offset) = 0;
    virtual ssize_t pwrite(int fd, const void* buf, std::size_t bytes, std::uint64_t offset) = 0;
    /// fallocate(fd, 0, offset, bytes): −EOPNOTSUPP where the filesystem lacks it.
    virtual int fallocate(int fd, std::uint64_t offset, std::uint64_t bytes) = 0;
    virtual int ftruncate(int fd, std::uint64_t bytes) = 0;
    virtual int fdatasync(int fd) = 0;
    virtual int close(int fd) = 0;
};

/// The real system calls. Thread-safe (it holds no state but its options).
class PosixFileIo final : public FileIo {
public:
    struct Options {
        /// false skips O_TMPFILE and always takes the mkstemp + unlink path (tests
        /// use it to cover the fallback on kernels that have O_TMPFILE).
        bool use_o_tmpfile = true;
    };
    PosixFileIo() noexcept = default;
    explicit PosixFileIo(Options options) noexcept : options_(options) {}

    int open_tmpfile(const std::string& dir, bool direct) override;
    ssize_t pread(int fd, void* buf, std::size_t bytes, std::uint64_t offset) override;
    ssize_t pwrite(int fd, const void* buf, std::size_t bytes, std::uint64_t offset) override;
    int fallocate(int fd, std::uint64_t offset, std::uint64_t bytes) override;
    int ftruncate(int fd, std::uint64_t bytes) override;
    int fdatasync(int fd) override;
    int close(int fd) override;

private:
    Options options_{};
};

/// The process-wide PosixFileIo that SpillFile uses when given none.
[[nodiscard]] FileIo& posix_file_io() noexcept;

/// One fault to inject: the nth call (1-based, counted per op since arm()) of `op`
/// fails with `error` (an errno value). With error 0 on Read/Write the call is short
/// instead: it transfers min(bytes, short_bytes) bytes through the inner FileIo (a
/// 0-byte read is end of file, a 0-byte write no progress). On an O_DIRECT file pick
/// short_bytes a multiple of 4096, as the kernel's own short transfers are.
/// persistent: every call of `op` from the nth on fails the same way.
struct FileFault {
    FileOp op = FileOp::Write;
    std::uint64_t nth = 1;
    int error = 0;
    std::size_t short_bytes = 0;
    bool persistent = false;
};

/// Wraps another FileIo and injects one armed fault. Thread-safe; `inner` must
/// outlive it.
class FaultyFileIo final : public FileIo {
public:
    /// To wrap another FaultyFileIo, pass it as FileIo& (the copy constructor is deleted).
    explicit FaultyFileIo(FileIo& inner) noexcept : inner_(&inner) {}
    FaultyFileIo(const FaultyFileIo&) = delete;
    FaultyFileIo& operator=(const FaultyFileIo&) = delete;
    /// Arms `fault` and restarts the call counts.
    void arm(const FileFault& fault);
    /// No more faults; the call counts keep running.
    void disarm();
    /// Calls of `op` since the last arm() (or construction).
    [[nodiscard]] std::uint64_t calls(FileOp op) const noexcept;
    /// Faults injected since the last arm().
    [[nodiscard]] std::uint64_t injected() const noexcept;

    int open_tmpfile(const std::string& dir, bool direct) override;
    ssize_t pread(int fd, void* buf, std::size_t bytes, std::uint64_t offset) override;
    ssize_t pwrite(int fd, const void* buf, std::size_t bytes, std::uint64_t offset) override;
    int fallocate(int fd, std::uint64_t offset, std::uint64_t bytes) override;
    int ftruncate(int fd, std::uint64_t bytes) override;
    int fdatasync(int fd) override;
    int close(int fd) override;

private:
    // Counts the call; true (and the fault in `out`) when this one must fail.
    bool should_fail(FileOp op, FileFault& out) noexcept;

    FileIo* inner_;
    mutable std::mutex mutex_;
    FileFault fault_{};
    bool armed_ = false;
    std::array<std::uint64_t, kFileOpCount> calls_{};
    std::uint64_t injected_ = 0;
};

}  // namespace outcore::swap
