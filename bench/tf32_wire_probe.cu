// bench/tf32_wire_probe.cu — could tf32 GEMM operands cross the link as 24-bit words?
// (docs/tiling.md, "Fewer bytes for tf32"). Not part of the CMake build: a one-off
// probe, kept so its figures can be measured again. On a machine with an NVIDIA GPU:
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -Xcompiler -march=native bench/tf32_wire_probe.cu \
//        -o tf32_wire_probe -lcublas && ./tf32_wire_probe
//
// 1. Exactness: C of a FAST_TF32 cublasGemmEx from the full float32 inputs against C from
//    inputs whose low 8 bits are replaced by a sticky bit (bit 8 set when any of them
//    was), by truncation to tf32, by rounding to tf32, and by dropping the 8 bits.
// 2. The host's packing rate, pinned float32 to pinned 3-byte words, on 1–16 threads,
//    alone and beside a 4 GiB upload; the widening kernel's rate; a packed upload's rate.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "probe_check.hpp"

namespace {

std::uint32_t bits(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
float from_bits(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
std::uint32_t sticky(std::uint32_t u) { return (u & ~0xFFu) | ((u & 0xFFu) != 0 ? 0x100u : 0u); }
std::uint32_t trunc13(std::uint32_t u) { return u & ~0x1FFFu; }
std::uint32_t round13(std::uint32_t u) { return (u + 0xFFFu + ((u >> 13) & 1u)) & ~0x1FFFu; }

__global__ void widen(const std::uint8_t* p, float* out, std::size_t n) {
    for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
         i += std::size_t{gridDim.x} * blockDim.x) {
        const std::uint32_t v = std::uint32_t{p[3 * i]} << 8 | std::uint32_t{p[3 * i + 1]} << 16 |
                                std::uint32_t{p[3 * i + 2]} << 24;
        out[i] = __uint_as_float(v);
    }
}

std::vector<float> gemm_tf32(cublasHandle_t h, int n, const std::vector<float>& a,
                             const std::vector<float>& b) {
    const std::size_t bytes = std::size_t(n) * n * 4;
    float *da, *db, *dc;
    CK(cudaMalloc(&da, bytes));
    CK(cudaMalloc(&db, bytes));
    CK(cudaMalloc(&dc, bytes));
    CK(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));
    const float one = 1, zero = 0;
    CK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, da, CUDA_R_32F, n, db, CUDA_R_32F, n, &zero,
                    dc, CUDA_R_32F, n, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
    std::vector<float> c(std::size_t(n) * n);
    CK(cudaMemcpy(c.data(), dc, bytes, cudaMemcpyDeviceToHost));
    CK(cudaFree(da));
    CK(cudaFree(db));
    CK(cudaFree(dc));
    return c;
}

// 4 float32 → 12 bytes (each the top 24 bits with the sticky bit), lo and hi multiples of 4.
void pack(const float* src, std::uint8_t* dst, std::size_t lo, std::size_t hi) {
    auto s24 = [](std::uint32_t u) { return (u >> 8) | std::uint32_t{(u & 0xFFu) != 0}; };
    const auto* s = reinterpret_cast<const std::uint32_t*>(src);
    auto* d = reinterpret_cast<std::uint32_t*>(dst);
    for (std::size_t i = lo; i < hi; i += 4) {
        const std::uint32_t v0 = s24(s[i]), v1 = s24(s[i + 1]), v2 = s24(s[i + 2]), v3 = s24(s[i + 3]);
        d[3 * i / 4] = v0 | v1 << 24;
        d[3 * i / 4 + 1] = v1 >> 8 | v2 << 16;
        d[3 * i / 4 + 2] = v2 >> 16 | v3 << 8;
    }
}

double pack_seconds(const float* src, std::uint8_t* dst, std::size_t n, int threads) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    const std::size_t per = n / threads / 4 * 4;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back(pack, src, dst, t * per, t + 1 == threads ? n : (t + 1) * per);
    for (auto& t : pool) t.join();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main() {
    cublasHandle_t h;
    CK(cublasCreate(&h));
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0, 1);
    for (const int n : {512, 2816, 4096, 8192}) {
        std::vector<float> a(std::size_t(n) * n), b(a.size());
        for (float& x : a) x = normal(rng);
        for (float& x : b) x = normal(rng);
        const std::vector<float> want = gemm_tf32(h, n, a, b);
        const char* names[] = {"sticky 24-bit", "truncated to tf32", "rounded to tf32",
                               "24-bit, no sticky bit"};
        for (int mode = 0; mode < 4; ++mode) {
            auto f = [mode](float x) {
                const std::uint32_t u = bits(x);
                return from_bits(mode == 0   ? sticky(u)
                                 : mode == 1 ? trunc13(u)
                                 : mode == 2 ? round13(u)
                                             : u & ~0xFFu);
            };
            std::vector<float> a2(a), b2(b);
            std::transform(a2.begin(), a2.end(), a2.begin(), f);
            std::transform(b2.begin(), b2.end(), b2.begin(), f);
            const std::vector<float> got = gemm_tf32(h, n, a2, b2);
            std::size_t differ = 0;
            for (std::size_t i = 0; i < got.size(); ++i) differ += bits(got[i]) != bits(want[i]);
            std::printf("n=%d inputs %-22s: %zu of %zu elements of C differ\n", n, names[mode], differ,
                        got.size());
        }
    }

    const std::size_t n = std::size_t{1} << 30;  // 4 GiB of float32
    float* src;
    std::uint8_t* dst;
    CK(cudaMallocHost(&src, n * 4));
    CK(cudaMallocHost(&dst, n * 3));
    for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<float>(i % 1000) * 0.37f;
    for (const int threads : {1, 2, 4, 8, 12, 16}) {
        const double s = pack_seconds(src, dst, n, threads);
        std::printf("pack on %2d threads: %.1f GB/s of float32 in, %.1f GB/s packed out\n", threads,
                    n * 4 / s / 1e9, n * 3 / s / 1e9);
    }
    float* other;
    float* dev;
    CK(cudaMallocHost(&other, n * 4));
    CK(cudaMalloc(&dev, n * 4));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float ms = 0;
    for (const int threads : {8, 16}) {
        CK(cudaEventRecord(e0, st));
        CK(cudaMemcpyAsync(dev, other, n * 4, cudaMemcpyHostToDevice, st));
        CK(cudaEventRecord(e1, st));
        const double s = pack_seconds(src, dst, n, threads);
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        std::printf("pack on %2d threads beside a 4 GiB upload: %.1f GB/s packed out; the upload %.1f GB/s\n",
                    threads, n * 3 / s / 1e9, n * 4 / ms / 1e6);
    }
    std::uint8_t* packed;
    CK(cudaMalloc(&packed, n * 3));
    widen<<<132 * 8, 256>>>(packed, dev, n);  // warm-up
    CK(cudaEventRecord(e0));
    widen<<<132 * 8, 256>>>(packed, dev, n);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    std::printf("widening 4 GiB of float32 on the device: %.2f ms\n", ms);
    CK(cudaEventRecord(e0, st));
    CK(cudaMemcpyAsync(packed, dst, n * 3, cudaMemcpyHostToDevice, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    std::printf("upload of 3 GiB packed: %.1f GB/s\n", n * 3 / ms / 1e6);
    return 0;
}
