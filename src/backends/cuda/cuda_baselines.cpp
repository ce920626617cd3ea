#include "outcore/backends/cuda_baselines.hpp"

#include <cublasXt.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "cuda_blas.hpp"
#include "cuda_check.hpp"
#include "outcore/core/error.hpp"

namespace outcore::cuda {

namespace {

using Clock = std::chrono::steady_clock;

/// The cuBLASXt entry points, from the same libcublas the backend loaded.
struct XtApi {
    cublasStatus_t (*create)(cublasXtHandle_t*) = nullptr;
    cublasStatus_t (*destroy)(cublasXtHandle_t) = nullptr;
    cublasStatus_t (*device_select)(cublasXtHandle_t, int, int*) = nullptr;
    cublasStatus_t (*set_block_dim)(cublasXtHandle_t, int) = nullptr;
    cublasStatus_t (*sgemm)(cublasXtHandle_t, cublasOperation_t, cublasOperation_t, size_t, size_t, size_t,
                            const float*, const float*, size_t, const float*, size_t, const float*, float*,
                            size_t) = nullptr;
};

template <typename F>
void resolve(void* library, const char* symbol, F& out) {
    void* address = ::dlsym(library, symbol);
    if (address == nullptr)
        throw BackendError(kComponent, fmt::format("cuBLAS lacks {}", symbol), 0, "dlsym");
    out = reinterpret_cast<F>(address);
}

XtApi xt_api() {
    void* library = cublas_library();
    XtApi api;
    resolve(library, "cublasXtCreate", api.create);
    resolve(library, "cublasXtDestroy", api.destroy);
    resolve(library, "cublasXtDeviceSelect", api.device_select);
    resolve(library, "cublasXtSetBlockDim", api.set_block_dim);
    resolve(library, "cublasXtSgemm", api.sgemm);
    return api;
}

void check_xt(cublasStatus_t status, const char* what) {
    if (status == CUBLAS_STATUS_SUCCESS) return;
    const CublasApi& blas = cublas_api();
    throw BackendError(kComponent, fmt::format("{} failed: {}", what, blas.status_string(status)),
                       static_cast<int>(status), blas.status_name(status));
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

double cublasxt_sgemm_seconds(const std::vector<int>& ordinals, int block_dim, std::uint64_t m,
                              std::uint64_t n, std::uint64_t k, const float* a, std::uint64_t lda,
                              const float* b, std::uint64_t ldb, float* c, std::uint64_t ldc) {
    const XtApi xt = xt_api();
    cublasXtHandle_t handle = nullptr;
    check_xt(xt.create(&handle), "cublasXtCreate");
    struct Guard {
        const XtApi& xt;
        cublasXtHandle_t h;
        ~Guard() { (void)xt.destroy(h); }
    } guard{xt, handle};
    std::vector<int> devices = ordinals;
    check_xt(xt.device_select(handle, static_cast<int>(devices.size()), devices.data()),
             "cublasXtDeviceSelect");
    if (block_dim > 0) check_xt(xt.set_block_dim(handle, block_dim), "cublasXtSetBlockDim");
    const float alpha = 1.0F;
    const float beta = 0.0F;
    const auto start = Clock::now();
    check_xt(xt.sgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc),
             "cublasXtSgemm");
    OUTCORE_CUDA_CHECK(cudaDeviceSynchronize());
    return std::chrono::duration<double>(Clock::now() - start).count();
}

NativeAllocTimes native_alloc_pair_ns(std::uint32_t ordinal, std::uint64_t bytes, int iterations) {
    OUTCORE_CUDA_CHECK(cudaSetDevice(static_cast<int>(ordinal)));
    const auto n = static_cast<std::size_t>(bytes);
    const int count = std::max(1, iterations);
    std::vector<double> sync_ns;
    std::vector<double> async_ns;
    sync_ns.reserve(static_cast<std::size_t>(count));
    async_ns.reserve(static_cast<std::size_t>(count));
    for (int i = 0; i < count + 10; ++i) {
        void* p = nullptr;
        const auto t0 = Clock::now();
        OUTCORE_CUDA_CHECK(cudaMalloc(&p, n));
        OUTCORE_CUDA_CHECK(cudaFree(p));
        const auto t1 = Clock::now();
        if (i >= 10) sync_ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
    }
    cudaStream_t stream = nullptr;
    OUTCORE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaMemPool_t pool = nullptr;
    OUTCORE_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, static_cast<int>(ordinal)));
    std::uint64_t threshold = UINT64_MAX;
    OUTCORE_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    for (int i = 0; i < count + 10; ++i) {
        void* p = nullptr;
        const auto t0 = Clock::now();
        OUTCORE_CUDA_CHECK(cudaMallocAsync(&p, n, stream));
        OUTCORE_CUDA_CHECK(cudaFreeAsync(p, stream));
        const auto t1 = Clock::now();
        if (i >= 10) async_ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
    }
    OUTCORE_CUDA_CHECK(cudaStreamSynchronize(stream));
    OUTCORE_CUDA_CHECK(cudaStreamDestroy(stream));
    return {.malloc_free_ns = median(sync_ns), .malloc_async_free_ns = median(async_ns)};
}

}  // namespace outcore::cuda
