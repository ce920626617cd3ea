// gemm_pacing.hpp — C tiles downloaded in pieces spread over the next tile's GEMMs
// (private to src/ops/gemm.cpp).
//
// Where the link's two directions share one budget (NVIDIA's Vulkan driver on an H100:
// 48 GB/s up alone, 58 GB/s both ways at once, where CUDA moves 55 and 101), a C tile
// downloaded whole right after its last GEMM takes half the link from the uploads of
// the next tile's first chunks, and that tile's GEMMs wait for them: 2.3–3.2 ms at each
// tile boundary of the Vulkan plan square-c 16384×2816×2048 (docs/BENCHMARKS.md). Paced,
// the tile goes down in pieces, one after each of the next tile's GEMMs and waiting for
// it on the device, so the link carries one piece beside each chunk's uploads.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "outcore/device/device.hpp"
#include "outcore/ops/gemm.hpp"
#include "outcore/tile/pipeline.hpp"

namespace outcore::ops::detail {

/// Whether a run paces its C downloads: GemmOptions::pace_c_downloads where set, else
/// where both directions at once carry less than kSharedLinkRatio × the faster one
/// (the rates the options give, else the device's measured ones; never where rates
/// are neither given nor measured).
[[nodiscard]] bool pace_c_downloads(Device& device, const GemmOptions& options);

/// Below this ratio of both-ways to one-way rate the directions share the link.
inline constexpr double kSharedLinkRatio = 1.5;

/// The pieces a C tile of `c_bytes` in `cols` columns goes down in when the next tile
/// has `k_chunks` GEMMs: one per GEMM but the last (the tile after next may need the
/// slot), at most kMaxPacedPieces and `cols`, none under `min_piece_bytes`; 0 where
/// that leaves fewer than two (nothing to spread).
[[nodiscard]] std::uint64_t paced_pieces(std::uint64_t k_chunks, std::uint64_t c_bytes, std::uint64_t cols,
                                         std::uint64_t min_piece_bytes);
inline constexpr std::uint64_t kMaxPacedPieces = 8;
inline constexpr std::uint64_t kMinPacedPieceBytes = std::uint64_t{4} << 20;

/// Download pieces waiting for GEMMs to follow. Not thread-safe (the issuing thread's).
class PacedDownloads {
public:
    using Issue = std::function<void()>;

    explicit PacedDownloads(tile::Pipeline& p) : p_(p) {}

    /// Queues a tile's pieces, after issuing whatever is left of earlier tiles'.
    void defer(std::vector<Issue> pieces);
    /// After a GEMM that writes `written` was issued: the next queued piece, its
    /// download waiting on the device for that GEMM.
    void after_gemm(tile::SlotId written);
    /// Issues every queued piece now.
    void flush();
    /// Pieces issued after a GEMM (not by flush).
    [[nodiscard]] std::uint64_t paced() const noexcept { return paced_; }

private:
    tile::Pipeline& p_;
    std::deque<Issue> pending_;
    std::uint64_t paced_ = 0;
};

}  // namespace outcore::ops::detail
