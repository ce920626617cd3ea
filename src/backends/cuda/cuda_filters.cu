// cuda_filters.cu — the CUDA backend's filter kernels (see cuda_filters.hpp).
//
// Each output sample is formed by exactly the sequence cpu_filters.cpp documents:
//
//   SeparableRow     acc = w[0]·x[e];  acc = acc + w[t]·x[e + t·step]      t = 1 .. 2r
//   SeparableColumn  acc = w[0]·x[y];  acc = acc + w[t]·x[y + t]           t = 1 .. 2r
//   Conv2D           acc = w[0]·x(0,0); acc = acc + w[dy·side+dx]·x(dy,dx), dy outer, dx inner
//   SobelMagnitude   gx = ((a2 − a0) + 2·(b2 − b0)) + (c2 − c0)
//                    gy = ((c0 + 2·c1) + c2) − ((a0 + 2·a1) + a2),  sqrt(gx·gx + gy·gy)
//
// with every product, sum and square root rounded on its own (the _rn intrinsics
// below are never contracted into FMAs; the file is also built with -fmad=false),
// and integer outputs clamped to [0, max] (NaN → 0) and rounded to nearest even by
// adding and subtracting 2^23. So the CUDA and CPU backends agree bit for bit, and a
// tile's position never changes a sample.
//
// Two kernels: the usual one stages the input tile and its halo in shared memory
// (converted to float once) together with the weights, then computes from there; a
// fallback reads global memory directly, for halos too wide for shared memory. One
// kernel serves every op and type (the op and types are uniform per launch), which
// keeps this file to two instantiations: compile time on small CI machines matters
// more than the last few percent here, as the tiles are bound by PCIe transfers.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cuda_filters.hpp"

namespace outcore::cuda {

namespace {

constexpr int kBlockX = 32;
constexpr int kBlockY = 8;
constexpr int kThreads = kBlockX * kBlockY;
constexpr int kMaxGridY = 65535;
/// 2^23: adding and subtracting it rounds a float in [0, 2^23] to an integer, ties to even.
constexpr float kRoundBias = 8388608.0F;

__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float sub(float a, float b) { return __fsub_rn(a, b); }

/// Input samples straight from global memory, converted to float.
struct GlobalSource {
    const char* base;
    std::int64_t stride;
    PixelKind type;

    __device__ __forceinline__ float operator()(std::int64_t y, std::int64_t x) const {
        const char* row = base + y * stride;
        switch (type) {
            case PixelKind::U8: return static_cast<float>(reinterpret_cast<const std::uint8_t*>(row)[x]);
            case PixelKind::U16: return static_cast<float>(reinterpret_cast<const std::uint16_t*>(row)[x]);
            default: return reinterpret_cast<const float*>(row)[x];
        }
    }
};

/// Input samples from a tile staged in shared memory (coordinates relative to it).
struct SharedSource {
    const float* tile;
    int pitch;

    __device__ __forceinline__ float operator()(std::int64_t y, std::int64_t x) const {
        return tile[y * pitch + x];
    }
};

/// One output sample at (y, e) of the source's coordinates: the documented sequence.
template <class Source>
__device__ __forceinline__ float filter_sample(FilterKind op, const Source& x, const float* w, std::int64_t y,
                                               std::int64_t e, int step, int radius) {
    const int side = 2 * radius + 1;
    switch (op) {
        case FilterKind::SeparableRow: {
            float acc = mul(w[0], x(y, e));
            for (int t = 1; t < side; ++t)
                acc = add(acc, mul(w[t], x(y, e + static_cast<std::int64_t>(t) * step)));
            return acc;
        }
        case FilterKind::SeparableColumn: {
            float acc = mul(w[0], x(y, e));
            for (int t = 1; t < side; ++t) acc = add(acc, mul(w[t], x(y + t, e)));
            return acc;
        }
        case FilterKind::Conv2D: {
            float acc = mul(w[0], x(y, e));
            for (int dy = 0; dy < side; ++dy) {
                for (int dx = dy == 0 ? 1 : 0; dx < side; ++dx) {
                    acc =
                        add(acc, mul(w[dy * side + dx], x(y + dy, e + static_cast<std::int64_t>(dx) * step)));
                }
            }
            return acc;
        }
        default: {  // Sobel: rows a, b, c at y, y+1, y+2; columns 0, 1, 2 at e, e+step, e+2·step
            const std::int64_t e1 = e + step;
            const std::int64_t e2 = e + 2 * static_cast<std::int64_t>(step);
            const float a0 = x(y, e), a1 = x(y, e1), a2 = x(y, e2);
            const float b0 = x(y + 1, e), b2 = x(y + 1, e2);
            const float c0 = x(y + 2, e), c1 = x(y + 2, e1), c2 = x(y + 2, e2);
            const float gx = add(add(sub(a2, a0), mul(2.0F, sub(b2, b0))), sub(c2, c0));
            const float gy = sub(add(add(c0, mul(2.0F, c1)), c2), add(add(a0, mul(2.0F, a1)), a2));
            return __fsqrt_rn(add(mul(gx, gx), mul(gy, gy)));
        }
    }
}

/// Clamps to [0, hi] (NaN → 0: both comparisons are false for NaN), rounds to nearest even.
__device__ __forceinline__ float round_clamped(float v, float hi) {
    float c = v > 0.0F ? v : 0.0F;
    c = c < hi ? c : hi;
    return sub(add(c, kRoundBias), kRoundBias);
}

__device__ __forceinline__ void store_sample(char* base, std::int64_t stride, PixelKind type, std::int64_t y,
                                             std::int64_t e, float v) {
    char* row = base + y * stride;
    switch (type) {
        case PixelKind::U8:
            reinterpret_cast<std::uint8_t*>(row)[e] =
                static_cast<std::uint8_t>(static_cast<std::int32_t>(round_clamped(v, 255.0F)));
            break;
        case PixelKind::U16:
            reinterpret_cast<std::uint16_t*>(row)[e] =
                static_cast<std::uint16_t>(static_cast<std::int32_t>(round_clamped(v, 65535.0F)));
            break;
        default: reinterpret_cast<float*>(row)[e] = v; break;
    }
}

__device__ __forceinline__ int halo_rows(FilterKind op, int radius) {
    return op == FilterKind::SeparableRow ? 0 : radius;
}
__device__ __forceinline__ int halo_elems(FilterKind op, int radius, int step) {
    return op == FilterKind::SeparableColumn ? 0 : radius * step;
}

/// Output samples one block computes per step: `rows` × `elems`.
struct TileShape {
    int rows;
    int elems;
};

// Shared memory: the weights (taps floats), then the input tile with its halo,
// (rows + 2·halo_rows) × (elems + 2·halo_elems) floats. Blocks step down the image
// (grid-stride in y) so any number of rows fits the grid.
__global__ void __launch_bounds__(kThreads) filter_shared_kernel(const FilterLaunch p, const TileShape tile) {
    extern __shared__ float shared[];
    float* w = shared;
    float* s = shared + p.taps;
    const int tid = static_cast<int>(threadIdx.y) * kBlockX + static_cast<int>(threadIdx.x);
    for (int i = tid; i < p.taps; i += kThreads)
        w[i] = p.weights_buffer != nullptr ? p.weights_buffer[i] : p.weights[i];

    const int pitch = tile.elems + 2 * halo_elems(p.op, p.radius, p.step);
    const int in_tile_rows = tile.rows + 2 * halo_rows(p.op, p.radius);
    const std::int64_t e0 = static_cast<std::int64_t>(blockIdx.x) * tile.elems;
    const GlobalSource in{static_cast<const char*>(p.in), p.in_stride, p.in_type};
    const SharedSource staged{s, pitch};
    const std::int64_t row_step = static_cast<std::int64_t>(gridDim.y) * tile.rows;
    for (std::int64_t row0 = static_cast<std::int64_t>(blockIdx.y) * tile.rows; row0 < p.out_rows;
         row0 += row_step) {
        __syncthreads();  // the weights are written; the previous tile is no longer read
        for (int r = static_cast<int>(threadIdx.y); r < in_tile_rows; r += kBlockY) {
            const std::int64_t y = row0 + r;
            for (int c = static_cast<int>(threadIdx.x); c < pitch; c += kBlockX) {
                const std::int64_t x = e0 + c;
                s[r * pitch + c] = y < p.in_rows && x < p.in_elems ? in(y, x) : 0.0F;
            }
        }
        __syncthreads();
        for (int r = static_cast<int>(threadIdx.y); r < tile.rows && row0 + r < p.out_rows; r += kBlockY) {
            for (int c = static_cast<int>(threadIdx.x); c < tile.elems && e0 + c < p.out_elems;
                 c += kBlockX) {
                const float v = filter_sample(p.op, staged, w, r, c, p.step, p.radius);
                store_sample(static_cast<char*>(p.out), p.out_stride, p.out_type, row0 + r, e0 + c, v);
            }
        }
    }
}

// One thread per output sample, reading global memory; inline weights are staged in
// shared memory (at most kMaxInlineTaps floats), a weights buffer is read in place.
__global__ void __launch_bounds__(kThreads) filter_global_kernel(const FilterLaunch p) {
    extern __shared__ float shared[];
    const float* w = p.weights_buffer;
    if (w == nullptr) {
        const int tid = static_cast<int>(threadIdx.y) * kBlockX + static_cast<int>(threadIdx.x);
        for (int i = tid; i < p.taps; i += kThreads) shared[i] = p.weights[i];
        __syncthreads();
        w = shared;
    }
    const GlobalSource in{static_cast<const char*>(p.in), p.in_stride, p.in_type};
    const std::int64_t y_step = static_cast<std::int64_t>(gridDim.y) * kBlockY;
    const std::int64_t e_step = static_cast<std::int64_t>(gridDim.x) * kBlockX;
    for (std::int64_t y = static_cast<std::int64_t>(blockIdx.y) * kBlockY + threadIdx.y; y < p.out_rows;
         y += y_step) {
        for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * kBlockX + threadIdx.x; e < p.out_elems;
             e += e_step) {
            store_sample(static_cast<char*>(p.out), p.out_stride, p.out_type, y, e,
                         filter_sample(p.op, in, w, y, e, p.step, p.radius));
        }
    }
}

/// Tile shapes to try, largest first; each is a multiple of the block's 32 × 8.
/// Wide rows for the row pass (its halo is horizontal), tall ones for the column
/// pass, square-ish for the 2-D kernels.
struct ShapeList {
    const TileShape* shapes;
    int count;
};

constexpr TileShape kRowShapes[] = {{8, 512}, {8, 256}, {1, 256}, {1, 32}};
constexpr TileShape kColumnShapes[] = {{64, 64}, {32, 64}, {16, 32}, {8, 32}, {1, 32}};
constexpr TileShape kConvShapes[] = {{32, 64}, {16, 64}, {8, 32}, {1, 32}};
constexpr TileShape kSobelShapes[] = {{32, 128}, {8, 32}};

ShapeList shapes_for(FilterKind op) {
    switch (op) {
        case FilterKind::SeparableRow:
            return {kRowShapes, static_cast<int>(sizeof kRowShapes / sizeof kRowShapes[0])};
        case FilterKind::SeparableColumn:
            return {kColumnShapes, static_cast<int>(sizeof kColumnShapes / sizeof kColumnShapes[0])};
        case FilterKind::Conv2D:
            return {kConvShapes, static_cast<int>(sizeof kConvShapes / sizeof kConvShapes[0])};
        default: return {kSobelShapes, static_cast<int>(sizeof kSobelShapes / sizeof kSobelShapes[0])};
    }
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// Area pixels [r0, r1) × [c0, c1), all outside the image: each takes the pixel its
/// row and column map to (inside the image, so never one this kernel writes) or zero.
__global__ void pad_edges_kernel(char* base, const EdgePadding a, std::int64_t r0, std::int64_t r1,
                                 std::int64_t c0, std::int64_t c1) {
    const std::int64_t k = c0 + static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (k >= c1) return;
    const auto pixel = static_cast<std::int64_t>(a.pixel_bytes);
    const auto stride = static_cast<std::int64_t>(a.row_stride);
    const std::int64_t sx = edge_source_index(a.left + k, static_cast<std::int64_t>(a.image_cols), a.edge);
    for (std::int64_t i = r0 + static_cast<std::int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; i < r1;
         i += static_cast<std::int64_t>(gridDim.y) * blockDim.y) {
        const std::int64_t sy = edge_source_index(a.top + i, static_cast<std::int64_t>(a.image_rows), a.edge);
        char* to = base + i * stride + k * pixel;
        if (sx < 0 || sy < 0) {
            for (std::int64_t b = 0; b < pixel; ++b) to[b] = 0;
        } else {
            const char* from = base + (sy - a.top) * stride + (sx - a.left) * pixel;
            for (std::int64_t b = 0; b < pixel; ++b) to[b] = from[b];
        }
    }
}

}  // namespace

cudaError_t prepare_filter_kernels(int max_shared_bytes) {
    return cudaFuncSetAttribute(filter_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                max_shared_bytes);
}

cudaError_t launch_filter(const FilterLaunch& launch, cudaStream_t stream, int max_shared_bytes,
                          bool force_global) {
    if (launch.out_rows <= 0 || launch.out_elems <= 0) return cudaSuccess;
    const dim3 block(kBlockX, kBlockY);
    const std::int64_t hr = launch.op == FilterKind::SeparableRow ? 0 : launch.radius;
    const std::int64_t he =
        launch.op == FilterKind::SeparableColumn ? 0 : static_cast<std::int64_t>(launch.radius) * launch.step;
    if (!force_global) {
        const ShapeList list = shapes_for(launch.op);
        for (int i = 0; i < list.count; ++i) {
            const TileShape shape = list.shapes[i];
            const std::int64_t floats = launch.taps + (shape.rows + 2 * hr) * (shape.elems + 2 * he);
            if (floats * static_cast<std::int64_t>(sizeof(float)) > max_shared_bytes) continue;
            const dim3 grid(static_cast<unsigned>(ceil_div(launch.out_elems, shape.elems)),
                            static_cast<unsigned>(
                                std::min<std::int64_t>(ceil_div(launch.out_rows, shape.rows), kMaxGridY)));
            // Clears an earlier, unrelated error so the check below sees this launch's.
            (void)cudaGetLastError();
            filter_shared_kernel<<<grid, block, static_cast<std::size_t>(floats) * sizeof(float), stream>>>(
                launch, shape);
            return cudaGetLastError();
        }
    }
    const dim3 grid(
        static_cast<unsigned>(std::min<std::int64_t>(ceil_div(launch.out_elems, kBlockX), 1 << 30)),
        static_cast<unsigned>(std::min<std::int64_t>(ceil_div(launch.out_rows, kBlockY), kMaxGridY)));
    const std::size_t shared_bytes =
        launch.weights_buffer == nullptr ? static_cast<std::size_t>(launch.taps) * sizeof(float) : 0;
    (void)cudaGetLastError();
    filter_global_kernel<<<grid, block, shared_bytes, stream>>>(launch);
    return cudaGetLastError();
}

cudaError_t launch_pad_edges(void* base, const EdgePadding& area, cudaStream_t stream) {
    const auto rows = static_cast<std::int64_t>(area.rows);
    const auto cols = static_cast<std::int64_t>(area.cols);
    // The area's rows and columns inside the image, in area coordinates.
    const std::int64_t in_r0 = std::max<std::int64_t>(0, -area.top);
    const std::int64_t in_r1 = std::min(rows, static_cast<std::int64_t>(area.image_rows) - area.top);
    const std::int64_t in_c0 = std::max<std::int64_t>(0, -area.left);
    const std::int64_t in_c1 = std::min(cols, static_cast<std::int64_t>(area.image_cols) - area.left);
    // Rows above and below (full width), then columns left and right of the inside rows.
    const std::int64_t rects[4][4] = {
        {0, in_r0, 0, cols}, {in_r1, rows, 0, cols}, {in_r0, in_r1, 0, in_c0}, {in_r0, in_r1, in_c1, cols}};
    const dim3 block(kBlockX, kBlockY);
    (void)cudaGetLastError();
    for (const auto& r : rects) {
        if (r[0] >= r[1] || r[2] >= r[3]) continue;
        const dim3 grid(
            static_cast<unsigned>(ceil_div(r[3] - r[2], kBlockX)),
            static_cast<unsigned>(std::min<std::int64_t>(ceil_div(r[1] - r[0], kBlockY), kMaxGridY)));
        pad_edges_kernel<<<grid, block, 0, stream>>>(static_cast<char*>(base), area, r[0], r[1], r[2], r[3]);
        const cudaError_t status = cudaGetLastError();
        if (status != cudaSuccess) return status;
    }
    return cudaSuccess;
}

}  // namespace outcore::cuda
