// gemm_pacing.cpp — C downloads spread over the next tile's GEMMs (gemm_pacing.hpp).
#include "gemm_pacing.hpp"

#include <algorithm>
#include <utility>

#include "outcore/tile/rates.hpp"

namespace outcore::ops::detail {

bool pace_c_downloads(Device& device, const GemmOptions& options) {
    if (options.pace_c_downloads) return *options.pace_c_downloads;
    double up = options.link_bytes_per_second;
    double down = options.link_d2h_bytes_per_second;
    double both = options.link_duplex_bytes_per_second;
    if (options.measure_rates && (up == 0 || down == 0 || both == 0)) {
        const tile::DeviceRates& r = tile::cached_rates(device, options.type, options.compute);
        if (up == 0) up = r.upload_bytes_per_second;
        if (down == 0) down = r.download_bytes_per_second;
        if (both == 0) both = r.duplex_bytes_per_second;
    }
    return both > 0 && both < kSharedLinkRatio * std::max(up, down);
}

std::uint64_t paced_pieces(std::uint64_t k_chunks, std::uint64_t c_bytes, std::uint64_t cols,
                           std::uint64_t min_piece_bytes) {
    if (k_chunks < 2) return 0;
    const std::uint64_t pieces = std::min(
        {k_chunks - 1, kMaxPacedPieces, cols, c_bytes / std::max<std::uint64_t>(min_piece_bytes, 1)});
    return pieces < 2 ? 0 : pieces;
}

void PacedDownloads::defer(std::vector<Issue> pieces) {
    flush();
    for (Issue& piece : pieces) pending_.push_back(std::move(piece));
}

void PacedDownloads::after_gemm(tile::SlotId written) {
    if (pending_.empty()) return;
    p_.downloads_wait_for(written);
    Issue piece = std::move(pending_.front());
    pending_.pop_front();
    piece();
    ++paced_;
}

void PacedDownloads::flush() {
    while (!pending_.empty()) {
        Issue piece = std::move(pending_.front());
        pending_.pop_front();
        piece();
    }
}

}  // namespace outcore::ops::detail
