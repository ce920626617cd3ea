// outcore/core/size.hpp — byte sizes: parsing, formatting and checked arithmetic.
//
//   auto s = outcore::parse_size("1.5GiB");          // SizeSpec, absolute
//   std::uint64_t b = s.resolve(total_ram, auto_budget);
//   outcore::format_size(b);                         // "1.5 GiB"
//   outcore::checked_mul(rows, cols, "gemm");        // UsageError on overflow, never a wrap
//
// Accepted forms: plain bytes ("4096"), binary units ("512MiB", "2GiB", "1KiB"),
// decimal units ("1.5GB", "10kB", "3MB"), "B" suffix, a percentage of a reference
// ("75%"), and "auto" (the caller's default). A bare K, M, G or T is binary. Units
// are case-insensitive; spaces between number and unit are allowed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace outcore {

inline constexpr std::uint64_t kKiB = 1024;
inline constexpr std::uint64_t kMiB = 1024 * kKiB;
inline constexpr std::uint64_t kGiB = 1024 * kMiB;
inline constexpr std::uint64_t kTiB = 1024 * kGiB;

/// A size as the user wrote it: absolute bytes, a fraction of some reference, or auto.
struct SizeSpec {
    enum class Kind : unsigned char { Bytes, Fraction, Auto };
    Kind kind = Kind::Auto;
    std::uint64_t bytes = 0;  ///< for Kind::Bytes
    double fraction = 0.0;    ///< for Kind::Fraction, in [0, 1]: "75%" is 0.75

    /// Bytes this spec means: `reference` scales a fraction, `auto_bytes` answers auto.
    [[nodiscard]] std::uint64_t resolve(std::uint64_t reference, std::uint64_t auto_bytes) const noexcept;
    /// Back to text that parse_size accepts ("2 GiB", "75%", "auto").
    [[nodiscard]] std::string to_string() const;
    friend bool operator==(const SizeSpec&, const SizeSpec&) = default;
};

/// Parses a size. Throws UsageError (naming `what`, e.g. "device_budget") on bad text,
/// a negative or non-finite number, a percentage over 100, or a value over 2^64-1 bytes.
[[nodiscard]] SizeSpec parse_size(std::string_view text, std::string_view what = "size");

/// Parses a size that must be absolute bytes (no % or auto). Throws UsageError.
[[nodiscard]] std::uint64_t parse_bytes(std::string_view text, std::string_view what = "size");

/// Formats bytes for people with binary units: "0 B", "512 B", "1.5 GiB", "16 EiB".
[[nodiscard]] std::string format_size(std::uint64_t bytes);

/// a + b, or UsageError "[what] size overflow (a + b exceeds 2^64-1)".
[[nodiscard]] std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, std::string_view what = "size");
/// a * b, or UsageError on overflow.
[[nodiscard]] std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, std::string_view what = "size");
/// a - b, or UsageError when b > a.
[[nodiscard]] std::uint64_t checked_sub(std::uint64_t a, std::uint64_t b, std::string_view what = "size");
/// Rounds `value` up to a multiple of the power of two `alignment`; UsageError on
/// overflow or a non-power-of-two alignment.
[[nodiscard]] std::uint64_t checked_align_up(std::uint64_t value, std::uint64_t alignment,
                                             std::string_view what = "size");

/// True when `value` is a power of two (0 is not).
[[nodiscard]] constexpr bool is_power_of_two(std::uint64_t value) noexcept {
    return value != 0 && (value & (value - 1)) == 0;
}
/// Rounds up to a power-of-two alignment; the caller guarantees no overflow.
[[nodiscard]] constexpr std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) noexcept {
    return (value + alignment - 1) & ~(alignment - 1);
}

}  // namespace outcore
