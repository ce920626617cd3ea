// outcore/device/edge.hpp — what a filter reads beyond an image's edge, as one
// mapping shared by host code and device kernels.
//
//   const std::int64_t s = edge_source_index(-2, 100, EdgeMode::Mirror);   // 2
//   const std::int64_t z = edge_source_index(-1, 100, EdgeMode::Zero);     // -1: reads zero
//
// Self-contained (only <cstdint>) so the CUDA kernels include it as it is: on the
// host and in a kernel the same function decides which pixel a halo pixel copies, so
// a halo filled on the device equals one filled on the host, bit for bit.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define OUTCORE_HOST_DEVICE __host__ __device__
#else
#define OUTCORE_HOST_DEVICE
#endif

namespace outcore {

/// What a filter reads beyond the image's edge.
enum class EdgeMode : unsigned char {
    /// The nearest edge pixel (… a a | a b c d | d d …).
    Clamp,
    /// Reflection about the edge pixel, which is not repeated (… c b | a b c d | c b …):
    /// OpenCV's BORDER_REFLECT_101. It repeats with period 2(n−1) when the halo is
    /// wider than the image; a 1-pixel dimension reflects onto its only pixel.
    Mirror,
    /// Zero (… 0 0 | a b c d | 0 0 …).
    Zero,
};

/// The index in [0, size) that position `index` (possibly outside) reads under
/// `edge`, or -1 when it reads zero (EdgeMode::Zero outside). `size` must be ≥ 1.
OUTCORE_HOST_DEVICE constexpr std::int64_t edge_source_index(std::int64_t index, std::int64_t size,
                                                             EdgeMode edge) noexcept {
    if (index >= 0 && index < size) return index;
    switch (edge) {
        case EdgeMode::Clamp: return index < 0 ? 0 : size - 1;
        case EdgeMode::Mirror: {
            if (size <= 1) return 0;
            // Reflect-101 is periodic with period 2(n − 1): fold into one period, then
            // reflect the second half back.
            const std::int64_t period = 2 * (size - 1);
            std::int64_t m = index % period;
            if (m < 0) m += period;
            if (m >= size) m = period - m;
            return m;
        }
        case EdgeMode::Zero: return -1;
    }
    return -1;
}

/// A rectangle of pixels around part of an image — a filter tile's input with its
/// halo — whose pixels outside the image are to be filled from those inside it.
/// Pixels are `pixel_bytes` (1..16) each, rows `row_stride` bytes apart; pixel (0, 0)
/// of the area is image pixel (top, left). The area must overlap the image, and every
/// outside pixel's source (edge_source_index per axis) must lie in that overlap — it
/// does for a tile of at least one pixel with the same halo on each side.
struct EdgePadding {
    EdgeMode edge = EdgeMode::Clamp;
    std::uint32_t pixel_bytes = 0;
    std::uint64_t rows = 0, cols = 0;  ///< the area, in pixels
    std::int64_t top = 0, left = 0;    ///< image coordinates of the area's pixel (0, 0)
    std::uint64_t image_rows = 0, image_cols = 0;
    std::uint64_t row_stride = 0;  ///< bytes between the area's rows

    /// True when some pixel of the area lies outside the image (there is work).
    [[nodiscard]] OUTCORE_HOST_DEVICE constexpr bool crosses_edge() const noexcept {
        return top < 0 || left < 0 ||
               top + static_cast<std::int64_t>(rows) > static_cast<std::int64_t>(image_rows) ||
               left + static_cast<std::int64_t>(cols) > static_cast<std::int64_t>(image_cols);
    }
};

}  // namespace outcore
