// swap_micro_bench — the swap store's fixed cost: acquire + release of a block that is
// already resident on the device (no data moves), on the CPU backend, next to the floor
// any such pair pays in the same run (two lock/unlock pairs of an uncontended mutex,
// one hash lookup and one small vector, which is what acquire + release do at least).
// Target: median acquire + release under 200 ns.
//
//   outcore_bench_swap --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
//
// Argument: units per object (1 = one 1 MiB unit; 4 = a 4 MiB object of four units, each
// pinned and given a view). The store holds kBackgroundObjects other resident objects,
// so the unit table and the device LRU list are not trivially small.
#include <benchmark/benchmark.h>

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "outcore/backends/cpu.hpp"
#include "outcore/core/size.hpp"
#include "outcore/swap/store.hpp"

namespace {

using outcore::kMiB;
namespace swap = outcore::swap;

constexpr std::uint64_t kUnitBytes = 1 * kMiB;
constexpr int kBackgroundObjects = 64;
constexpr std::uint64_t kBudgetBytes = 256 * kMiB;  // holds every object: nothing is evicted

/// A CPU device and a store with kBackgroundObjects + 1 resident objects; `id` is the
/// one the benchmark acquires.
struct Resident {
    std::unique_ptr<outcore::Device> device = outcore::cpu::make_cpu_device();
    swap::TieredStore store{*device, options()};
    swap::BlockId id;

    static swap::StoreOptions options() {
        swap::StoreOptions o;
        o.device_budget_bytes = kBudgetBytes;
        o.host_budget_bytes = kBudgetBytes;
        o.unit_bytes = kUnitBytes;
        return o;
    }
    explicit Resident(std::int64_t units) {
        for (int i = 0; i < kBackgroundObjects; ++i) make_resident(1);
        id = make_resident(units);
    }
    swap::BlockId make_resident(std::int64_t units) {
        const swap::BlockId b = store.create(static_cast<std::uint64_t>(units) * kUnitBytes);
        // Discard: a device buffer for every unit and no copy; resident once released.
        (void)store.acquire(b, swap::Access::Discard);
        return b;
    }
};

void BM_AcquireReleaseResident(benchmark::State& state) {
    Resident r(state.range(0));
    for (auto _ : state) {
        swap::Pin pin = r.store.acquire(r.id, swap::Access::Read);
        benchmark::DoNotOptimize(pin.view().block.native);
    }  // the Pin releases here
    const swap::StoreStats st = r.store.stats();
    if (st.device.misses !=
        static_cast<std::uint64_t>(kBackgroundObjects) + static_cast<std::uint64_t>(state.range(0))) {
        state.SkipWithError("a resident block missed: the benchmark moved data");
    }
    state.SetLabel(std::to_string(state.range(0)) + " unit(s), read");
}
BENCHMARK(BM_AcquireReleaseResident)->Arg(1)->Arg(4);

// Write access also marks the device copy the only one (drops lower copies: none here
// after the first iteration).
void BM_AcquireReleaseResidentWrite(benchmark::State& state) {
    Resident r(state.range(0));
    for (auto _ : state) {
        swap::Pin pin = r.store.acquire(r.id, swap::Access::Write);
        benchmark::DoNotOptimize(pin.view().block.native);
    }
    state.SetLabel(std::to_string(state.range(0)) + " unit(s), write");
}
BENCHMARK(BM_AcquireReleaseResidentWrite)->Arg(1);

// The floor: what any acquire + release pair does at least (lock, look the id up, build
// the views, unlock; lock, unlock).
void BM_FloorTwoLocksLookupVector(benchmark::State& state) {
    std::mutex mutex;
    std::unordered_map<std::uint64_t, std::uint64_t> table;
    for (std::uint64_t i = 1; i <= kBackgroundObjects + 1; ++i) table.emplace(i, i);
    const std::uint64_t key = kBackgroundObjects + 1;
    for (auto _ : state) {
        std::vector<std::uint64_t> views;
        {
            std::lock_guard lock(mutex);
            views.push_back(table.find(key)->second);
        }
        benchmark::DoNotOptimize(views.data());
        {
            std::lock_guard lock(mutex);
            benchmark::ClobberMemory();
        }
    }
    state.SetLabel("baseline");
}
BENCHMARK(BM_FloorTwoLocksLookupVector);

}  // namespace

BENCHMARK_MAIN();
