// filter_spec.cpp — FilterSpec's factories and checks, names, kernel files, ImageShape.
#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/io/file.hpp"
#include "outcore/ops/filter.hpp"

namespace outcore::ops {

namespace {

constexpr const char* kComponent = "filter";
/// A 15×15 kernel written with generous precision and comments is a few KiB.
constexpr std::uint64_t kMaxKernelFileBytes = 64 * kKiB;

constexpr std::array<std::pair<FilterKind, std::string_view>, 4> kKindNames{{
    {FilterKind::Gaussian, "gaussian"},
    {FilterKind::Box, "box"},
    {FilterKind::Sobel, "sobel"},
    {FilterKind::Conv, "conv"},
}};
constexpr std::array<std::pair<EdgeMode, std::string_view>, 3> kEdgeNames{{
    {EdgeMode::Clamp, "clamp"},
    {EdgeMode::Mirror, "mirror"},
    {EdgeMode::Zero, "zero"},
}};

void check_separable_radius(std::uint64_t radius, std::string_view what) {
    if (radius > kMaxSeparableRadius) {
        throw UsageError(kComponent, fmt::format("{} needs radius {}, over the limit of {}", what, radius,
                                                 kMaxSeparableRadius));
    }
}

}  // namespace

std::string_view to_string(FilterKind kind) noexcept {
    for (const auto& [k, name] : kKindNames) {
        if (k == kind) return name;
    }
    return "unknown";
}

std::string_view to_string(EdgeMode edge) noexcept {
    for (const auto& [e, name] : kEdgeNames) {
        if (e == edge) return name;
    }
    return "unknown";
}

std::optional<FilterKind> parse_filter_kind(std::string_view text) noexcept {
    for (const auto& [k, name] : kKindNames) {
        if (name == text) return k;
    }
    return std::nullopt;
}

std::optional<EdgeMode> parse_edge_mode(std::string_view text) noexcept {
    for (const auto& [e, name] : kEdgeNames) {
        if (name == text) return e;
    }
    return std::nullopt;
}

FilterSpec FilterSpec::gaussian(double sigma, EdgeMode edge) {
    if (!(sigma > 0.0) || !std::isfinite(sigma)) {
        throw UsageError(kComponent, fmt::format("gaussian sigma must be a positive number, not {}", sigma));
    }
    const double radius_exact = std::ceil(3.0 * sigma);
    if (radius_exact > kMaxSeparableRadius) {
        throw UsageError(kComponent, fmt::format("gaussian sigma {} needs radius {}, over the limit of {}",
                                                 sigma, radius_exact, kMaxSeparableRadius));
    }
    FilterSpec spec;
    spec.kind = FilterKind::Gaussian;
    spec.sigma = sigma;
    spec.radius = static_cast<std::uint32_t>(radius_exact);
    spec.edge = edge;
    const std::size_t taps = 2 * std::size_t{spec.radius} + 1;
    std::vector<double> exact(taps);
    double sum = 0.0;
    for (std::size_t t = 0; t < taps; ++t) {
        const double x = static_cast<double>(t) - spec.radius;
        exact[t] = std::exp(-(x * x) / (2.0 * sigma * sigma));
        sum += exact[t];
    }
    spec.kernel.resize(taps);
    for (std::size_t t = 0; t < taps; ++t) spec.kernel[t] = static_cast<float>(exact[t] / sum);
    return spec;
}

FilterSpec FilterSpec::box(std::uint32_t radius, EdgeMode edge) {
    check_separable_radius(radius, "box blur");
    FilterSpec spec;
    spec.kind = FilterKind::Box;
    spec.radius = radius;
    spec.edge = edge;
    const std::size_t taps = 2 * std::size_t{radius} + 1;
    spec.kernel.assign(taps, static_cast<float>(1.0 / static_cast<double>(taps)));
    return spec;
}

FilterSpec FilterSpec::sobel(EdgeMode edge) {
    FilterSpec spec;
    spec.kind = FilterKind::Sobel;
    spec.radius = 1;
    spec.edge = edge;
    return spec;
}

FilterSpec FilterSpec::conv(std::vector<float> kernel, std::uint32_t size, EdgeMode edge) {
    FilterSpec spec;
    spec.kind = FilterKind::Conv;
    spec.radius = size / 2;
    spec.edge = edge;
    if (size % 2 == 0 || size > kMaxConvSide) {
        throw UsageError(kComponent,
                         fmt::format("a kernel of side {} is not odd and at most {}", size, kMaxConvSide));
    }
    if (kernel.size() != std::size_t{size} * size) {
        throw UsageError(kComponent, fmt::format("a {0}x{0} kernel needs {1} weights, not {2}", size,
                                                 size * size, kernel.size()));
    }
    spec.kernel = std::move(kernel);
    spec.validate();
    return spec;
}

void FilterSpec::validate() const {
    const std::uint64_t side = 2ULL * radius + 1;
    std::uint64_t taps = 0;
    switch (kind) {
        case FilterKind::Gaussian:
        case FilterKind::Box:
            check_separable_radius(radius, to_string(kind));
            taps = side;
            break;
        case FilterKind::Sobel:
            if (radius != 1) throw UsageError(kComponent, fmt::format("sobel has radius 1, not {}", radius));
            break;
        case FilterKind::Conv:
            if (side > kMaxConvSide) {
                throw UsageError(kComponent, fmt::format("a {0}x{0} kernel is over the {1}x{1} limit", side,
                                                         kMaxConvSide));
            }
            taps = side * side;
            break;
        default: throw UsageError(kComponent, "unknown filter kind");
    }
    if (kernel.size() != taps) {
        throw UsageError(kComponent, fmt::format("a {} filter of radius {} needs {} weights, not {}",
                                                 to_string(kind), radius, taps, kernel.size()));
    }
    for (const float w : kernel) {
        if (!std::isfinite(w)) throw UsageError(kComponent, "filter weights must be finite");
    }
    if (kind == FilterKind::Gaussian && !(sigma > 0.0 && std::isfinite(sigma))) {
        throw UsageError(kComponent, "gaussian sigma must be a positive number");
    }
    if (edge != EdgeMode::Clamp && edge != EdgeMode::Mirror && edge != EdgeMode::Zero) {
        throw UsageError(kComponent, "unknown edge mode");
    }
}

FilterSpec load_kernel_file(const std::string& path, EdgeMode edge) {
    const io::File file = io::File::open_read(path, kComponent);
    const std::uint64_t bytes = file.size_bytes();
    const std::string shown = io::printable(path);
    if (bytes > kMaxKernelFileBytes) {
        throw UsageError(kComponent,
                         fmt::format("kernel file {} is {}, too large for a kernel of at most {}x{}", shown,
                                     format_size(bytes), kMaxConvSide, kMaxConvSide));
    }
    std::string text(static_cast<std::size_t>(bytes), '\0');
    file.read_exact(reinterpret_cast<std::byte*>(text.data()), bytes, 0);

    std::vector<float> weights;
    std::size_t line = 1;
    std::size_t at = 0;
    while (at < text.size()) {
        const char ch = text[at];
        if (ch == '\n') ++line;
        if (ch == '#') {
            while (at < text.size() && text[at] != '\n') ++at;
            continue;
        }
        if (std::strchr(" \t\r\n\v\f", ch) != nullptr) {
            ++at;
            continue;
        }
        std::size_t end = at;
        while (end < text.size() && std::strchr(" \t\r\n\v\f#", text[end]) == nullptr) ++end;
        const std::string_view token(text.data() + at, end - at);
        // from_chars takes no leading '+'; people write one.
        const std::string_view digits = token.size() > 1 && token[0] == '+' ? token.substr(1) : token;
        double value = 0.0;
        const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
        if (ec != std::errc{} || ptr != digits.data() + digits.size()) {
            throw UsageError(kComponent, fmt::format("kernel file {} line {}: '{}' is not a number", shown,
                                                     line, io::printable(token, 40)));
        }
        if (!std::isfinite(value) || std::fabs(value) > std::numeric_limits<float>::max()) {
            throw UsageError(kComponent,
                             fmt::format("kernel file {} line {}: '{}' is not a finite f32 weight", shown,
                                         line, io::printable(token, 40)));
        }
        weights.push_back(static_cast<float>(value));
        at = end;
    }
    const auto side = static_cast<std::uint32_t>(std::lround(std::sqrt(static_cast<double>(weights.size()))));
    if (weights.empty() || std::size_t{side} * side != weights.size() || side % 2 == 0 ||
        side > kMaxConvSide) {
        throw UsageError(kComponent,
                         fmt::format("kernel file {} has {} numbers, not an odd square of side at most {} "
                                     "(9, 25, ..., 225)",
                                     shown, weights.size(), kMaxConvSide));
    }
    return FilterSpec::conv(std::move(weights), side, edge);
}

std::uint64_t ImageShape::row_bytes() const { return checked_mul(extent.cols, pixel_bytes(), kComponent); }

void ImageShape::validate() const {
    if (extent.rows == 0 || extent.cols == 0) {
        throw UsageError(kComponent, fmt::format("the image is empty ({}x{})", extent.rows, extent.cols));
    }
    if (channels < 1 || channels > 4) {
        throw UsageError(kComponent, fmt::format("{} channels: 1 to 4 are supported", channels));
    }
    if (type != DType::U8 && type != DType::U16 && type != DType::F32) {
        throw UsageError(kComponent,
                         fmt::format("{} pixels: u8, u16 and f32 are supported", outcore::to_string(type)));
    }
    // Rows and columns are indexed as signed 64-bit around the halo; the whole image
    // must be addressable in bytes.
    constexpr auto kMaxSide = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max() / 2);
    if (extent.rows > kMaxSide || extent.cols > kMaxSide)
        throw UsageError(kComponent, "the image is too large");
    (void)checked_mul(extent.rows, row_bytes(), kComponent);
}

}  // namespace outcore::ops
