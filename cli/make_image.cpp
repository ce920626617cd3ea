// cli/make_image.cpp — `outcore make-image`: writes a test image of any size, band by
// band in bounded memory, for demos and benchmarks (a 20000 × 20000 float image is
// 1.5 GiB; it is never held whole).
//
//   outcore make-image big.tif --rows 20000 --cols 20000 --dtype f32 --pattern random --seed 1
//   outcore make-image small.npy --rows 512 --cols 768 --channels 3 --dtype u8 --pattern gradient
//
// Patterns: random (each sample uniform over the type's range, or [0, 1) for f32, a
// function of (seed, sample index) only), gradient (a diagonal ramp with a fine
// checkerboard over it, so both smooth areas and sharp edges appear). TIFF output is
// tiled (--tile, default 256), uncompressed, BigTIFF when over 4 GiB.
#include <fmt/format.h>
#include <sys/statvfs.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/io/image.hpp"
#include "outcore/io/tiff.hpp"
#include "progress.hpp"
#include "run_support.hpp"

namespace outcore::cli {
namespace {

constexpr std::uint64_t kBandBytes = 32 * kMiB;  // rows generated and written per step

struct MakeImageFlags {
    std::string out_path;
    std::optional<std::string> rows, cols, channels, tile, seed;
    std::string dtype = "f32";
    std::string pattern = "random";
    bool force = false;
    bool quiet = false;
};

constexpr std::uint64_t mix(std::uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/// Sample value in [0, 1) for (row, col, channel).
double value_at(bool random, std::uint64_t seed, std::uint64_t rows, std::uint64_t cols, std::uint64_t r,
                std::uint64_t c, std::uint64_t index) noexcept {
    if (random) return static_cast<double>(mix(seed + (index + 1) * 0x9e3779b97f4a7c15ULL) >> 11) * 0x1.0p-53;
    const double ramp = (static_cast<double>(r) + static_cast<double>(c)) / static_cast<double>(rows + cols);
    const bool check = ((r / 8) + (c / 8)) % 2 == 1;
    return std::min(0.999, 0.8 * ramp + (check ? 0.2 : 0.0));
}

void store(std::byte* dst, DType type, double v) noexcept {
    switch (type) {
        case DType::U8: *dst = static_cast<std::byte>(static_cast<unsigned>(v * 256.0)); break;
        case DType::U16: {
            const auto s = static_cast<std::uint16_t>(v * 65536.0);
            std::memcpy(dst, &s, 2);
            break;
        }
        default: {
            const auto f = static_cast<float>(v);
            std::memcpy(dst, &f, 4);
            break;
        }
    }
}

/// Bytes free for an unprivileged writer in the directory of `path` (UINT64_MAX when
/// unknown: the writer then reports what fails).
std::uint64_t free_disk_bytes(const std::string& path) {
    std::filesystem::path dir = std::filesystem::path(path).parent_path();
    if (dir.empty()) dir = ".";
    struct statvfs st {};
    if (::statvfs(dir.c_str(), &st) != 0) return UINT64_MAX;
    const std::uint64_t blocks = st.f_bavail;
    const std::uint64_t block_bytes = st.f_frsize;
    return block_bytes != 0 && blocks > UINT64_MAX / block_bytes ? UINT64_MAX : blocks * block_bytes;
}

int run_make_image(const MakeImageFlags& f, const GlobalOptions& globals) {
    io::ImageInfo info;
    if (!f.rows || !f.cols) throw UsageError("make-image", "--rows and --cols are required");
    info.rows = parse_count("--rows", *f.rows);
    info.cols = parse_count("--cols", *f.cols);
    const std::uint64_t channels = f.channels ? parse_count("--channels", *f.channels) : 1;
    if (info.rows == 0 || info.cols == 0)
        throw UsageError("make-image", "--rows and --cols must be at least 1");
    if (channels < 1 || channels > 4) throw UsageError("make-image", "--channels must be 1 to 4");
    info.channels = static_cast<std::uint32_t>(channels);
    if (f.dtype == "f32") {
        info.dtype = DType::F32;
    } else if (f.dtype == "u8") {
        info.dtype = DType::U8;
    } else if (f.dtype == "u16") {
        info.dtype = DType::U16;
    } else {
        throw UsageError("make-image",
                         fmt::format("--dtype '{}': expected f32, u8 or u16", io::printable(f.dtype)));
    }
    if (f.pattern != "random" && f.pattern != "gradient") {
        throw UsageError("make-image", fmt::format("--pattern '{}': expected random or gradient",
                                                   io::printable(f.pattern)));
    }
    const bool random = f.pattern == "random";
    const std::uint64_t seed = f.seed ? parse_count("--seed", *f.seed) : 1;
    if (f.tile) {
        const std::uint64_t t = parse_count("--tile", *f.tile);
        if (t == 0 || t % 16 != 0 || t > 4096)
            throw UsageError("make-image", "--tile must be a multiple of 16 up to 4096");
        info.tiled = true;
        info.tile_rows = info.tile_cols = static_cast<std::uint32_t>(t);
    }
    const std::uint64_t row_bytes = info.row_bytes();  // UsageError on overflow
    const std::uint64_t image_bytes = info.bytes();
    const std::uint64_t free_bytes = free_disk_bytes(f.out_path);
    if (image_bytes > free_bytes) {
        throw OutOfMemory("make-image",
                          fmt::format("'{}' does not fit the free disk space", io::printable(f.out_path)),
                          {.requested_bytes = image_bytes, .tier = Tier::Disk, .budget_bytes = free_bytes});
    }
    const std::uint64_t band_rows = std::clamp<std::uint64_t>(kBandBytes / row_bytes, 1, info.rows);
    const std::uint64_t band_bytes = checked_mul(band_rows, row_bytes, "make-image");
    HostBuffer band = allocate_host(band_bytes, "an image band", host_limit_bytes(make_config(globals)));

    std::unique_ptr<io::ImageSink> out = io::create_image(f.out_path, info, f.force);
    ProgressBar bar("make-image", !f.quiet);
    const auto start = std::chrono::steady_clock::now();
    const std::uint32_t sample_bytes = dtype_bytes(info.dtype);
    for (std::uint64_t r0 = 0; r0 < info.rows; r0 += band_rows) {
        const std::uint64_t n = std::min(band_rows, info.rows - r0);
        for (std::uint64_t r = 0; r < n; ++r) {
            std::byte* row = band.get() + r * row_bytes;
            for (std::uint64_t c = 0; c < info.cols; ++c) {
                for (std::uint64_t ch = 0; ch < info.channels; ++ch) {
                    const std::uint64_t index = ((r0 + r) * info.cols + c) * info.channels + ch;
                    store(row + (c * info.channels + ch) * sample_bytes, info.dtype,
                          value_at(random, seed, info.rows, info.cols, r0 + r, c, index));
                }
            }
        }
        out->write_rows(r0, n, band.get(), row_bytes);
        bar.update(static_cast<double>(r0 + n) / static_cast<double>(info.rows));
    }
    out->commit();
    bar.finish();
    if (!f.quiet) {
        fmt::print(
            "make-image: wrote '{}': {}x{}, {} channel{}, {}, {} pattern{}, {} in {}\n", f.out_path,
            info.rows, info.cols, info.channels, info.channels == 1 ? "" : "s", f.dtype, f.pattern,
            random ? fmt::format(" (seed {})", seed) : "", format_size(info.bytes()),
            format_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
    }
    return 0;
}

}  // namespace

void add_make_image_command(CLI::App& app, const GlobalOptions& globals, CommandList& commands) {
    auto* sub =
        app.add_subcommand("make-image", "Write a random or gradient test image (.tif/.tiff or .npy)");
    auto f = std::make_shared<MakeImageFlags>();
    sub->add_option("out", f->out_path, "Output image: .tif/.tiff (tiled) or .npy")->required();
    sub->add_option("--rows", f->rows, "Height in pixels")->type_name("N");
    sub->add_option("--cols", f->cols, "Width in pixels")->type_name("N");
    sub->add_option("--channels", f->channels, "Interleaved channels, 1 to 4 (default 1)")->type_name("N");
    sub->add_option("--dtype", f->dtype, "f32 (default, values in [0, 1)), u8 or u16")->type_name("TYPE");
    sub->add_option("--pattern", f->pattern, "random (default) or gradient")->type_name("NAME");
    sub->add_option("--seed", f->seed, "Seed of the random pattern (default 1)")->type_name("N");
    sub->add_option("--tile", f->tile, "TIFF tile side, a multiple of 16 (default 256)")->type_name("N");
    sub->add_flag("--force", f->force, "Overwrite an existing output");
    sub->add_flag("--quiet", f->quiet, "No progress bar and no summary");
    commands.push_back({sub, [&globals, f] { return run_make_image(*f, globals); }});
}

}  // namespace outcore::cli
