// filter_test_support.hpp — shared pieces of the filter tests: typed pixel access,
// random images and specs, device round trips, and a scalar re-implementation of
// the CPU kernels' documented arithmetic (the "float-order" reference).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "outcore/backends/cpu.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/device.hpp"
#include "outcore/ops/filter.hpp"

namespace outcore::filter_test {

inline constexpr DType kPixelTypes[] = {DType::U8, DType::U16, DType::F32};
inline constexpr ops::EdgeMode kEdgeModes[] = {ops::EdgeMode::Clamp, ops::EdgeMode::Mirror,
                                               ops::EdgeMode::Zero};

/// Element `i` of a packed array of `type`, as double (exact).
inline double load(const std::byte* data, DType type, std::size_t i) {
    switch (type) {
        case DType::U8: return static_cast<double>(std::to_integer<std::uint8_t>(data[i]));
        case DType::U16: {
            std::uint16_t v = 0;
            std::memcpy(&v, data + i * 2, 2);
            return v;
        }
        default: {
            float v = 0;
            std::memcpy(&v, data + i * 4, 4);
            return v;
        }
    }
}

/// Stores `v` (already representable) as element `i` of `type`.
inline void store(std::byte* data, DType type, std::size_t i, double v) {
    switch (type) {
        case DType::U8: data[i] = static_cast<std::byte>(static_cast<std::uint8_t>(v)); break;
        case DType::U16: {
            const auto u = static_cast<std::uint16_t>(v);
            std::memcpy(data + i * 2, &u, 2);
            break;
        }
        default: {
            const auto f = static_cast<float>(v);
            std::memcpy(data + i * 4, &f, 4);
            break;
        }
    }
}

/// `count` random elements of `type`: integers over their whole range; f32 in
/// [−64, 320) so integer outputs see clamping at both ends.
inline std::vector<std::byte> random_elements(DType type, std::size_t count, std::mt19937_64& rng) {
    std::vector<std::byte> out(count * dtype_bytes(type));
    std::uniform_real_distribution<double> real(-64.0, 320.0);
    for (std::size_t i = 0; i < count; ++i) {
        switch (type) {
            case DType::U8: store(out.data(), type, i, static_cast<double>(rng() % 256)); break;
            case DType::U16: store(out.data(), type, i, static_cast<double>(rng() % 65536)); break;
            default: store(out.data(), type, i, static_cast<float>(real(rng))); break;
        }
    }
    return out;
}

/// The documented integer rule, written independently of the kernels: clamp to
/// [0, max] (NaN → 0), then round to nearest, ties to even (nearbyint in the default
/// rounding mode).
inline double round_to(DType type, float v) {
    if (type == DType::F32) return v;
    const float hi = type == DType::U8 ? 255.0F : 65535.0F;
    if (!(v > 0.0F)) v = 0.0F;
    if (v > hi) v = hi;
    return std::nearbyint(v);
}

inline std::unique_ptr<Device> cpu_device(std::uint64_t max_inline_bytes = 4096) {
    return cpu::make_cpu_device({.total_memory_bytes = 2 * kGiB, .max_inline_bytes = max_inline_bytes});
}

/// Device-kind block holding `bytes` (host == nullptr: the kernels must use the native address).
inline Block upload(Device& dev, Queue& q, std::span<const std::byte> bytes) {
    Block b = dev.allocate(
        {.bytes = std::max<std::uint64_t>(bytes.size(), 1), .kind = MemoryKind::Device, .tag = "t"});
    if (!bytes.empty()) q.upload(bytes.data(), BufferView(b, 0, bytes.size()));
    return b;
}

/// A random FilterSpec of `kind`, small enough for fast tests.
inline ops::FilterSpec random_spec(ops::FilterKind kind, ops::EdgeMode edge, std::mt19937_64& rng) {
    switch (kind) {
        case ops::FilterKind::Gaussian:
            return ops::FilterSpec::gaussian(std::uniform_real_distribution<double>(0.2, 2.4)(rng), edge);
        case ops::FilterKind::Box: return ops::FilterSpec::box(static_cast<std::uint32_t>(rng() % 5), edge);
        case ops::FilterKind::Sobel: return ops::FilterSpec::sobel(edge);
        case ops::FilterKind::Conv: {
            const auto side = static_cast<std::uint32_t>(2 * (rng() % 8) + 1);
            std::vector<float> k(std::size_t{side} * side);
            std::uniform_real_distribution<float> w(-1.0F, 1.0F);
            for (float& v : k) v = w(rng);
            return ops::FilterSpec::conv(std::move(k), side, edge);
        }
    }
    return ops::FilterSpec::sobel(edge);
}

}  // namespace outcore::filter_test
