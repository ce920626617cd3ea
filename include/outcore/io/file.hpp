// outcore/io/file.hpp — files for out-of-core data: positional reads and writes that
// finish what they start, and outputs that appear under their final name only when
// complete.
//
//   io::File in = io::File::open_read("A.npy", "npy");
//   in.read_exact(buffer, 4096, offset);                 // continues short reads, retries EINTR
//
//   io::AtomicOutput out("C.npy", /*force=*/false, "npy"); // ".C.npy.tmp.XXXXXX" next to it
//   out.file().write_exact(bytes, n, offset);
//   out.commit();                                        // fsync, rename to C.npy
//   // destroyed without commit(): the temporary file is removed, C.npy never appears
//
// Every operation is positional (pread/pwrite): one File may be read, or written at
// disjoint ranges, from several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace outcore::io {

/// Text safe inside a one-line error message: control and non-ASCII bytes become
/// \xNN, and text longer than `max_chars` is cut with "...".
[[nodiscard]] std::string printable(std::string_view text, std::size_t max_chars = 160);

/// An open file descriptor (move-only; closed on destruction). Errors are IoError
/// naming the path and the system call, prefixed with the caller's component.
class File {
public:
    File() = default;
    /// Takes ownership of `fd`.
    File(int fd, std::string path, std::string_view component);
    ~File();
    File(File&& other) noexcept;
    File& operator=(File&& other) noexcept;
    File(const File&) = delete;
    File& operator=(const File&) = delete;

    /// Opens an existing file read-only. IoError if it is missing or unreadable,
    /// UsageError if it is a directory.
    [[nodiscard]] static File open_read(const std::string& path, std::string_view component);

    [[nodiscard]] bool is_open() const noexcept { return fd_ >= 0; }
    [[nodiscard]] int fd() const noexcept { return fd_; }
    [[nodiscard]] const std::string& path() const noexcept { return path_; }
    [[nodiscard]] const std::string& component() const noexcept { return component_; }

    /// Current size in bytes (fstat). IoError on failure.
    [[nodiscard]] std::uint64_t size_bytes() const;
    /// Reads exactly `bytes` at `offset`; IoError on failure or end of file.
    void read_exact(std::byte* dst, std::uint64_t bytes, std::uint64_t offset) const;
    /// Reads up to `bytes` at `offset`, stopping early only at end of file; returns
    /// the bytes read. IoError on failure.
    [[nodiscard]] std::uint64_t read_some(std::byte* dst, std::uint64_t bytes, std::uint64_t offset) const;
    /// Writes exactly `bytes` at `offset` (continues short writes). IoError on failure.
    void write_exact(const std::byte* src, std::uint64_t bytes, std::uint64_t offset) const;
    /// Sets the file's size (sparse when growing). IoError on failure.
    void truncate(std::uint64_t bytes) const;
    /// fsync. IoError on failure.
    void sync() const;
    /// Closes now, reporting a failed close as IoError (the destructor cannot).
    void close();

private:
    int fd_ = -1;
    std::string path_;
    std::string component_;
};

/// An output written to a temporary file next to its final path and renamed over it
/// by commit(). Not thread-safe itself; its file() is (positional writes).
class AtomicOutput {
public:
    /// Creates the temporary file (mode 0666 less the umask). UsageError "'path'
    /// exists (use --force)" when the output exists and !force; IoError when the
    /// directory is missing or not writable.
    AtomicOutput(std::string path, bool force, std::string_view component);
    /// Removes the temporary file unless committed.
    ~AtomicOutput();
    AtomicOutput(AtomicOutput&& other) noexcept;
    AtomicOutput& operator=(AtomicOutput&&) = delete;
    AtomicOutput(const AtomicOutput&) = delete;
    AtomicOutput& operator=(const AtomicOutput&) = delete;

    [[nodiscard]] File& file() noexcept { return file_; }
    [[nodiscard]] const std::string& final_path() const noexcept { return final_path_; }
    [[nodiscard]] const std::string& temp_path() const noexcept { return temp_path_; }
    [[nodiscard]] bool committed() const noexcept { return committed_; }

    /// fsyncs and closes the file, renames it to the final path (without replacing a
    /// file that appeared meanwhile unless force), then fsyncs the directory.
    /// UsageError when committed twice or when the output appeared without force;
    /// IoError when a system call fails (the temporary file is then still removed
    /// by the destructor).
    void commit();

private:
    std::string final_path_;
    std::string temp_path_;
    File file_;
    bool force_ = false;
    bool committed_ = false;
};

}  // namespace outcore::io
