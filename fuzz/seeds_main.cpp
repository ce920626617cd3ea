// Writes the fuzzers' seed corpora: io_fuzz_seeds DIR creates DIR/npy_header/ and
// DIR/tiff/ with valid inputs (fuzz/io_fuzz_targets.cpp says which).
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io_fuzz_targets.hpp"

namespace {
void write_all(const std::filesystem::path& dir, const std::vector<std::vector<std::byte>>& seeds,
               const char* ext) {
    std::filesystem::create_directories(dir);
    for (std::size_t i = 0; i < seeds.size(); ++i) {
        std::ofstream out(dir / fmt::format("seed{}{}", i, ext), std::ios::binary);
        out.write(reinterpret_cast<const char*>(seeds[i].data()),
                  static_cast<std::streamsize>(seeds[i].size()));
    }
    std::printf("%zu seeds in %s\n", seeds.size(), dir.c_str());
}
}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: io_fuzz_seeds DIR\n");
        return 2;
    }
    const std::filesystem::path root = argv[1];
    write_all(root / "npy_header", outcore::fuzz::npy_seed_inputs(), ".npy");
    write_all(root / "tiff", outcore::fuzz::tiff_seed_inputs(), ".tif");
    return 0;
}
