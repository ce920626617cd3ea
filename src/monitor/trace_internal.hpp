// trace_internal.hpp (private) — what trace.cpp and trace_writer.cpp share.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <string_view>

namespace outcore::monitor::detail {

/// The device id of the recorder's own tracks ("allocations", "swap").
inline constexpr std::uint64_t kOwnTrack = std::numeric_limits<std::uint64_t>::max();
inline constexpr std::string_view kAllocationTrack = "allocations";
inline constexpr std::string_view kSwapTrack = "swap";
/// Set in a swap record's `to` when the move was dirty.
inline constexpr unsigned kDirtyBit = 0x80U;

/// Throws IoError unless a file can be created next to `file` (its temporary).
void check_writable(const std::filesystem::path& file);

}  // namespace outcore::monitor::detail
