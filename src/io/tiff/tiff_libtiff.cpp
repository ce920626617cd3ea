// TIFF through libtiff (>= 4.5). Chosen by src/io/CMakeLists.txt when libtiff was
// found; tiff_unavailable.cpp stands in otherwise.
//
// libtiff does its I/O through the callbacks below (pread/pwrite on outcore's File,
// or a memory span), so reads are positional, EINTR-safe and never memory-mapped;
// its messages go to a per-handle handler that keeps the first error for the
// exception instead of printing it.
#include "outcore/io/tiff.hpp"

#include <fmt/format.h>
#include <tiffio.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <list>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "io/transpose.hpp"
#include "outcore/core/error.hpp"

namespace outcore::io {
namespace {

constexpr std::string_view kComponent = "tiff";
constexpr std::uint64_t kMaxOffset = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
constexpr std::uint32_t kDefaultTile = 256;
constexpr std::uint32_t kMaxTile = 4096;
constexpr std::uint64_t kMaxCachedUnits = 4096;

// What libtiff said during the current call; only the first error is kept (later ones
// are usually consequences of it).
struct Messages {
    std::string first_error;
    void clear() { first_error.clear(); }
};

int on_error(TIFF* /*tif*/, void* user_data, const char* module, const char* format, va_list args) {
    auto* messages = static_cast<Messages*>(user_data);
    if (messages != nullptr && messages->first_error.empty()) {
        char text[512];
        std::vsnprintf(text, sizeof text, format, args);
        messages->first_error =
            module != nullptr && module[0] != '\0' ? fmt::format("{}: {}", module, text) : std::string(text);
        if (messages->first_error.empty()) messages->first_error = "unspecified libtiff error";
    }
    return 1;  // handled: libtiff's global handler, which prints to stderr, is skipped
}

int on_warning(TIFF* /*tif*/, void* /*user_data*/, const char* /*module*/, const char* /*format*/,
               va_list /*args*/) {
    return 1;  // warnings are dropped: a file outcore can read is fine as far as the user is concerned
}

// The byte stream behind a TIFF handle: a File, or a span of memory when file is null.
struct Stream {
    const File* file = nullptr;
    std::span<const std::byte> memory;
    std::uint64_t offset = 0;
    std::uint64_t size = 0;
    int io_errno = 0;  // first failed system call, reported as IoError
    std::string io_operation;
};

Stream& stream_of(thandle_t handle) { return *static_cast<Stream*>(handle); }

// libtiff is C: nothing may be thrown through it, so failures become return values and
// the Stream remembers the errno.
tmsize_t read_proc(thandle_t handle, void* buffer, tmsize_t size) {
    Stream& s = stream_of(handle);
    if (size <= 0) return 0;
    auto want = static_cast<std::uint64_t>(size);
    if (s.file == nullptr) {
        if (s.offset >= s.memory.size()) return 0;
        want = std::min<std::uint64_t>(want, s.memory.size() - s.offset);
        std::memcpy(buffer, s.memory.data() + s.offset, want);
        s.offset += want;
        return static_cast<tmsize_t>(want);
    }
    try {
        const std::uint64_t got = s.file->read_some(static_cast<std::byte*>(buffer), want, s.offset);
        s.offset += got;
        return static_cast<tmsize_t>(got);
    } catch (const IoError& e) {
        if (s.io_errno == 0) {
            s.io_errno = e.errno_value();
            s.io_operation = "pread";
        }
    } catch (...) {
        if (s.io_errno == 0) s.io_errno = EIO;
    }
    return -1;
}

tmsize_t write_proc(thandle_t handle, void* buffer, tmsize_t size) {
    Stream& s = stream_of(handle);
    if (size <= 0) return 0;
    if (s.file == nullptr) return -1;
    try {
        const auto bytes = static_cast<std::uint64_t>(size);
        s.file->write_exact(static_cast<const std::byte*>(buffer), bytes, s.offset);
        s.offset += bytes;
        s.size = std::max(s.size, s.offset);
        return size;
    } catch (const IoError& e) {
        if (s.io_errno == 0) {
            s.io_errno = e.errno_value();
            s.io_operation = "pwrite";
        }
    } catch (...) {
        if (s.io_errno == 0) s.io_errno = EIO;
    }
    return -1;
}

toff_t seek_proc(thandle_t handle, toff_t offset, int whence) {
    Stream& s = stream_of(handle);
    const auto fail = static_cast<toff_t>(-1);
    std::uint64_t base = 0;
    switch (whence) {
        case SEEK_SET: base = 0; break;
        case SEEK_CUR: base = s.offset; break;
        case SEEK_END: base = s.size; break;
        default: return fail;
    }
    // libtiff passes backward SEEK_CUR moves as wrapped unsigned values.
    const std::uint64_t target = base + offset;
    if (target > kMaxOffset) return fail;
    s.offset = target;
    return s.offset;
}

int close_proc(thandle_t /*handle*/) { return 0; }  // the File is owned (and closed) by outcore

toff_t size_proc(thandle_t handle) { return stream_of(handle).size; }

int map_proc(thandle_t handle, void** base, toff_t* size) {
    Stream& s = stream_of(handle);
    if (s.file != nullptr) {
        return 0;  // files are read, never mapped: page cache use stays visible and bounded
    }
    *base = const_cast<std::byte*>(s.memory.data());
    *size = s.memory.size();
    return 1;
}

void unmap_proc(thandle_t /*handle*/, void* /*base*/, toff_t /*size*/) {}

TIFF* open_tiff(const std::string& name, const char* mode, Stream& stream, Messages& messages,
                std::uint64_t max_alloc_bytes) {
    TIFFOpenOptions* options = TIFFOpenOptionsAlloc();
    if (options == nullptr) throw InternalError(kComponent, "TIFFOpenOptionsAlloc failed");
    TIFFOpenOptionsSetErrorHandlerExtR(options, on_error, &messages);
    TIFFOpenOptionsSetWarningHandlerExtR(options, on_warning, nullptr);
    TIFFOpenOptionsSetMaxSingleMemAlloc(
        options, static_cast<tmsize_t>(std::min<std::uint64_t>(max_alloc_bytes, kMaxOffset)));
    TIFF* tif = TIFFClientOpenExt(name.c_str(), mode, &stream, read_proc, write_proc, seek_proc, close_proc,
                                  size_proc, map_proc, unmap_proc, options);
    TIFFOpenOptionsFree(options);
    return tif;
}

// A failed libtiff call: IoError when a system call underneath failed, else a one-line
// UsageError with libtiff's own explanation.
[[noreturn]] void throw_tiff(const std::string& name, std::string_view what, const Stream& stream,
                             const Messages& messages) {
    if (stream.io_errno != 0) {
        throw IoError(kComponent, what, stream.io_errno, printable(name),
                      stream.io_operation.empty() ? "read" : stream.io_operation);
    }
    const std::string detail = messages.first_error.empty() ? "libtiff gave no reason" : messages.first_error;
    throw UsageError(kComponent, fmt::format("'{}': {}: {}", printable(name), what, printable(detail, 200)));
}

[[noreturn]] void unsupported(const std::string& name, std::string_view what) {
    throw UsageError(kComponent, fmt::format("'{}': unsupported TIFF: {}", printable(name), what));
}

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace

bool tiff_supported() noexcept { return true; }

// ---------------------------------------------------------------------------------
// Reader

struct TiffReader::Impl {
    // A decoded strip or tile row: rows [index * unit_rows, + rows) of the image.
    struct Unit {
        std::uint64_t index = kNoUnit;
        std::uint64_t rows = 0;
        std::unique_ptr<std::byte[]> data;
    };
    static constexpr std::uint64_t kNoUnit = std::numeric_limits<std::uint64_t>::max();

    std::string name;
    File file;
    Stream stream;
    Messages messages;
    TIFF* tif = nullptr;
    TiffReadOptions options;
    ImageInfo info;
    std::uint64_t row_bytes = 0;
    std::uint64_t unit_rows = 0;
    std::uint64_t unit_bytes = 0;  // a full unit; the last may have fewer rows
    std::uint64_t tile_bytes = 0;
    std::uint64_t tiles_across = 0;
    std::unique_ptr<std::byte[]> tile;  // tiled files: one decoded tile
    // Least recently used last. O(1) lookups: an image of one-row strips can keep
    // thousands of them within cache_bytes.
    std::list<Unit> cache;
    std::unordered_map<std::uint64_t, std::list<Unit>::iterator> cached;
    std::size_t max_units = 2;
    std::uint64_t decoded = 0;
    std::mutex mutex;

    Impl() = default;
    Impl(const Impl&) = delete;
    Impl& operator=(const Impl&) = delete;
    ~Impl() {
        if (tif != nullptr) TIFFClose(tif);
    }

    void open();
    void describe();
    const Unit& unit(std::uint64_t index);
    void decode_strip(std::uint64_t index, std::uint64_t rows, std::byte* dst);
    void decode_tile_row(std::uint64_t index, std::uint64_t rows, std::byte* dst);
};

void TiffReader::Impl::open() {
    // libtiff's own buffers (compressed strips, offset tables) get room beyond a unit:
    // compressed data can outgrow what it decodes to.
    const std::uint64_t unit = std::min(options.max_unit_bytes, kMaxOffset / 4);
    tif = open_tiff(name, "r", stream, messages, 2 * unit + 64 * kMiB);
    if (tif == nullptr) throw_tiff(name, "not a readable TIFF", stream, messages);
    describe();
}

void TiffReader::Impl::describe() {
    std::uint32_t width = 0;
    std::uint32_t height = 0;
    if (TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &width) != 1 ||
        TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &height) != 1) {
        throw_tiff(name, "no image size", stream, messages);
    }
    if (width == 0 || height == 0) unsupported(name, fmt::format("empty image ({} x {})", width, height));
    std::uint16_t spp = 1;
    std::uint16_t bits = 1;
    std::uint16_t format = SAMPLEFORMAT_UINT;
    std::uint16_t planar = PLANARCONFIG_CONTIG;
    std::uint16_t photometric = PHOTOMETRIC_MINISBLACK;
    std::uint16_t compression = COMPRESSION_NONE;
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
    TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bits);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &format);
    TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
    TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photometric);
    TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);

    if (spp < 1 || spp > 4) unsupported(name, fmt::format("{} samples per pixel (1 to 4 supported)", spp));
    if (bits == 8 && format == SAMPLEFORMAT_UINT) {
        info.dtype = DType::U8;
    } else if (bits == 16 && format == SAMPLEFORMAT_UINT) {
        info.dtype = DType::U16;
    } else if (bits == 32 && format == SAMPLEFORMAT_IEEEFP) {
        info.dtype = DType::F32;
    } else {
        const char* kind = format == SAMPLEFORMAT_IEEEFP ? "float"
                           : format == SAMPLEFORMAT_INT  ? "signed integer"
                           : format == SAMPLEFORMAT_UINT ? "unsigned integer"
                                                         : "other";
        unsupported(
            name, fmt::format("{}-bit {} samples (supported: 8/16-bit unsigned, 32-bit float)", bits, kind));
    }
    if (spp > 1 && planar != PLANARCONFIG_CONTIG) {
        unsupported(name, "separate planes (only interleaved samples)");
    }
    if (photometric == PHOTOMETRIC_LOGL || photometric == PHOTOMETRIC_LOGLUV) {
        unsupported(name, "LogL/LogLuv data");
    }
    if (photometric == PHOTOMETRIC_YCBCR) {
        if (compression == COMPRESSION_JPEG) {
            // libtiff converts JPEG-compressed YCbCr (subsampled or not) to RGB itself.
            if (TIFFSetField(tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB) != 1) {
                throw_tiff(name, "cannot decode YCbCr JPEG as RGB", stream, messages);
            }
        } else {
            std::uint16_t sub_h = 1;
            std::uint16_t sub_v = 1;
            TIFFGetFieldDefaulted(tif, TIFFTAG_YCBCRSUBSAMPLING, &sub_h, &sub_v);
            if (sub_h != 1 || sub_v != 1) unsupported(name, "subsampled YCbCr");
        }
    }
    info.rows = height;
    info.cols = width;
    info.channels = spp;
    info.bigtiff = TIFFIsBigTIFF(tif) != 0;
    row_bytes = info.row_bytes();
    if (static_cast<std::uint64_t>(TIFFScanlineSize64(tif)) != row_bytes) {
        throw_tiff(name, fmt::format("unexpected scanline size (expected {} bytes)", row_bytes), stream,
                   messages);
    }
    if (TIFFIsTiled(tif) != 0) {
        std::uint32_t tw = 0;
        std::uint32_t th = 0;
        if (TIFFGetField(tif, TIFFTAG_TILEWIDTH, &tw) != 1 ||
            TIFFGetField(tif, TIFFTAG_TILELENGTH, &th) != 1 || tw == 0 || th == 0) {
            throw_tiff(name, "bad tile size", stream, messages);
        }
        info.tiled = true;
        info.tile_rows = th;
        info.tile_cols = tw;
        unit_rows = std::min<std::uint64_t>(th, height);
        tiles_across = ceil_div(width, tw);
        const std::uint64_t tiles = tiles_across * ceil_div(height, th);
        if (TIFFNumberOfTiles(tif) != tiles) {
            unsupported(name,
                        fmt::format("{} tiles where {} x {} tiles of {} x {} are expected",
                                    TIFFNumberOfTiles(tif), tiles_across, ceil_div(height, th), th, tw));
        }
        tile_bytes = static_cast<std::uint64_t>(TIFFTileSize64(tif));
        const std::uint64_t expect = std::uint64_t{tw} * th * info.pixel_bytes();
        if (tile_bytes != expect) {
            throw_tiff(name, fmt::format("unexpected tile size {} bytes (expected {})", tile_bytes, expect),
                       stream, messages);
        }
        if (tile_bytes > options.max_unit_bytes) {
            unsupported(name, fmt::format("a {} x {} tile is {} bytes, over the reader's {}-byte limit", th,
                                          tw, tile_bytes, options.max_unit_bytes));
        }
        tile = std::make_unique_for_overwrite<std::byte[]>(tile_bytes);
    } else {
        std::uint32_t rps = 0;
        TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, &rps);
        if (rps == 0) unsupported(name, "RowsPerStrip is 0");
        unit_rows = std::min<std::uint64_t>(rps, height);
        info.rows_per_strip = static_cast<std::uint32_t>(unit_rows);
        const std::uint64_t strips = ceil_div(height, unit_rows);
        if (TIFFNumberOfStrips(tif) != strips) {
            unsupported(name, fmt::format("{} strips where {} of {} rows are expected",
                                          TIFFNumberOfStrips(tif), strips, unit_rows));
        }
    }
    if (row_bytes > options.max_unit_bytes / unit_rows) {
        unsupported(
            name, fmt::format("a strip or tile row of {} rows x {} bytes exceeds the reader's {}-byte limit "
                              "(re-save the image tiled)",
                              unit_rows, row_bytes, options.max_unit_bytes));
    }
    unit_bytes = unit_rows * row_bytes;
    // At least two (a halo straddles a unit boundary), at most kMaxCachedUnits (tiny
    // strips would otherwise cost more in bookkeeping than in pixels).
    max_units = static_cast<std::size_t>(
        std::clamp<std::uint64_t>(options.cache_bytes / unit_bytes, 2, kMaxCachedUnits));
}

void TiffReader::Impl::decode_strip(std::uint64_t index, std::uint64_t rows, std::byte* dst) {
    const std::uint64_t want = rows * row_bytes;
    messages.clear();
    const tmsize_t got =
        TIFFReadEncodedStrip(tif, static_cast<std::uint32_t>(index), dst, static_cast<tmsize_t>(want));
    if (got < 0) throw_tiff(name, fmt::format("cannot decode strip {}", index), stream, messages);
    if (static_cast<std::uint64_t>(got) != want) {
        throw_tiff(name, fmt::format("strip {} decoded to {} bytes, expected {}", index, got, want), stream,
                   messages);
    }
}

void TiffReader::Impl::decode_tile_row(std::uint64_t index, std::uint64_t rows, std::byte* dst) {
    const std::uint64_t px = info.pixel_bytes();
    const std::uint64_t y = index * info.tile_rows;
    for (std::uint64_t tx = 0; tx < tiles_across; ++tx) {
        const std::uint64_t x = tx * info.tile_cols;
        const std::uint32_t number =
            TIFFComputeTile(tif, static_cast<std::uint32_t>(x), static_cast<std::uint32_t>(y), 0, 0);
        messages.clear();
        const tmsize_t got = TIFFReadEncodedTile(tif, number, tile.get(), static_cast<tmsize_t>(tile_bytes));
        if (got < 0) throw_tiff(name, fmt::format("cannot decode tile {}", number), stream, messages);
        if (static_cast<std::uint64_t>(got) != tile_bytes) {
            throw_tiff(name, fmt::format("tile {} decoded to {} bytes, expected {}", number, got, tile_bytes),
                       stream, messages);
        }
        const std::uint64_t cols = std::min<std::uint64_t>(info.tile_cols, info.cols - x);
        detail::copy_runs(tile.get(), info.tile_cols * px, dst + x * px, row_bytes, cols * px, rows);
    }
}

const TiffReader::Impl::Unit& TiffReader::Impl::unit(std::uint64_t index) {
    if (const auto hit = cached.find(index); hit != cached.end()) {
        cache.splice(cache.begin(), cache, hit->second);
        return *hit->second;
    }
    if (cache.size() < max_units) {
        cache.emplace_front();
        cache.front().data = std::make_unique_for_overwrite<std::byte[]>(unit_bytes);
    } else {
        cache.splice(cache.begin(), cache, std::prev(cache.end()));
        cached.erase(cache.front().index);
    }
    Unit& slot = cache.front();
    // Unlisted until decoded: a failed decode must not leave stale rows under an index.
    slot.index = kNoUnit;
    const std::uint64_t rows = std::min(unit_rows, info.rows - index * unit_rows);
    try {
        if (info.tiled) {
            decode_tile_row(index, rows, slot.data.get());
        } else {
            decode_strip(index, rows, slot.data.get());
        }
    } catch (...) {
        cache.splice(cache.end(), cache, cache.begin());  // the slot is reused first
        throw;
    }
    ++decoded;
    slot.index = index;
    slot.rows = rows;
    cached.emplace(index, cache.begin());
    return slot;
}

TiffReader::TiffReader(const std::string& path, const TiffReadOptions& options)
    : impl_(std::make_unique<Impl>()) {
    impl_->name = path;
    impl_->options = options;
    impl_->file = File::open_read(path, kComponent);
    impl_->stream.file = &impl_->file;
    impl_->stream.size = impl_->file.size_bytes();
    impl_->open();
}

TiffReader::TiffReader(std::span<const std::byte> bytes, const std::string& name,
                       const TiffReadOptions& options)
    : impl_(std::make_unique<Impl>()) {
    impl_->name = name;
    impl_->options = options;
    impl_->stream.memory = bytes;
    impl_->stream.size = bytes.size();
    impl_->open();
}

TiffReader::~TiffReader() = default;

const ImageInfo& TiffReader::info() const noexcept { return impl_->info; }

std::uint64_t TiffReader::units_decoded() const noexcept {
    std::lock_guard lock(impl_->mutex);
    return impl_->decoded;
}

std::uint64_t TiffReader::unit_rows() const noexcept { return impl_->unit_rows; }

void TiffReader::do_read_rows(std::uint64_t row0, std::uint64_t rows, std::byte* dst,
                              std::uint64_t row_stride_bytes) const {
    Impl& m = *impl_;
    std::lock_guard lock(m.mutex);
    const std::uint64_t end = row0 + rows;
    for (std::uint64_t r = row0; r < end;) {
        const std::uint64_t index = r / m.unit_rows;
        const Impl::Unit& u = m.unit(index);
        const std::uint64_t first = index * m.unit_rows;
        const std::uint64_t n = std::min(end, first + u.rows) - r;
        detail::copy_runs(u.data.get() + (r - first) * m.row_bytes, m.row_bytes,
                          dst + (r - row0) * row_stride_bytes, row_stride_bytes, m.row_bytes, n);
        r += n;
    }
}

// ---------------------------------------------------------------------------------
// Writer

struct TiffWriter::Impl {
    AtomicOutput output;
    Stream stream;
    Messages messages;
    TIFF* tif = nullptr;
    ImageInfo info;
    TiffWriteOptions options;
    std::uint64_t row_bytes = 0;
    std::uint64_t tile_bytes = 0;
    std::unique_ptr<std::byte[]> band;  // one tile row of output, filled row by row
    std::unique_ptr<std::byte[]> tile;
    std::uint64_t next_row = 0;

    Impl(const std::string& path, bool force) : output(path, force, kComponent) {}
    Impl(const Impl&) = delete;
    Impl& operator=(const Impl&) = delete;
    ~Impl() {
        // Frees without writing a directory; `output` then removes the temporary file.
        if (tif != nullptr) TIFFCleanup(tif);
    }

    [[nodiscard]] const std::string& name() const { return output.final_path(); }
    void set(bool ok, std::string_view what) const {
        if (!ok) throw_tiff(name(), fmt::format("cannot set {}", what), stream, messages);
    }
    void open();
    void flush_tile_row(std::uint64_t tile_row, std::uint64_t rows);
};

namespace {

// Checks a request and fills in what the writer decides (tiling, tile size, BigTIFF).
ImageInfo writer_info(const std::string& path, const ImageInfo& requested, const TiffWriteOptions& options) {
    ImageInfo info = requested;
    const auto bad = [&](std::string_view what) {
        throw UsageError(kComponent, fmt::format("'{}': cannot write {}", printable(path), what));
    };
    if (info.dtype != DType::U8 && info.dtype != DType::U16 && info.dtype != DType::F32) {
        bad(fmt::format("{} samples (TIFF output takes u8, u16 or f32)", to_string(info.dtype)));
    }
    if (info.channels < 1 || info.channels > 4) bad(fmt::format("{} channels (1 to 4)", info.channels));
    if (info.rows == 0 || info.cols == 0) bad(fmt::format("an empty image ({} x {})", info.rows, info.cols));
    if (info.rows > std::numeric_limits<std::uint32_t>::max() ||
        info.cols > std::numeric_limits<std::uint32_t>::max()) {
        bad(fmt::format("a {} x {} image (TIFF dimensions stop at 2^32-1)", info.rows, info.cols));
    }
    for (std::uint32_t* side : {&info.tile_rows, &info.tile_cols}) {
        if (*side == 0) *side = kDefaultTile;
        if (*side % 16 != 0 || *side > kMaxTile) {
            bad(fmt::format("tiles of {} x {} (sides are multiples of 16 up to {})", requested.tile_rows,
                            requested.tile_cols, kMaxTile));
        }
    }
    info.tiled = true;
    info.rows_per_strip = 0;
    // Uncompressed bytes of every padded tile plus the offset tables; compressed
    // tiles can grow (LZW on noise), hence the margin. Classic TIFF's offsets are 32-bit.
    const std::uint64_t tiles = ceil_div(info.rows, info.tile_rows) * ceil_div(info.cols, info.tile_cols);
    const std::uint64_t tile_bytes = std::uint64_t{info.tile_rows} * info.tile_cols * info.pixel_bytes();
    const long double data = static_cast<long double>(tiles) * static_cast<long double>(tile_bytes + 16);
    const long double estimate = options.compression == TiffCompression::None ? data : data * 1.5L;
    info.bigtiff = requested.bigtiff ||
                   estimate + static_cast<long double>(kMiB) > 4.0L * static_cast<long double>(kGiB);
    return info;
}

}  // namespace

void TiffWriter::Impl::open() {
    stream.file = &output.file();
    tif = open_tiff(output.temp_path(), info.bigtiff ? "w8" : "w", stream, messages, kGiB);
    if (tif == nullptr) throw_tiff(name(), "cannot start the TIFF", stream, messages);
    const auto bits = static_cast<std::uint16_t>(dtype_bytes(info.dtype) * 8);
    const auto spp = static_cast<std::uint16_t>(info.channels);
    set(TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, static_cast<std::uint32_t>(info.cols)) == 1, "width");
    set(TIFFSetField(tif, TIFFTAG_IMAGELENGTH, static_cast<std::uint32_t>(info.rows)) == 1, "height");
    set(TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, spp) == 1, "samples per pixel");
    set(TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, bits) == 1, "bits per sample");
    const std::uint16_t format = info.dtype == DType::F32 ? SAMPLEFORMAT_IEEEFP : SAMPLEFORMAT_UINT;
    set(TIFFSetField(tif, TIFFTAG_SAMPLEFORMAT, format) == 1, "sample format");
    set(TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG) == 1, "planar configuration");
    const std::uint16_t photometric = info.channels >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK;
    set(TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, photometric) == 1, "photometric");
    if (info.channels == 2 || info.channels == 4) {
        // The channel beyond gray or RGB is declared as (unassociated) alpha.
        const std::uint16_t extra = EXTRASAMPLE_UNASSALPHA;
        set(TIFFSetField(tif, TIFFTAG_EXTRASAMPLES, 1, &extra) == 1, "extra samples");
    }
    std::uint16_t compression = COMPRESSION_NONE;
    if (options.compression == TiffCompression::Lzw) compression = COMPRESSION_LZW;
    if (options.compression == TiffCompression::Deflate) compression = COMPRESSION_ADOBE_DEFLATE;
    set(TIFFSetField(tif, TIFFTAG_COMPRESSION, compression) == 1, "compression");
    if (compression != COMPRESSION_NONE) {
        const std::uint16_t predictor =
            info.dtype == DType::F32 ? PREDICTOR_FLOATINGPOINT : PREDICTOR_HORIZONTAL;
        set(TIFFSetField(tif, TIFFTAG_PREDICTOR, predictor) == 1, "predictor");
    }
    set(TIFFSetField(tif, TIFFTAG_TILEWIDTH, info.tile_cols) == 1, "tile width");
    set(TIFFSetField(tif, TIFFTAG_TILELENGTH, info.tile_rows) == 1, "tile length");
    row_bytes = info.row_bytes();
    tile_bytes = std::uint64_t{info.tile_rows} * info.tile_cols * info.pixel_bytes();
    if (static_cast<std::uint64_t>(TIFFTileSize64(tif)) != tile_bytes) {
        throw InternalError(kComponent, fmt::format("libtiff tile size {} differs from the expected {} bytes",
                                                    TIFFTileSize64(tif), tile_bytes));
    }
    band = std::make_unique_for_overwrite<std::byte[]>(info.tile_rows * row_bytes);
    tile = std::make_unique_for_overwrite<std::byte[]>(tile_bytes);
}

void TiffWriter::Impl::flush_tile_row(std::uint64_t tile_row, std::uint64_t rows) {
    const std::uint64_t px = info.pixel_bytes();
    const std::uint64_t y = tile_row * info.tile_rows;
    for (std::uint64_t x = 0; x < info.cols; x += info.tile_cols) {
        const std::uint64_t cols = std::min<std::uint64_t>(info.tile_cols, info.cols - x);
        // Edge tiles are padded with zeros, not leftovers of the previous tile.
        if (cols < info.tile_cols || rows < info.tile_rows) std::memset(tile.get(), 0, tile_bytes);
        detail::copy_runs(band.get() + x * px, row_bytes, tile.get(), info.tile_cols * px, cols * px, rows);
        const std::uint32_t number =
            TIFFComputeTile(tif, static_cast<std::uint32_t>(x), static_cast<std::uint32_t>(y), 0, 0);
        messages.clear();
        if (TIFFWriteEncodedTile(tif, number, tile.get(), static_cast<tmsize_t>(tile_bytes)) < 0) {
            throw_tiff(name(), fmt::format("cannot write tile {}", number), stream, messages);
        }
    }
}

TiffWriter::TiffWriter(const std::string& path, const ImageInfo& info, bool force,
                       const TiffWriteOptions& options) {
    const ImageInfo checked = writer_info(path, info, options);
    impl_ = std::make_unique<Impl>(path, force);
    impl_->info = checked;
    impl_->options = options;
    impl_->open();
}

TiffWriter::~TiffWriter() = default;

const ImageInfo& TiffWriter::info() const noexcept { return impl_->info; }

void TiffWriter::do_write_rows(std::uint64_t row0, std::uint64_t rows, const std::byte* src,
                               std::uint64_t row_stride_bytes) {
    Impl& m = *impl_;
    if (row0 != m.next_row) {
        throw UsageError(kComponent,
                         fmt::format("'{}': rows must be written top to bottom: expected row {}, got {}",
                                     printable(m.name()), m.next_row, row0));
    }
    const std::uint64_t th = m.info.tile_rows;
    for (std::uint64_t r = 0; r < rows;) {
        const std::uint64_t row = row0 + r;
        const std::uint64_t in_band = row % th;
        const std::uint64_t n = std::min(rows - r, th - in_band);
        detail::copy_runs(src + r * row_stride_bytes, row_stride_bytes, m.band.get() + in_band * m.row_bytes,
                          m.row_bytes, m.row_bytes, n);
        r += n;
        m.next_row = row + n;
        if (in_band + n == th || m.next_row == m.info.rows) m.flush_tile_row(row / th, in_band + n);
    }
}

void TiffWriter::do_commit() {
    Impl& m = *impl_;
    if (m.next_row != m.info.rows) {
        throw UsageError(kComponent, fmt::format("'{}': commit before every row was written ({} of {})",
                                                 printable(m.name()), m.next_row, m.info.rows));
    }
    if (m.tif == nullptr) {
        throw UsageError(kComponent,
                         fmt::format("'{}': a failed commit cannot be retried", printable(m.name())));
    }
    m.messages.clear();
    if (TIFFFlush(m.tif) != 1) throw_tiff(m.name(), "cannot finish the TIFF", m.stream, m.messages);
    TIFF* tif = std::exchange(m.tif, nullptr);
    TIFFClose(tif);
    if (m.stream.io_errno != 0) throw_tiff(m.name(), "cannot finish the TIFF", m.stream, m.messages);
    m.output.commit();
}

}  // namespace outcore::io
