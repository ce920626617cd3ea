// filter.comp — one filter tile (outcore/device/kernels.hpp, FilterTileArgs), one
// invocation per output sample. Each sample is formed by exactly the sequence the CPU
// backend documents (cpu_filters.cpp), every operation `precise` (never fused or
// reordered), integer outputs clamped (NaN -> 0) and rounded to nearest even:
//
//   SeparableRow     acc = w[0]·x[e];  acc = acc + w[t]·x[e + t·step]      t = 1 .. 2r
//   SeparableColumn  acc = w[0]·x[y];  acc = acc + w[t]·x[y + t]           t = 1 .. 2r
//   Conv2D           acc = w[0]·x(0,0); acc = acc + w[dy·side+dx]·x(dy,dx), dy outer, dx inner
//   SobelMagnitude   gx = ((a2 − a0) + 2·(b2 − b0)) + (c2 − c0)
//                    gy = ((c0 + 2·c1) + c2) − ((a0 + 2·a1) + a2),  sqrt(gx·gx + gy·gy)
//                    (sqrt rounded to nearest where the device has float64, see sqrt_rn)
//
// Pixels are u8, u16 or f32 (8- and 16-bit storage); each buffer is bound three times,
// once per type. Offsets and strides are in elements of the bound type.
#version 450
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_16bit_storage : require

layout(local_size_x = 32, local_size_y = 8) in;

layout(set = 0, binding = 0) readonly buffer In8 { uint8_t in8[]; };
layout(set = 0, binding = 1) readonly buffer In16 { uint16_t in16[]; };
layout(set = 0, binding = 2) readonly buffer In32 { float in32[]; };
layout(set = 0, binding = 3) writeonly buffer Out8 { uint8_t out8[]; };
layout(set = 0, binding = 4) writeonly buffer Out16 { uint16_t out16[]; };
layout(set = 0, binding = 5) writeonly buffer Out32 { float out32[]; };
layout(set = 0, binding = 6) readonly buffer Weights { float w[]; };

layout(push_constant) uniform Params {
    uint op;        // 0 row, 1 column, 2 conv2d, 3 sobel
    uint in_type;   // 0 u8, 1 u16, 2 f32
    uint out_type;
    uint step;      // samples between horizontal neighbours (channels)
    uint radius;
    uint out_rows;
    uint out_elems;
    uint in_off;    // elements
    uint in_stride; // elements
    uint out_off;
    uint out_stride;
    uint w_off;     // floats
} p;

float x(uint y, uint e) {
    const uint i = p.in_off + y * p.in_stride + e;
    if (p.in_type == 0u) return float(uint(in8[i]));
    if (p.in_type == 1u) return float(uint(in16[i]));
    return in32[i];
}

float wt(uint t) { return w[p.w_off + t]; }

#if defined(EXACT_SQRT)
// sqrt(m) rounded to nearest, as IEEE (and the CPU's std::sqrt) rounds it. A driver's
// sqrt may be a few ulp off (NVIDIA's is). The midpoint between two neighbouring
// floats has 25 significant bits, so its square (50 bits) is exact in double, as are
// the sums and products below (Vulkan rounds double +, * correctly); m is never such a
// square, so comparing m with the squared midpoints picks the float nearest the root.
// Built as the "filter_exact_sqrt" module, used where the device has shaderFloat64.
float sqrt_rn(float m) {
    float s = sqrt(m);
    // 0, NaN, negative, inf: as the driver gives them; so is a subnormal m that the
    // driver flushed to a 0 root (stepping down from 0 would make a NaN).
    if (!(m > 0.0) || !(s > 0.0) || isinf(m)) return s;
    for (int i = 0; i < 4; ++i) {
        const float below = uintBitsToFloat(floatBitsToUint(s) - 1u);
        const float above = uintBitsToFloat(floatBitsToUint(s) + 1u);
        precise const double lo = (double(below) + double(s)) * 0.5LF;
        precise const double hi = (double(s) + double(above)) * 0.5LF;
        if (double(m) < lo * lo) {
            s = below;
        } else if (double(m) > hi * hi) {
            s = above;
        } else {
            break;
        }
    }
    return s;
}
#else
float sqrt_rn(float m) { return sqrt(m); }  // the driver's rounding (no float64)
#endif

precise float sample_at(uint y, uint e) {
    const uint side = 2u * p.radius + 1u;
    if (p.op == 0u) {
        precise float acc = wt(0u) * x(y, e);
        for (uint t = 1u; t < side; ++t) acc = acc + wt(t) * x(y, e + t * p.step);
        return acc;
    }
    if (p.op == 1u) {
        precise float acc = wt(0u) * x(y, e);
        for (uint t = 1u; t < side; ++t) acc = acc + wt(t) * x(y + t, e);
        return acc;
    }
    if (p.op == 2u) {
        precise float acc = wt(0u) * x(y, e);
        for (uint dy = 0u; dy < side; ++dy) {
            for (uint dx = dy == 0u ? 1u : 0u; dx < side; ++dx) {
                acc = acc + wt(dy * side + dx) * x(y + dy, e + dx * p.step);
            }
        }
        return acc;
    }
    const uint e1 = e + p.step;
    const uint e2 = e + 2u * p.step;
    const float a0 = x(y, e), a1 = x(y, e1), a2 = x(y, e2);
    const float b0 = x(y + 1u, e), b2 = x(y + 1u, e2);
    const float c0 = x(y + 2u, e), c1 = x(y + 2u, e1), c2 = x(y + 2u, e2);
    precise float gx = ((a2 - a0) + 2.0 * (b2 - b0)) + (c2 - c0);
    precise float gy = ((c0 + 2.0 * c1) + c2) - ((a0 + 2.0 * a1) + a2);
    precise float m = gx * gx + gy * gy;
    return sqrt_rn(m);
}

float clamped(float v, float hi) {  // [0, hi], NaN -> 0 (both comparisons are false for NaN)
    float c = v > 0.0 ? v : 0.0;
    return c < hi ? c : hi;
}

void main() {
    const uint e = gl_GlobalInvocationID.x;
    const uint y = gl_GlobalInvocationID.y;
    if (e >= p.out_elems || y >= p.out_rows) return;
    const float v = sample_at(y, e);
    const uint o = p.out_off + y * p.out_stride + e;
    if (p.out_type == 0u) {
        out8[o] = uint8_t(uint(roundEven(clamped(v, 255.0))));
    } else if (p.out_type == 1u) {
        out16[o] = uint16_t(uint(roundEven(clamped(v, 65535.0))));
    } else {
        out32[o] = v;
    }
}
