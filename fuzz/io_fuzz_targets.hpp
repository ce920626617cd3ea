// fuzz/io_fuzz_targets.hpp — what the .npy and TIFF fuzzers do with one input, shared
// by the libFuzzer entry points (npy_header_fuzz.cpp, tiff_fuzz.cpp; clang only) and
// the gtest that replays mutated valid inputs under any compiler
// (tests/unit/io/fuzz_corpus_test.cpp).
//
//   FuzzOutcome o = outcore::fuzz::npy_header_target(bytes);
//   if (!o.violation.empty()) abort();     // a broken invariant: a bug
//
// A target throws nothing for any input: rejection is the documented one-line
// UsageError, which it catches and checks; anything else it reports as a violation.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace outcore::fuzz {

struct FuzzOutcome {
    bool accepted = false;  ///< the input parsed (and, for TIFF, decoded)
    std::string error;      ///< the UsageError message when rejected
    std::string violation;  ///< non-empty when an invariant broke
};

/// Parses `data` as the start of a .npy file; when it parses, checks the header's
/// arithmetic and that formatting it again parses to the same fields.
[[nodiscard]] FuzzOutcome npy_header_target(std::span<const std::byte> data);

/// Opens `data` as a TIFF held in memory; when it opens, checks the info and, for
/// small images, that reading in halo'd bands gives the same bytes as one whole read.
[[nodiscard]] FuzzOutcome tiff_target(std::span<const std::byte> data);

/// Valid .npy headers (every dtype, both orders, ranks 0..4): seeds for mutation.
[[nodiscard]] std::vector<std::vector<std::byte>> npy_seed_inputs();

/// Valid small TIFFs: hand-made striped ones (several rows-per-strip, u8/u16/f32,
/// 1..4 channels, classic and BigTIFF) and, where TIFF support is built, tiled ones
/// from TiffWriter (uncompressed, LZW, deflate).
[[nodiscard]] std::vector<std::vector<std::byte>> tiff_seed_inputs();

}  // namespace outcore::fuzz
