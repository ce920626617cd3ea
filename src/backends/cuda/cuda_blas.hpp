// cuda_blas.hpp — cuBLAS, loaded on first use (private to the CUDA backend).
//
//   const CublasApi& blas = cublas_api();          // dlopen on the first call; throws
//   OUTCORE_CUBLAS_CHECK(blas.create(&handle));
//
// Why not link it: libcublas pulls in libcublasLt (about 540 MB), and loading the pair
// costs every process that links outcore about 200 ms and 200 MB of resident memory
// at start-up, GPU or not (measured: a test binary's start went from 5 ms to 200 ms).
// Only GEMM needs it, so it is opened when a queue runs its first GEMM. The headers
// still come from the toolkit, and the library name from its major version.
#pragma once

#include <cublas_api.h>

namespace outcore::cuda {

/// The few cuBLAS entry points the backend uses, resolved from libcublas.so.<major>.
struct CublasApi {
    cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
    cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
    cublasStatus_t (*set_workspace)(cublasHandle_t, void*, size_t) = nullptr;
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                              const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                              const void*, void*, cudaDataType, int, cublasComputeType_t,
                              cublasGemmAlgo_t) = nullptr;
    const char* (*status_name)(cublasStatus_t) = nullptr;
    const char* (*status_string)(cublasStatus_t) = nullptr;
};

/// cuBLAS, loaded once per process (thread-safe). Throws BackendError naming the
/// library and dlerror() when it cannot be loaded; a later call tries again.
[[nodiscard]] const CublasApi& cublas_api();

/// The dlopen handle of libcublas (opened by cublas_api()), for entry points outside
/// CublasApi (cuBLASXt in the benchmark baselines). Throws like cublas_api().
[[nodiscard]] void* cublas_library();

/// The loaded API, or null when cublas_api() has not succeeded yet. Never throws.
[[nodiscard]] const CublasApi* loaded_cublas_api() noexcept;

}  // namespace outcore::cuda
