// gemm_f32.comp — one GEMM tile, column-major as in BLAS:
//   C[m×n] = alpha · op(A)[m×k] · op(B)[k×n] + beta · C     (beta == 0: C is not read)
// A workgroup of 16×16 threads computes a 64×64 block of C, 4×4 per thread, staging
// 16-deep slices of op(A) and op(B) in shared memory. Each binding starts at an
// offset aligned to minStorageBufferOffsetAlignment; *_off are the element offsets
// of the matrices from there.
#version 450

layout(local_size_x = 16, local_size_y = 16) in;

layout(set = 0, binding = 0) readonly buffer A { float a[]; };
layout(set = 0, binding = 1) readonly buffer B { float b[]; };
layout(set = 0, binding = 2) buffer C { float c[]; };

layout(push_constant) uniform Params {
    uint m, n, k;
    uint lda, ldb, ldc;
    uint a_off, b_off, c_off;
    uint trans_a, trans_b;
    float alpha, beta;
} p;

const uint BM = 64;
const uint BN = 64;
const uint BK = 16;

shared float as[BK][BM];
shared float bs[BK][BN];

float load_a(uint i, uint l) {  // op(A)(i, l), 0 outside
    if (i >= p.m || l >= p.k) return 0.0;
    return p.trans_a != 0u ? a[p.a_off + l + i * p.lda] : a[p.a_off + i + l * p.lda];
}

float load_b(uint l, uint j) {  // op(B)(l, j), 0 outside
    if (l >= p.k || j >= p.n) return 0.0;
    return p.trans_b != 0u ? b[p.b_off + j + l * p.ldb] : b[p.b_off + l + j * p.ldb];
}

void main() {
    const uint tx = gl_LocalInvocationID.x;
    const uint ty = gl_LocalInvocationID.y;
    const uint lane = ty * 16u + tx;
    const uint i0 = gl_WorkGroupID.x * BM;
    const uint j0 = gl_WorkGroupID.y * BN;

    float acc[4][4];
    for (uint r = 0u; r < 4u; ++r)
        for (uint s = 0u; s < 4u; ++s) acc[r][s] = 0.0;

    for (uint l0 = 0u; l0 < p.k; l0 += BK) {
        // 1024 elements of each slice, 4 per thread.
        for (uint e = 0u; e < 4u; ++e) {
            const uint idx = lane + e * 256u;
            const uint row = idx % BM;  // along m (A) or n (B)
            const uint kk = idx / BM;
            as[kk][row] = load_a(i0 + row, l0 + kk);
            bs[kk][row] = load_b(l0 + kk, j0 + row);
        }
        barrier();
        for (uint kk = 0u; kk < BK; ++kk) {
            float av[4];
            float bv[4];
            for (uint r = 0u; r < 4u; ++r) av[r] = as[kk][tx + 16u * r];
            for (uint s = 0u; s < 4u; ++s) bv[s] = bs[kk][ty + 16u * s];
            for (uint r = 0u; r < 4u; ++r)
                for (uint s = 0u; s < 4u; ++s) acc[r][s] += av[r] * bv[s];
        }
        barrier();
    }

    for (uint s = 0u; s < 4u; ++s) {
        const uint j = j0 + ty + 16u * s;
        if (j >= p.n) continue;
        for (uint r = 0u; r < 4u; ++r) {
            const uint i = i0 + tx + 16u * r;
            if (i >= p.m) continue;
            const uint at = p.c_off + i + j * p.ldc;
            const float v = p.alpha * acc[r][s];
            c[at] = p.beta == 0.0 ? v : v + p.beta * c[at];
        }
    }
}
