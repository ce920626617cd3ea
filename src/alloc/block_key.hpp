// src/alloc/block_key.hpp (private) — identifies a live RawBlock by the fields an
// upstream allocator never changes between allocate and deallocate, so adaptors can
// keep per-allocation records (tag, time) without touching the upstream's cookie.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "outcore/device/block.hpp"

namespace outcore::alloc::detail {

struct BlockKey {
    std::uint64_t device_id = 0;
    std::uintptr_t native = 0;
    std::uint64_t offset = 0;
    MemoryKind kind = MemoryKind::Device;

    // Two live blocks never share native handle + offset: sub-allocators hand out
    // disjoint offsets of one handle, native allocators distinct handles.
    static BlockKey of(const RawBlock& b) noexcept { return {b.device_id, b.native, b.offset, b.kind}; }
    friend bool operator==(const BlockKey&, const BlockKey&) = default;
};

struct BlockKeyHash {
    std::size_t operator()(const BlockKey& k) const noexcept {
        // boost::hash_combine's mixing; the fields are already well spread addresses.
        std::size_t h = std::hash<std::uint64_t>{}(k.device_id);
        auto mix = [&h](std::size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
        mix(std::hash<std::uintptr_t>{}(k.native));
        mix(std::hash<std::uint64_t>{}(k.offset));
        mix(static_cast<std::size_t>(k.kind));
        return h;
    }
};

}  // namespace outcore::alloc::detail
