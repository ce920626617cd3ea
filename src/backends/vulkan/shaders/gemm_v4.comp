// gemm_v4.comp — one float32 GEMM tile, column-major as in BLAS, the way fast hand-written
// SGEMMs block it:
//   C[m×n] = alpha · op(A)[m×k] · op(B)[k×n] + beta · C     (beta == 0: C is not read)
// Same bindings and push constants as gemm.comp (VulkanKernels picks one of the two by
// GemmTile::vectorized). A workgroup of 16×16 threads computes a 128×128 block of C,
// 8×8 per thread as 2×2 sub-blocks of 4×4: thread (tx, ty) owns rows tx·4..tx·4+3 and
// 64+tx·4..64+tx·4+3, and likewise columns by ty. Why so, rather than gemm.comp's
// arrays: on NVIDIA's driver gemm.comp at 8×8 per thread ran at a tenth of its 4×4
// rate, and per-thread arrays (acc, av, bv) that land in local memory are the first
// suspect. Here no per-thread value is an array: 16 vec4 accumulators, vec4 fragments,
// vec4 prefetch registers, all named (macros below). Shared memory holds vec4 too, so
// each k step is four 16-byte shared loads per thread for 64 FMAs.
//
// BK (specialization constant 2, as in gemm.comp; 8 or 16) is the k depth of a slice.
// Slices are double-buffered: the next slice's global loads are issued into registers
// before this slice's FMAs and stored into the other stage after them, so one barrier
// per slice suffices and the loads' latency hides behind the arithmetic.
#version 450
#extension GL_EXT_control_flow_attributes : require

layout(constant_id = 2) const uint BK = 8;  // 8 or 16 (checked when the device opens)
layout(local_size_x = 16, local_size_y = 16) in;

// Each matrix twice, as floats and as vec4s (the same binding): a quad of four
// neighbours in memory is one 16-byte load or store where the offset and the leading
// dimension make it 16-byte aligned.
layout(set = 0, binding = 0) readonly buffer A { float a[]; };
layout(set = 0, binding = 0) readonly buffer A4 { vec4 a4[]; };
layout(set = 0, binding = 1) readonly buffer B { float b[]; };
layout(set = 0, binding = 1) readonly buffer B4 { vec4 b4[]; };
layout(set = 0, binding = 2) buffer C { float c[]; };
layout(set = 0, binding = 2) buffer C4 { vec4 c4[]; };

layout(push_constant) uniform Params {
    uint m, n, k;
    uint lda, ldb, ldc;
    uint a_off, b_off, c_off;
    uint trans_a, trans_b;
    uint pad;  // alpha at byte 48, as gemm.comp's (aligned for its double variant)
    float alpha, beta;
} p;

const uint BM = 128u;                 // rows (and columns) of C per workgroup
const uint QUADS = BM * BK / 4u / 256u;  // quads of each slice one thread stages: BK / 8
const uint KQ = BK / 4u;              // quads along k in one column of a k-contiguous slice

// Two stages of BK rows each; row r holds op(A)(i0 + 4q .. i0 + 4q + 3, l) at quad q
// (and bs op(B)(l, j0 + 4q ..)), for quad q stored at column q ^ swz(l). The XOR swizzle
// spreads the transposing stores of k-contiguous slices (an untransposed B, a
// transposed A) over all 32 banks, as four padding floats per row would, without
// the padding: 16-deep slices then still fit 32 KiB (lavapipe's limit). Reads stay
// conflict-free, since every thread of a k step reads the same row.
shared vec4 as[2u * BK][32];
shared vec4 bs[2u * BK][32];

uint swz(uint l) { return (l >> 2u) * (32u / BK); }  // 0 or 4 (BK 8); 0, 2, 4, 6 (BK 16)

// Whether quads of A, B, C start on 16 bytes: the same for every quad of a dispatch.
bool a_quads() { return ((p.a_off | p.lda) & 3u) == 0u; }
bool b_quads() { return ((p.b_off | p.ldb) & 3u) == 0u; }
bool c_quads() { return ((p.c_off | p.ldc) & 3u) == 0u; }

// Elements (r .. r+3, col) of A's memory (rows × cols column-major from a_off), 0 outside.
vec4 quad_a(uint r, uint col, uint rows, uint cols) {
    if (col >= cols) return vec4(0.0);
    const uint at = p.a_off + r + col * p.lda;
    if (r + 3u < rows && a_quads()) return a4[at >> 2u];
    vec4 v = vec4(0.0);
    if (r < rows) v.x = a[at];
    if (r + 1u < rows) v.y = a[at + 1u];
    if (r + 2u < rows) v.z = a[at + 2u];
    if (r + 3u < rows) v.w = a[at + 3u];
    return v;
}

vec4 quad_b(uint r, uint col, uint rows, uint cols) {
    if (col >= cols) return vec4(0.0);
    const uint at = p.b_off + r + col * p.ldb;
    if (r + 3u < rows && b_quads()) return b4[at >> 2u];
    vec4 v = vec4(0.0);
    if (r < rows) v.x = b[at];
    if (r + 1u < rows) v.y = b[at + 1u];
    if (r + 2u < rows) v.z = b[at + 2u];
    if (r + 3u < rows) v.w = b[at + 3u];
    return v;
}

// Thread `lane`'s quad e (< QUADS) of a slice. Neighbouring threads read neighbouring
// quads of memory: along m (an untransposed A: quad idx % 32 of column idx / 32) or
// along k (a transposed A: quad idx % KQ of row idx / KQ).
vec4 fetch_a(uint lane, uint e, uint i0, uint l0) {
    const uint idx = lane + e * 256u;
    if (p.trans_a == 0u) return quad_a(i0 + 4u * (idx % 32u), l0 + idx / 32u, p.m, p.k);
    return quad_a(l0 + 4u * (idx % KQ), i0 + idx / KQ, p.k, p.m);
}

// op(B)(l, j) is B's memory (l, j) untransposed (along k), (j, l) transposed (along n).
vec4 fetch_b(uint lane, uint e, uint j0, uint l0) {
    const uint idx = lane + e * 256u;
    if (p.trans_b != 0u) return quad_b(j0 + 4u * (idx % 32u), l0 + idx / 32u, p.n, p.k);
    return quad_b(l0 + 4u * (idx % KQ), j0 + idx / KQ, p.k, p.n);
}

// Where fetch_a's quad goes in stage `st` (its first row): whole along m, one element
// into each of four k rows along k.
void stash_a(uint lane, uint e, uint st, vec4 v) {
    const uint idx = lane + e * 256u;
    if (p.trans_a == 0u) {
        const uint l = idx / 32u;
        as[st + l][(idx % 32u) ^ swz(l)] = v;
        return;
    }
    const uint l = 4u * (idx % KQ);
    const uint i = idx / KQ;
    const uint q = (i >> 2u) ^ swz(l);  // swz is the same for the four rows l .. l+3
    as[st + l][q][i & 3u] = v.x;
    as[st + l + 1u][q][i & 3u] = v.y;
    as[st + l + 2u][q][i & 3u] = v.z;
    as[st + l + 3u][q][i & 3u] = v.w;
}

void stash_b(uint lane, uint e, uint st, vec4 v) {
    const uint idx = lane + e * 256u;
    if (p.trans_b != 0u) {
        const uint l = idx / 32u;
        bs[st + l][(idx % 32u) ^ swz(l)] = v;
        return;
    }
    const uint l = 4u * (idx % KQ);
    const uint j = idx / KQ;
    const uint q = (j >> 2u) ^ swz(l);
    bs[st + l][q][j & 3u] = v.x;
    bs[st + l + 1u][q][j & 3u] = v.y;
    bs[st + l + 2u][q][j & 3u] = v.z;
    bs[st + l + 3u][q][j & 3u] = v.w;
}

// alpha · v + beta · C for rows i .. i+3 of column j, those inside C.
void store_quad(uint i, uint j, vec4 v) {
    if (j >= p.n || i >= p.m) return;
    const uint at = p.c_off + i + j * p.ldc;
    v *= p.alpha;
    if (i + 3u < p.m && c_quads()) {
        c4[at >> 2u] = p.beta == 0.0 ? v : v + p.beta * c4[at >> 2u];
        return;
    }
    const bool keep = p.beta != 0.0;
    c[at] = keep ? v.x + p.beta * c[at] : v.x;
    if (i + 1u < p.m) c[at + 1u] = keep ? v.y + p.beta * c[at + 1u] : v.y;
    if (i + 2u < p.m) c[at + 2u] = keep ? v.z + p.beta * c[at + 2u] : v.z;
    if (i + 3u < p.m) c[at + 3u] = keep ? v.w + p.beta * c[at + 3u] : v.w;
}

// The accumulators: ACC(h, s) holds rows (h ? 64 : 0) + tx·4 .. +3 of column
// (s < 4 ? 0 : 64) + ty·4 + s % 4.
#define ACC(h, s) acc##h##s
#define DECLARE_ROW(h)                                                                  \
    vec4 ACC(h, 0) = vec4(0.0), ACC(h, 1) = vec4(0.0), ACC(h, 2) = vec4(0.0),           \
         ACC(h, 3) = vec4(0.0), ACC(h, 4) = vec4(0.0), ACC(h, 5) = vec4(0.0),           \
         ACC(h, 6) = vec4(0.0), ACC(h, 7) = vec4(0.0)
// One k step for rows h: the fragment `av` (4 rows) times the 8 columns of bv0, bv1.
#define FMA_ROW(h, av)                                                                  \
    ACC(h, 0) += av * bv0.x; ACC(h, 1) += av * bv0.y; ACC(h, 2) += av * bv0.z;          \
    ACC(h, 3) += av * bv0.w; ACC(h, 4) += av * bv1.x; ACC(h, 5) += av * bv1.y;          \
    ACC(h, 6) += av * bv1.z; ACC(h, 7) += av * bv1.w
#define STORE_ROW(h, i)                                                                 \
    store_quad(i, cj, ACC(h, 0));                                                       \
    store_quad(i, cj + 1u, ACC(h, 1));                                                  \
    store_quad(i, cj + 2u, ACC(h, 2));                                                  \
    store_quad(i, cj + 3u, ACC(h, 3));                                                  \
    store_quad(i, cj + 64u, ACC(h, 4));                                                 \
    store_quad(i, cj + 65u, ACC(h, 5));                                                 \
    store_quad(i, cj + 66u, ACC(h, 6));                                                 \
    store_quad(i, cj + 67u, ACC(h, 7))

void main() {
    const uint tx = gl_LocalInvocationID.x;
    const uint ty = gl_LocalInvocationID.y;
    const uint lane = gl_LocalInvocationIndex;
    const uint i0 = gl_WorkGroupID.x * BM;
    const uint j0 = gl_WorkGroupID.y * BM;

    DECLARE_ROW(0);
    DECLARE_ROW(1);

    // The prefetch registers: a slice is QUADS (1 or 2) quads of each matrix per thread.
    vec4 pa0 = fetch_a(lane, 0u, i0, 0u);
    vec4 pb0 = fetch_b(lane, 0u, j0, 0u);
    vec4 pa1 = vec4(0.0), pb1 = vec4(0.0);
    if (QUADS > 1u) {
        pa1 = fetch_a(lane, 1u, i0, 0u);
        pb1 = fetch_b(lane, 1u, j0, 0u);
    }
    stash_a(lane, 0u, 0u, pa0);
    stash_b(lane, 0u, 0u, pb0);
    if (QUADS > 1u) {
        stash_a(lane, 1u, 0u, pa1);
        stash_b(lane, 1u, 0u, pb1);
    }
    barrier();

    uint st = 0u;  // first row of the stage the FMAs read
    for (uint l0 = 0u; l0 < p.k; l0 += BK) {
        const bool more = l0 + BK < p.k;
        if (more) {  // issued now, waited for only at the stash below
            pa0 = fetch_a(lane, 0u, i0, l0 + BK);
            pb0 = fetch_b(lane, 0u, j0, l0 + BK);
            if (QUADS > 1u) {
                pa1 = fetch_a(lane, 1u, i0, l0 + BK);
                pb1 = fetch_b(lane, 1u, j0, l0 + BK);
            }
        }
        [[unroll]] for (uint l = 0u; l < BK; ++l) {
            const uint q = swz(l);  // a constant once unrolled
            const vec4 av0 = as[st + l][tx ^ q];
            const vec4 av1 = as[st + l][(tx ^ q) + 16u];
            const vec4 bv0 = bs[st + l][ty ^ q];
            const vec4 bv1 = bs[st + l][(ty ^ q) + 16u];
            FMA_ROW(0, av0);
            FMA_ROW(1, av1);
        }
        // The other stage was last read before the previous barrier: free to overwrite.
        if (more) {
            const uint next = BK - st;
            stash_a(lane, 0u, next, pa0);
            stash_b(lane, 0u, next, pb0);
            if (QUADS > 1u) {
                stash_a(lane, 1u, next, pa1);
                stash_b(lane, 1u, next, pb1);
            }
        }
        barrier();
        st = BK - st;
    }

    const uint ri = i0 + 4u * tx;
    const uint cj = j0 + 4u * ty;
    STORE_ROW(0, ri);
    STORE_ROW(1, ri + 64u);
}
