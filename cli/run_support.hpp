// cli/run_support.hpp — what the tiled subcommands (gemm, filter, make-image) share:
// strict parsing of size flags, the device budget in effect, host buffers checked
// against the host budget, the --json record's destination, and number formatting.
//
//   const std::uint64_t m = parse_count("--m", m_text);             // UsageError, never a wrap
//   auto device = open_device(device_selector(globals), config);
//   const std::uint64_t budget = resolve_budget(budget_text, config, device->info());
//   HostBuffer a = allocate_host(bytes, "A", host_limit_bytes(config));   // OutOfMemory (host)
//   JsonDestination json(json_flag, force);   // checks --json FILE before any work
//   ...  json.write(record);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "outcore/core/config.hpp"
#include "outcore/device/device_info.hpp"
#include "outcore/io/file.hpp"

namespace outcore::cli {

/// Parses a non-negative decimal integer flag ("4096"); UsageError naming `flag` for
/// anything else (signs, hex, exponents, values over 2^64-1). CLI11 would wrap "-1"
/// to 2^64-1, so size flags arrive as text and come through here.
[[nodiscard]] std::uint64_t parse_count(std::string_view flag, std::string_view text);

/// Parses a finite real number flag (--alpha, --sigma); UsageError otherwise.
[[nodiscard]] double parse_real(std::string_view flag, std::string_view text);

/// The device budget a run uses: --budget when given (bytes, % of the device's total,
/// or auto), else the configured device_budget; auto is the device's recommended
/// working set. UsageError for a budget above the device's total memory; a budget below
/// what the problem needs (0 included) is left to each command, which states its minimum.
[[nodiscard]] std::uint64_t resolve_budget(const std::optional<std::string>& flag, const Config& config,
                                           const DeviceInfo& info);

/// Host bytes a subcommand may allocate for whole in-memory arrays (random inputs,
/// verification copies): the configured host_budget of physical RAM, auto = 75%.
[[nodiscard]] std::uint64_t host_limit_bytes(const Config& config);

/// An uninitialised host allocation (freed on destruction).
struct HostBuffer {
    std::unique_ptr<std::byte[]> data;
    std::uint64_t bytes = 0;
    [[nodiscard]] std::byte* get() const noexcept { return data.get(); }
};

/// Allocates `bytes` of host memory for `what`. OutOfMemory (Tier::Host) when it is
/// over `limit_bytes` or the allocation fails; never a std::bad_alloc.
[[nodiscard]] HostBuffer allocate_host(std::uint64_t bytes, std::string_view what, std::uint64_t limit_bytes);

/// Where --json sends its record: stdout for a bare --json, else FILE through a
/// temporary file renamed by write(). Constructed before the run so an existing FILE
/// without --force fails at once (UsageError).
class JsonDestination {
public:
    /// `flag`: nullopt (no --json), "" (bare --json: stdout) or a path.
    JsonDestination(const std::optional<std::string>& flag, bool force);
    [[nodiscard]] bool enabled() const noexcept { return enabled_; }
    /// True when the record goes to stdout (the text summary then stays off stdout).
    [[nodiscard]] bool to_stdout() const noexcept { return enabled_ && !file_; }
    /// Writes the record (pretty-printed, one trailing newline). IoError on failure.
    void write(const nlohmann::json& record);

private:
    bool enabled_ = false;
    std::optional<io::AtomicOutput> file_;
};

/// "1.23 s", "850 ms", "12.5 min".
[[nodiscard]] std::string format_seconds(double seconds);
/// "97.5%".
[[nodiscard]] std::string format_percent(double fraction);
/// "1.25x".
[[nodiscard]] std::string format_ratio(std::uint64_t value, std::uint64_t reference);

}  // namespace outcore::cli
