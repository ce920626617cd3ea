// bench/gemm_shape_probe.cu — how fast does cuBLAS run the GEMM shapes a schedule would
// issue, against the in-core 32768³ GEMM of the same type? Device-resident operands,
// column-major, lda = m, ldb = k, ldc = m; each shape timed as the median of 5 runs
// (after a warm-up) with CUDA events, on pseudo-random values in [-1, 1) (a GPU at its
// power limit runs zeros faster than such data, so zeros would flatter every shape). The
// shapes: the tiles the planner's tf32 and bf16 panels run (16384 or 32768 rows, whole k),
// panel heights a whole number of 132-SM waves off 16384, and the k-chunk GEMMs a group or a
// wide first block computed k outer would issue (docs/tiling.md, "Groups"). Not
// part of the CMake build: a one-off probe, kept so its figures can be measured again.
// On a machine with an NVIDIA GPU:
//
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/gemm_shape_probe.cu -lcublas -o shape_probe && ./shape_probe
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "probe_check.hpp"
#include "probe_fill.cuh"

namespace {

/// Fills `n` elements of both operands with the type the GEMMs read.
void fill_operands(bool bf16, void* a, void* b, std::uint64_t n) {
    for (void* x : {a, b}) {
        if (bf16) {
            fill<<<1024, 256>>>(static_cast<__nv_bfloat16*>(x), n);
        } else {
            fill<<<1024, 256>>>(static_cast<float*>(x), n);
        }
    }
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
}

struct Shape {
    int m, n, k;
};

/// Median seconds of 5 GEMMs of `s` (type: tf32 when `bf16` is false).
double time_shape(cublasHandle_t h, bool bf16, const Shape& s, void* a, void* b, float* c) {
    const float one = 1.0F, zero = 0.0F;
    const auto type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
    const auto compute = bf16 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
    auto gemm = [&] {
        CK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, s.m, s.n, s.k, &one, a, type, s.m, b, type, s.k, &zero,
                        c, CUDA_R_32F, s.m, compute, CUBLAS_GEMM_DEFAULT));
    };
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    gemm();
    std::vector<double> t;
    for (int r = 0; r < 5; ++r) {
        CK(cudaEventRecord(e0));
        gemm();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms / 1e3);
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    std::sort(t.begin(), t.end());
    return t[2];
}

}  // namespace

int main() {
    constexpr std::uint64_t kN = 32768;
    cudaDeviceProp prop{};
    CK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s\n", prop.name);
    void *a = nullptr, *b = nullptr;
    float* c = nullptr;
    CK(cudaMalloc(&a, kN * kN * 4));
    CK(cudaMalloc(&b, kN * kN * 4));
    CK(cudaMalloc(&c, kN * kN * 4));
    cublasHandle_t h;
    CK(cublasCreate(&h));
    const std::vector<Shape> shapes = {
        {32768, 32768, 32768}, {32768, 1536, 32768}, {32768, 1024, 32768}, {32768, 512, 32768},
        {16384, 512, 32768},   {16384, 1024, 32768}, {16896, 1024, 32768}, {15872, 1024, 32768},
        {32768, 1536, 4096},   {32768, 4096, 4096},  {32768, 8192, 2048},  {32768, 8192, 4096},
        {32768, 12288, 4096},  {16384, 512, 4096},   {16384, 4096, 4096},  {16384, 8192, 4096},
    };
    for (const bool bf16 : {false, true}) {
        fill_operands(bf16, a, b, kN * kN);
        double base = 0;
        for (const auto& s : shapes) {
            const double sec = time_shape(h, bf16, s, a, b, c);
            const double tf = 2.0 * s.m * s.n * s.k / sec / 1e12;
            if (base == 0) base = tf;
            std::printf("%-4s %5d x %5d x %5d  %8.3f ms  %6.1f TFLOP/s  %.3f of 32768^3\n",
                        bf16 ? "bf16" : "tf32", s.m, s.n, s.k, sec * 1e3, tf, tf / base);
        }
    }
    CK(cublasDestroy(h));
    return 0;
}
