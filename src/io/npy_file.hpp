// src/io/npy_file.hpp — reading a .npy header from an open file (private).
#pragma once

#include <string>

#include "outcore/io/file.hpp"
#include "outcore/io/npy.hpp"

namespace outcore::io::detail {

/// Reads, parses and size-checks the header of `file` (pread only; reads no data).
/// UsageError naming the file for a bad or truncated file; IoError on a failed read.
[[nodiscard]] NpyHeader read_npy_header(const File& file);

/// "(3, 4)", "(5,)", "()".
[[nodiscard]] std::string npy_shape_text(const NpyHeader& header);

}  // namespace outcore::io::detail
