// tests/unit/tile/plan_test_util.hpp — random problems and limits for planner tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

#include "outcore/tile/limits.hpp"

namespace outcore::tile::test_util {

/// Log-uniform integer in [lo, hi].
inline std::uint64_t log_uniform(std::mt19937_64& rng, double lo, double hi) {
    std::uniform_real_distribution<double> d(std::log(lo), std::log(hi) + 1e-9);
    const auto v = static_cast<std::uint64_t>(std::exp(d(rng)));
    return std::clamp(v, static_cast<std::uint64_t>(lo), static_cast<std::uint64_t>(hi));
}

inline bool coin(std::mt19937_64& rng, double p = 0.5) { return std::bernoulli_distribution(p)(rng); }

/// Device limits as backends report them, with rates known half the time.
inline PlanLimits random_limits(std::mt19937_64& rng) {
    PlanLimits l;
    const std::uint64_t aligns[] = {64, 256, 256, 4096};
    l.min_offset_alignment = aligns[std::uniform_int_distribution<int>(0, 3)(rng)];
    l.pipeline_depth = std::uniform_int_distribution<std::uint32_t>(2, 3)(rng);
    l.max_buffer_bytes = coin(rng, 0.7) ? UINT64_MAX : log_uniform(rng, 1 << 20, 1ULL << 34);
    if (coin(rng)) {
        l.compute_flops = static_cast<double>(log_uniform(rng, 1e11, 1e15));
        l.link_bytes_per_second = static_cast<double>(log_uniform(rng, 1e9, 1e11));
        if (coin(rng)) {
            l.link_d2h_bytes_per_second =
                l.link_bytes_per_second * std::uniform_real_distribution<>(0.5, 1.5)(rng);
            l.link_duplex_bytes_per_second =
                l.link_bytes_per_second * std::uniform_real_distribution<>(1.0, 2.0)(rng);
        }
    }
    return l;
}

}  // namespace outcore::tile::test_util
