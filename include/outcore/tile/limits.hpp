// outcore/tile/limits.hpp — what a plan must respect: the budget and the device's limits.
//
//   auto limits = tile::limits_for(device, budget_bytes);   // reads DeviceInfo + rates
//   auto plan = tile::plan_gemm(problem, limits);
//
// compute_flops and link_bytes_per_second are measured once per device and cached
// (tile/rates.hpp); plans use them to pick tiles whose transfers hide behind compute.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

namespace outcore::tile {

/// The operands of a GEMM, as the planner asks for their copies' rates.
enum class GemmOperand : unsigned char { A, B, C };

struct PlanLimits {
    std::uint64_t budget_bytes = 0;               ///< device bytes the plan may hold at once
    std::uint64_t min_offset_alignment = 256;     ///< every slot offset is a multiple of this
    std::uint64_t max_buffer_bytes = UINT64_MAX;  ///< largest single slot (binding range)
    std::uint64_t max_inline_bytes = 4096;        ///< kernel parameters inline up to this
    std::uint32_t pipeline_depth = 2;             ///< slots per input stream, 2 or 3
    double compute_flops = 0;                     ///< device rate for the op's dtype, FLOP/s (0: unknown)
    double link_bytes_per_second = 0;             ///< host→device bandwidth, B/s (0: unknown)
    /// device→host bandwidth, B/s (0: same as link_bytes_per_second).
    double link_d2h_bytes_per_second = 0;
    /// Both directions at once, B/s in total (0: the directions do not overlap, so a
    /// plan's transfer time is bytes_moved / bandwidth). PCIe is full duplex: an H200
    /// does 55.3 up, 55.4 down and 101.7 both at once.
    double link_duplex_bytes_per_second = 0;
    /// Fixed cost of one kernel call (launch, ramp-up), seconds; with the rates known,
    /// it makes plans prefer fewer, larger GEMM calls.
    double kernel_call_seconds = 10e-6;
    /// GEMM only: the measured FLOP/s of one GEMM call of tile shape m × n × k as the
    /// executor makes it (0: unknown). One rate per type misjudges tiles: on the H200 a
    /// 16384 × 768 × 11008 tf32 tile ran 20–25% below the square 4096³ probe. When set
    /// (ops::plan_gemm sets it from tile::cached_gemm_shape_flops), the planner asks it
    /// for the few tile shapes whose candidates the single rate ranks near the fastest
    /// and chooses among those with their own rates (docs/tiling.md, "shape rates").
    std::function<double(std::uint64_t m, std::uint64_t n, std::uint64_t k)> gemm_shape_flops = nullptr;
    /// GEMM only, optional: called once, before gemm_shape_flops, with every tile shape
    /// (m, n, k) the planner will ask it for, in that order. A measuring implementation
    /// probes them together (ops::plan_gemm: forward, then back, so that clocks drifting
    /// during the probes favour no shape for its place in the order).
    std::function<void(const std::vector<std::array<std::uint64_t, 3>>& shapes)> gemm_shapes_ahead = nullptr;
    /// GEMM only: the measured rate, bytes per second, of the copy that moves one chunk
    /// of A (tile_m × tile_k of op(A): outer = tile_m, inner = tile_k), of B (outer =
    /// tile_n, inner = tile_k) or one C tile (outer = tile_m, inner = tile_n) between
    /// its host memory and the device (0: the link rates apply). A chunk of a matrix in
    /// pinned memory goes up as one 2-D copy whose runs are a column of the chunk, and
    /// short runs are slow (H200: 16 KiB runs 64 KiB apart at 32 GB/s, against 55 for
    /// one run). When set (ops::plan_gemm sets it from tile::cached_upload_2d_rate for
    /// operands in device-readable memory), every candidate's link time counts each
    /// operand's bytes at its rate (docs/tiling.md, "Copy rates").
    std::function<double(GemmOperand operand, std::uint64_t outer, std::uint64_t inner)> gemm_copy_rate =
        nullptr;
};

}  // namespace outcore::tile
