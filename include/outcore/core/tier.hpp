// outcore/core/tier.hpp — the storage tiers data can live in, from fastest to slowest.
//
// Device memory is the hot tier, pinned and pageable host memory the warm tiers,
// the spill file on disk the cold one. Errors and statistics name tiers with this.
#pragma once

#include <string_view>

namespace outcore {

enum class Tier : unsigned char {
    Device,      ///< GPU memory (host memory counted as device on the CPU backend)
    HostPinned,  ///< page-locked host memory, the staging tier
    Host,        ///< ordinary pageable host memory
    Disk,        ///< the spill file
};

/// "device", "host-pinned", "host", "disk".
[[nodiscard]] std::string_view to_string(Tier tier) noexcept;

}  // namespace outcore
