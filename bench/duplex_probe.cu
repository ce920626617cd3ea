// bench/duplex_probe.cu — when both link directions are busy, do uploads keep their
// one-way rate if the downloads are held to what the link has left (both-at-once rate
// less the upload rate), or does the link split evenly whatever the downloads ask?
// (docs/tiling.md, "What a downloaded byte costs the uploads".) Not part of the CMake
// build: a one-off probe, kept so its figures can be measured again. On a machine with
// an NVIDIA GPU:
//
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/duplex_probe.cu -o duplex_probe && ./duplex_probe
//
// Uploads go flat out in 64 MiB copies; downloads in pieces, each held on its stream by a
// one-thread kernel until piece/rate after the previous piece started (the GPU's global
// timer), so the downloads never run above the target rate, and last longer than the
// uploads, so every upload is measured beside them.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "probe_check.hpp"

namespace {

constexpr std::uint64_t kMiB = 1ULL << 20;
constexpr std::uint64_t kGiB = 1ULL << 30;

__device__ std::uint64_t now_ns() {
    std::uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void stamp(std::uint64_t* start) { *start = now_ns(); }

/// Spins until `gap_ns` after the previous release (*last), then records this one.
__global__ void wait_after(std::uint64_t* last, std::uint64_t gap_ns) {
    const std::uint64_t until = *last + gap_ns;
    std::uint64_t t = now_ns();
    while (t < until) {
        __nanosleep(2000);
        t = now_ns();
    }
    *last = t;
}

struct Result {
    double up_gbs = 0, down_gbs = 0;
};

/// `up_bytes` up in 64 MiB copies on one stream while `down_bytes` come down in
/// `piece` pieces on another, paced at `rate` bytes/s (0: flat out). Rates over each
/// stream's own span.
Result run(std::byte* h_up, std::byte* h_down, std::uint64_t host_bytes, std::byte* d_up, std::byte* d_down,
           std::uint64_t up_bytes, std::uint64_t down_bytes, std::uint64_t piece, double rate,
           std::uint64_t* d_start) {
    cudaStream_t su, sd, sg;
    CK(cudaStreamCreateWithFlags(&su, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&sd, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&sg, cudaStreamNonBlocking));
    cudaEvent_t u0, u1, d0, d1, go;
    for (cudaEvent_t* e : {&u0, &u1, &d0, &d1, &go}) CK(cudaEventCreate(e));
    // Both streams start from one event, 50 ms after the gate stream's stamp: time
    // enough to queue every copy first.
    stamp<<<1, 1, 0, sg>>>(d_start);
    wait_after<<<1, 1, 0, sg>>>(d_start, 50'000'000);
    CK(cudaGetLastError());
    CK(cudaEventRecord(go, sg));
    CK(cudaStreamWaitEvent(su, go, 0));
    CK(cudaStreamWaitEvent(sd, go, 0));
    CK(cudaEventRecord(u0, su));
    CK(cudaEventRecord(d0, sd));
    const std::uint64_t up_piece = 64 * kMiB;
    for (std::uint64_t o = 0; o < up_bytes; o += up_piece) {
        const std::uint64_t n = std::min(up_piece, up_bytes - o);
        CK(cudaMemcpyAsync(d_up + (o % (4 * kGiB)), h_up + (o % host_bytes), n, cudaMemcpyHostToDevice, su));
    }
    for (std::uint64_t o = 0; o < down_bytes; o += piece) {
        const std::uint64_t n = std::min(piece, down_bytes - o);
        if (rate > 0) {
            wait_after<<<1, 1, 0, sd>>>(d_start, o == 0 ? 0 : static_cast<std::uint64_t>(piece / rate * 1e9));
            CK(cudaGetLastError());
        }
        CK(cudaMemcpyAsync(h_down + (o % host_bytes), d_down + (o % (4 * kGiB)), n, cudaMemcpyDeviceToHost,
                           sd));
    }
    CK(cudaEventRecord(u1, su));
    CK(cudaEventRecord(d1, sd));
    CK(cudaDeviceSynchronize());
    float mu = 0, md = 0;
    CK(cudaEventElapsedTime(&mu, u0, u1));
    CK(cudaEventElapsedTime(&md, d0, d1));
    Result r;
    if (up_bytes > 0) r.up_gbs = static_cast<double>(up_bytes) / (mu * 1e-3) * 1e-9;
    if (down_bytes > 0) r.down_gbs = static_cast<double>(down_bytes) / (md * 1e-3) * 1e-9;
    for (cudaEvent_t e : {u0, u1, d0, d1, go}) CK(cudaEventDestroy(e));
    CK(cudaStreamDestroy(su));
    CK(cudaStreamDestroy(sd));
    CK(cudaStreamDestroy(sg));
    return r;
}

}  // namespace

int main() {
    cudaDeviceProp prop{};
    CK(cudaGetDeviceProperties(&prop, 0));
    std::printf("%s\n", prop.name);
    const std::uint64_t host_bytes = 8 * kGiB;
    std::byte *h_up, *h_down, *d_up, *d_down;
    std::uint64_t* d_start;
    CK(cudaHostAlloc(reinterpret_cast<void**>(&h_up), host_bytes, cudaHostAllocPortable));
    CK(cudaHostAlloc(reinterpret_cast<void**>(&h_down), host_bytes, cudaHostAllocPortable));
    std::memset(h_up, 1, host_bytes);
    std::memset(h_down, 2, host_bytes);
    CK(cudaMalloc(reinterpret_cast<void**>(&d_up), 4 * kGiB));
    CK(cudaMalloc(reinterpret_cast<void**>(&d_down), 4 * kGiB));
    CK(cudaMalloc(reinterpret_cast<void**>(&d_start), 8));
    const std::uint64_t up = 8 * kGiB;
    (void)run(h_up, h_down, host_bytes, d_up, d_down, 1 * kGiB, 1 * kGiB, 8 * kMiB, 0, d_start);  // warm
    // The median of three by the upload rate (by the download rate where nothing goes up).
    auto median3 = [&](std::uint64_t u, std::uint64_t d, std::uint64_t piece, double rate) {
        std::vector<Result> rs;
        for (int r = 0; r < 3; ++r)
            rs.push_back(run(h_up, h_down, host_bytes, d_up, d_down, u, d, piece, rate, d_start));
        std::sort(rs.begin(), rs.end(), [](const Result& a, const Result& b) {
            return a.up_gbs != b.up_gbs ? a.up_gbs < b.up_gbs : a.down_gbs < b.down_gbs;
        });
        return rs[1];
    };
    const Result up_alone = median3(up, 0, 8 * kMiB, 0);
    const Result down_alone = median3(0, up, 8 * kMiB, 0);
    std::printf("alone: up %.1f GB/s, down %.1f GB/s\n", up_alone.up_gbs, down_alone.down_gbs);
    const Result both = median3(up, up, 8 * kMiB, 0);
    std::printf("both flat out: up %.1f, down %.1f, sum %.1f GB/s\n", both.up_gbs, both.down_gbs,
                both.up_gbs + both.down_gbs);
    std::printf("%10s %8s %10s %10s %10s %8s\n", "target", "piece", "up GB/s", "down GB/s", "sum",
                "up/alone");
    for (const std::uint64_t piece : {4 * kMiB, 16 * kMiB}) {
        for (const double target : {15e9, 25e9, 30e9, 35e9, 40e9, 45e9}) {
            // Downloads outlasting the uploads (a quarter longer than at the one-way rate).
            const auto down = static_cast<std::uint64_t>(1.25 * target * static_cast<double>(up) /
                                                         (up_alone.up_gbs * 1e9)) /
                              piece * piece;
            const Result r = median3(up, down, piece, target);
            std::printf("%10.0f %8llu %10.1f %10.1f %10.1f %8.3f\n", target * 1e-9,
                        static_cast<unsigned long long>(piece / kMiB), r.up_gbs, r.down_gbs,
                        r.up_gbs + r.down_gbs, r.up_gbs / up_alone.up_gbs);
        }
    }
    return 0;
}
