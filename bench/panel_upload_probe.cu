// bench/panel_upload_probe.cu — how fast can a row panel of a column-major matrix in
// pinned host memory go up? The bf16 A panel (16384 of 32768 rows, so runs of 32 KiB
// every 64 KiB) went up at ~47 GB/s through cudaMemcpy2DAsync in the eighth session's
// traces, against ~55 GB/s for contiguous bytes (docs/tiling.md, "A 16-bit C" and
// "What a downloaded byte costs"). This probe compares, for a 1 GiB panel in chunks of
// 4096 columns: one 2-D copy per chunk on one stream; the same split over two and four
// streams; CUDA 12.8's batched copies (cudaMemcpyBatchAsync, a copy per column; and
// cudaMemcpy3DBatchAsync, an op per chunk; each with and without the
// cudaMemcpyFlagPreferOverlapWithCompute hint); a gather kernel that reads the pinned host
// memory directly (zero-copy) with G blocks; each of those beside contiguous uploads on
// another stream and beside bf16 GEMMs (on pseudo-random operands); and the panel packed on
// the host: T threads copy each chunk's runs, 16 MiB pieces at a time, into pinned staging
// buffers that go up contiguous (each thread on its own stream). Two more modes:
// `order` allocates pinned buffers as `outcore bench gpu` does (12 GiB of f32, then 6 GiB
// of bf16) and times the 2-D and contiguous copies from each (with cudaMemcpyHostToDevice
// and cudaMemcpyDefault); `after` times 128 MiB chunk copies (2-D, contiguous and by the
// gather kernel) one by one on an idle GPU, right behind ~100 ms of bf16 GEMMs and 0.2 s
// after them, with and without an event between copies. Not part of the CMake build: a
// one-off probe, kept so its figures can be measured again (BENCHMARKS.md, twelfth,
// fourteenth and fifteenth H100 sessions). On a machine with an NVIDIA GPU:
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -Ibench bench/panel_upload_probe.cu -lcublas -o panel_probe
//   ./panel_probe            # every method
//   ./panel_probe quick      # the copy calls only (no gather kernel, no host staging)
//   ./panel_probe order      # the rate by pinned allocation
//   ./panel_probe after      # the rate by what ran before
//   ./panel_probe huge       # `after` from pinned memory made three ways: cudaHostAlloc,
//                            # and mmap'd pages registered with cudaHostRegister, without
//                            # and with transparent huge pages (MADV_HUGEPAGE)
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "probe_check.hpp"

namespace {

constexpr std::uint64_t kMiB = 1ULL << 20;
constexpr std::uint64_t kGiB = 1ULL << 30;
constexpr std::uint64_t kRows = 32768, kCols = 32768, kPanelRows = 16384, kChunkCols = 4096;
constexpr std::uint64_t kElem = 2;  // bf16
constexpr std::uint64_t kPitch = kRows * kElem, kRun = kPanelRows * kElem;
constexpr std::uint64_t kPanelBytes = kRun * kCols;

/// Copies `cols` columns of `run` bytes (host pitch `pitch`, device packed) with 16-byte
/// loads straight from mapped pinned memory; every thread keeps 4 loads in flight.
__global__ void gather(const uint4* __restrict__ host, uint4* __restrict__ dev, unsigned run16,
                       unsigned pitch16, unsigned cols) {
    const unsigned total = run16 * cols;  // a chunk: 8 Mi vectors
    const unsigned stride = gridDim.x * blockDim.x;
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < total; i += 4 * stride) {
        uint4 v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const unsigned j = i + u * stride;
            v[u] = host[static_cast<std::uint64_t>(j / run16) * pitch16 + j % run16];
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) dev[i + u * stride] = v[u];
    }
    for (; i < total; i += stride) dev[i] = host[static_cast<std::uint64_t>(i / run16) * pitch16 + i % run16];
}

struct Streams {
    std::vector<cudaStream_t> s;
    explicit Streams(int n) : s(n) {
        for (auto& x : s) CK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
    }
    ~Streams() {
        for (auto x : s) cudaStreamDestroy(x);
    }
};

double seconds(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    return ms * 1e-3;
}

/// Queues the panel's upload by `method` (0: contiguous 1 GiB as a reference; 1, 2, 4:
/// 2-D copies over that many streams; negative: the gather kernel with -method blocks)
/// on the streams from `first`, all after event `go`; returns the event recorded when
/// every part is done (on streams[first]).
void queue_panel(int method, const std::byte* h, std::byte* d, Streams& st, int first, cudaEvent_t go,
                 cudaEvent_t done) {
    if (method == 0) {
        CK(cudaStreamWaitEvent(st.s[first], go, 0));
        for (std::uint64_t o = 0; o < kPanelBytes; o += 64 * kMiB)
            CK(cudaMemcpyAsync(d + o, h + o, 64 * kMiB, cudaMemcpyHostToDevice, st.s[first]));
        CK(cudaEventRecord(done, st.s[first]));
        return;
    }
    if (method < 0) {
        CK(cudaStreamWaitEvent(st.s[first], go, 0));
        for (std::uint64_t c = 0; c < kCols; c += kChunkCols)
            gather<<<-method, 512, 0, st.s[first]>>>(reinterpret_cast<const uint4*>(h + c * kPitch),
                                                     reinterpret_cast<uint4*>(d + c * kRun), kRun / 16,
                                                     kPitch / 16, kChunkCols);
        CK(cudaGetLastError());
        CK(cudaEventRecord(done, st.s[first]));
        return;
    }
    if (method >= 8) {
        // 8, 9: cudaMemcpyBatchAsync, one 32 KiB copy per column, a batch per chunk; 10, 11:
        // cudaMemcpy3DBatchAsync, one pitched op per chunk. 9 and 11 set
        // cudaMemcpyFlagPreferOverlapWithCompute ("overlap the copy with compute work on the SMs").
        const unsigned flags = method % 2 == 1 ? cudaMemcpyFlagPreferOverlapWithCompute : 0;
        CK(cudaStreamWaitEvent(st.s[first], go, 0));
        std::vector<void*> dsts(kChunkCols);
        std::vector<const void*> srcs(kChunkCols);
        std::vector<std::size_t> sizes(kChunkCols, kRun);
        for (std::uint64_t c = 0; c < kCols; c += kChunkCols) {
            if (method <= 9) {
                for (std::uint64_t j = 0; j < kChunkCols; ++j) {
                    dsts[j] = d + (c + j) * kRun;
                    srcs[j] = h + (c + j) * kPitch;
                }
                cudaMemcpyAttributes attr{};
                attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
                attr.flags = flags;
                std::size_t idx = 0;
                CK(cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), kChunkCols, &attr, &idx, 1,
                                        st.s[first]));
            } else {
                cudaMemcpy3DBatchOp op{};
                op.src.type = cudaMemcpyOperandTypePointer;
                op.src.op.ptr.ptr = const_cast<std::byte*>(h + c * kPitch);
                op.src.op.ptr.rowLength = kPitch;
                op.dst.type = cudaMemcpyOperandTypePointer;
                op.dst.op.ptr.ptr = d + c * kRun;
                op.dst.op.ptr.rowLength = kRun;
                op.extent = make_cudaExtent(kRun, kChunkCols, 1);
                op.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
                op.flags = flags;
                CK(cudaMemcpy3DBatchAsync(1, &op, 0, st.s[first]));
            }
        }
        CK(cudaEventRecord(done, st.s[first]));
        return;
    }
    std::vector<cudaEvent_t> ends(method);
    for (int p = 0; p < method; ++p) CK(cudaStreamWaitEvent(st.s[first + p], go, 0));
    const std::uint64_t part = kChunkCols / method;
    for (std::uint64_t c = 0; c < kCols; c += kChunkCols)
        for (int p = 0; p < method; ++p) {
            const std::uint64_t col = c + p * part;
            CK(cudaMemcpy2DAsync(d + col * kRun, kRun, h + col * kPitch, kPitch, kRun, part,
                                 cudaMemcpyHostToDevice, st.s[first + p]));
        }
    for (int p = 1; p < method; ++p) {
        CK(cudaEventCreate(&ends[p]));
        CK(cudaEventRecord(ends[p], st.s[first + p]));
        CK(cudaStreamWaitEvent(st.s[first], ends[p], 0));
    }
    CK(cudaEventRecord(done, st.s[first]));
    for (int p = 1; p < method; ++p) CK(cudaEventDestroy(ends[p]));
}

struct Timing {
    double panel_gbs = 0, other_gbs = 0, gemm_tflops = 0;
};

/// The panel by `method`, alone or beside `beside_bytes` of contiguous uploads on
/// another stream, or beside `gemms` bf16 GEMMs (16384×1024×32768) on another stream.
Timing run(int method, const std::byte* hA, const std::byte* hB, std::byte* dA, std::byte* dB,
           std::uint64_t beside_bytes, int gemms, cublasHandle_t blas, const __nv_bfloat16* gA,
           const __nv_bfloat16* gB, float* gC) {
    Streams st(6);
    cudaEvent_t go, a1, b0, b1;
    for (auto* e : {&go, &a1, &b0, &b1}) CK(cudaEventCreate(e));
    CK(cudaEventRecord(go, st.s[5]));
    queue_panel(method, hA, dA, st, 0, go, a1);
    CK(cudaStreamWaitEvent(st.s[4], go, 0));
    CK(cudaEventRecord(b0, st.s[4]));
    for (std::uint64_t o = 0; o < beside_bytes; o += 96 * kMiB)
        CK(cudaMemcpyAsync(dB + o % (2 * kGiB), hB + o % (2 * kGiB), std::min(96 * kMiB, beside_bytes - o),
                           cudaMemcpyHostToDevice, st.s[4]));
    if (gemms > 0) {
        CK(cublasSetStream(blas, st.s[4]));
        const float one = 1, zero = 0;
        for (int g = 0; g < gemms; ++g)
            CK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, 16384, 1024, 32768, &one, gA, CUDA_R_16BF, 16384,
                            gB, CUDA_R_16BF, 32768, &zero, gC, CUDA_R_32F, 16384, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
    }
    CK(cudaEventRecord(b1, st.s[4]));
    CK(cudaDeviceSynchronize());
    Timing t;
    t.panel_gbs = static_cast<double>(kPanelBytes) / seconds(go, a1) * 1e-9;
    if (beside_bytes > 0) t.other_gbs = static_cast<double>(beside_bytes) / seconds(b0, b1) * 1e-9;
    if (gemms > 0) t.gemm_tflops = 2.0 * 16384 * 1024 * 32768 * gemms / seconds(b0, b1) * 1e-12;
    for (auto e : {go, a1, b0, b1}) CK(cudaEventDestroy(e));
    return t;
}

/// The panel packed on the host by `threads` threads: piece i (kStagedCols columns of a
/// chunk, 16 MiB) is copied run by run into staging buffer i mod (2·threads) by thread
/// i mod threads, then goes up as one contiguous copy on that thread's stream; a
/// buffer is refilled once its previous copy is done. Beside it on another stream,
/// `beside_bytes` of contiguous uploads or `gemms` bf16 GEMMs, as in run().
constexpr std::uint64_t kStagedCols = 512;
Timing run_staged(int threads, std::byte* const* staging, const std::byte* hA, const std::byte* hB,
                  std::byte* dA, std::byte* dB, std::uint64_t beside_bytes, int gemms, cublasHandle_t blas,
                  const __nv_bfloat16* gA, const __nv_bfloat16* gB, float* gC) {
    Streams st(threads + 1);
    cudaStream_t other = st.s[threads];
    const int buffers = 2 * threads;
    std::vector<cudaEvent_t> used(buffers);
    for (auto& e : used) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    cudaEvent_t b0, b1;
    CK(cudaEventCreate(&b0));
    CK(cudaEventCreate(&b1));
    CK(cudaEventRecord(b0, other));
    for (std::uint64_t o = 0; o < beside_bytes; o += 96 * kMiB)
        CK(cudaMemcpyAsync(dB + o % (2 * kGiB), hB + o % (2 * kGiB), std::min(96 * kMiB, beside_bytes - o),
                           cudaMemcpyHostToDevice, other));
    if (gemms > 0) {
        CK(cublasSetStream(blas, other));
        const float one = 1, zero = 0;
        for (int g = 0; g < gemms; ++g)
            CK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, 16384, 1024, 32768, &one, gA, CUDA_R_16BF, 16384,
                            gB, CUDA_R_16BF, 32768, &zero, gC, CUDA_R_32F, 16384, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
    }
    CK(cudaEventRecord(b1, other));
    const auto t0 = std::chrono::steady_clock::now();
    const std::uint64_t pieces = kCols / kStagedCols;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            for (std::uint64_t i = t; i < pieces; i += threads) {
                const int b = static_cast<int>(i % buffers);
                CK(cudaEventSynchronize(used[b]));
                for (std::uint64_t c = 0; c < kStagedCols; ++c)
                    std::memcpy(staging[b] + c * kRun, hA + (i * kStagedCols + c) * kPitch, kRun);
                CK(cudaMemcpyAsync(dA + i * kStagedCols * kRun, staging[b], kStagedCols * kRun,
                                   cudaMemcpyHostToDevice, st.s[t]));
                CK(cudaEventRecord(used[b], st.s[t]));
            }
        });
    }
    for (auto& th : pool) th.join();
    for (int t = 0; t < threads; ++t) CK(cudaStreamSynchronize(st.s[t]));
    const double panel_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CK(cudaDeviceSynchronize());
    Timing r;
    r.panel_gbs = static_cast<double>(kPanelBytes) / panel_s * 1e-9;
    if (beside_bytes > 0) r.other_gbs = static_cast<double>(beside_bytes) / seconds(b0, b1) * 1e-9;
    if (gemms > 0) r.gemm_tflops = 2.0 * 16384 * 1024 * 32768 * gemms / seconds(b0, b1) * 1e-12;
    for (auto e : used) CK(cudaEventDestroy(e));
    CK(cudaEventDestroy(b0));
    CK(cudaEventDestroy(b1));
    return r;
}

/// "order": pinned buffers allocated as `outcore bench gpu` allocates its matrices (A, B, C
/// in f32, 4 GiB each, then A, B, C in bf16, 2 GiB each), each written once; then, for each
/// in allocation order, the panel's 2-D copy (32 KiB runs every 64 KiB, 1 GiB) and a
/// contiguous 1 GiB copy, alone, medians of three. Does the rate depend on the allocation?
int allocation_order() {
    const std::uint64_t sizes[] = {4 * kGiB, 4 * kGiB, 4 * kGiB, 2 * kGiB, 2 * kGiB, 2 * kGiB};
    std::vector<std::byte*> bufs;
    for (const std::uint64_t bytes : sizes) {
        std::byte* p = nullptr;
        CK(cudaHostAlloc(reinterpret_cast<void**>(&p), bytes, cudaHostAllocPortable));
        std::memset(p, 3, bytes);
        bufs.push_back(p);
    }
    std::byte* d = nullptr;
    CK(cudaMalloc(reinterpret_cast<void**>(&d), kGiB));
    Streams st(1);
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    // kind 0: 2-D, cudaMemcpyHostToDevice; 1: 2-D, cudaMemcpyDefault (as outcore's queues
    // copy); 2: contiguous.
    auto rate = [&](const std::byte* h, int kind) {
        std::vector<double> r;
        for (int rep = 0; rep < 4; ++rep) {
            CK(cudaEventRecord(a, st.s[0]));
            if (kind < 2)
                for (std::uint64_t c = 0; c < kGiB / kRun; c += kChunkCols)
                    CK(cudaMemcpy2DAsync(d + c * kRun, kRun, h + c * kPitch, kPitch, kRun, kChunkCols,
                                         kind == 0 ? cudaMemcpyHostToDevice : cudaMemcpyDefault, st.s[0]));
            else
                for (std::uint64_t o = 0; o < kGiB; o += 64 * kMiB)
                    CK(cudaMemcpyAsync(d + o, h + o, 64 * kMiB, cudaMemcpyHostToDevice, st.s[0]));
            CK(cudaEventRecord(b, st.s[0]));
            CK(cudaEventSynchronize(b));
            if (rep > 0) r.push_back(static_cast<double>(kGiB) / seconds(a, b) * 1e-9);
        }
        std::sort(r.begin(), r.end());
        return r[1];
    };
    std::printf("%-26s %12s %16s %16s\n", "pinned buffer (as bench)", "2-D GB/s", "2-D Default GB/s",
                "contiguous GB/s");
    const char* names[] = {"f32 A (4 GiB)", "f32 B", "f32 C", "bf16 A (2 GiB)", "bf16 B", "bf16 C"};
    for (std::size_t i = 0; i < bufs.size(); ++i)
        std::printf("%-26s %12.1f %16.1f %16.1f\n", names[i], rate(bufs[i], 0), rate(bufs[i], 1),
                    rate(bufs[i], 2));
    // The last buffer again, after freeing the first three (a bf16 user's process holds no f32).
    for (int i = 0; i < 3; ++i) CK(cudaFreeHost(bufs[i]));
    std::byte* fresh = nullptr;
    CK(cudaHostAlloc(reinterpret_cast<void**>(&fresh), 2 * kGiB, cudaHostAllocPortable));
    std::memset(fresh, 3, 2 * kGiB);
    std::printf("%-26s %12.1f %16.1f %16.1f\n", "2 GiB after freeing f32", rate(fresh, 0), rate(fresh, 1),
                rate(fresh, 2));
    return 0;
}

/// "after": the panel's 2-D chunk copies (32 KiB runs every 64 KiB, 128 MiB each) timed one
/// by one on an idle GPU, then queued right behind ~100 ms of bf16 GEMMs (the copies wait for
/// the GEMMs' end), then after the GEMMs and a pause of 0.2 s; contiguous 128 MiB copies and
/// the gather kernel (one block an SM) the same way. The out-of-core runs' traces show these
/// chunk copies at 44-48 GB/s with almost nothing beside them, where the same copies alone
/// run at 55: is it what ran before them?
int after_gemms(const std::byte* hA, std::byte* dA, cublasHandle_t blas, const __nv_bfloat16* gA,
                const __nv_bfloat16* gB, float* gC, int sms, bool with_gather = true) {
    Streams st(2);
    constexpr int kChunks = 8;
    std::vector<cudaEvent_t> ev(kChunks + 2);
    for (auto& e : ev) CK(cudaEventCreate(&e));
    CK(cublasSetStream(blas, st.s[1]));
    // kind 0: contiguous copies, 1: 2-D copies, 2: the gather kernel (one block an SM).
    auto series = [&](int kind, int gemms, int pause_ms, bool per_copy_events = true) {
        CK(cudaDeviceSynchronize());
        const float one = 1, zero = 0;
        for (int g = 0; g < gemms; ++g)
            CK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, 16384, 1024, 32768, &one, gA, CUDA_R_16BF, 16384,
                            gB, CUDA_R_16BF, 32768, &zero, gC, CUDA_R_32F, 16384, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
        if (pause_ms > 0) {
            CK(cudaStreamSynchronize(st.s[1]));
            std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
        }
        CK(cudaEventRecord(ev[kChunks + 1], st.s[1]));
        CK(cudaStreamWaitEvent(st.s[0], ev[kChunks + 1], 0));
        CK(cudaEventRecord(ev[0], st.s[0]));
        for (int c = 0; c < kChunks; ++c) {
            if (kind == 2)
                gather<<<sms, 512, 0, st.s[0]>>>(reinterpret_cast<const uint4*>(hA + c * kChunkCols * kPitch),
                                                 reinterpret_cast<uint4*>(dA + c * kChunkCols * kRun),
                                                 kRun / 16, kPitch / 16, kChunkCols);
            else if (kind == 1)
                CK(cudaMemcpy2DAsync(dA + c * kChunkCols * kRun, kRun, hA + c * kChunkCols * kPitch, kPitch,
                                     kRun, kChunkCols, cudaMemcpyHostToDevice, st.s[0]));
            else
                CK(cudaMemcpyAsync(dA + c * kChunkCols * kRun, hA + c * kChunkCols * kPitch,
                                   kChunkCols * kRun, cudaMemcpyHostToDevice, st.s[0]));
            if (per_copy_events || c + 1 == kChunks) CK(cudaEventRecord(ev[c + 1], st.s[0]));
        }
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::printf("%-11s %-34s",
                    kind == 2   ? "gather"
                    : kind == 1 ? "2-D"
                                : "contiguous",
                    gemms == 0      ? "idle GPU"
                    : pause_ms == 0 ? "right after 64 GEMMs"
                                    : "64 GEMMs, then 0.2 s idle");
        if (per_copy_events)
            for (int c = 0; c < kChunks; ++c)
                std::printf(" %5.1f",
                            static_cast<double>(kChunkCols * kRun) / seconds(ev[c], ev[c + 1]) * 1e-9);
        std::printf("  all 8: %5.1f%s\n",
                    static_cast<double>(kChunks * kChunkCols * kRun) / seconds(ev[0], ev[kChunks]) * 1e-9,
                    per_copy_events ? "" : " (no events between)");
    };
    std::printf("128 MiB chunk copies, GB/s each, in order:\n");
    for (int rep = 0; rep < 2; ++rep) {
        for (const int kind : {1, 0, 2}) {
            if (kind == 2 && !with_gather) continue;
            series(kind, 0, 0);
            series(kind, 64, 0);
            series(kind, 64, 200);
        }
        // The same 2-D copies with no event between them.
        series(1, 0, 0, false);
        series(1, 64, 0, false);
        series(1, 64, 200, false);
    }
    for (auto e : ev) CK(cudaEventDestroy(e));
    return 0;
}

/// `bytes` of anonymous memory on a 2 MiB boundary, with transparent huge pages asked for
/// (MADV_HUGEPAGE) or not, touched, then pinned and registered with cudaHostRegister.
std::byte* registered(std::uint64_t bytes, bool huge) {
    constexpr std::uint64_t kAlign = 2 * kMiB;
    void* raw = mmap(nullptr, bytes + kAlign, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        std::printf("mmap failed\n");
        std::exit(1);
    }
    auto* p =
        reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(raw) + kAlign - 1) & ~(kAlign - 1));
    if (madvise(p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0) std::printf("madvise failed\n");
    std::memset(p, 1, bytes);
    CK(cudaHostRegister(p, bytes, cudaHostRegisterPortable));
    return p;
}

/// AnonHugePages of /proc/meminfo, in MiB (-1 when it cannot be read).
long anon_huge_mib() {
    std::FILE* f = std::fopen("/proc/meminfo", "r");
    if (f == nullptr) return -1;
    char line[256];
    long kib = -1;
    while (std::fgets(line, sizeof line, f) != nullptr)
        if (std::sscanf(line, "AnonHugePages: %ld kB", &kib) == 1) break;
    std::fclose(f);
    return kib < 0 ? -1 : kib / 1024;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 1 && std::strcmp(argv[1], "order") == 0) return allocation_order();
    cudaDeviceProp prop{};
    CK(cudaGetDeviceProperties(&prop, 0));
    std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
    std::byte *hA, *hB, *dA, *dB;
    CK(cudaHostAlloc(reinterpret_cast<void**>(&hA), kPitch * kCols,
                     cudaHostAllocMapped | cudaHostAllocPortable));
    CK(cudaHostAlloc(reinterpret_cast<void**>(&hB), 2 * kGiB, cudaHostAllocPortable));
    std::memset(hA, 1, kPitch * kCols);
    std::memset(hB, 2, 2 * kGiB);
    CK(cudaMalloc(reinterpret_cast<void**>(&dA), kPanelBytes));
    CK(cudaMalloc(reinterpret_cast<void**>(&dB), 2 * kGiB));
    __nv_bfloat16 *gA, *gB;
    float* gC;
    CK(cudaMalloc(reinterpret_cast<void**>(&gA), 16384ULL * 32768 * 2));
    CK(cudaMalloc(reinterpret_cast<void**>(&gB), 32768ULL * 1024 * 2));
    CK(cudaMalloc(reinterpret_cast<void**>(&gC), 16384ULL * 1024 * 4));
    {
        // Pseudo-random bf16 operands in [-1, 1): GEMMs on zeros draw less power.
        std::vector<__nv_bfloat16> v(32768ULL * 1024);
        std::uint64_t x = 88172645463325252ULL;
        for (auto& e : v) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            e = __float2bfloat16(static_cast<float>(x >> 40) / static_cast<float>(1ULL << 23) - 1.0f);
        }
        for (std::uint64_t o = 0; o < 16384ULL * 32768; o += v.size())
            CK(cudaMemcpy(gA + o, v.data(), v.size() * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(gB, v.data(), v.size() * 2, cudaMemcpyHostToDevice));
    }
    cublasHandle_t blas;
    CK(cublasCreate(&blas));
    if (argc > 1 && std::strcmp(argv[1], "after") == 0)
        return after_gemms(hA, dA, blas, gA, gB, gC, prop.multiProcessorCount);
    if (argc > 1 && std::strcmp(argv[1], "huge") == 0) {
        if (std::FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r")) {
            char line[128] = {};
            if (std::fgets(line, sizeof line, f) != nullptr) std::printf("transparent_hugepage: %s", line);
            std::fclose(f);
        }
        std::printf("== cudaHostAlloc (AnonHugePages %ld MiB)\n", anon_huge_mib());
        int rc = after_gemms(hA, dA, blas, gA, gB, gC, prop.multiProcessorCount, false);
        for (const bool huge : {false, true}) {
            const long before = anon_huge_mib();
            std::byte* h = registered(kPitch * kCols, huge);
            std::printf("== mmap + cudaHostRegister, %s (AnonHugePages %ld -> %ld MiB)\n",
                        huge ? "MADV_HUGEPAGE" : "MADV_NOHUGEPAGE", before, anon_huge_mib());
            rc |= after_gemms(h, dA, blas, gA, gB, gC, prop.multiProcessorCount, false);
            CK(cudaHostUnregister(h));
        }
        return rc;
    }

    // The gather kernel copies what the 2-D copy does.
    {
        std::vector<std::byte> want(kRun), got(kRun);
        for (std::uint64_t i = 0; i < kPitch * 8; ++i) hA[i] = static_cast<std::byte>(i * 7 + 3);
        // So do the batched copies.
        for (const int method : {-16, 8, 10}) {
            CK(cudaMemset(dA, 0, kRun * 8));
            (void)run(method, hA, hB, dA, dB, 0, 0, blas, gA, gB, gC);
            for (std::uint64_t c = 0; c < 8; ++c) {
                CK(cudaMemcpy(got.data(), dA + c * kRun, kRun, cudaMemcpyDeviceToHost));
                if (std::memcmp(got.data(), hA + c * kPitch, kRun) != 0) {
                    std::printf("method %d copied column %llu wrong\n", method,
                                static_cast<unsigned long long>(c));
                    return 1;
                }
            }
        }
    }
    auto median3 = [&](int method, std::uint64_t beside, int gemms) {
        std::vector<Timing> ts;
        for (int r = 0; r < 3; ++r)
            ts.push_back(run(method, hA, hB, dA, dB, beside, gemms, blas, gA, gB, gC));
        std::sort(ts.begin(), ts.end(),
                  [](const Timing& a, const Timing& b) { return a.panel_gbs < b.panel_gbs; });
        return ts[1];
    };
    (void)median3(0, 0, 0);
    const int gemms_alone = 16;  // ~25 ms: about the panel's time
    const Timing g0 = median3(0, 0, 0);
    std::printf("%-28s %10s %12s %14s %16s\n", "panel upload (1 GiB)", "alone GB/s", "beside: GB/s",
                "contiguous GB/s", "beside GEMMs: GB/s TFLOP/s");
    // "quick": the copy calls only (contiguous, 2-D, the batched copies), no gather kernel or
    // host staging.
    const bool quick = argc > 1 && std::strcmp(argv[1], "quick") == 0;
    const std::vector<int> methods =
        quick ? std::vector<int>{0, 1, 8, 9, 10, 11}
              : std::vector<int>{0, 1, 2, 4, 8, 9, 10, 11, -8, -16, -33, -66, -132};
    for (const int method : methods) {
        const Timing alone = median3(method, 0, 0);
        const Timing beside = median3(method, 2 * kGiB, 0);
        const Timing with_gemm = median3(method, 0, gemms_alone);
        char name[64];
        if (method == 0)
            std::snprintf(name, sizeof name, "contiguous (reference)");
        else if (method >= 8)
            std::snprintf(name, sizeof name, "%s%s",
                          method <= 9 ? "batch, a copy a column" : "3-D batch, an op a chunk",
                          method % 2 == 1 ? ", overlap" : "");
        else if (method > 0)
            std::snprintf(name, sizeof name, "2-D copies, %d stream(s)", method);
        else
            std::snprintf(name, sizeof name, "gather kernel, %d blocks", -method);
        std::printf("%-28s %10.1f %12.1f %14.1f %10.1f %10.1f\n", name, alone.panel_gbs, beside.panel_gbs,
                    beside.other_gbs, with_gemm.panel_gbs, with_gemm.gemm_tflops);
    }
    std::byte* staging[32];
    for (auto& b : staging)
        CK(cudaHostAlloc(reinterpret_cast<void**>(&b), kStagedCols * kRun, cudaHostAllocPortable));
    for (const int threads : quick ? std::vector<int>{} : std::vector<int>{2, 4, 8, 16}) {
        auto staged3 = [&](std::uint64_t beside, int gemms) {
            std::vector<Timing> ts;
            for (int r = 0; r < 3; ++r)
                ts.push_back(run_staged(threads, staging, hA, hB, dA, dB, beside, gemms, blas, gA, gB, gC));
            std::sort(ts.begin(), ts.end(),
                      [](const Timing& a, const Timing& b) { return a.panel_gbs < b.panel_gbs; });
            return ts[1];
        };
        const Timing alone = staged3(0, 0);
        const Timing beside = staged3(2 * kGiB, 0);
        const Timing with_gemm = staged3(0, gemms_alone);
        char name[64];
        std::snprintf(name, sizeof name, "host-staged, %d threads", threads);
        std::printf("%-28s %10.1f %12.1f %14.1f %10.1f %10.1f\n", name, alone.panel_gbs, beside.panel_gbs,
                    beside.other_gbs, with_gemm.panel_gbs, with_gemm.gemm_tflops);
    }
    {
        // The staged panel arrives whole and in place.
        std::vector<std::byte> got(kRun);
        for (std::uint64_t c : {0ULL, 511ULL, 512ULL, 32767ULL}) {
            hA[c * kPitch] = static_cast<std::byte>(c % 251);
            hA[c * kPitch + kRun - 1] = static_cast<std::byte>(c % 241);
        }
        (void)run_staged(4, staging, hA, hB, dA, dB, 0, 0, blas, gA, gB, gC);
        for (std::uint64_t c : {0ULL, 511ULL, 512ULL, 32767ULL}) {
            CK(cudaMemcpy(got.data(), dA + c * kRun, kRun, cudaMemcpyDeviceToHost));
            if (std::memcmp(got.data(), hA + c * kPitch, kRun) != 0) {
                std::printf("host staging copied column %llu wrong\n", static_cast<unsigned long long>(c));
                return 1;
            }
        }
    }
    const Timing gemm_alone = [&] {
        std::vector<Timing> ts;
        for (int r = 0; r < 3; ++r) {
            Streams st(1);
            cudaEvent_t a, b;
            CK(cudaEventCreate(&a));
            CK(cudaEventCreate(&b));
            CK(cublasSetStream(blas, st.s[0]));
            CK(cudaEventRecord(a, st.s[0]));
            const float one = 1, zero = 0;
            for (int g = 0; g < gemms_alone; ++g)
                CK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, 16384, 1024, 32768, &one, gA, CUDA_R_16BF,
                                16384, gB, CUDA_R_16BF, 32768, &zero, gC, CUDA_R_32F, 16384,
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
            CK(cudaEventRecord(b, st.s[0]));
            CK(cudaDeviceSynchronize());
            Timing t;
            t.gemm_tflops = 2.0 * 16384 * 1024 * 32768 * gemms_alone / seconds(a, b) * 1e-12;
            ts.push_back(t);
        }
        std::sort(ts.begin(), ts.end(),
                  [](const Timing& a, const Timing& b) { return a.gemm_tflops < b.gemm_tflops; });
        return ts[1];
    }();
    std::printf(
        "GEMMs alone: %.1f TFLOP/s (%d of 16384x1024x32768 bf16, f32 C); contiguous 1 GiB alone %.1f GB/s\n",
        gemm_alone.gemm_tflops, gemms_alone, g0.panel_gbs);
    return 0;
}
