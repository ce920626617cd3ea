#include "outcore/core/size.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include "outcore/core/error.hpp"

namespace outcore {

namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) s.remove_suffix(1);
    return s;
}

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(a[i])) !=
            std::tolower(static_cast<unsigned char>(b[i]))) {
            return false;
        }
    }
    return true;
}

struct Unit {
    std::string_view name;
    std::uint64_t factor;
};
constexpr std::array<Unit, 16> kUnits{{
    {"", 1},
    {"b", 1},
    {"k", kKiB},
    {"kib", kKiB},
    {"kb", 1000ULL},
    {"m", kMiB},
    {"mib", kMiB},
    {"mb", 1000ULL * 1000},
    {"g", kGiB},
    {"gib", kGiB},
    {"gb", 1000ULL * 1000 * 1000},
    {"t", kTiB},
    {"tib", kTiB},
    {"tb", 1000ULL * 1000 * 1000 * 1000},
    {"pib", 1024 * kTiB},
    {"pb", 1000ULL * 1000 * 1000 * 1000 * 1000},
}};

[[noreturn]] void bad(std::string_view what, std::string_view text, std::string_view why) {
    throw UsageError(
        what, fmt::format("invalid size '{}': {} (examples: 4096, 512MiB, 1.5GB, 75%, auto)", text, why));
}

}  // namespace

SizeSpec parse_size(std::string_view text, std::string_view what) {
    const std::string_view s = trim(text);
    if (s.empty()) bad(what, text, "empty");
    if (iequals(s, "auto")) return SizeSpec{};

    // Split number and unit: the number is digits with at most one '.'.
    std::size_t end = 0;
    bool seen_dot = false;
    while (end < s.size() &&
           (std::isdigit(static_cast<unsigned char>(s[end])) != 0 || (s[end] == '.' && !seen_dot))) {
        seen_dot = seen_dot || s[end] == '.';
        ++end;
    }
    const std::string_view number = s.substr(0, end);
    const std::string_view unit = trim(s.substr(end));
    if (number.empty() || number == ".") bad(what, text, "no number");

    if (unit == "%") {
        double pct = 0;
        const auto [p, ec] = std::from_chars(number.data(), number.data() + number.size(), pct);
        if (ec != std::errc{} || p != number.data() + number.size() || !std::isfinite(pct))
            bad(what, text, "bad number");
        if (pct > 100.0) bad(what, text, "a percentage cannot exceed 100%");
        return SizeSpec{SizeSpec::Kind::Fraction, 0, pct / 100.0};
    }

    const Unit* found = nullptr;
    for (const Unit& u : kUnits) {
        if (iequals(unit, u.name)) found = &u;
    }
    if (found == nullptr) bad(what, text, fmt::format("unknown unit '{}'", unit));

    if (!seen_dot) {
        std::uint64_t value = 0;
        const auto [p, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
        if (ec == std::errc::result_out_of_range) bad(what, text, "exceeds 2^64-1 bytes");
        if (ec != std::errc{} || p != number.data() + number.size()) bad(what, text, "bad number");
        if (value != 0 && found->factor > kMax / value) bad(what, text, "exceeds 2^64-1 bytes");
        return SizeSpec{SizeSpec::Kind::Bytes, value * found->factor, 0.0};
    }
    // A fraction ("1.5GB"): long double keeps 64 bits of mantissa on x86-64.
    long double value = 0;
    const std::string copy(number);
    try {
        value = std::stold(copy);
    } catch (const std::exception&) {
        bad(what, text, "bad number");
    }
    const long double bytes = std::floor(value * static_cast<long double>(found->factor) + 0.5L);
    if (!std::isfinite(static_cast<double>(bytes)) || bytes >= 18446744073709551616.0L) {
        bad(what, text, "exceeds 2^64-1 bytes");
    }
    return SizeSpec{SizeSpec::Kind::Bytes, static_cast<std::uint64_t>(bytes), 0.0};
}

std::uint64_t parse_bytes(std::string_view text, std::string_view what) {
    const SizeSpec spec = parse_size(text, what);
    if (spec.kind != SizeSpec::Kind::Bytes) {
        throw UsageError(
            what, fmt::format("invalid size '{}': an absolute size is needed here (like 512MiB)", text));
    }
    return spec.bytes;
}

std::uint64_t SizeSpec::resolve(std::uint64_t reference, std::uint64_t auto_bytes) const noexcept {
    switch (kind) {
        case Kind::Bytes: return bytes;
        case Kind::Fraction: {
            const long double v = static_cast<long double>(reference) * static_cast<long double>(fraction);
            return v >= 18446744073709551615.0L ? kMax : static_cast<std::uint64_t>(v);
        }
        case Kind::Auto: return auto_bytes;
    }
    return auto_bytes;
}

std::string SizeSpec::to_string() const {
    switch (kind) {
        case Kind::Bytes: return fmt::format("{}B", bytes);
        case Kind::Fraction: return fmt::format("{}%", fraction * 100.0);
        case Kind::Auto: return "auto";
    }
    return "auto";
}

std::string format_size(std::uint64_t bytes) {
    static constexpr std::array<std::string_view, 7> kNames{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < kKiB) return fmt::format("{} B", bytes);
    std::size_t unit = 0;
    long double value = static_cast<long double>(bytes);
    while (value >= 1024.0L && unit + 1 < kNames.size()) {
        value /= 1024.0L;
        ++unit;
    }
    // One decimal, dropped when it is zero: "1.5 GiB", "16 GiB".
    const long double rounded = std::round(value * 10.0L) / 10.0L;
    if (rounded == std::floor(rounded))
        return fmt::format("{:.0f} {}", static_cast<double>(rounded), kNames[unit]);
    return fmt::format("{:.1f} {}", static_cast<double>(rounded), kNames[unit]);
}

std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, std::string_view what) {
    std::uint64_t r = 0;
    if (__builtin_add_overflow(a, b, &r)) {
        throw UsageError(what, fmt::format("size overflow ({} + {} exceeds 2^64-1)", a, b));
    }
    return r;
}

std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, std::string_view what) {
    std::uint64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r)) {
        throw UsageError(what, fmt::format("size overflow ({} * {} exceeds 2^64-1)", a, b));
    }
    return r;
}

std::uint64_t checked_sub(std::uint64_t a, std::uint64_t b, std::string_view what) {
    if (b > a) throw UsageError(what, fmt::format("size underflow ({} - {} is negative)", a, b));
    return a - b;
}

std::uint64_t checked_align_up(std::uint64_t value, std::uint64_t alignment, std::string_view what) {
    if (!is_power_of_two(alignment)) {
        throw UsageError(what, fmt::format("alignment {} is not a power of two", alignment));
    }
    return checked_add(value, alignment - 1, what) & ~(alignment - 1);
}

}  // namespace outcore
