// outcore/backends/cuda_baselines.hpp — NVIDIA's own ways of doing what outcore does,
// run natively so benchmarks can put outcore next to them in the same process:
// cuBLASXt's out-of-core SGEMM on host-resident matrices, and the CUDA runtime's
// allocators. Present only in builds with the CUDA backend (outcore::cuda).
//
//   double s = outcore::cuda::cublasxt_sgemm_seconds({0, 1}, 8192, n, n, n, a, n, b, n, c, n);
//   outcore::cuda::NativeAllocTimes t = outcore::cuda::native_alloc_pair_ns(0, 1 << 20, 1000);
#pragma once

#include <cstdint>
#include <vector>

namespace outcore::cuda {

/// C = A·B with cublasXtSgemm on the GPUs `ordinals` (cuBLASXt spreads its blocks over
/// them); A (m × k), B (k × n), C (m × n) are
/// column-major host memory (pinned for full speed) with leading dimensions in
/// elements. block_dim 0 keeps cuBLASXt's default block size. Returns the seconds the
/// call took (it returns once C is in host memory). BackendError when cuBLAS fails.
[[nodiscard]] double cublasxt_sgemm_seconds(const std::vector<int>& ordinals, int block_dim, std::uint64_t m,
                                            std::uint64_t n, std::uint64_t k, const float* a,
                                            std::uint64_t lda, const float* b, std::uint64_t ldb, float* c,
                                            std::uint64_t ldc);

/// Median wall time of one allocate + free pair of `bytes`, in nanoseconds.
struct NativeAllocTimes {
    double malloc_free_ns = 0;        ///< cudaMalloc + cudaFree
    double malloc_async_free_ns = 0;  ///< cudaMallocAsync + cudaFreeAsync, warm pool, one stream
};

/// Times `iterations` pairs of each kind on GPU `ordinal` after a warm-up (the async
/// pool's release threshold is raised so it keeps its memory, as a warm pool does).
[[nodiscard]] NativeAllocTimes native_alloc_pair_ns(std::uint32_t ordinal, std::uint64_t bytes,
                                                    int iterations);

}  // namespace outcore::cuda
