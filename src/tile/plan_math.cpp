#include "plan_math.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"

namespace outcore::tile::detail {

Count align_count(Count value, std::uint64_t alignment) noexcept {
    if (!value.ok()) return value;
    const std::uint64_t v = value.value();
    const std::uint64_t mask = alignment - 1;
    if (v > std::numeric_limits<std::uint64_t>::max() - mask) return Count::overflow();
    return Count((v + mask) & ~mask);
}

Axis make_axis(std::uint64_t extent, std::uint64_t tile, TailPolicy tail) noexcept {
    Axis a;
    a.tile = std::min(tile, extent);
    a.count = ceil_div(extent, a.tile);
    if (tail == TailPolicy::ShiftInwards) {
        a.sum = a.count * a.tile;  // ≤ extent + tile: no overflow for tile ≤ extent < 2^63
        a.last = a.tile;
    } else {
        a.sum = extent;
        a.last = extent - (a.count - 1) * a.tile;
    }
    return a;
}

std::vector<std::uint64_t> tile_candidates(std::uint64_t extent) {
    constexpr std::uint64_t kGranule = 256;
    std::vector<std::uint64_t> out;
    auto add = [&](std::uint64_t q) {
        std::uint64_t t = ceil_div(extent, q);
        if (q > 1 && t >= kGranule) t = std::min(extent, align_up(t, kGranule));
        out.push_back(t);
        return t;
    };
    // Fine steps (×1.33–1.5) where tiles are large and the choice matters, then halving.
    for (std::uint64_t q : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}) {
        if (add(q) == 1) break;
    }
    for (std::uint64_t q = 128; out.back() > 1 && q != 0; q *= 2) add(q);  // q wraps to 0 past 2^63
    if (out.back() != 1) out.push_back(1);
    std::sort(out.begin(), out.end(), std::greater<>());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

void validate_limits(const PlanLimits& limits, std::string_view op) {
    if (!is_power_of_two(limits.min_offset_alignment)) {
        throw UsageError("tile", fmt::format("{}: min_offset_alignment {} is not a power of two", op,
                                             limits.min_offset_alignment));
    }
    if (limits.pipeline_depth < 1 || limits.pipeline_depth > 8) {
        throw UsageError("tile", fmt::format("{}: pipeline_depth {} is outside 1..8 (2 or 3 are usual)", op,
                                             limits.pipeline_depth));
    }
    if (limits.max_buffer_bytes < limits.min_offset_alignment) {
        throw UsageError("tile", fmt::format("{}: max_buffer_bytes {} is below the offset alignment {}", op,
                                             limits.max_buffer_bytes, limits.min_offset_alignment));
    }
    for (const double rate :
         {limits.compute_flops, limits.link_bytes_per_second, limits.link_d2h_bytes_per_second,
          limits.link_duplex_bytes_per_second, limits.kernel_call_seconds}) {
        if (!std::isfinite(rate) || rate < 0) {
            throw UsageError("tile",
                             fmt::format("{}: rates and costs must be finite and ≥ 0 (got {})", op, rate));
        }
    }
}

LinkModel link_model(const PlanLimits& limits) noexcept {
    LinkModel m;
    m.up_bytes_per_second = limits.link_bytes_per_second;
    m.down_bytes_per_second = limits.link_d2h_bytes_per_second > 0 ? limits.link_d2h_bytes_per_second
                                                                   : limits.link_bytes_per_second;
    m.duplex_bytes_per_second = limits.link_duplex_bytes_per_second;
    return m;
}

double LinkModel::up_seconds(double bytes) const noexcept {
    return known() ? bytes / up_bytes_per_second : 0.0;
}

double LinkModel::down_seconds(double bytes) const noexcept {
    return known() ? bytes / down_bytes_per_second : 0.0;
}

double LinkModel::seconds(double up, double down) const noexcept {
    if (!known()) return 0.0;
    const double u = up_seconds(up);
    const double d = down_seconds(down);
    if (duplex_bytes_per_second <= 0) return u + d;
    return std::max({u, d, (up + down) / duplex_bytes_per_second});
}

double LinkModel::down_beside_up_seconds(double bytes, double down_share) const noexcept {
    const double up = up_bytes_per_second;
    const double down = down_bytes_per_second;
    const double duplex = duplex_bytes_per_second;
    if (!known() || duplex <= 0 || duplex >= up + down) return down_seconds(bytes);
    const double rate = std::min(down, std::max(duplex - up, duplex * down_share));
    return rate > 0 ? bytes / rate : down_seconds(bytes);
}

bool clearly_less(double a, double b) noexcept { return a < b - 1e-12 * std::max(std::abs(a), std::abs(b)); }

void throw_below_minimum(std::string_view what, std::uint64_t minimum_bytes, std::uint64_t budget_bytes) {
    throw UsageError("tile",
                     fmt::format("{} does not fit the device budget (needed at least {} = {} bytes, "
                                 "available {})",
                                 what, format_size(minimum_bytes), minimum_bytes, format_size(budget_bytes)));
}

}  // namespace outcore::tile::detail
