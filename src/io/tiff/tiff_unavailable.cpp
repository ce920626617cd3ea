// TIFF when libtiff was not found at build time (src/io/CMakeLists.txt picks this file):
// every entry point says so. .npy images (image.hpp) work without it.
#include "outcore/core/error.hpp"
#include "outcore/io/tiff.hpp"

namespace outcore::io {
namespace {

[[noreturn]] void not_built() {
    throw UsageError("tiff", "TIFF support was not built: libtiff was not found at build time");
}

// What info() returns on an object that cannot exist (every constructor throws).
const ImageInfo kNoImage{};

}  // namespace

bool tiff_supported() noexcept { return false; }

struct TiffReader::Impl {};
struct TiffWriter::Impl {};

TiffReader::TiffReader(const std::string& /*path*/, const TiffReadOptions& /*options*/) { not_built(); }
TiffReader::TiffReader(std::span<const std::byte> /*bytes*/, const std::string& /*name*/,
                       const TiffReadOptions& /*options*/) {
    not_built();
}
TiffReader::~TiffReader() = default;
const ImageInfo& TiffReader::info() const noexcept { return kNoImage; }
std::uint64_t TiffReader::units_decoded() const noexcept { return 0; }
std::uint64_t TiffReader::unit_rows() const noexcept { return 0; }
void TiffReader::do_read_rows(std::uint64_t /*row0*/, std::uint64_t /*rows*/, std::byte* /*dst*/,
                              std::uint64_t /*row_stride_bytes*/) const {
    not_built();
}

TiffWriter::TiffWriter(const std::string& /*path*/, const ImageInfo& /*info*/, bool /*force*/,
                       const TiffWriteOptions& /*options*/) {
    not_built();
}
TiffWriter::~TiffWriter() = default;
const ImageInfo& TiffWriter::info() const noexcept { return kNoImage; }
void TiffWriter::do_write_rows(std::uint64_t /*row0*/, std::uint64_t /*rows*/, const std::byte* /*src*/,
                               std::uint64_t /*row_stride_bytes*/) {
    not_built();
}
void TiffWriter::do_commit() { not_built(); }

}  // namespace outcore::io
