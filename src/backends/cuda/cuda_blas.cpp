#include "cuda_blas.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <string>

#include "cuda_check.hpp"
#include "outcore/core/error.hpp"

namespace outcore::cuda {

namespace {

std::mutex g_mutex;
CublasApi g_api;
std::atomic<const CublasApi*> g_loaded{nullptr};
void* g_library = nullptr;  // under g_mutex until g_loaded is set, then read-only

template <typename F>
void resolve(void* library, const char* symbol, F& out) {
    void* address = ::dlsym(library, symbol);
    if (address == nullptr) {
        const char* why = ::dlerror();
        throw BackendError(kComponent, fmt::format("cuBLAS lacks {}: {}", symbol, why != nullptr ? why : "?"),
                           0, "dlsym");
    }
    out = reinterpret_cast<F>(address);
}

void* open_library() {
    const std::string name = fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR);
    std::string why;
    auto attempt = [&why](const std::string& path) -> void* {
        void* library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (library == nullptr) {
            const char* error = ::dlerror();
            why = error != nullptr ? error : "not found";
        }
        return library;
    };
    // The loader's search path first (the executable's RUNPATH, ld.so.conf), then the
    // toolkit this backend was built against.
    if (void* library = attempt(name)) return library;
#ifdef OUTCORE_CUDA_LIBRARY_DIR
    if (void* library = attempt(std::string(OUTCORE_CUDA_LIBRARY_DIR) + "/" + name)) return library;
#endif
    throw BackendError(kComponent, fmt::format("cannot load cuBLAS ({}): {}", name, why), 0, "dlopen");
}

}  // namespace

const CublasApi& cublas_api() {
    if (const CublasApi* api = g_loaded.load(std::memory_order_acquire)) return *api;
    std::lock_guard lock(g_mutex);
    if (const CublasApi* api = g_loaded.load(std::memory_order_relaxed)) return *api;
    // Never closed: cuBLAS stays loaded for the life of the process, as a linked one would.
    void* library = open_library();
    CublasApi api;
    resolve(library, "cublasCreate_v2", api.create);
    resolve(library, "cublasDestroy_v2", api.destroy);
    resolve(library, "cublasSetStream_v2", api.set_stream);
    resolve(library, "cublasSetWorkspace_v2", api.set_workspace);
    resolve(library, "cublasGemmEx", api.gemm_ex);
    resolve(library, "cublasGetStatusName", api.status_name);
    resolve(library, "cublasGetStatusString", api.status_string);
    g_api = api;
    g_library = library;
    g_loaded.store(&g_api, std::memory_order_release);
    return g_api;
}

void* cublas_library() {
    (void)cublas_api();
    return g_library;
}

const CublasApi* loaded_cublas_api() noexcept { return g_loaded.load(std::memory_order_acquire); }

}  // namespace outcore::cuda
