// gemm.comp — one GEMM tile, column-major as in BLAS:
//   C[m×n] = alpha · op(A)[m×k] · op(B)[k×n] + beta · C     (beta == 0: C is not read)
// Built four times (src/backends/vulkan/CMakeLists.txt): TYPE_F32 (float throughout),
// TYPE_BF16 and TYPE_F16 (16-bit inputs through 16-bit storage, widened exactly to
// float, float accumulation and C) and TYPE_F64 (double throughout, shaderFloat64).
// A workgroup of WG×WG threads computes a BM×BM block of C (BM = WG·TPT), TPT×TPT per
// thread, staging BK-deep slices of op(A) and op(B) in shared memory; WG, TPT and BK
// are specialization constants (defaults 16, 4, 16: 64×64 blocks), and so is CONTIG:
// whether a thread's TPT rows (and columns) are neighbours (its shared-memory reads
// then merge into vector loads) or WG apart. Every loop over them is unrolled (the k
// loop is not). Each binding
// starts at an offset aligned to minStorageBufferOffsetAlignment; *_off are the
// element offsets of the matrices from there.
#version 450
#extension GL_EXT_control_flow_attributes : require
#if defined(TYPE_BF16) || defined(TYPE_F16)
#extension GL_EXT_shader_16bit_storage : require
#endif

#if defined(TYPE_F64)
#define T double
#define IN double
#define TO_T(x) (x)
#elif defined(TYPE_BF16)
#define T float
#define IN uint16_t
#define TO_T(x) uintBitsToFloat(uint(x) << 16)
#elif defined(TYPE_F16)
#define T float
#define IN uint16_t
#define TO_T(v) unpackHalf2x16(uint(v)).x
#else
#define T float
#define IN float
#define TO_T(x) (x)
#endif

layout(constant_id = 0) const uint WG = 16;
layout(constant_id = 1) const uint TPT = 4;
layout(constant_id = 2) const uint BK = 16;
layout(constant_id = 3) const bool CONTIG = false;
const uint MAX_TPT = 8u;  // the largest TPT (checked when the device opens)
layout(local_size_x_id = 0, local_size_y_id = 0) in;

layout(set = 0, binding = 0) readonly buffer A { IN a[]; };
layout(set = 0, binding = 1) readonly buffer B { IN b[]; };
layout(set = 0, binding = 2) buffer C { T c[]; };

layout(push_constant) uniform Params {
    uint m, n, k;
    uint lda, ldb, ldc;
    uint a_off, b_off, c_off;
    uint trans_a, trans_b;
    uint pad;  // alpha at byte 48, aligned for a double
    T alpha, beta;
} p;

const uint BM = WG * TPT;
const uint BN = WG * TPT;
const uint LOADS = BM * BK / (WG * WG);  // elements of each slice one thread stages

// Four padding columns: staging stores that run along k (a transposed A, an
// untransposed B) then spread over the banks, and rows stay 16-byte aligned.
shared T as[BK][BM + 4];
shared T bs[BK][BN + 4];

uint own(uint t, uint r) { return CONTIG ? t * TPT + r : t + WG * r; }  // row or column in the block

T load_a(uint i, uint l) {  // op(A)(i, l), 0 outside
    if (i >= p.m || l >= p.k) return T(0);
    // Converted in each branch: selecting between 16-bit values needs Int16 arithmetic.
    return p.trans_a != 0u ? TO_T(a[p.a_off + l + i * p.lda]) : TO_T(a[p.a_off + i + l * p.lda]);
}

T load_b(uint l, uint j) {  // op(B)(l, j), 0 outside
    if (l >= p.k || j >= p.n) return T(0);
    return p.trans_b != 0u ? TO_T(b[p.b_off + j + l * p.ldb]) : TO_T(b[p.b_off + l + j * p.ldb]);
}

void main() {
    const uint tx = gl_LocalInvocationID.x;
    const uint ty = gl_LocalInvocationID.y;
    const uint lane = ty * WG + tx;
    const uint i0 = gl_WorkGroupID.x * BM;
    const uint j0 = gl_WorkGroupID.y * BN;

    // Fixed-size arrays (TPT ≤ MAX_TPT) and unrolled loops, so that every index is a
    // constant once TPT is specialized. On NVIDIA's driver 8×8 per thread still runs at
    // a tenth of 4×4's rate (2.4 against 20.5 TFLOP/s on an H200), as it did with
    // arrays sized by the specialization constant. gemm_v4.comp, whose per-thread state
    // is named vec4s instead of arrays, runs 8×8 at 39 TFLOP/s there: f32 uses it by
    // default, and this shader serves bf16, f16 and f64 at 4×4 (docs/backends.md).
    T acc[MAX_TPT][MAX_TPT];
    [[unroll]] for (uint r = 0u; r < TPT; ++r)
        [[unroll]] for (uint s = 0u; s < TPT; ++s) acc[r][s] = T(0);

    for (uint l0 = 0u; l0 < p.k; l0 += BK) {
        // Neighbouring threads load neighbouring elements of memory: along m for an
        // untransposed A, along k for a transposed A and for an untransposed B.
        [[unroll]] for (uint e = 0u; e < LOADS; ++e) {
            const uint idx = lane + e * WG * WG;
            const bool a_along_m = p.trans_a == 0u;
            const uint ra = a_along_m ? idx % BM : idx / BK;
            const uint ka = a_along_m ? idx / BM : idx % BK;
            as[ka][ra] = load_a(i0 + ra, l0 + ka);
            const bool b_along_k = p.trans_b == 0u;
            const uint rb = b_along_k ? idx / BK : idx % BN;
            const uint kb = b_along_k ? idx % BK : idx / BN;
            bs[kb][rb] = load_b(l0 + kb, j0 + rb);
        }
        barrier();
        // The k loop stays a loop: unrolled as well, NVIDIA's driver took 40 s to build
        // the 8×8 pipeline (20 s without), and no blocking ran faster for it.
        [[dont_unroll]] for (uint kk = 0u; kk < BK; ++kk) {
            T av[MAX_TPT];
            T bv[MAX_TPT];
            [[unroll]] for (uint r = 0u; r < TPT; ++r) av[r] = as[kk][own(tx, r)];
            [[unroll]] for (uint s = 0u; s < TPT; ++s) bv[s] = bs[kk][own(ty, s)];
            [[unroll]] for (uint r = 0u; r < TPT; ++r)
                [[unroll]] for (uint s = 0u; s < TPT; ++s) acc[r][s] += av[r] * bv[s];
        }
        barrier();
    }

    [[unroll]] for (uint s = 0u; s < TPT; ++s) {
        const uint j = j0 + own(ty, s);
        if (j >= p.n) continue;
        [[unroll]] for (uint r = 0u; r < TPT; ++r) {
            const uint i = i0 + own(tx, r);
            if (i >= p.m) continue;
            const uint at = p.c_off + i + j * p.ldc;
            const T v = p.alpha * acc[r][s];
            c[at] = p.beta == T(0) ? v : v + p.beta * c[at];
        }
    }
}
