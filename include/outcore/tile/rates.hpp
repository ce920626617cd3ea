// outcore/tile/rates.hpp — a device's GEMM and link rates, measured once and cached,
// so plans can pick tiles whose transfers hide behind compute (tiling.md, "t ≥ w·F/B").
//
//   const tile::DeviceRates& r = tile::cached_rates(device, DType::F32);   // ~0.1 s the first time
//   tile::PlanLimits limits{.budget_bytes = budget};
//   tile::apply_rates(r, DType::F32, GemmCompute::Exact, limits);
//   tile::GemmPlan plan = tile::plan_gemm(problem, limits);
//
// The probes are short: a square GEMM grown until one call takes ~10 ms (side at
// most 4096), and pinned↔device copies grown until one takes ~10 ms (at most
// 256 MiB), each way and both at once; each is the best of three after a warm-up. They allocate their own
// buffers outside any budget; a device too small for a probe size keeps the last size that fitted, and a rate
// that could not be measured at all stays 0 (unknown), which the planner treats as "minimise bytes moved".
#pragma once

#include <cstdint>
#include <vector>

#include "outcore/device/device.hpp"
#include "outcore/device/dtype.hpp"
#include "outcore/device/kernels.hpp"
#include "outcore/tile/limits.hpp"

namespace outcore::tile {

struct DeviceRates {
    double f32_flops = 0;                  ///< GEMM FLOP/s, f32 exact (0: unknown or unsupported)
    double f64_flops = 0;                  ///< f64
    double tf32_flops = 0;                 ///< f32 data, GemmCompute::FastTF32
    double bf16_flops = 0;                 ///< bf16 inputs, f32 accumulation
    double f16_flops = 0;                  ///< f16 inputs, f32 accumulation
    double upload_bytes_per_second = 0;    ///< pinned host → device
    double download_bytes_per_second = 0;  ///< device → pinned host
    double duplex_bytes_per_second = 0;    ///< both directions at once, in total

    /// The GEMM rate for a type and compute mode (0 when unknown).
    [[nodiscard]] double gemm_flops(DType type, GemmCompute compute) const noexcept;
};

/// Measures `device` now (not cached). Failures of individual probes (a type the
/// kernels lack, memory the device refuses) leave that rate 0; never throws for them.
/// Throws only for failures outside the probes (BackendError making a queue).
[[nodiscard]] DeviceRates measure_rates(Device& device);

/// The rates of `device`, measured on first use and cached for the process under its
/// identity (backend, index, name), so every Device object of one physical device
/// shares them: the link once, and the GEMM rate of (type, compute) the first time
/// that pair is asked for (other GEMM rates may still read 0). Thread-safe:
/// concurrent first calls measure once. The reference stays valid for the process.
[[nodiscard]] const DeviceRates& cached_rates(Device& device, DType type = DType::F32,
                                              GemmCompute compute = GemmCompute::Exact);

/// The link rates of `device` alone (the upload, download and duplex fields of
/// cached_rates; no GEMM is probed): for plans that move data but run no GEMM, such
/// as filters. Cached with cached_rates. Thread-safe.
[[nodiscard]] const DeviceRates& cached_link_rates(Device& device);

/// One GEMM call as the out-of-core executor makes it: operands packed in their slots
/// (lda = m, or k with trans_a; ldb = k, or n with trans_b), C accumulated (β = 1).
struct GemmShape {
    DType type = DType::F32;
    GemmCompute compute = GemmCompute::Exact;
    bool trans_a = false, trans_b = false;
    std::uint64_t m = 0, n = 0, k = 0;
};

/// The FLOP/s of one call of `shape` on `device` (as probe_gemm_shapes measures it), measured
/// the first time it is asked for and cached for the process per physical device and
/// shape (with failures). 0 when it is not measured: one call would take longer than
/// `max_call_seconds` at `expected_flops` (the probe is meant to cost milliseconds),
/// the kernel is missing, or the device refuses the memory (the probe holds the three
/// operands, no more than a plan with this tile holds anyway). Thread-safe.
[[nodiscard]] double cached_gemm_shape_flops(Device& device, const GemmShape& shape, double expected_flops,
                                             double max_call_seconds = 0.05);
/// Measures the shapes cached_gemm_shape_flops would measure (not cached yet, cheap
/// enough) together: in two passes, the second in reverse order, each shape's rate the
/// mean of its two (a device warming up during the probes favours no shape for its
/// place in the order). Caches them as cached_gemm_shape_flops does. Thread-safe.
void probe_gemm_shapes(Device& device, const std::vector<GemmShape>& shapes, double expected_flops,
                       double max_call_seconds = 0.05);
/// Sets limits.gemm_shape_flops and limits.gemm_shapes_ahead to measure shapes of
/// `base` (its type, compute mode and transposes) on `device` with the two above,
/// against limits.compute_flops as the single rate. `device` must outlive the limits.
void set_shape_probes(PlanLimits& limits, Device& device, const GemmShape& base);

/// Bytes per second of one 2-D upload of `shape` from `host` (memory the device reads
/// directly: pinned) into device memory while f32 GEMMs keep the device busy, as a real
/// run's copies always overlap GEMMs (H200: 16 KiB runs 64 KiB apart 48.6 GB/s alone,
/// 30.6 with a GEMM running; 55 for one run). Best of 3 after a warm-up, measured the
/// first time a (run width, host pitch) pair is asked for on a physical device and
/// cached for the process. The probe moves at most 16 MiB and 4096 runs (fewer rows than
/// `shape` when it is larger) into device memory of its own, only reads `host`, and
/// measures the device's f32 rate first if it is not cached yet (to size its GEMMs).
/// 0 when not measured: a contiguous shape (one run: the link rate applies), an empty
/// one, or a failed probe. Thread-safe.
[[nodiscard]] double cached_upload_2d_rate(Device& device, const void* host, const Copy2D& shape);

/// Fills `dst` with what the GEMM probes' operands hold: pseudo-random values of `type`
/// in [-1, 1) (random bytes for the integer types), one 1 MiB pattern, the same every
/// call, uploaded and repeated by device copies; returns once they are there. Probes on
/// zeros read 20–25 % fast on an H100 (tensor cores draw less power on them).
void fill_probe_values(Queue& q, const BufferView& dst, DType type);

/// Fills limits' compute_flops and link fields from `rates` for this type and mode;
/// leaves a field alone when the rate is unknown (0).
void apply_rates(const DeviceRates& rates, DType type, GemmCompute compute, PlanLimits& limits) noexcept;

}  // namespace outcore::tile
