#include "outcore/core/error.hpp"

#include <fmt/format.h>

#include <cstring>

#include "outcore/core/size.hpp"

namespace outcore {

namespace {
std::string bracket(std::string_view component, std::string_view message) {
    return fmt::format("[{}] {}", component, message);
}
}  // namespace

Error::Error(std::string_view component, std::string_view message)
    : std::runtime_error(bracket(component, message)), component_(component) {}

std::string_view Error::detail() const noexcept {
    std::string_view all = what();
    const std::size_t prefix = component_.size() + 3;  // "[" + component + "] "
    return all.size() >= prefix ? all.substr(prefix) : all;
}

namespace {
std::string oom_message(std::string_view reason, const OutOfMemoryInfo& info) {
    std::string text =
        fmt::format("{} on {}: needed {}", reason, to_string(info.tier), format_size(info.requested_bytes));
    if (info.budget_bytes != 0) {
        const std::uint64_t available =
            info.budget_bytes > info.in_use_bytes ? info.budget_bytes - info.in_use_bytes : 0;
        text += fmt::format(", available {} (budget {}, in use {})", format_size(available),
                            format_size(info.budget_bytes), format_size(info.in_use_bytes));
    } else if (info.in_use_bytes != 0) {
        text += fmt::format(", in use {}", format_size(info.in_use_bytes));
    }
    if (info.largest_free_bytes != 0) {
        text += fmt::format(", largest free range {}", format_size(info.largest_free_bytes));
    }
    return text;
}
}  // namespace

OutOfMemory::OutOfMemory(std::string_view component, std::string_view reason, const OutOfMemoryInfo& info)
    : Error(component, oom_message(reason, info)), info_(info) {}

BackendError::BackendError(std::string_view component, std::string_view message, std::int64_t native_code,
                           std::string_view native_name)
    : Error(component, fmt::format("{} ({} = {})", message, native_name, native_code)),
      native_code_(native_code),
      native_name_(native_name) {}

IoError::IoError(std::string_view component, std::string_view message, int errno_value, std::string_view path,
                 std::string_view operation)
    : Error(component, fmt::format("{}: {} '{}': {}", message, operation, path, std::strerror(errno_value))),
      errno_(errno_value),
      path_(path),
      operation_(operation) {}

ExitCode exit_code_for(const std::exception& e) noexcept {
    if (dynamic_cast<const UsageError*>(&e) != nullptr) return ExitCode::Usage;
    if (dynamic_cast<const OutOfMemory*>(&e) != nullptr) return ExitCode::OutOfMemory;
    if (dynamic_cast<const IoError*>(&e) != nullptr) return ExitCode::Io;
    if (dynamic_cast<const CorruptionError*>(&e) != nullptr) return ExitCode::Corruption;
    return ExitCode::Internal;
}

std::string_view to_string(Tier tier) noexcept {
    switch (tier) {
        case Tier::Device: return "device";
        case Tier::HostPinned: return "host-pinned";
        case Tier::Host: return "host";
        case Tier::Disk: return "disk";
    }
    return "unknown";
}

}  // namespace outcore
