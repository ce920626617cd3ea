#include "outcore/device/memory_kind.hpp"

namespace outcore {

std::string_view to_string(MemoryKind kind) noexcept {
    switch (kind) {
        case MemoryKind::Device: return "device";
        case MemoryKind::HostPinned: return "host-pinned";
        case MemoryKind::HostCached: return "host-cached";
    }
    return "unknown";
}

Tier tier_of(MemoryKind kind) noexcept {
    return kind == MemoryKind::Device ? Tier::Device : Tier::HostPinned;
}

}  // namespace outcore
