// bench/group_gemm_probe.cu — a k-outer group (docs/tiling.md, "A serpentine with retained
// B") issues, for each chunk of its A panel, one GEMM per tile of the group:
// tile_m × tile_n × chunk_k, C accumulated (β = 1), each tile's whole-k B chunk and C tile
// in their own slots. Would one batched call per chunk run those faster than the calls one
// by one? This probe times, for r tiles of 16384 × 512 with k chunks of 4096 (the tf32
// 6 GiB plan on an H100: r = 32) and in bf16 too:
//
//   single    r cublasGemmEx calls on one stream (the group's calls as issued on one lane)
//   lanes     the same calls alternating over two streams (the executor's two lanes)
//   batched   one cublasGemmBatchedEx over r pointer triples (slots anywhere)
//   strided   one cublasGemmStridedBatchedEx (slots equally spaced)
//   one GEMM  tile_m × (r·tile_n) × chunk_k with the slots side by side (the bound)
//
// and the whole-k tile (tile_m × tile_n × k) for reference. Device-resident pseudo-random
// operands; medians of 7 after a warm-up, CUDA events. Not part of the CMake build: a
// one-off probe, kept so its figures can be measured again. On a machine with an NVIDIA GPU:
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -Ibench bench/group_gemm_probe.cu -lcublas -o group_probe &&
//   ./group_probe
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <vector>

#include "probe_check.hpp"
#include "probe_fill.cuh"

namespace {

/// Median seconds of 7 runs of `work` (after one warm-up), timed on stream 0's events
/// with `s1` joined back in.
double time_it(cudaStream_t s0, cudaStream_t s1, const std::function<void()>& work) {
    cudaEvent_t e0, e1, j;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventCreate(&j));
    work();
    CK(cudaDeviceSynchronize());
    std::vector<double> t;
    for (int r = 0; r < 7; ++r) {
        CK(cudaEventRecord(e0, s0));
        CK(cudaStreamWaitEvent(s1, e0));
        work();
        CK(cudaEventRecord(j, s1));
        CK(cudaStreamWaitEvent(s0, j));
        CK(cudaEventRecord(e1, s0));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms / 1e3);
    }
    for (cudaEvent_t e : {e0, e1, j}) CK(cudaEventDestroy(e));
    std::sort(t.begin(), t.end());
    return t[3];
}

}  // namespace

int main() {
    constexpr int kM = 16384, kN = 512, kK = 32768, kChunk = 4096;
    cudaDeviceProp prop{};
    CK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s\n", prop.name);
    constexpr std::uint64_t kMaxR = 32;
    // A: one panel chunk (tile_m × chunk_k); B: r whole-k tiles side by side (k × r·tile_n,
    // ld k); C: r tiles side by side (tile_m × r·tile_n, ld tile_m). Sized for f32.
    void *a = nullptr, *b = nullptr, *c = nullptr;
    CK(cudaMalloc(&a, std::uint64_t{kM} * kK * 4));
    CK(cudaMalloc(&b, std::uint64_t{kK} * kN * kMaxR * 4));
    CK(cudaMalloc(&c, std::uint64_t{kM} * kN * kMaxR * 4));
    void** ptrs = nullptr;  // A, B, C pointer arrays for the batched call
    CK(cudaMalloc(reinterpret_cast<void**>(&ptrs), 3 * kMaxR * sizeof(void*)));
    cudaStream_t s0, s1;
    CK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    cublasHandle_t h0, h1;
    CK(cublasCreate(&h0));
    CK(cublasCreate(&h1));
    CK(cublasSetStream(h0, s0));
    CK(cublasSetStream(h1, s1));
    const float one = 1.0F;
    for (const bool bf16 : {false, true}) {
        const int w = bf16 ? 2 : 4;
        const auto type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
        const auto compute = bf16 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
        const char* name = bf16 ? "bf16" : "tf32";
        if (bf16) {
            fill<<<1024, 256>>>(static_cast<__nv_bfloat16*>(a), std::uint64_t{kM} * kK);
            fill<<<1024, 256>>>(static_cast<__nv_bfloat16*>(b), std::uint64_t{kK} * kN * kMaxR);
        } else {
            fill<<<1024, 256>>>(static_cast<float*>(a), std::uint64_t{kM} * kK);
            fill<<<1024, 256>>>(static_cast<float*>(b), std::uint64_t{kK} * kN * kMaxR);
        }
        fill<<<1024, 256>>>(static_cast<float*>(c), std::uint64_t{kM} * kN * kMaxR);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        auto* ab = static_cast<char*>(a);
        auto* bb = static_cast<char*>(b);
        auto* cb = static_cast<char*>(c);
        const std::uint64_t b_tile = std::uint64_t{kK} * kN * w;  // whole-k B tile
        const std::uint64_t c_tile = std::uint64_t{kM} * kN * 4;  // f32 C tile
        // Tile g's GEMM over chunk 1 (rows [kChunk, 2·kChunk) of its B tile).
        auto tile_gemm = [&](cublasHandle_t h, int g) {
            CK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, kM, kN, kChunk, &one, ab, type, kM,
                            bb + g * b_tile + std::uint64_t{kChunk} * w, type, kK, &one, cb + g * c_tile,
                            CUDA_R_32F, kM, compute, CUBLAS_GEMM_DEFAULT));
        };
        const double whole = time_it(s0, s1, [&] {
            CK(cublasGemmEx(h0, CUBLAS_OP_N, CUBLAS_OP_N, kM, kN, kK, &one, ab, type, kM, bb, type, kK, &one,
                            cb, CUDA_R_32F, kM, compute, CUBLAS_GEMM_DEFAULT));
        });
        const double fl_whole = 2.0 * kM * kN * kK;
        std::printf("%s whole-k tile %dx%dx%d: %.3f ms, %.1f TFLOP/s\n", name, kM, kN, kK, whole * 1e3,
                    fl_whole / whole / 1e12);
        for (const int r : {8, 32}) {
            std::vector<const void*> host(3 * r);
            for (int g = 0; g < r; ++g) {
                host[g] = ab;
                host[r + g] = bb + g * b_tile + std::uint64_t{kChunk} * w;
                host[2 * r + g] = cb + g * c_tile;
            }
            CK(cudaMemcpy(ptrs, host.data(), host.size() * sizeof(void*), cudaMemcpyHostToDevice));
            const double fl = 2.0 * kM * kN * kChunk * r;
            const double single = time_it(s0, s1, [&] {
                for (int g = 0; g < r; ++g) tile_gemm(h0, g);
            });
            const double lanes = time_it(s0, s1, [&] {
                for (int g = 0; g < r; ++g) tile_gemm(g % 2 == 0 ? h0 : h1, g);
            });
            const double batched = time_it(s0, s1, [&] {
                CK(cublasGemmBatchedEx(h0, CUBLAS_OP_N, CUBLAS_OP_N, kM, kN, kChunk, &one,
                                       reinterpret_cast<const void* const*>(ptrs), type, kM,
                                       reinterpret_cast<const void* const*>(ptrs + r), type, kK, &one,
                                       reinterpret_cast<void* const*>(ptrs + 2 * r), CUDA_R_32F, kM, r,
                                       compute, CUBLAS_GEMM_DEFAULT));
            });
            const double strided = time_it(s0, s1, [&] {
                CK(cublasGemmStridedBatchedEx(
                    h0, CUBLAS_OP_N, CUBLAS_OP_N, kM, kN, kChunk, &one, ab, type, kM, 0,
                    bb + std::uint64_t{kChunk} * w, type, kK, static_cast<long long>(b_tile / w), &one, cb,
                    CUDA_R_32F, kM, static_cast<long long>(c_tile / 4), r, compute, CUBLAS_GEMM_DEFAULT));
            });
            const double joined = time_it(s0, s1, [&] {
                CK(cublasGemmEx(h0, CUBLAS_OP_N, CUBLAS_OP_N, kM, kN * r, kChunk, &one, ab, type, kM,
                                bb + std::uint64_t{kChunk} * w, type, kK, &one, cb, CUDA_R_32F, kM, compute,
                                CUBLAS_GEMM_DEFAULT));
            });
            for (const auto& [label, s] : std::vector<std::pair<const char*, double>>{{"single", single},
                                                                                      {"lanes", lanes},
                                                                                      {"batched", batched},
                                                                                      {"strided", strided},
                                                                                      {"one GEMM", joined}}) {
                std::printf("%s r=%2d %-8s %8.3f ms  %6.1f TFLOP/s  %.3f of whole-k  %.3f ms a tile\n", name,
                            r, label, s * 1e3, fl / s / 1e12, (fl / s) / (fl_whole / whole), s * 1e3 / r);
            }
        }
    }
    CK(cublasDestroy(h0));
    CK(cublasDestroy(h1));
    return 0;
}
