// libFuzzer entry point for the TIFF reader (io::TiffReader over memory, libtiff underneath).
//
//   cmake -S . -B build/fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DOUTCORE_BUILD_FUZZ=ON
//         -DOUTCORE_SANITIZE='address;undefined' && cmake --build build/fuzz --target tiff_fuzz
//   build/fuzz/fuzz/io_fuzz_seeds corpus && build/fuzz/fuzz/tiff_fuzz corpus/tiff -max_total_time=60
//
// The logic lives in io_fuzz_targets.cpp, which tests/unit/io/fuzz_corpus_test.cpp also
// runs (under gcc, on mutated valid inputs).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "io_fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const outcore::fuzz::FuzzOutcome outcome =
        outcore::fuzz::tiff_target(std::as_bytes(std::span(data, size)));
    if (!outcome.violation.empty()) {
        std::fprintf(stderr, "invariant violated: %s\n", outcome.violation.c_str());
        std::abort();
    }
    return 0;
}
