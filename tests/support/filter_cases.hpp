// support/filter_cases.hpp — random filter tiles run on any device, for the tests
// that hold a GPU backend's filter kernels to the CPU backend's bytes.
//
//   for (const FilterCase& fc : every_combination(rng)) {
//       const FilterInput input(fc, rng);
//       EXPECT_EQ(input.run(gpu), input.run(cpu)) << describe(fc);
//   }
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "outcore/device/device.hpp"
#include "outcore/device/kernel_params.hpp"

namespace outcore::test {

struct FilterCase {
    outcore::FilterOp op = outcore::FilterOp::Conv2D;
    outcore::DType in = outcore::DType::F32;
    outcore::DType out = outcore::DType::F32;
    std::uint32_t channels = 1;
    std::uint32_t radius = 1;
    std::uint64_t rows = 1, cols = 1;       ///< output tile
    std::uint64_t in_pad = 0, out_pad = 0;  ///< row padding in bytes (multiples of the element)
};

inline std::string describe(const FilterCase& fc) {
    return "op " + std::to_string(static_cast<int>(fc.op)) + " " + std::string(outcore::to_string(fc.in)) +
           "->" + std::string(outcore::to_string(fc.out)) + " c" + std::to_string(fc.channels) + " r" +
           std::to_string(fc.radius) + " " + std::to_string(fc.rows) + "x" + std::to_string(fc.cols);
}

/// The tile's input (with halo), weights and layout, shared by both devices' runs.
struct FilterInput {
    FilterCase fc;
    std::uint64_t in_stride = 0, out_stride = 0, in_rows = 0;
    std::vector<std::byte> input;
    std::vector<float> weights;

    FilterInput(const FilterCase& c, std::mt19937_64& rng) : fc(c) {
        const std::uint64_t hr = c.op == outcore::FilterOp::SeparableRow ? 0 : c.radius;
        const std::uint64_t hc = c.op == outcore::FilterOp::SeparableColumn ? 0 : c.radius;
        in_rows = c.rows + 2 * hr;
        in_stride = (c.cols + 2 * hc) * c.channels * outcore::dtype_bytes(c.in) + c.in_pad;
        out_stride = c.cols * c.channels * outcore::dtype_bytes(c.out) + c.out_pad;
        input.resize(in_rows * in_stride);
        std::uniform_real_distribution<float> real(-64.0F, 320.0F);
        const std::size_t count = input.size() / outcore::dtype_bytes(c.in);
        for (std::size_t i = 0; i < count; ++i) {
            if (c.in == outcore::DType::U8) {
                input[i] = static_cast<std::byte>(rng());
            } else if (c.in == outcore::DType::U16) {
                const auto v = static_cast<std::uint16_t>(rng());
                std::memcpy(input.data() + i * 2, &v, 2);
            } else {
                const float v = real(rng);
                std::memcpy(input.data() + i * 4, &v, 4);
            }
        }
        const std::size_t side = 2 * std::size_t{c.radius} + 1;
        const std::size_t taps = c.op == outcore::FilterOp::SobelMagnitude ? 0
                                 : c.op == outcore::FilterOp::Conv2D       ? side * side
                                                                           : side;
        std::uniform_real_distribution<float> w(-1.0F, 1.0F);
        weights.resize(taps);
        for (float& v : weights) v = w(rng) / static_cast<float>(side);
    }

    /// Runs the tile on `dev` with input and output in `kind` memory, `in_offset` and
    /// `out_offset` bytes into their blocks (multiples of their elements); returns the
    /// output rows.
    std::vector<std::byte> run(outcore::Device& dev, outcore::MemoryKind kind = outcore::MemoryKind::Device,
                               std::uint64_t in_offset = 0, std::uint64_t out_offset = 0) const {
        auto q = dev.create_queue(outcore::QueueRole::Compute);
        outcore::Block in_block = dev.allocate({.bytes = in_offset + input.size(), .kind = kind});
        outcore::Block out_block = dev.allocate({.bytes = out_offset + fc.rows * out_stride, .kind = kind});
        const outcore::BufferView in(in_block, in_offset, input.size());
        const outcore::BufferView out(out_block, out_offset, fc.rows * out_stride);
        std::vector<std::byte> result(fc.rows * out_stride, std::byte{0xAB});
        q->upload(input.data(), in);
        q->upload(result.data(), out);  // poison: every sample must be written, padding kept
        const outcore::KernelParams params =
            outcore::KernelParams::make(dev, *q, std::as_bytes(std::span(weights)));
        dev.kernels().filter(*q, outcore::FilterTileArgs{.op = fc.op,
                                                         .channels = fc.channels,
                                                         .radius = fc.radius,
                                                         .in_type = fc.in,
                                                         .out_type = fc.out,
                                                         .out_rows = fc.rows,
                                                         .out_cols = fc.cols,
                                                         .in = in,
                                                         .in_row_stride = in_stride,
                                                         .out = out,
                                                         .out_row_stride = out_stride,
                                                         .weights = weights.empty() ? nullptr : &params});
        q->download(out, result.data());
        q->synchronize();
        return result;
    }
};

inline std::vector<FilterCase> every_combination(std::mt19937_64& rng) {
    std::vector<FilterCase> cases;
    const outcore::DType types[] = {outcore::DType::U8, outcore::DType::U16, outcore::DType::F32};
    for (outcore::FilterOp op : {outcore::FilterOp::SeparableRow, outcore::FilterOp::SeparableColumn,
                                 outcore::FilterOp::Conv2D, outcore::FilterOp::SobelMagnitude}) {
        for (outcore::DType in : types) {
            for (outcore::DType out : types) {
                if (op == outcore::FilterOp::SeparableRow && out != outcore::DType::F32) continue;
                if (op == outcore::FilterOp::SeparableColumn && in != outcore::DType::F32) continue;
                const std::uint32_t channels = 1 + static_cast<std::uint32_t>(rng() % 4);
                std::uint32_t radius = 1;
                if (op == outcore::FilterOp::Conv2D) radius = static_cast<std::uint32_t>(rng() % 8);
                if (op == outcore::FilterOp::SeparableRow || op == outcore::FilterOp::SeparableColumn) {
                    radius = static_cast<std::uint32_t>(rng() % 40);
                }
                cases.push_back({.op = op,
                                 .in = in,
                                 .out = out,
                                 .channels = channels,
                                 .radius = radius,
                                 .rows = 1 + rng() % 150,
                                 .cols = 1 + rng() % 700,
                                 .in_pad = (rng() % 3) * 4 * outcore::dtype_bytes(in),
                                 .out_pad = (rng() % 3) * outcore::dtype_bytes(out)});
            }
        }
    }
    return cases;
}

/// Runs `fc` (fresh random input from `rng`) on `reference` and on `device` (tiles in
/// `kind` memory there) and expects the same bytes; a failure names the first difference.
inline void expect_same_bytes(outcore::Device& device, outcore::Device& reference, const FilterCase& fc,
                              std::mt19937_64& rng, outcore::MemoryKind kind = outcore::MemoryKind::Device) {
    const FilterInput input(fc, rng);
    const std::vector<std::byte> want = input.run(reference);
    const std::vector<std::byte> got = input.run(device, kind);
    ASSERT_EQ(got.size(), want.size());
    if (got == want) return;
    std::size_t at = 0;
    while (got[at] == want[at]) ++at;
    ADD_FAILURE() << describe(fc) << ": first difference at byte " << at << " (row " << at / input.out_stride
                  << ")";
}

}  // namespace outcore::test
