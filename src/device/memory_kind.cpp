#include "outcore/device/memory_kind.hpp"

#include <optional>

#include "outcore/device/dtype.hpp"

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

std::string_view to_string(DType t) noexcept {
    switch (t) {
        case DType::F32: return "f32";
        case DType::F64: return "f64";
        case DType::BF16: return "bf16";
        case DType::F16: return "f16";
        case DType::U8: return "u8";
        case DType::U16: return "u16";
    }
    return "unknown";
}

std::optional<DType> parse_dtype(std::string_view text) noexcept {
    for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16, DType::U8, DType::U16}) {
        if (to_string(t) == text) return t;
    }
    return std::nullopt;
}

}  // namespace outcore
