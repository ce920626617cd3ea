// cli/bench_gpu.hpp — the pieces of `outcore bench gpu` (cli/bench_gpu.cpp): host
// arrays in pinned memory, timing, and the checks a run makes of its own results.
//
//   PinnedArray a(device, n * n * 4, "A");             // HostPinned, freed on destruction
//   fill_random(a.floats(), n * n, seed);              // all cores
//   Timing t = time_reps(1, 3, [&] { run(); });        // warm-up, then the median of 3
//   double err = gemm_sample_error(...);               // against a float64 reference
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "outcore/device/block.hpp"
#include "outcore/device/device.hpp"
#include "outcore/device/dtype.hpp"
#include "outcore/device/kernels.hpp"
#include "outcore/tile/gemm_plan.hpp"

namespace outcore::cli::gpu_bench {

/// Pinned host memory of the device under test (the operands of out-of-core runs).
class PinnedArray {
public:
    PinnedArray(Device& device, std::uint64_t bytes, const char* tag);
    [[nodiscard]] std::byte* data() const noexcept { return block_.host(); }
    [[nodiscard]] float* floats() const noexcept { return reinterpret_cast<float*>(block_.host()); }
    [[nodiscard]] std::uint64_t bytes() const noexcept { return block_.bytes(); }

private:
    Block block_;
};

/// Seconds of each repetition after the warm-ups, with the median and spread.
struct Timing {
    std::vector<double> seconds;
    [[nodiscard]] double median() const;
    [[nodiscard]] double min() const;
    [[nodiscard]] double max() const;
    [[nodiscard]] nlohmann::json to_json() const;
};

/// Runs `body` warmup times untimed, then reps times timed.
[[nodiscard]] Timing time_reps(int warmup, int reps, const std::function<void()>& body);

/// A time_reps run with the process-wide trace on: it records (warm-ups included) to a
/// file in a fresh temporary folder, which is written after the timed runs and removed
/// with the folder. Throws UsageError while another trace is being recorded.
struct TracedTiming {
    Timing timing;
    std::uint64_t events = 0;      ///< events the trace file held
    std::uint64_t file_bytes = 0;  ///< its size
};
[[nodiscard]] TracedTiming time_reps_traced(int warmup, int reps, const std::function<void()>& body);

/// An in-core n × n × n GEMM on `dev` (column-major, no transposes): A and B (host,
/// `type`) go up once, then each repetition is the kernel alone, synchronized. C
/// (gemm_c_dtype(type)) comes back into `c` afterwards unless it is null.
[[nodiscard]] Timing in_core_gemm(Device& dev, DType type, GemmCompute compute, const void* a, const void* b,
                                  void* c, std::uint64_t n, int warmup, int reps);

/// How much longer GEMM tiles take with copies beside them: `gemms` back-to-back
/// m × n × k float32 GEMMs (beta 1, random device-resident operands) on a Compute
/// queue, alone and with `copy_bytes` going down on a Download queue, up on an Upload
/// queue, and both, each issued with the first GEMM. Medians of `reps`, in seconds from
/// the first command to the last queue synchronized; the copies must end before the
/// GEMMs do for the difference to be what the copies cost the GEMMs.
struct BesideCopies {
    double alone = 0, download = 0, upload = 0, both = 0;
    double copy_alone = 0;                              ///< the download by itself
    double download_cached = 0, copy_cached_alone = 0;  ///< the same into HostCached memory
    [[nodiscard]] nlohmann::json to_json() const;
};
[[nodiscard]] BesideCopies gemm_beside_copies(Device& dev, std::uint64_t m, std::uint64_t n, std::uint64_t k,
                                              int gemms, std::uint64_t copy_bytes, int reps);

/// Uniform values in [−1, 1) from `seed`, written by all cores.
void fill_random(float* data, std::uint64_t count, std::uint64_t seed);
/// Rounds float32 to bfloat16 (nearest even), all cores; dst holds 2-byte values.
void to_bf16(const float* src, std::uint16_t* dst, std::uint64_t count);
/// float32 value of a bfloat16.
[[nodiscard]] float bf16_to_float(std::uint16_t v) noexcept;

/// The largest error of `samples` entries of C = A·B (column-major, n × n, A and B of
/// `type` (F32 or BF16 as 2-byte values), C float32) against a float64 reference,
/// each divided by Σ|a||b| of its dot product (so 1e-7 is float32 rounding).
[[nodiscard]] double gemm_sample_error(const std::byte* a, const std::byte* b, const float* c,
                                       std::uint64_t n, DType type, int samples, std::uint64_t seed);
/// The same for a C of `c_type` (F32, or BF16 as 2-byte values rounded from the sums).
[[nodiscard]] double gemm_sample_error(const std::byte* a, const std::byte* b, const std::byte* c,
                                       DType c_type, std::uint64_t n, DType type, int samples,
                                       std::uint64_t seed);

/// Reading `path` with pread in 8 MiB pieces, after asking the kernel to drop it from the
/// page cache (posix_fadvise DONTNEED): bytes per second. `streams` threads each read
/// their own contiguous share start to end (1: the whole file in order).
[[nodiscard]] double disk_read_bandwidth(const std::string& path, unsigned streams = 1);
/// Asks the kernel to drop `path` from the page cache (best effort).
void drop_page_cache(const std::string& path) noexcept;
/// Runs `run` with a trace recorded to `path` (its directory made first); runs it
/// untraced when `path` is empty or a trace is already being recorded (OUTCORE_TRACE).
void run_traced(const std::string& path, const std::function<void()>& run);

/// Tiles forced by an --explore option: "SCHEDULE:MxNxK", optionally followed by
/// ":gGROUP" and then ":cSLOTS" (C slots) — schedule square-c, a-panel or b-panel.
struct ForcedTiles {
    tile::GemmSchedule schedule = tile::GemmSchedule::SquareC;
    std::uint64_t m = 0, n = 0, k = 0;
    std::uint32_t group = 1;
    std::uint32_t c_slots = 0;  ///< 0: as the planner would choose
    std::uint32_t depth = 0;    ///< slots per streamed operand (GemmOptions::pipeline_depth); 0: 2
    std::uint32_t lanes = 0;    ///< compute lanes, 1 or 2 (GemmOptions::compute_lanes); 0: the device's
    /// ":kCHUNK": the A panel in chunks of CHUNK columns, 0 whole (GemmOptions::panel_chunk_k); unset: the
    /// planner's.
    std::optional<std::uint64_t> panel_chunk_k = std::nullopt;
    /// ":rRETAINED": rows in a serpentine keeping RETAINED B chunks (GemmOptions::retained_b);
    /// unset: the planner's.
    std::optional<std::uint32_t> retained_b = std::nullopt;
    /// ":oOUTER": chunks of a new panel the retained group computes k outer
    /// (GemmOptions::retained_k_outer); unset: the planner's.
    std::optional<std::uint32_t> retained_k_outer = std::nullopt;
    std::optional<bool> paced = std::nullopt;  ///< ":paced" / ":whole": GemmOptions::pace_c_downloads forced
};
/// ", A panel in chunks of C (P ahead[, R B retained, O k outer])" for a plan with its A
/// panel in chunks, else "": the explore lines of bench gpu and bench vulkan.
[[nodiscard]] std::string describe_panel_chunks(const tile::GemmPlan& plan);
/// Parses `text` as above; UsageError naming `option` (the whole argument) otherwise.
[[nodiscard]] ForcedTiles parse_forced_tiles(const std::string& text, const std::string& option);

/// Parses "ROWSxCOLS" (both positive integers) for --blur-tiles; UsageError otherwise.
[[nodiscard]] std::pair<std::uint64_t, std::uint64_t> parse_tile_shape(const std::string& text);

/// Writes a column-major n × n float32 matrix as a Fortran-order .npy file.
void write_npy_f32(const std::string& path, const float* data, std::uint64_t n);

}  // namespace outcore::cli::gpu_bench
