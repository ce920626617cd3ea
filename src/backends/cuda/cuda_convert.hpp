// cuda_convert.hpp — the CUDA conversion kernel's launch interface (private to the CUDA
// backend; cuda_kernels.cpp validates the arguments, Kernels::convert the views).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace outcore::cuda {

enum class FloatKind : std::int32_t { F32, BF16, F16 };

/// Enqueues out[i] = in[i] converted, i < count, on `stream` (the stream's device must be
/// current): f32 to bf16 or f16 rounds to nearest even (__float2bfloat16_rn,
/// __float2half_rn), bf16 or f16 to f32 is exact. One of `from` and `to` is F32. Returns
/// the launch status.
[[nodiscard]] cudaError_t launch_convert(FloatKind from, FloatKind to, const void* in, void* out,
                                         std::uint64_t count, cudaStream_t stream);

}  // namespace outcore::cuda
