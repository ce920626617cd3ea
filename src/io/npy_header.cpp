// The .npy header: a fixed prefix, then a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// padded with spaces and a newline. Parsed by hand, bounds-checked at every byte: it
// is fed hostile input by the fuzzer (fuzz/npy_header_fuzz.cpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>

#include "outcore/core/error.hpp"
#include "outcore/io/npy.hpp"

namespace outcore::io {
namespace {

static_assert(std::endian::native == std::endian::little,
              "outcore reads .npy data in place and supports little-endian hosts only");

constexpr std::string_view kComponent = "npy";
constexpr std::array<unsigned char, 6> kMagic = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr std::size_t kMaxDims = 64;  // NumPy's NPY_MAXDIMS
constexpr std::uint64_t kMaxFileOffset = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

[[noreturn]] void fail(std::string_view name, std::string_view what) {
    throw UsageError(kComponent, fmt::format("'{}': {}", printable(name), what));
}

std::string format_shape(std::span<const std::uint64_t> shape) {
    if (shape.size() == 1) return fmt::format("({},)", shape[0]);
    return fmt::format("({})", fmt::join(shape, ", "));
}

struct DTypeName {
    std::string_view type;  // descr without its byte-order character
    DType dtype;
};
constexpr std::array<DTypeName, 5> kTypes = {{
    {"f4", DType::F32},
    {"f8", DType::F64},
    {"f2", DType::F16},
    {"u2", DType::U16},
    {"u1", DType::U8},
}};

DType dtype_from_descr(std::string_view descr, std::string_view name) {
    const auto unsupported = [&] {
        fail(name, fmt::format("unsupported dtype '{}' (supported: <f4, <f8, <f2, <u2, |u1)",
                               printable(descr, 40)));
    };
    if (descr.size() < 2) unsupported();
    const char order = descr[0];
    const std::string_view type = descr.substr(1);
    for (const DTypeName& t : kTypes) {
        if (t.type != type) continue;
        const bool single_byte = dtype_bytes(t.dtype) == 1;
        if (order == '>' && !single_byte) {
            fail(name,
                 fmt::format("unsupported byte order in dtype '{}' (big-endian; only little-endian data "
                             "are supported)",
                             descr));
        }
        // '=' is native order, little-endian here; '|' means "not applicable" and is
        // only right for single bytes.
        if (order == '<' || order == '=' || (single_byte && (order == '|' || order == '>'))) return t.dtype;
        unsupported();
    }
    unsupported();
    return DType::F32;  // unreachable: unsupported() throws
}

// A cursor over the dict text. Every access is bounds-checked; peek() past the end
// yields '\0', which no rule accepts.
class DictParser {
public:
    DictParser(std::string_view text, std::string_view name) : text_(text), name_(name) {}

    void parse(NpyHeader& header) {
        std::optional<std::string> descr;
        std::optional<bool> fortran;
        std::optional<std::vector<std::uint64_t>> shape;
        skip_space();
        expect('{', "header is not a dict (expected '{')");
        skip_space();
        while (peek() != '}') {
            const std::string key = parse_string("dict key");
            skip_space();
            expect(':', "expected ':' after a key");
            skip_space();
            if (key == "descr") {
                if (descr) fail(name_, "duplicate key 'descr' in header");
                if (peek() == '[') fail(name_, "structured dtypes are not supported (descr is a list)");
                descr = parse_string("'descr' value");
            } else if (key == "fortran_order") {
                if (fortran) fail(name_, "duplicate key 'fortran_order' in header");
                fortran = parse_bool();
            } else if (key == "shape") {
                if (shape) fail(name_, "duplicate key 'shape' in header");
                shape = parse_shape();
            } else {
                fail(name_, fmt::format("unexpected key '{}' in header", printable(key, 40)));
            }
            skip_space();
            if (peek() == ',') {
                ++pos_;
                skip_space();
            } else if (peek() != '}') {
                fail(name_, "expected ',' or '}' in header dict");
            }
        }
        ++pos_;  // the '}'
        skip_space();
        if (pos_ != text_.size()) fail(name_, "unexpected text after the header dict");
        if (!descr) fail(name_, "header lacks 'descr'");
        if (!fortran) fail(name_, "header lacks 'fortran_order'");
        if (!shape) fail(name_, "header lacks 'shape'");
        header.dtype = dtype_from_descr(*descr, name_);
        header.fortran_order = *fortran;
        header.shape = std::move(*shape);
    }

private:
    [[nodiscard]] char peek() const noexcept { return pos_ < text_.size() ? text_[pos_] : '\0'; }

    void skip_space() noexcept {
        while (pos_ < text_.size() &&
               (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
            ++pos_;
        }
    }

    void expect(char c, std::string_view what) {
        if (peek() != c) fail(name_, what);
        ++pos_;
    }

    bool consume_word(std::string_view word) noexcept {
        if (text_.substr(pos_, word.size()) != word) return false;
        pos_ += word.size();
        return true;
    }

    std::string parse_string(std::string_view what) {
        const char quote = peek();
        if (quote != '\'' && quote != '"') fail(name_, fmt::format("expected a string for the {}", what));
        ++pos_;
        const std::size_t start = pos_;
        while (pos_ < text_.size() && text_[pos_] != quote) {
            // Escapes never occur in a valid header; refusing them keeps the parser small.
            if (text_[pos_] == '\\' || text_[pos_] == '\n') {
                fail(name_, fmt::format("malformed string in the {}", what));
            }
            ++pos_;
        }
        if (pos_ >= text_.size()) fail(name_, fmt::format("unterminated string in the {}", what));
        std::string value(text_.substr(start, pos_ - start));
        ++pos_;
        return value;
    }

    bool parse_bool() {
        if (consume_word("True")) return true;
        if (consume_word("False")) return false;
        fail(name_, "'fortran_order' is not True or False");
    }

    std::uint64_t parse_dim() {
        if (peek() < '0' || peek() > '9') {
            fail(name_, "'shape' holds something other than non-negative integers");
        }
        std::uint64_t value = 0;
        while (peek() >= '0' && peek() <= '9') {
            const auto digit = static_cast<std::uint64_t>(peek() - '0');
            if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) {
                fail(name_, "a 'shape' dimension exceeds 2^64-1");
            }
            value = value * 10 + digit;
            ++pos_;
        }
        if (peek() == 'L') ++pos_;  // Python 2 long literals, as old NumPy wrote them
        return value;
    }

    std::vector<std::uint64_t> parse_shape() {
        expect('(', "'shape' is not a tuple");
        std::vector<std::uint64_t> dims;
        skip_space();
        if (peek() == ')') {
            ++pos_;
            return dims;
        }
        while (true) {
            if (dims.size() == kMaxDims) {
                fail(name_, fmt::format("'shape' has more than {} dimensions", kMaxDims));
            }
            dims.push_back(parse_dim());
            skip_space();
            if (peek() == ')') {
                // Python spells a 1-tuple "(n,)"; "(n)" is just n.
                if (dims.size() == 1) {
                    fail(name_, "'shape' is not a tuple (a 1-tuple needs a trailing comma)");
                }
                ++pos_;
                return dims;
            }
            expect(',', "expected ',' or ')' in 'shape'");
            skip_space();
            if (peek() == ')') {
                ++pos_;
                return dims;
            }
        }
    }

    std::string_view text_;
    std::string_view name_;
    std::size_t pos_ = 0;
};

std::uint64_t read_le(std::span<const std::byte> bytes, std::size_t offset, std::size_t count) {
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < count; ++i) {
        value |= static_cast<std::uint64_t>(bytes[offset + i]) << (8 * i);
    }
    return value;
}

// The sizes a shape implies, or nullopt when they overflow.
struct ShapeSizes {
    std::uint64_t elements = 1;
    std::uint64_t bytes = 0;
};
std::optional<ShapeSizes> shape_sizes(std::span<const std::uint64_t> shape, DType dtype) {
    ShapeSizes sizes;
    for (const std::uint64_t d : shape) {
        if (d != 0 && sizes.elements > std::numeric_limits<std::uint64_t>::max() / d) return std::nullopt;
        sizes.elements *= d;
    }
    const std::uint64_t w = dtype_bytes(dtype);
    if (sizes.elements > std::numeric_limits<std::uint64_t>::max() / w) return std::nullopt;
    sizes.bytes = sizes.elements * w;
    return sizes;
}

}  // namespace

std::string_view npy_descr(DType dtype) {
    switch (dtype) {
        case DType::F32: return "<f4";
        case DType::F64: return "<f8";
        case DType::F16: return "<f2";
        case DType::U16: return "<u2";
        case DType::U8: return "|u1";
        case DType::BF16: break;
    }
    throw UsageError(kComponent, fmt::format("dtype {} cannot be stored in a .npy file", to_string(dtype)));
}

std::uint64_t npy_header_bytes(std::span<const std::byte> prefix, std::string_view name) {
    if (prefix.size() < kMagic.size() || std::memcmp(prefix.data(), kMagic.data(), kMagic.size()) != 0) {
        fail(name, "not a .npy file (bad magic)");
    }
    if (prefix.size() < 10) fail(name, fmt::format("truncated header ({} bytes)", prefix.size()));
    const auto major = static_cast<unsigned>(prefix[6]);
    const auto minor = static_cast<unsigned>(prefix[7]);
    if (major < 1 || major > 3 || minor != 0) {
        fail(name, fmt::format("unsupported .npy version {}.{} (supported: 1.0, 2.0, 3.0)", major, minor));
    }
    const std::size_t length_bytes = major == 1 ? 2 : 4;
    if (prefix.size() < 8 + length_bytes) {
        fail(name, fmt::format("truncated header ({} bytes)", prefix.size()));
    }
    const std::uint64_t length = read_le(prefix, 8, length_bytes);
    if (length > kNpyMaxHeaderBytes) {
        fail(name, fmt::format("header of {} bytes exceeds the {}-byte limit", length, kNpyMaxHeaderBytes));
    }
    return 8 + length_bytes + length;
}

NpyHeader parse_npy_header(std::span<const std::byte> bytes, std::string_view name) {
    const std::uint64_t total = npy_header_bytes(bytes, name);
    if (bytes.size() < total) {
        fail(name, fmt::format("truncated header ({} of {} bytes)", bytes.size(), total));
    }
    NpyHeader header;
    header.major_version = static_cast<std::uint8_t>(bytes[6]);
    header.minor_version = static_cast<std::uint8_t>(bytes[7]);
    const std::size_t dict_start = header.major_version == 1 ? 10 : 12;
    const std::string_view dict(reinterpret_cast<const char*>(bytes.data()) + dict_start, total - dict_start);
    DictParser(dict, name).parse(header);
    const std::optional<ShapeSizes> sizes = shape_sizes(header.shape, header.dtype);
    if (!sizes) {
        fail(name,
             fmt::format("shape {} has more elements than fit in 2^64 bytes", format_shape(header.shape)));
    }
    header.element_count = sizes->elements;
    header.data_bytes = sizes->bytes;
    header.data_offset_bytes = total;
    if (header.data_bytes > kMaxFileOffset - total) {
        fail(name, fmt::format("shape {} is too large for a file ({} bytes of data)",
                               format_shape(header.shape), header.data_bytes));
    }
    return header;
}

void check_npy_file_size(const NpyHeader& header, std::uint64_t file_bytes, std::string_view name) {
    const std::uint64_t needed =
        header.data_offset_bytes + header.data_bytes;  // no overflow: parse checked it
    if (file_bytes < needed) {
        fail(name,
             fmt::format("data truncated: shape {} of {} needs {} bytes after the header, the file has {}",
                         format_shape(header.shape), npy_descr(header.dtype), header.data_bytes,
                         file_bytes > header.data_offset_bytes ? file_bytes - header.data_offset_bytes : 0));
    }
}

std::vector<std::byte> format_npy_header(std::span<const std::uint64_t> shape, DType dtype, NpyOrder order) {
    const std::string_view descr = npy_descr(dtype);
    if (shape.size() > kMaxDims) {
        throw UsageError(kComponent,
                         fmt::format("shape has {} dimensions (at most {})", shape.size(), kMaxDims));
    }
    const std::optional<ShapeSizes> sizes = shape_sizes(shape, dtype);
    if (!sizes || sizes->bytes > kMaxFileOffset - kMiB) {
        throw UsageError(kComponent, fmt::format("shape {} is too large for a file", format_shape(shape)));
    }
    std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': {}, 'shape': {}, }}", descr,
                                   order == NpyOrder::Fortran ? "True" : "False", format_shape(shape));
    // NumPy pads so the data start on a 64-byte boundary (aligned loads, mmap); version
    // 2.0 only when the dict outgrows version 1.0's 16-bit length.
    std::size_t prefix = 10;
    std::uint8_t major = 1;
    if (dict.size() + 1 + 64 > 0xffff) {
        prefix = 12;
        major = 2;
    }
    const std::size_t total = align_up(prefix + dict.size() + 1, 64);
    dict.append(total - prefix - dict.size() - 1, ' ');
    dict.push_back('\n');
    std::vector<std::byte> out;
    out.reserve(total);
    for (const unsigned char c : kMagic) out.push_back(std::byte{c});
    out.push_back(std::byte{major});
    out.push_back(std::byte{0});
    const std::uint64_t length = dict.size();
    for (std::size_t i = 0; i < prefix - 8; ++i) {
        out.push_back(static_cast<std::byte>((length >> (8 * i)) & 0xff));
    }
    for (const char c : dict) out.push_back(static_cast<std::byte>(c));
    return out;
}

}  // namespace outcore::io
