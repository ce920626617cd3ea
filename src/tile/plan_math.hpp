// src/tile/plan_math.hpp — arithmetic the planners share (private).
//
// Planners evaluate thousands of candidate tilings, some of which overflow 64 bits on
// absurd problems (m = n = k = 2^32). Count carries "overflowed" instead of throwing
// so such a candidate is simply not feasible; only a problem whose compulsory traffic
// overflows is a UsageError. Axis summarises one dimension cut into tiles, so byte
// counts are closed forms instead of walks over millions of tiles.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "outcore/tile/gemm_plan.hpp"
#include "outcore/tile/grid.hpp"
#include "outcore/tile/limits.hpp"

namespace outcore::tile::detail {

/// An unsigned 64-bit count that remembers overflow instead of wrapping.
class Count {
public:
    constexpr Count() = default;
    constexpr Count(std::uint64_t value) noexcept : value_(value) {}  // NOLINT(google-explicit-constructor)
    [[nodiscard]] static constexpr Count overflow() noexcept {
        Count c;
        c.ok_ = false;
        return c;
    }
    [[nodiscard]] constexpr bool ok() const noexcept { return ok_; }
    /// The value, or UINT64_MAX when it overflowed (compares as "too big").
    [[nodiscard]] constexpr std::uint64_t value() const noexcept {
        return ok_ ? value_ : std::numeric_limits<std::uint64_t>::max();
    }
    friend constexpr Count operator+(Count a, Count b) noexcept {
        std::uint64_t r = 0;
        if (!a.ok_ || !b.ok_ || __builtin_add_overflow(a.value_, b.value_, &r)) return overflow();
        return Count(r);
    }
    friend constexpr Count operator*(Count a, Count b) noexcept {
        std::uint64_t r = 0;
        if (!a.ok_ || !b.ok_ || __builtin_mul_overflow(a.value_, b.value_, &r)) return overflow();
        return Count(r);
    }

private:
    std::uint64_t value_ = 0;
    bool ok_ = true;
};

/// Rounds up to a multiple of the power of two `alignment`, keeping overflow.
[[nodiscard]] Count align_count(Count value, std::uint64_t alignment) noexcept;

/// One dimension cut into tiles of `tile` (already ≤ extent) under a tail policy.
struct Axis {
    std::uint64_t tile = 0;   ///< nominal tile, min(requested, extent)
    std::uint64_t count = 0;  ///< tiles along the axis
    std::uint64_t sum = 0;    ///< Σ actual tile sizes: extent for Shrink, count·tile for ShiftInwards
    std::uint64_t last = 0;   ///< size of the last tile
};
[[nodiscard]] Axis make_axis(std::uint64_t extent, std::uint64_t tile, TailPolicy tail) noexcept;

/// Tile sizes worth trying along an axis of `extent` (descending, unique): extent/q
/// for q = 1, 2, 3, 4, 6, 8, 12, ... 64 and then powers of two until 1. Sizes of 256
/// and more are rounded up to multiples of 256 (aligned, GEMM-friendly), which never
/// adds a tile: ceil(extent / t) stays ≤ q.
[[nodiscard]] std::vector<std::uint64_t> tile_candidates(std::uint64_t extent);

/// "GEMM MxNxK type" for messages.
[[nodiscard]] std::string describe_gemm(const GemmProblem& problem);

/// Checks the limits every planner relies on; UsageError naming `op` otherwise.
void validate_limits(const PlanLimits& limits, std::string_view op);

/// The transfer-time model of PlanLimits (see docs/tiling.md, "time model").
struct LinkModel {
    double up_bytes_per_second = 0;
    double down_bytes_per_second = 0;
    double duplex_bytes_per_second = 0;  ///< 0: directions do not overlap

    [[nodiscard]] bool known() const noexcept { return up_bytes_per_second > 0; }
    [[nodiscard]] double up_seconds(double bytes) const noexcept;
    [[nodiscard]] double down_seconds(double bytes) const noexcept;
    /// Time to move `up` bytes to the device and `down` bytes back, both streams kept
    /// busy (bytes as doubles: estimates of phases, not exact counts).
    [[nodiscard]] double seconds(double up, double down) const noexcept;
    /// Time to move `bytes` down while uploads keep the link busy. Where both
    /// directions at once fall short of up + down (an H100 here: 55 + 55 GB/s alone,
    /// 64–74 together), the download gets what the uploads leave (duplex − up), but
    /// no less than `down_share` of the duplex rate (its share of the bytes moved).
    [[nodiscard]] double down_beside_up_seconds(double bytes, double down_share) const noexcept;
};
[[nodiscard]] LinkModel link_model(const PlanLimits& limits) noexcept;

/// a < b beyond rounding noise (relative 1e-12).
[[nodiscard]] bool clearly_less(double a, double b) noexcept;

/// Throws the UsageError for a budget below the smallest plan, stating the minimum.
[[noreturn]] void throw_below_minimum(std::string_view what, std::uint64_t minimum_bytes,
                                      std::uint64_t budget_bytes);

}  // namespace outcore::tile::detail
