// Helpers for the disk-tier tests: scratch directories, random bytes, probing the
// filesystem for O_DIRECT, and page-wise access to a spill file for corrupting it.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace outcore::swap::spill_test {

/// A fresh directory under `base` (mkdtemp), removed with everything in it on destruction.
class TempDir {
public:
    explicit TempDir(const std::filesystem::path& base = default_base()) {
        std::string pattern = (base / "outcore-spill-test-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) {
            throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
        }
        path_ = pattern;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                                     std::filesystem::perm_options::add, ec);
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
    /// Names in the directory (a spill file must never have one).
    [[nodiscard]] std::vector<std::string> entries() const {
        std::vector<std::string> names;
        for (const auto& e : std::filesystem::directory_iterator(path_)) names.push_back(e.path().filename());
        return names;
    }

    /// /var/tmp (on the real disk, unlike a tmpfs /tmp), else the system temp dir.
    static std::filesystem::path default_base() {
        std::error_code ec;
        if (std::filesystem::is_directory("/var/tmp", ec)) return "/var/tmp";
        return std::filesystem::temp_directory_path();
    }

private:
    std::filesystem::path path_;
};

/// The scratch bases worth covering: the real disk, and /dev/shm (tmpfs) where present.
inline std::vector<std::filesystem::path> test_bases() {
    std::vector<std::filesystem::path> bases{TempDir::default_base()};
    std::error_code ec;
    if (std::filesystem::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0) {
        bases.emplace_back("/dev/shm");
    }
    return bases;
}

/// Whether the filesystem of `dir` accepts an unnamed O_DIRECT file (what SpillFile should then use).
inline bool filesystem_allows_direct(const std::filesystem::path& dir) {
    const int fd = ::open(dir.c_str(), O_TMPFILE | O_EXCL | O_RDWR | O_DIRECT | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    ::close(fd);
    return true;
}

inline std::vector<std::byte> random_bytes(std::mt19937_64& rng, std::size_t n) {
    std::vector<std::byte> v(n);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const std::uint64_t r = rng();
        std::memcpy(v.data() + i, &r, 8);
    }
    for (; i < n; ++i) v[i] = static_cast<std::byte>(rng());
    return v;
}

/// One 4 KiB page of a file, read and written with an aligned buffer so it works on
/// O_DIRECT descriptors too. bytes() is how much of the page the file holds.
class FilePage {
public:
    static constexpr std::size_t kBytes = 4096;

    FilePage(int fd, std::uint64_t page_offset) : fd_(fd), offset_(page_offset) {
        void* p = std::aligned_alloc(kBytes, kBytes);
        if (p == nullptr) throw std::bad_alloc();
        data_.reset(static_cast<std::byte*>(p));
        std::memset(data_.get(), 0, kBytes);
        const ssize_t n = ::pread(fd_, data_.get(), kBytes, static_cast<off_t>(offset_));
        if (n < 0) throw std::system_error(errno, std::generic_category(), "pread page");
        bytes_ = static_cast<std::size_t>(n);
    }
    [[nodiscard]] std::span<std::byte> data() noexcept { return {data_.get(), bytes_}; }
    [[nodiscard]] std::span<const std::byte> view() const noexcept { return {data_.get(), bytes_}; }
    [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
    /// Writes the page back (the whole 4 KiB on O_DIRECT, else the bytes read).
    void store() {
        const bool direct = (::fcntl(fd_, F_GETFL) & O_DIRECT) != 0;
        const std::size_t n = direct ? kBytes : bytes_;
        if (::pwrite(fd_, data_.get(), n, static_cast<off_t>(offset_)) != static_cast<ssize_t>(n)) {
            throw std::system_error(errno, std::generic_category(), "pwrite page");
        }
    }
    /// Copies another page's content in (a stale page).
    void assign(const FilePage& other) {
        std::memcpy(data_.get(), other.data_.get(), kBytes);
        bytes_ = other.bytes_;
    }

private:
    struct Free {
        void operator()(std::byte* p) const noexcept { std::free(p); }
    };
    int fd_;
    std::uint64_t offset_;
    std::unique_ptr<std::byte[], Free> data_;
    std::size_t bytes_ = 0;
};

}  // namespace outcore::swap::spill_test
