#include "outcore/io/file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <utility>
#include <vector>

#include "outcore/core/error.hpp"

namespace outcore::io {
namespace {

// One system call moves at most this much: Linux caps a single read/write at ~2 GiB
// anyway, and smaller pieces keep a failing call's partial progress meaningful.
constexpr std::uint64_t kMaxChunkBytes = std::uint64_t{1} << 30;
// EAGAIN on a regular file is transient; a descriptor that keeps answering it is not.
constexpr int kMaxRetries = 100;
constexpr std::uint64_t kMaxOffset = static_cast<std::uint64_t>(std::numeric_limits<off_t>::max());

[[noreturn]] void throw_io(const std::string& component, std::string_view what, int err,
                           const std::string& path, std::string_view operation) {
    throw IoError(component, what, err, printable(path), operation);
}

void check_range(const std::string& component, const std::string& path, std::uint64_t bytes,
                 std::uint64_t offset) {
    if (offset > kMaxOffset || bytes > kMaxOffset - offset) {
        throw UsageError(component,
                         fmt::format("'{}': file range at offset {} of {} bytes exceeds the largest "
                                     "file offset",
                                     printable(path), offset, bytes));
    }
}

// The process umask, read without changing it (umask() would race with other threads).
mode_t current_umask() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("Umask:", 0) == 0) {
            return static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8) & 0777U);
        }
    }
    return 022;
}

std::string parent_directory(const std::string& path) {
    const std::size_t slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

std::string base_name(const std::string& path) {
    const std::size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool path_exists(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace

std::string printable(std::string_view text, std::size_t max_chars) {
    std::string out;
    out.reserve(std::min(text.size(), max_chars) + 4);
    for (const char c : text) {
        if (out.size() >= max_chars) {
            out += "...";
            break;
        }
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u >= 0x7f) {
            out += fmt::format("\\x{:02x}", u);
        } else {
            out += c;
        }
    }
    return out;
}

File::File(int fd, std::string path, std::string_view component)
    : fd_(fd), path_(std::move(path)), component_(component) {}

File::~File() {
    if (fd_ >= 0) ::close(fd_);
}

File::File(File&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      component_(std::move(other.component_)) {}

File& File::operator=(File&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = std::exchange(other.fd_, -1);
        path_ = std::move(other.path_);
        component_ = std::move(other.component_);
    }
    return *this;
}

File File::open_read(const std::string& path, std::string_view component) {
    int fd = -1;
    do {
        fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) throw_io(std::string(component), "cannot open input", errno, path, "open");
    File file(fd, path, component);
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw_io(file.component_, "cannot inspect input", errno, path, "fstat");
    if (S_ISDIR(st.st_mode)) {
        throw UsageError(component, fmt::format("'{}' is a directory, not a file", printable(path)));
    }
    return file;
}

std::uint64_t File::size_bytes() const {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw_io(component_, "cannot inspect file", errno, path_, "fstat");
    return static_cast<std::uint64_t>(st.st_size);
}

std::uint64_t File::read_some(std::byte* dst, std::uint64_t bytes, std::uint64_t offset) const {
    check_range(component_, path_, bytes, offset);
    std::uint64_t done = 0;
    int retries = 0;
    while (done < bytes) {
        const std::uint64_t want = std::min(bytes - done, kMaxChunkBytes);
        const ssize_t got = ::pread(fd_, dst + done, want, static_cast<off_t>(offset + done));
        if (got < 0) {
            if (errno == EINTR || (errno == EAGAIN && ++retries < kMaxRetries)) continue;
            throw_io(component_, fmt::format("read failed at offset {}", offset + done), errno, path_,
                     "pread");
        }
        if (got == 0) break;
        done += static_cast<std::uint64_t>(got);
    }
    return done;
}

void File::read_exact(std::byte* dst, std::uint64_t bytes, std::uint64_t offset) const {
    const std::uint64_t got = read_some(dst, bytes, offset);
    if (got != bytes) {
        // The sizes were checked when the file was opened: it shrank underneath us.
        throw_io(
            component_,
            fmt::format("unexpected end of file at offset {} (wanted {} bytes)", offset + got, bytes - got),
            EIO, path_, "pread");
    }
}

void File::write_exact(const std::byte* src, std::uint64_t bytes, std::uint64_t offset) const {
    check_range(component_, path_, bytes, offset);
    std::uint64_t done = 0;
    int retries = 0;
    while (done < bytes) {
        const std::uint64_t want = std::min(bytes - done, kMaxChunkBytes);
        const ssize_t put = ::pwrite(fd_, src + done, want, static_cast<off_t>(offset + done));
        if (put < 0) {
            if (errno == EINTR || (errno == EAGAIN && ++retries < kMaxRetries)) continue;
            throw_io(component_, fmt::format("write failed at offset {}", offset + done), errno, path_,
                     "pwrite");
        }
        if (put == 0) throw_io(component_, "write made no progress", ENOSPC, path_, "pwrite");
        done += static_cast<std::uint64_t>(put);
    }
}

void File::truncate(std::uint64_t bytes) const {
    check_range(component_, path_, 0, bytes);
    int rc = 0;
    do {
        rc = ::ftruncate(fd_, static_cast<off_t>(bytes));
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        throw_io(component_, fmt::format("cannot size file to {} bytes", bytes), errno, path_, "ftruncate");
    }
}

void File::sync() const {
    if (::fsync(fd_) != 0) throw_io(component_, "cannot flush file to disk", errno, path_, "fsync");
}

void File::close() {
    if (fd_ < 0) return;
    // The descriptor is released even when close reports an error (Linux semantics),
    // so it must not be closed again.
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0 && errno != EINTR) throw_io(component_, "cannot close file", errno, path_, "close");
}

AtomicOutput::AtomicOutput(std::string path, bool force, std::string_view component)
    : final_path_(std::move(path)), force_(force) {
    if (final_path_.empty()) throw UsageError(component, "output path is empty");
    if (!force_ && path_exists(final_path_)) {
        throw UsageError(component, fmt::format("'{}' exists (use --force)", printable(final_path_)));
    }
    // The base name is shortened so the temporary name stays under NAME_MAX.
    std::string pattern = fmt::format("{}/.{}.tmp.XXXXXX", parent_directory(final_path_),
                                      base_name(final_path_).substr(0, 200));
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    const int fd = ::mkostemp(buffer.data(), O_CLOEXEC);
    if (fd < 0) {
        throw IoError(component, "cannot create the output's temporary file", errno, printable(pattern),
                      "mkstemp");
    }
    temp_path_.assign(buffer.data());
    file_ = File(fd, temp_path_, component);
    // mkstemp creates 0600; an output file should get the permissions any new file would.
    if (::fchmod(fd, static_cast<mode_t>(0666 & ~current_umask())) != 0) {
        const int err = errno;
        ::unlink(temp_path_.c_str());
        temp_path_.clear();
        throw_io(file_.component(), "cannot set output permissions", err, final_path_, "fchmod");
    }
}

AtomicOutput::AtomicOutput(AtomicOutput&& other) noexcept
    : final_path_(std::move(other.final_path_)),
      temp_path_(std::exchange(other.temp_path_, std::string())),
      file_(std::move(other.file_)),
      force_(other.force_),
      committed_(other.committed_) {}

AtomicOutput::~AtomicOutput() {
    if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
}

void AtomicOutput::commit() {
    const std::string component = file_.component();
    if (committed_) {
        throw UsageError(component, fmt::format("'{}' was committed twice", printable(final_path_)));
    }
    if (temp_path_.empty()) throw UsageError(component, "commit on a moved-from output");
    file_.sync();
    file_.close();
    if (force_) {
        if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
            throw_io(component, "cannot move the output into place", errno, final_path_, "rename");
        }
    } else {
        // RENAME_NOREPLACE keeps a file that appeared since the constructor checked;
        // filesystems without it get check-then-rename.
        int rc = ::renameat2(AT_FDCWD, temp_path_.c_str(), AT_FDCWD, final_path_.c_str(), RENAME_NOREPLACE);
        if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {
            if (path_exists(final_path_)) {
                errno = EEXIST;
            } else {
                rc = ::rename(temp_path_.c_str(), final_path_.c_str());
            }
        }
        if (rc != 0 && errno == EEXIST) {
            throw UsageError(component, fmt::format("'{}' exists (use --force)", printable(final_path_)));
        }
        if (rc != 0) throw_io(component, "cannot move the output into place", errno, final_path_, "rename");
    }
    committed_ = true;
    // Makes the rename itself durable; some filesystems cannot fsync a directory.
    const std::string dir = parent_directory(final_path_);
    const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
        const int rc = ::fsync(dir_fd);
        const int err = errno;
        ::close(dir_fd);
        if (rc != 0 && err != EINVAL && err != EROFS) {
            throw_io(component, "cannot flush the output's directory", err, dir, "fsync");
        }
    }
}

}  // namespace outcore::io
