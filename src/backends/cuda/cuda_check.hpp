// cuda_check.hpp — the one place CUDA and cuBLAS status codes become exceptions
// (private to the CUDA backend).
//
//   OUTCORE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
//   OUTCORE_CUBLAS_CHECK(cublasSetStream(handle, s));
//
// A failure throws BackendError("cuda", "<call> failed: <name>: <description>",
// code, "<name>") where <name> is cudaGetErrorName / cublasGetStatusName. Failing
// CUDA calls also leave their code as the thread's "last error" (non-sticky errors
// included); check() clears it so that a later cudaGetLastError after a kernel
// launch reports that launch only.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <string_view>

namespace outcore::cuda {

/// Component name in every error the backend throws.
inline constexpr const char* kComponent = "cuda";

/// Throws BackendError for anything but cudaSuccess. `what` names the call.
void check(cudaError_t status, std::string_view what);
/// Throws BackendError for anything but CUBLAS_STATUS_SUCCESS.
void check(cublasStatus_t status, std::string_view what);

/// "cudaErrorNoDevice: no CUDA-capable device is detected".
[[nodiscard]] std::string_view error_name(cudaError_t status) noexcept;

/// Makes `ordinal` the calling thread's current device (cudaSetDevice). Every entry
/// point that submits work or allocates calls this first: the runtime's current
/// device is per thread, and a device may be used from any thread.
void use_device(int ordinal);

}  // namespace outcore::cuda

#define OUTCORE_CUDA_CHECK(call) ::outcore::cuda::check((call), #call)
#define OUTCORE_CUBLAS_CHECK(call) ::outcore::cuda::check((call), #call)
