#include "io_fuzz_targets.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "outcore/core/error.hpp"
#include "outcore/io/npy.hpp"
#include "outcore/io/tiff.hpp"

namespace outcore::fuzz {
namespace {

// Records a rejection; the message must be the documented single line.
void rejected(const Error& e, std::string_view prefix, FuzzOutcome& out) {
    out.error = e.what();
    if (out.error.find('\n') != std::string::npos) out.violation = "multi-line error: " + out.error;
    if (out.error.rfind(prefix, 0) != 0) {
        out.violation = "error without the '" + std::string(prefix) + "' prefix: " + out.error;
    }
}

// ---- .npy ----------------------------------------------------------------------------

void check_npy(const io::NpyHeader& h, std::span<const std::byte> data, FuzzOutcome& out) {
    if (h.data_offset_bytes > data.size()) out.violation = "data offset beyond the input";
    std::uint64_t n = 1;
    for (const std::uint64_t d : h.shape) n *= d;  // parse checked this cannot overflow
    if (n != h.element_count) out.violation = "element count is not the product of the shape";
    if (h.data_bytes != n * dtype_bytes(h.dtype)) out.violation = "data bytes are not elements x itemsize";
    try {
        io::check_npy_file_size(h, data.size(), "fuzz.npy");
    } catch (const UsageError& e) {
        if (std::string(e.what()).find("data truncated") == std::string::npos) out.violation = e.what();
    }
    // Formatting the parsed header again must parse to the same fields (or refuse a
    // shape too large to write, which parse allows up to the largest offset).
    try {
        const std::vector<std::byte> again = io::format_npy_header(
            h.shape, h.dtype, h.fortran_order ? io::NpyOrder::Fortran : io::NpyOrder::C);
        const io::NpyHeader back = io::parse_npy_header(again, "again.npy");
        if (back.shape != h.shape || back.dtype != h.dtype || back.fortran_order != h.fortran_order ||
            back.data_bytes != h.data_bytes) {
            out.violation = "format/parse round trip changed the header";
        }
        if (again.size() % 64 != 0) out.violation = "formatted header is not 64-byte aligned";
    } catch (const UsageError& e) {
        if (std::string(e.what()).find("too large") == std::string::npos) out.violation = e.what();
    }
}

// ---- TIFF ----------------------------------------------------------------------------

void check_tiff(const io::TiffReader& r, FuzzOutcome& out) {
    const io::ImageInfo& info = r.info();
    if (info.rows == 0 || info.cols == 0 || info.channels < 1 || info.channels > 4 ||
        (info.dtype != DType::U8 && info.dtype != DType::U16 && info.dtype != DType::F32)) {
        out.violation = "reader accepted an image outside its documented range";
        return;
    }
    const std::uint64_t row_bytes = info.row_bytes();
    constexpr std::uint64_t kWholeLimitBytes = 4 * kMiB;
    constexpr std::uint64_t kWholeLimitUnits = 4096;
    if (info.rows > kWholeLimitBytes / row_bytes || info.rows / r.unit_rows() > kWholeLimitUnits) {
        // Too big (or in too many strips) to read whole on every input: the first and
        // last rows exercise the decoder at both ends.
        std::vector<std::byte> row(row_bytes);
        r.read_rows(0, 1, row.data(), row_bytes);
        r.read_rows(info.rows - 1, 1, row.data(), row_bytes);
        return;
    }
    std::vector<std::byte> whole(info.rows * row_bytes);
    r.read_rows(0, info.rows, whole.data(), row_bytes);
    // Halo'd bands, as the filter pipeline reads them, must see the same bytes.
    const std::uint64_t band = 1 + (info.rows * 7 + info.cols) % (2 * r.unit_rows() + 3);
    const std::uint64_t halo = info.cols % 4;
    std::vector<std::byte> tmp((band + 2 * halo) * row_bytes);
    for (std::uint64_t b0 = 0; b0 < info.rows; b0 += band) {
        const std::uint64_t lo = b0 >= halo ? b0 - halo : 0;
        const std::uint64_t hi = std::min(info.rows, b0 + band + halo);
        r.read_rows(lo, hi - lo, tmp.data(), row_bytes);
        if (std::memcmp(tmp.data(), whole.data() + lo * row_bytes, (hi - lo) * row_bytes) != 0) {
            out.violation = "a band read differs from the whole-image read";
            return;
        }
    }
}

// Little-endian bytes appended to a vector.
void put(std::vector<std::byte>& out, std::uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<std::byte>((value >> (8 * i)) & 0xff));
}
void patch(std::vector<std::byte>& out, std::size_t at, std::uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) {
        out[at + static_cast<std::size_t>(i)] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
    }
}

// A minimal uncompressed, striped, interleaved TIFF written by hand (not by libtiff),
// classic or BigTIFF: the seeds libtiff-independent inputs are made from.
std::vector<std::byte> striped_tiff(bool big, std::uint32_t width, std::uint32_t height, std::uint16_t spp,
                                    DType dtype, std::uint32_t rows_per_strip, std::uint32_t seed) {
    constexpr std::uint16_t kShort = 3;
    constexpr std::uint16_t kLong = 4;
    constexpr std::uint16_t kLong8 = 16;
    const auto bits = static_cast<std::uint16_t>(dtype_bytes(dtype) * 8);
    const std::uint64_t row_bytes = std::uint64_t{width} * spp * dtype_bytes(dtype);
    const int offset_bytes = big ? 8 : 4;
    std::vector<std::byte> out;
    put(out, 0x4949, 2);  // "II": little-endian
    put(out, big ? 43 : 42, 2);
    if (big) {
        put(out, 8, 2);
        put(out, 0, 2);
    }
    const std::size_t ifd_pointer = out.size();
    put(out, 0, offset_bytes);
    std::vector<std::uint64_t> strip_offsets;
    std::vector<std::uint64_t> strip_bytes;
    std::uint32_t state = seed * 2654435761U + 1;
    for (std::uint32_t y = 0; y < height; y += rows_per_strip) {
        const std::uint64_t rows = std::min(rows_per_strip, height - y);
        strip_offsets.push_back(out.size());
        strip_bytes.push_back(rows * row_bytes);
        for (std::uint64_t k = 0; k < rows * row_bytes; ++k) {
            state = state * 1664525U + 1013904223U;
            out.push_back(static_cast<std::byte>(state >> 24));
        }
        if (out.size() % 2 != 0) out.push_back(std::byte{0});
    }
    struct Entry {
        std::uint16_t tag;
        std::uint16_t type;
        std::vector<std::uint64_t> values;
    };
    const std::uint16_t format = dtype == DType::F32 ? 3 : 1;
    std::vector<Entry> entries = {
        {256, kLong, {width}},
        {257, kLong, {height}},
        {258, kShort, std::vector<std::uint64_t>(spp, bits)},
        {259, kShort, {1}},
        {262, kShort, {spp >= 3 ? 2U : 1U}},
        {273, big ? kLong8 : kLong, strip_offsets},
        {277, kShort, {spp}},
        {278, kLong, {rows_per_strip}},
        {279, big ? kLong8 : kLong, strip_bytes},
    };
    if (spp == 2 || spp == 4) entries.push_back({338, kShort, {2}});
    entries.push_back({339, kShort, std::vector<std::uint64_t>(spp, format)});
    const auto type_bytes = [](std::uint16_t type) { return type == kShort ? 2 : type == kLong ? 4 : 8; };
    // Values too long for the entry itself go before the IFD.
    std::vector<std::uint64_t> value_offsets(entries.size(), 0);
    for (std::size_t e = 0; e < entries.size(); ++e) {
        const int size = type_bytes(entries[e].type);
        if (entries[e].values.size() * static_cast<std::size_t>(size) <=
            static_cast<std::size_t>(offset_bytes)) {
            continue;
        }
        value_offsets[e] = out.size();
        for (const std::uint64_t v : entries[e].values) put(out, v, size);
        if (out.size() % 2 != 0) out.push_back(std::byte{0});
    }
    patch(out, ifd_pointer, out.size(), offset_bytes);
    put(out, entries.size(), big ? 8 : 2);
    for (std::size_t e = 0; e < entries.size(); ++e) {
        const Entry& entry = entries[e];
        put(out, entry.tag, 2);
        put(out, entry.type, 2);
        put(out, entry.values.size(), offset_bytes);
        const int size = type_bytes(entry.type);
        if (value_offsets[e] != 0) {
            put(out, value_offsets[e], offset_bytes);
        } else {
            int used = 0;
            for (const std::uint64_t v : entry.values) {
                put(out, v, size);
                used += size;
            }
            put(out, 0, offset_bytes - used);
        }
    }
    put(out, 0, offset_bytes);  // no next IFD
    return out;
}

std::vector<std::byte> read_whole(const std::string& path) {
    std::vector<std::byte> bytes;
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return bytes;
    std::array<std::byte, 1 << 16> buf{};
    std::size_t n = 0;
    while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
        bytes.insert(bytes.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
    }
    std::fclose(f);
    return bytes;
}

}  // namespace

FuzzOutcome npy_header_target(std::span<const std::byte> data) {
    FuzzOutcome out;
    try {
        const io::NpyHeader h = io::parse_npy_header(data, "fuzz.npy");
        out.accepted = true;
        check_npy(h, data, out);
    } catch (const UsageError& e) {
        rejected(e, "[npy] 'fuzz.npy': ", out);
    } catch (const Error& e) {
        out.violation = std::string("unexpected error kind: ") + e.what();
    }
    return out;
}

FuzzOutcome tiff_target(std::span<const std::byte> data) {
    FuzzOutcome out;
    try {
        io::TiffReadOptions options;
        options.cache_bytes = 256 * kKiB;
        options.max_unit_bytes = 8 * kMiB;  // bounds what a hostile header makes anyone allocate
        const io::TiffReader reader(data, "fuzz.tif", options);
        check_tiff(reader, out);
        out.accepted = true;
    } catch (const UsageError& e) {
        rejected(e, "[tiff] ", out);
    } catch (const Error& e) {
        out.violation = std::string("unexpected error kind: ") + e.what();
    }
    return out;
}

std::vector<std::vector<std::byte>> npy_seed_inputs() {
    std::vector<std::vector<std::byte>> seeds;
    const std::vector<std::vector<std::uint64_t>> shapes = {{},        {7},       {3, 4},
                                                            {1, 1023}, {2, 3, 4}, {5, 1, 2, 3}};
    for (const DType dtype : {DType::F32, DType::F64, DType::F16, DType::U16, DType::U8}) {
        for (const io::NpyOrder order : {io::NpyOrder::C, io::NpyOrder::Fortran}) {
            for (const auto& shape : shapes) {
                std::vector<std::byte> s = io::format_npy_header(shape, dtype, order);
                // Some seeds carry their data, so the size check passes as well as fails.
                std::uint64_t n = dtype_bytes(dtype);
                for (const std::uint64_t d : shape) n *= d;
                if (n <= 64 && (seeds.size() % 2 == 0)) s.resize(s.size() + n, std::byte{0x3c});
                seeds.push_back(std::move(s));
            }
        }
    }
    // Spellings NumPy never writes but Python would read: version 2.0/3.0 prefixes,
    // double quotes, Python 2 longs, no trailing comma.
    for (const std::string& dict :
         {std::string("{\"descr\": \"<f8\", \"fortran_order\": True, \"shape\": (2L, 3L)}\n"),
          std::string("{'shape': (9,), 'descr': '|u1', 'fortran_order': False}\n")}) {
        for (const char major : {'\x01', '\x02', '\x03'}) {
            std::vector<std::byte> s;
            for (const char c : std::string("\x93NUMPY")) s.push_back(static_cast<std::byte>(c));
            s.push_back(static_cast<std::byte>(major));
            s.push_back(std::byte{0});
            put(s, dict.size(), major == '\x01' ? 2 : 4);
            for (const char c : dict) s.push_back(static_cast<std::byte>(c));
            seeds.push_back(std::move(s));
        }
    }
    return seeds;
}

std::vector<std::vector<std::byte>> tiff_seed_inputs() {
    std::vector<std::vector<std::byte>> seeds;
    std::uint32_t seed = 1;
    for (const DType dtype : {DType::U8, DType::U16, DType::F32}) {
        for (std::uint16_t spp = 1; spp <= 4; ++spp) {
            for (const bool big : {false, true}) {
                for (const std::uint32_t rps : {1U, 3U, 9U}) {
                    seeds.push_back(striped_tiff(big, 5 + spp, 9, spp, dtype, rps, seed++));
                }
            }
        }
    }
    if (!io::tiff_supported()) return seeds;
    // Tiled seeds through outcore's own writer, in a scratch directory.
    std::string pattern = (std::filesystem::temp_directory_path() / "outcore-seeds-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) return seeds;
    const std::string dir = pattern;
    const std::string path = dir + "/seed.tif";
    for (const DType dtype : {DType::U8, DType::U16, DType::F32}) {
        for (const io::TiffCompression c :
             {io::TiffCompression::None, io::TiffCompression::Lzw, io::TiffCompression::Deflate}) {
            for (const std::uint32_t channels : {1U, 3U}) {
                io::ImageInfo info;
                info.rows = 21;
                info.cols = 37;
                info.channels = channels;
                info.dtype = dtype;
                info.tile_rows = 16;
                info.tile_cols = 16;
                info.bigtiff = c == io::TiffCompression::Lzw;
                io::TiffWriteOptions options;
                options.compression = c;
                io::TiffWriter w(path, info, true, options);
                std::vector<std::byte> pixels(info.bytes());
                for (std::size_t k = 0; k < pixels.size(); ++k) {
                    pixels[k] = static_cast<std::byte>((k * 37 + k / 7) & 0xff);
                }
                w.write_rows(0, info.rows, pixels.data(), info.row_bytes());
                w.commit();
                seeds.push_back(read_whole(path));
            }
        }
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return seeds;
}

}  // namespace outcore::fuzz
