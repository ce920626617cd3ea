#include "outcore/swap/file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <vector>

namespace outcore::swap {

std::string_view to_string(FileOp op) noexcept {
    switch (op) {
        case FileOp::Open: return "open";
        case FileOp::Read: return "pread";
        case FileOp::Write: return "pwrite";
        case FileOp::Allocate: return "fallocate";
        case FileOp::Truncate: return "ftruncate";
        case FileOp::Sync: return "fdatasync";
        case FileOp::Close: return "close";
    }
    return "unknown";
}

namespace {

constexpr int kOpenFlags = O_RDWR | O_CLOEXEC;

// mkstemp in `dir`, unlinked at once so the name exists for microseconds only.
int open_named_then_unlink(const std::string& dir, bool direct) {
    std::string pattern = dir;
    if (pattern.empty() || pattern.back() != '/') pattern += '/';
    pattern += ".outcore-spill-XXXXXX";
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    // mkostemp creates the file with O_EXCL and mode 0600 less the umask.
    const int fd = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd < 0) return -errno;
    if (::unlink(name.data()) != 0 || ::fchmod(fd, S_IRUSR | S_IWUSR) != 0) {
        const int err = errno;
        ::unlink(name.data());
        ::close(fd);
        return -err;
    }
    if (direct) {
        const int flags = ::fcntl(fd, F_GETFL);
        if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_DIRECT) != 0) {
            const int err = errno;
            ::close(fd);
            return -err;
        }
    }
    return fd;
}

}  // namespace

int PosixFileIo::open_tmpfile(const std::string& dir, bool direct) {
    const int flags = kOpenFlags | (direct ? O_DIRECT : 0);
    if (options_.use_o_tmpfile) {
        // O_EXCL: the file can never be given a name with linkat().
        const int fd = ::open(dir.c_str(), O_TMPFILE | O_EXCL | flags, S_IRUSR | S_IWUSR);
        if (fd >= 0) {
            // The umask may have cleared bits of 0600; set the mode exactly.
            if (::fchmod(fd, S_IRUSR | S_IWUSR) != 0) {
                const int err = errno;
                ::close(fd);
                return -err;
            }
            return fd;
        }
        // Kernels or filesystems without O_TMPFILE answer EOPNOTSUPP (or EISDIR on
        // kernels that predate it); anything else is the real answer.
        if (errno != EOPNOTSUPP && errno != EISDIR) return -errno;
    }
    return open_named_then_unlink(dir, direct);
}

ssize_t PosixFileIo::pread(int fd, void* buf, std::size_t bytes, std::uint64_t offset) {
    const ssize_t n = ::pread(fd, buf, bytes, static_cast<off_t>(offset));
    return n < 0 ? -errno : n;
}

ssize_t PosixFileIo::pwrite(int fd, const void* buf, std::size_t bytes, std::uint64_t offset) {
    const ssize_t n = ::pwrite(fd, buf, bytes, static_cast<off_t>(offset));
    return n < 0 ? -errno : n;
}

int PosixFileIo::fallocate(int fd, std::uint64_t offset, std::uint64_t bytes) {
    return ::fallocate(fd, 0, static_cast<off_t>(offset), static_cast<off_t>(bytes)) != 0 ? -errno : 0;
}

int PosixFileIo::ftruncate(int fd, std::uint64_t bytes) {
    return ::ftruncate(fd, static_cast<off_t>(bytes)) != 0 ? -errno : 0;
}

int PosixFileIo::fdatasync(int fd) { return ::fdatasync(fd) != 0 ? -errno : 0; }

// Linux frees the descriptor even when close() fails, so it is never retried.
int PosixFileIo::close(int fd) { return ::close(fd) != 0 ? -errno : 0; }

FileIo& posix_file_io() noexcept {
    static PosixFileIo io;
    return io;
}

// --- FaultyFileIo ------------------------------------------------------------------------

void FaultyFileIo::arm(const FileFault& fault) {
    std::lock_guard lock(mutex_);
    fault_ = fault;
    armed_ = true;
    calls_.fill(0);
    injected_ = 0;
}

void FaultyFileIo::disarm() {
    std::lock_guard lock(mutex_);
    armed_ = false;
}

std::uint64_t FaultyFileIo::calls(FileOp op) const noexcept {
    std::lock_guard lock(mutex_);
    return calls_[static_cast<std::size_t>(op)];
}

std::uint64_t FaultyFileIo::injected() const noexcept {
    std::lock_guard lock(mutex_);
    return injected_;
}

bool FaultyFileIo::should_fail(FileOp op, FileFault& out) noexcept {
    std::lock_guard lock(mutex_);
    const std::uint64_t n = ++calls_[static_cast<std::size_t>(op)];
    if (!armed_ || fault_.op != op) return false;
    if (n != fault_.nth && !(fault_.persistent && n > fault_.nth)) return false;
    // A fault without an errno means a short transfer, which only reads and writes have.
    if (fault_.error == 0 && op != FileOp::Read && op != FileOp::Write) return false;
    ++injected_;
    out = fault_;
    return true;
}

int FaultyFileIo::open_tmpfile(const std::string& dir, bool direct) {
    FileFault f;
    if (should_fail(FileOp::Open, f)) return -f.error;
    return inner_->open_tmpfile(dir, direct);
}

ssize_t FaultyFileIo::pread(int fd, void* buf, std::size_t bytes, std::uint64_t offset) {
    FileFault f;
    if (should_fail(FileOp::Read, f)) {
        if (f.error != 0) return -f.error;
        const std::size_t n = std::min(bytes, f.short_bytes);
        return n == 0 ? 0 : inner_->pread(fd, buf, n, offset);
    }
    return inner_->pread(fd, buf, bytes, offset);
}

ssize_t FaultyFileIo::pwrite(int fd, const void* buf, std::size_t bytes, std::uint64_t offset) {
    FileFault f;
    if (should_fail(FileOp::Write, f)) {
        if (f.error != 0) return -f.error;
        const std::size_t n = std::min(bytes, f.short_bytes);
        return n == 0 ? 0 : inner_->pwrite(fd, buf, n, offset);
    }
    return inner_->pwrite(fd, buf, bytes, offset);
}

int FaultyFileIo::fallocate(int fd, std::uint64_t offset, std::uint64_t bytes) {
    FileFault f;
    if (should_fail(FileOp::Allocate, f)) return -f.error;
    return inner_->fallocate(fd, offset, bytes);
}

int FaultyFileIo::ftruncate(int fd, std::uint64_t bytes) {
    FileFault f;
    if (should_fail(FileOp::Truncate, f)) return -f.error;
    return inner_->ftruncate(fd, bytes);
}

int FaultyFileIo::fdatasync(int fd) {
    FileFault f;
    if (should_fail(FileOp::Sync, f)) return -f.error;
    return inner_->fdatasync(fd);
}

int FaultyFileIo::close(int fd) {
    // The descriptor is released even when the close "fails", as on Linux.
    FileFault f;
    const bool fail = should_fail(FileOp::Close, f);
    const int rc = inner_->close(fd);
    return fail ? -f.error : rc;
}

}  // namespace outcore::swap
