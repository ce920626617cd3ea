// cuda_convert.cu — f32 ↔ bf16/f16 over a packed range (cuda_convert.hpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "cuda_convert.hpp"

namespace outcore::cuda {

namespace {

constexpr int kThreads = 256;
constexpr std::uint64_t kMaxBlocks = 65535;

template <typename From, typename To, typename Op>
__global__ void convert_kernel(const From* in, To* out, std::uint64_t count, Op op) {
    const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
         i += stride)
        out[i] = op(in[i]);
}

struct ToBf16 {
    __device__ __nv_bfloat16 operator()(float v) const { return __float2bfloat16_rn(v); }
};
struct ToF16 {
    __device__ __half operator()(float v) const { return __float2half_rn(v); }
};
struct FromBf16 {
    __device__ float operator()(__nv_bfloat16 v) const { return __bfloat162float(v); }
};
struct FromF16 {
    __device__ float operator()(__half v) const { return __half2float(v); }
};

template <typename From, typename To, typename Op>
cudaError_t launch(const void* in, void* out, std::uint64_t count, cudaStream_t stream) {
    const std::uint64_t blocks = std::min<std::uint64_t>((count + kThreads - 1) / kThreads, kMaxBlocks);
    (void)cudaGetLastError();
    convert_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        static_cast<const From*>(in), static_cast<To*>(out), count, Op{});
    return cudaGetLastError();
}

}  // namespace

cudaError_t launch_convert(FloatKind from, FloatKind to, const void* in, void* out, std::uint64_t count,
                           cudaStream_t stream) {
    if (count == 0) return cudaSuccess;
    if (from == FloatKind::F32 && to == FloatKind::BF16)
        return launch<float, __nv_bfloat16, ToBf16>(in, out, count, stream);
    if (from == FloatKind::F32 && to == FloatKind::F16)
        return launch<float, __half, ToF16>(in, out, count, stream);
    if (from == FloatKind::BF16 && to == FloatKind::F32)
        return launch<__nv_bfloat16, float, FromBf16>(in, out, count, stream);
    if (from == FloatKind::F16 && to == FloatKind::F32)
        return launch<__half, float, FromF16>(in, out, count, stream);
    return cudaErrorInvalidValue;
}

}  // namespace outcore::cuda
