// Tests of ops::gemm's packed fills in parts (GemmOptions::fill_part_bytes, src/ops/gemm_feed.hpp
// OperandCut::cut_parts): a chunk packed from a source that is not device-readable is filled by
// several reader threads at once, a part each — runs of columns, or of rows for a source that
// keeps its rows contiguous (MatrixSource::row_major). Each source element of a chunk is read
// exactly once, the staging ring holds parts, and C is bit for bit what whole-chunk fills give:
// for both layouts, every transpose, ragged parts, a packed input C (β ≠ 0), an A panel in
// chunks with a shorter last panel, and A in pieces.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "gemm_case.hpp"
#include "gemm_test_support.hpp"
#include "outcore/core/size.hpp"
#include "outcore/io/matrix.hpp"
#include "outcore/ops/gemm.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::DType;
using outcore::gemm_test::Bound;
using outcore::gemm_test::Case;
using outcore::gemm_test::describe;
using outcore::gemm_test::error_bound;
using outcore::gemm_test::expect_nothing_held;
using outcore::gemm_test::make_device;
using outcore::gemm_test::reference;
using outcore::gemm_test::relative_error;
using outcore::io::Layout;
using outcore::io::MatrixSource;
using outcore::ops::GemmReport;
using outcore::tile::GemmSchedule;

/// A source that forwards to another and counts its reads, the elements they covered, the
/// blocks' shapes and how many ran at once; each read holds its thread `hold` long, so that
/// reads that could run together do.
class CountingSource final : public MatrixSource {
public:
    CountingSource(const MatrixSource& inner, std::chrono::milliseconds hold) : inner_(inner), hold_(hold) {}
    [[nodiscard]] std::uint64_t rows() const noexcept override { return inner_.rows(); }
    [[nodiscard]] std::uint64_t cols() const noexcept override { return inner_.cols(); }
    [[nodiscard]] outcore::DType dtype() const noexcept override { return inner_.dtype(); }
    [[nodiscard]] bool row_major() const noexcept override { return inner_.row_major(); }

    std::uint64_t reads() const noexcept { return reads_.load(); }
    std::uint64_t elements() const noexcept { return elements_.load(); }
    std::uint64_t most_at_once() const noexcept { return most_.load(); }
    /// Every (rows, cols) a read asked for.
    std::set<std::pair<std::uint64_t, std::uint64_t>> shapes() const {
        std::lock_guard lock(mutex_);
        return shapes_;
    }

private:
    void do_read(std::uint64_t row0, std::uint64_t col0, std::uint64_t rows, std::uint64_t cols,
                 std::byte* dst, std::uint64_t ld_elements) const override {
        const std::uint64_t now = ++active_;
        std::uint64_t most = most_.load();
        while (now > most && !most_.compare_exchange_weak(most, now)) {}
        std::this_thread::sleep_for(hold_);
        inner_.read(row0, col0, rows, cols, dst, ld_elements);
        ++reads_;
        elements_ += rows * cols;
        {
            std::lock_guard lock(mutex_);
            shapes_.emplace(rows, cols);
        }
        --active_;
    }

    const MatrixSource& inner_;
    std::chrono::milliseconds hold_;
    mutable std::atomic<std::uint64_t> active_{0}, most_{0}, reads_{0}, elements_{0};
    mutable std::mutex mutex_;
    mutable std::set<std::pair<std::uint64_t, std::uint64_t>> shapes_;
};

/// Runs `cs` with whole-chunk fills, then with parts of `part_bytes` on `readers` threads:
/// the same plan, the same bytes moved, more uploads, C bit for bit the same and close to
/// the float64 reference.
void expect_parts_change_nothing_but_the_fills(const Case& cs, std::uint64_t part_bytes,
                                               std::uint32_t readers, std::mt19937_64& rng) {
    SCOPED_TRACE(describe(cs));
    auto device = make_device();
    Bound bound(cs, rng);
    auto& [ops, a, b, c, c0, o] = bound;
    o.budget_bytes = cs.budget_bytes;
    o.reader_threads = readers;
    o.fill_part_bytes = outcore::kGiB;  // whole chunks
    const GemmReport whole = outcore::ops::gemm(*device, a, b, c, o);
    const std::vector<std::byte> c_whole = ops.c.storage;

    ops.c.poison();
    o.fill_part_bytes = part_bytes;
    const GemmReport parts = outcore::ops::gemm(*device, a, b, c, o);
    EXPECT_EQ(parts.plan.tile_m, whole.plan.tile_m);
    EXPECT_EQ(parts.plan.tile_n, whole.plan.tile_n);
    EXPECT_EQ(parts.plan.tile_k, whole.plan.tile_k);
    EXPECT_EQ(parts.plan.a_chunk_k, whole.plan.a_chunk_k);
    EXPECT_GT(parts.pipeline.upload_count, 2 * whole.pipeline.upload_count);
    EXPECT_EQ(parts.bytes_moved, whole.bytes_moved);
    EXPECT_EQ(ops.c.storage, c_whole) << "parts must land where the whole chunk did";
    EXPECT_LE(relative_error(ops.c, reference(ops.a, ops.b, cs.beta != 0 ? &ops.c0 : nullptr, o)),
              error_bound(cs.type, cs.compute, cs.k));
    expect_nothing_held(*device);
}

// Square-C tiles 128 × 128 over k chunks of 512: every step packs a 256 KiB chunk of A
// and one of B. With parts of 64 KiB and four readers each chunk is four fills that run
// at once — runs of columns of column-major operands, of rows of row-major ones; whole,
// one. The same elements are read either way, the ring holds 16 parts instead of 4 chunks
// (the same bytes), and C is the same bit for bit.
TEST(GemmFill, PackedChunksAreFilledInPartsByReadersAtOnce) {
    std::mt19937_64 rng(outcore::test::seed());
    auto device = make_device();
    for (const Layout layout : {Layout::ColMajor, Layout::RowMajor}) {
        const Case cs{.m = 256,
                      .n = 256,
                      .k = 1024,
                      .type = DType::F32,
                      .layout = layout,
                      .schedule = GemmSchedule::SquareC,
                      .budget_bytes = 64 * outcore::kMiB,
                      .tile_m = 128,
                      .tile_n = 128,
                      .tile_k = 512};
        SCOPED_TRACE(describe(cs));
        Bound bound(cs, rng);
        auto& [ops, a, b, c, c0, o] = bound;
        o.budget_bytes = cs.budget_bytes;
        o.reader_threads = 4;
        const std::uint64_t chunk = 128 * 512 * 4;
        const std::uint64_t c_staging = 2 * 128 * 128 * 4;  // C's download ring
        const std::uint64_t steps = 2 * 2 * 2;              // 4 tiles, 2 k chunks each

        o.fill_part_bytes = chunk;  // whole chunks
        CountingSource a_whole(a, std::chrono::milliseconds(1));
        CountingSource b_whole(b, std::chrono::milliseconds(1));
        const GemmReport whole = outcore::ops::gemm(*device, a_whole, b_whole, c, o);
        const std::vector<std::byte> c_whole = ops.c.storage;
        EXPECT_EQ(whole.pipeline.upload_count, 2 * steps);
        EXPECT_EQ(a_whole.reads(), steps);
        EXPECT_EQ(whole.pipeline.staging_bytes, 2 * 2 * chunk + c_staging);

        ops.c.poison();
        o.fill_part_bytes = chunk / 4;
        CountingSource a_parts(a, std::chrono::milliseconds(10));
        CountingSource b_parts(b, std::chrono::milliseconds(10));
        const GemmReport parts = outcore::ops::gemm(*device, a_parts, b_parts, c, o);
        EXPECT_EQ(parts.pipeline.upload_count, 2 * 4 * steps);
        EXPECT_EQ(a_parts.reads(), 4 * steps);
        EXPECT_EQ(b_parts.reads(), 4 * steps);
        EXPECT_EQ(a_parts.elements(), a_whole.elements());
        EXPECT_EQ(b_parts.elements(), b_whole.elements());
        // A's chunks are 128 rows (m) × 512 columns (k), B's 512 rows (k) × 128 columns (n):
        // cut along the columns, or along the rows of row-major sources.
        using Shapes = std::set<std::pair<std::uint64_t, std::uint64_t>>;
        const bool rows = layout == Layout::RowMajor;
        const Shapes a_shapes = rows ? Shapes{{32, 512}} : Shapes{{128, 128}};
        const Shapes b_shapes = rows ? Shapes{{128, 128}} : Shapes{{512, 32}};
        EXPECT_EQ(a_parts.shapes(), a_shapes);
        EXPECT_EQ(b_parts.shapes(), b_shapes);
        EXPECT_EQ(parts.bytes_moved, whole.bytes_moved);
        EXPECT_EQ(parts.pipeline.staging_bytes, 2 * 4 * 2 * (chunk / 4) + c_staging);
        // A chunk's four parts are queued together: its readers overlap.
        EXPECT_GE(a_parts.most_at_once(), 2U);
        EXPECT_GE(b_parts.most_at_once(), 2U);
        EXPECT_EQ(ops.c.storage, c_whole) << "parts must land where the whole chunk did";
        EXPECT_LE(relative_error(ops.c, reference(ops.a, ops.b, nullptr, o)),
                  error_bound(cs.type, cs.compute, cs.k));
        expect_nothing_held(*device);
    }
}

// Parts that do not divide a chunk (the last one shorter), both layouts, every transpose
// (parts run along the stored columns, or rows: outer ranges or k ranges), the planner's
// schedule, and a packed input C cut in parts too.
TEST(GemmFill, RaggedPartsOfEveryTransposeAndAPackedInputC) {
    std::mt19937_64 rng(outcore::test::seed());
    for (const Layout layout : {Layout::ColMajor, Layout::RowMajor}) {
        for (const bool trans_a : {false, true}) {
            for (const bool trans_b : {false, true}) {
                const Case cs{.m = 301,
                              .n = 200,
                              .k = 700,
                              .type = DType::F32,
                              .trans_a = trans_a,
                              .trans_b = trans_b,
                              .alpha = 0.75,
                              .beta = 0.5,
                              .layout = layout,
                              .budget_bytes = 1 * outcore::kMiB};
                // Three parts (the readers) of chunks whose sides do not divide by 3.
                expect_parts_change_nothing_but_the_fills(cs, 4096, 3, rng);
            }
        }
    }
}

// An A panel in chunks whose last panel is shorter than the ring's regions (its chunks land
// with the regions' leading dimension), and an A panel whose chunks go up in k pieces (one
// region each): parts land inside those regions at their pitch.
TEST(GemmFill, PartsOfAPanelInChunksAndOfAInPieces) {
    std::mt19937_64 rng(outcore::test::seed());
    for (const Layout layout : {Layout::ColMajor, Layout::RowMajor}) {
        const Case chunked{.m = 700,  // panels of 256, 256 and 188 rows
                           .n = 200,
                           .k = 1024,
                           .type = DType::F32,
                           .layout = layout,
                           .schedule = GemmSchedule::APanelResident,
                           .budget_bytes = 64 * outcore::kMiB,
                           .tile_m = 256,
                           .tile_n = 64,
                           .tile_k = 1024,
                           .panel_chunk_k = 256};
        expect_parts_change_nothing_but_the_fills(chunked, 8192, 3, rng);
        const Case pieces{.m = 768,
                          .n = 200,
                          .k = 2048,  // chunks of 1024, in four pieces of 256
                          .type = DType::F32,
                          .layout = layout,
                          .schedule = GemmSchedule::APanelResident,
                          .budget_bytes = 64 * outcore::kMiB,
                          .tile_m = 256,
                          .tile_n = 64,
                          .tile_k = 1024};
        expect_parts_change_nothing_but_the_fills(pieces, 8192, 3, rng);
    }
}

}  // namespace
