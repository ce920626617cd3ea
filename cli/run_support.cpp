// cli/run_support.cpp — shared helpers of the tiled subcommands (see run_support.hpp).
#include "run_support.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <new>
#include <string>
#include <system_error>

#include "outcore/backends/cpu.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/io/file.hpp"

namespace outcore::cli {

std::uint64_t parse_count(std::string_view flag, std::string_view text) {
    std::uint64_t value = 0;
    const char* first = text.data();
    const char* last = text.data() + text.size();
    // from_chars takes no sign, prefix or exponent: exactly the digits we accept.
    const auto [ptr, ec] = std::from_chars(first, last, value, 10);
    if (text.empty() || ec == std::errc::invalid_argument || ptr != last) {
        throw UsageError("cli",
                         fmt::format("{} '{}': not a non-negative whole number", flag, io::printable(text)));
    }
    if (ec == std::errc::result_out_of_range) {
        throw UsageError("cli",
                         fmt::format("{} '{}': over the largest value 2^64-1", flag, io::printable(text)));
    }
    return value;
}

double parse_real(std::string_view flag, std::string_view text) {
    double value = 0;
    const char* last = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), last, value);
    if (text.empty() || ec != std::errc() || ptr != last || !std::isfinite(value)) {
        throw UsageError("cli", fmt::format("{} '{}': not a finite number", flag, io::printable(text)));
    }
    return value;
}

std::uint64_t resolve_budget(const std::optional<std::string>& flag, const Config& config,
                             const DeviceInfo& info) {
    const SizeSpec spec = flag ? parse_size(*flag, "--budget") : config.device_budget;
    const std::uint64_t budget = spec.resolve(info.total_memory_bytes, info.recommended_working_set_bytes);
    if (budget > info.total_memory_bytes) {
        throw UsageError(
            "cli", fmt::format("a device budget of {} is over the {} that device {} has", format_size(budget),
                               format_size(info.total_memory_bytes), info.id()));
    }
    return budget;
}

std::uint64_t host_limit_bytes(const Config& config) {
    const std::uint64_t ram = cpu::physical_memory_bytes();
    return config.host_budget.resolve(ram, ram / 4 * 3);
}

HostBuffer allocate_host(std::uint64_t bytes, std::string_view what, std::uint64_t limit_bytes) {
    OutOfMemoryInfo info{.requested_bytes = bytes, .tier = Tier::Host, .budget_bytes = limit_bytes};
    if (bytes > limit_bytes) {
        throw OutOfMemory("cli", fmt::format("{} does not fit the host budget (set --host-budget)", what),
                          info);
    }
    try {
        return HostBuffer{std::make_unique_for_overwrite<std::byte[]>(static_cast<std::size_t>(bytes)),
                          bytes};
    } catch (const std::bad_alloc&) {
        throw OutOfMemory("cli", fmt::format("allocating {} failed", what), info);
    }
}

JsonDestination::JsonDestination(const std::optional<std::string>& flag, bool force)
    : enabled_(flag.has_value()) {
    if (flag && !flag->empty()) file_.emplace(*flag, force, "json");
}

void JsonDestination::write(const nlohmann::json& record) {
    if (!enabled_) return;
    const std::string text = record.dump(2) + "\n";
    if (!file_) {
        fmt::print("{}", text);
        std::fflush(stdout);
        return;
    }
    file_->file().write_exact(reinterpret_cast<const std::byte*>(text.data()), text.size(), 0);
    file_->commit();
}

std::string format_seconds(double seconds) {
    if (seconds < 1.0) return fmt::format("{:.0f} ms", seconds * 1e3);
    if (seconds < 600.0) return fmt::format("{:.2f} s", seconds);
    return fmt::format("{:.1f} min", seconds / 60.0);
}

std::string format_percent(double fraction) { return fmt::format("{:.1f}%", fraction * 100.0); }

std::string format_ratio(std::uint64_t value, std::uint64_t reference) {
    if (reference == 0) return "n/a";
    return fmt::format("{:.2f}x", static_cast<double>(value) / static_cast<double>(reference));
}

}  // namespace outcore::cli
