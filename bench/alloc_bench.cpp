// alloc_bench — one allocate + free pair through Tlsf, through Heap (over a malloc
// upstream, pre-reserved so the loop never grows), and through malloc/free as the
// baseline, at the same sizes in the same run: 256 B, 64 KiB, 1 MiB and a random
// log-uniform mix of 256 B .. 1 MiB (argument 0).
//
//   outcore_bench_alloc --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Each allocator starts with a few thousand live allocations of random sizes, so
// the pair runs against populated free lists rather than one empty range.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "outcore/alloc/heap.hpp"
#include "outcore/alloc/tlsf.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"

namespace {

using outcore::kGiB;
using outcore::kKiB;
using outcore::kMiB;

constexpr std::uint64_t kAlignment = 256;
constexpr std::size_t kMixCount = 4096;  // a power of two: the index wraps with a mask
constexpr int kBackgroundCount = 2000;
constexpr std::uint64_t kSeed = 20240601;

// The sizes one benchmark run cycles through: one fixed size, or the random mix.
std::vector<std::uint64_t> sizes_for(std::int64_t arg) {
    if (arg != 0) return std::vector<std::uint64_t>(kMixCount, static_cast<std::uint64_t>(arg));
    std::mt19937_64 rng(kSeed);
    std::uniform_real_distribution<double> exponent(8.0, 20.0);  // 256 B .. 1 MiB
    std::vector<std::uint64_t> sizes(kMixCount);
    for (auto& s : sizes) s = static_cast<std::uint64_t>(std::exp2(exponent(rng)));
    return sizes;
}

void label(benchmark::State& state) {
    state.SetLabel(state.range(0) == 0 ? "mix 256B-1MiB"
                                       : outcore::format_size(static_cast<std::uint64_t>(state.range(0))));
}

// Host memory from aligned_alloc: the heap's upstream, standing in for a device.
class MallocUpstream final : public outcore::Allocator {
    outcore::RawBlock do_allocate(const outcore::AllocationRequest& r) override {
        const std::uint64_t alignment = std::max<std::uint64_t>(r.alignment, 64);
        void* p = std::aligned_alloc(alignment, outcore::align_up(r.bytes, alignment));
        if (p == nullptr)
            throw outcore::OutOfMemory("malloc", "aligned_alloc failed", {.requested_bytes = r.bytes});
        outcore::RawBlock b;
        b.kind = r.kind;
        b.bytes = r.bytes;
        b.native = reinterpret_cast<std::uintptr_t>(p);
        return b;
    }
    void do_deallocate(const outcore::RawBlock& b) noexcept override {
        std::free(reinterpret_cast<void*>(b.native));  // NOLINT(performance-no-int-to-ptr)
    }
};

void BM_TlsfPair(benchmark::State& state) {
    const std::vector<std::uint64_t> sizes = sizes_for(state.range(0));
    outcore::alloc::Tlsf tlsf(4 * kGiB, kAlignment);
    std::mt19937_64 rng(kSeed);
    const std::vector<std::uint64_t> mix = sizes_for(0);
    for (int i = 0; i < kBackgroundCount; ++i) {
        (void)tlsf.allocate(mix[static_cast<std::size_t>(rng()) % kMixCount] / 4 + 1);
    }
    std::size_t i = 0;
    for (auto _ : state) {
        const auto a = tlsf.allocate(sizes[i++ & (kMixCount - 1)], kAlignment);
        benchmark::DoNotOptimize(a);
        tlsf.free(a->offset);
    }
    label(state);
}

void BM_HeapPair(benchmark::State& state) {
    const std::vector<std::uint64_t> sizes = sizes_for(state.range(0));
    MallocUpstream upstream;
    outcore::alloc::Heap heap(upstream, kAlignment, {.block_bytes = 4 * kGiB, .never_grow = true});
    heap.reserve(4 * kGiB);
    std::vector<outcore::RawBlock> background;
    std::mt19937_64 rng(kSeed);
    const std::vector<std::uint64_t> mix = sizes_for(0);
    for (int i = 0; i < kBackgroundCount; ++i) {
        background.push_back(
            heap.allocate_raw({.bytes = mix[static_cast<std::size_t>(rng()) % kMixCount] / 4 + 1}));
    }
    std::size_t i = 0;
    for (auto _ : state) {
        const outcore::RawBlock b = heap.allocate_raw({.bytes = sizes[i++ & (kMixCount - 1)]});
        benchmark::DoNotOptimize(b);
        heap.deallocate_raw(b);
    }
    for (const auto& b : background) heap.deallocate_raw(b);
    label(state);
}

void BM_MallocPair(benchmark::State& state) {
    const std::vector<std::uint64_t> sizes = sizes_for(state.range(0));
    std::vector<void*> background;
    std::mt19937_64 rng(kSeed);
    const std::vector<std::uint64_t> mix = sizes_for(0);
    for (int i = 0; i < kBackgroundCount; ++i) {
        background.push_back(std::malloc(mix[static_cast<std::size_t>(rng()) % kMixCount] / 4 + 1));
    }
    std::size_t i = 0;
    for (auto _ : state) {
        void* p = std::malloc(sizes[i++ & (kMixCount - 1)]);
        benchmark::DoNotOptimize(p);
        std::free(p);
    }
    for (void* p : background) std::free(p);
    label(state);
}

void sizes(benchmark::internal::Benchmark* b) { b->Arg(256)->Arg(64 * kKiB)->Arg(1 * kMiB)->Arg(0); }

BENCHMARK(BM_TlsfPair)->Apply(sizes);
BENCHMARK(BM_HeapPair)->Apply(sizes);
BENCHMARK(BM_MallocPair)->Apply(sizes);

}  // namespace

BENCHMARK_MAIN();
