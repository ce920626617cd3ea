// outcore/core/error.hpp — the typed errors of the public API.
//
// Every failure that leaves outcore is one of these, derived from outcore::Error.
// Messages read "[component] what failed (needed 3.0 GiB, available 1.2 GiB)".
//
//   try { heap.allocate(size); }
//   catch (const outcore::OutOfMemory& e) { log(e.requested_bytes(), e.largest_free_bytes()); }
//
// Inside allocators "does not fit" is a value (std::optional); these exceptions are
// for the public boundary. The CLI maps each kind to an exit code (exit_code_for).
#pragma once

#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>

#include "outcore/core/tier.hpp"

namespace outcore {

/// Base of every outcore error. component() names the layer that failed ("heap", "cpu").
class Error : public std::runtime_error {
public:
    Error(std::string_view component, std::string_view message);
    [[nodiscard]] const std::string& component() const noexcept { return component_; }
    /// The message without the "[component] " prefix.
    [[nodiscard]] std::string_view detail() const noexcept;

private:
    std::string component_;
};

/// Facts an OutOfMemory carries; fields a thrower does not know stay 0.
struct OutOfMemoryInfo {
    std::uint64_t requested_bytes = 0;
    Tier tier = Tier::Device;
    std::uint64_t budget_bytes = 0;
    std::uint64_t in_use_bytes = 0;
    std::uint64_t largest_free_bytes = 0;
};

/// A request did not fit in a tier's budget or the backend refused it.
class OutOfMemory : public Error {
public:
    /// `reason` is a short phrase ("budget exceeded", "cudaMalloc failed"); the
    /// message is built from it and the numbers.
    OutOfMemory(std::string_view component, std::string_view reason, const OutOfMemoryInfo& info);
    [[nodiscard]] const OutOfMemoryInfo& info() const noexcept { return info_; }
    [[nodiscard]] std::uint64_t requested_bytes() const noexcept { return info_.requested_bytes; }
    [[nodiscard]] Tier tier() const noexcept { return info_.tier; }
    [[nodiscard]] std::uint64_t budget_bytes() const noexcept { return info_.budget_bytes; }
    [[nodiscard]] std::uint64_t in_use_bytes() const noexcept { return info_.in_use_bytes; }
    [[nodiscard]] std::uint64_t largest_free_bytes() const noexcept { return info_.largest_free_bytes; }

private:
    OutOfMemoryInfo info_;
};

/// A native API call failed. native_code() is the backend's own code (cudaError_t,
/// VkResult), native_name() its symbolic name ("cudaErrorLaunchFailure").
class BackendError : public Error {
public:
    BackendError(std::string_view component, std::string_view message, std::int64_t native_code,
                 std::string_view native_name);
    [[nodiscard]] std::int64_t native_code() const noexcept { return native_code_; }
    [[nodiscard]] const std::string& native_name() const noexcept { return native_name_; }

private:
    std::int64_t native_code_;
    std::string native_name_;
};

/// The caller asked for something invalid: a bad size, flag, shape, file or key.
class UsageError : public Error {
public:
    using Error::Error;
};

/// A system call on a file failed. errno_value() is errno; path() and operation()
/// ("pread", "open") say where.
class IoError : public Error {
public:
    IoError(std::string_view component, std::string_view message, int errno_value, std::string_view path,
            std::string_view operation);
    [[nodiscard]] int errno_value() const noexcept { return errno_; }
    [[nodiscard]] const std::string& path() const noexcept { return path_; }
    [[nodiscard]] const std::string& operation() const noexcept { return operation_; }

private:
    int errno_;
    std::string path_;
    std::string operation_;
};

/// Stored data failed a check (checksum, header): wrong bytes are never returned.
class CorruptionError : public Error {
public:
    using Error::Error;
};

/// A broken invariant inside outcore: a bug, reported rather than hidden.
class InternalError : public Error {
public:
    using Error::Error;
};

/// Process exit codes the CLI uses; documented in README.md.
enum class ExitCode : int {
    Success = 0,
    Internal = 1,
    Usage = 2,
    OutOfMemory = 3,
    Io = 4,
    Corruption = 5,
    /// OUTCORE_LEAK_CHECK found memory still allocated at exit (monitor/leak_check.hpp).
    Leak = 8,
};

/// Maps an exception to the CLI's exit code (unknown exceptions are Internal).
[[nodiscard]] ExitCode exit_code_for(const std::exception& e) noexcept;

}  // namespace outcore
