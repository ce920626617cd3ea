// bench/probe_fill.cuh — fill<T>(x, n): the GEMM probes' operands (bench/*_probe.cu), element i a
// hash of i mapped to [-1, 1) as float or bf16. Pseudo-random, not zeros: a GPU at its power limit
// runs GEMMs on zeros faster, which would flatter every shape.
#pragma once

#include <cstdint>

template <typename T>
__global__ void fill(T* x, std::uint64_t n) {
    for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n;
         i += std::uint64_t{gridDim.x} * blockDim.x) {
        std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761U ^ static_cast<std::uint32_t>(i >> 32);
        h ^= h >> 15;
        h *= 2246822519U;
        h ^= h >> 13;
        x[i] = static_cast<T>(static_cast<float>(h) * (2.0F / 4294967296.0F) - 1.0F);
    }
}
