#include "cuda_check.hpp"

#include <fmt/format.h>

#include <string>

#include "cuda_blas.hpp"
#include "outcore/core/error.hpp"

namespace outcore::cuda {

std::string_view error_name(cudaError_t status) noexcept {
    const char* name = cudaGetErrorName(status);
    return name != nullptr ? name : "cudaErrorUnknown";
}

void check(cudaError_t status, std::string_view what) {
    if (status == cudaSuccess) return;
    // Clear the thread's last error: non-sticky errors would otherwise be reported
    // again by the next cudaGetLastError (after an unrelated kernel launch).
    (void)cudaGetLastError();
    const std::string_view name = error_name(status);
    const char* description = cudaGetErrorString(status);
    throw BackendError(
        kComponent, fmt::format("{} failed: {}: {}", what, name, description != nullptr ? description : "?"),
        static_cast<std::int64_t>(status), name);
}

void check(cublasStatus_t status, std::string_view what) {
    if (status == CUBLAS_STATUS_SUCCESS) return;
    (void)cudaGetLastError();
    // A status can only come from a loaded cuBLAS; the fallback keeps this total.
    const CublasApi* api = loaded_cublas_api();
    const char* name_text = api != nullptr ? api->status_name(status) : nullptr;
    const char* description = api != nullptr ? api->status_string(status) : nullptr;
    const std::string name = name_text != nullptr ? std::string(name_text)
                                                  : fmt::format("cublasStatus {}", static_cast<int>(status));
    throw BackendError(
        kComponent, fmt::format("{} failed: {}: {}", what, name, description != nullptr ? description : "?"),
        static_cast<std::int64_t>(status), name);
}

void use_device(int ordinal) { check(cudaSetDevice(ordinal), "cudaSetDevice"); }

}  // namespace outcore::cuda
