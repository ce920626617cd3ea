// outcore/device/memory_kind.hpp — where a Block's bytes live and who can see them.
//
//   Device     : private to the GPU (Metal private storage, cudaMalloc, DEVICE_LOCAL)
//   HostPinned : page-locked host memory the GPU reads directly, coherent
//                (Metal shared storage, cudaMallocHost, HOST_VISIBLE|HOST_COHERENT)
//   HostCached : cached host memory with explicit coherence: Device::flush after the
//                host writes, Device::invalidate before the host reads what the device
//                wrote (Metal managed storage with didModifyRange:/synchronizeResource:)
#pragma once

#include <string_view>

#include "outcore/core/tier.hpp"

namespace outcore {

enum class MemoryKind : unsigned char { Device, HostPinned, HostCached };

inline constexpr int kMemoryKindCount = 3;

/// "device", "host-pinned", "host-cached".
[[nodiscard]] std::string_view to_string(MemoryKind kind) noexcept;
/// The tier a kind's bytes count against: Device -> Tier::Device, the others -> HostPinned.
[[nodiscard]] Tier tier_of(MemoryKind kind) noexcept;
/// True for kinds whose bytes have a host address.
[[nodiscard]] constexpr bool host_visible(MemoryKind kind) noexcept { return kind != MemoryKind::Device; }

}  // namespace outcore
