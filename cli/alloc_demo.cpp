// cli/alloc_demo.cpp — `outcore alloc-demo`: the allocation layer at work on the
// default device, with every number it prints read back from the allocators.
//
// The stack, bottom to top (each an Allocator over the one below):
//   device -> Budget (budget in effect) -> Statistics ("native") -> Heap (TLSF)
//          -> Tracking (live blocks by tag) -> Statistics ("requests")
// then a BufferPool of pinned staging slots, an AliasPlanner over a small pipeline's
// lifetimes, and a request over the budget that ends in OutOfMemory, not an abort.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"
#include "outcore/alloc/alias_planner.hpp"
#include "outcore/alloc/budget.hpp"
#include "outcore/alloc/buffer_pool.hpp"
#include "outcore/alloc/heap.hpp"
#include "outcore/alloc/statistics.hpp"
#include "outcore/alloc/tracking.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/device.hpp"
#include "outcore/device/registry.hpp"

namespace outcore::cli {
namespace {

constexpr std::uint64_t kHeapBlockBytes = 32 * kMiB;
constexpr std::uint64_t kMinimumBudgetBytes = 128 * kMiB;

void print_heap(std::string_view when, const alloc::Heap& heap) {
    const alloc::HeapStatistics s = heap.statistics();
    fmt::print(
        "  {:<34} {:>3} live  used {:>10}  reserved {:>10} in {} block{}  largest free {:>10}  "
        "fragmentation {:.2f}\n",
        when, s.allocation_count, format_size(s.bytes_used), format_size(s.bytes_reserved), s.block_count,
        s.block_count == 1 ? "" : "s", format_size(s.largest_free_bytes), s.fragmentation);
}

void print_counters(std::string_view name, const alloc::AllocationCounters& c) {
    fmt::print("    {:<14} current {:>10}  peak {:>10}  allocations {:>4}  total {:>10}\n", name,
               format_size(c.current_bytes), format_size(c.peak_bytes), c.allocation_count,
               format_size(c.total_allocated_bytes));
}

/// Sub-allocates a deterministic mix of tiles, frees some to make holes, refills
/// them, and frees the rest: the heap's numbers after each step.
void heap_pattern(Allocator& requests, alloc::Heap& heap, alloc::Tracking& tracking) {
    struct Shape {
        std::uint64_t bytes;
        std::uint64_t alignment;
        std::string_view tag;
    };
    // Odd sizes and mixed alignments, as real tiles have; tags name what they hold.
    constexpr std::array<Shape, 6> kShapes{{
        {3 * kMiB, 256, "tile.in"},
        {kMiB + 300, 4096, "scratch"},
        {5 * kMiB / 2, 256, "tile.out"},
        {768 * kKiB, 64, "scratch"},
        {2 * kMiB, 4096, "tile.in"},
        {4 * kMiB + 17, 256, "tile.out"},
    }};
    fmt::print("\nheap: TLSF over {} native blocks, placements aligned to >= {} B\n",
               format_size(kHeapBlockBytes), heap.alignment_bytes());
    std::vector<Block> live;
    for (int round = 0; round < 4; ++round) {
        for (const Shape& s : kShapes) {
            live.push_back(requests.allocate(
                {.bytes = s.bytes, .kind = MemoryKind::Device, .alignment = s.alignment, .tag = s.tag}));
        }
    }
    heap.validate();
    print_heap(fmt::format("after {} allocations", live.size()), heap);

    // Free every scratch block and every other tile: holes all over the blocks.
    std::uint64_t freed = 0;
    for (std::size_t i = 0; i < live.size(); ++i) {
        if (kShapes[i % kShapes.size()].tag == "scratch" || i % 4 == 0) {
            live[i].reset();
            ++freed;
        }
    }
    heap.validate();
    print_heap(fmt::format("after freeing {} (holes)", freed), heap);
    fmt::print("  live blocks by tag (Tracking):\n");
    for (const alloc::LeakGroup& g : tracking.leak_report().groups) {
        fmt::print("    {:<14} {:>3} blocks  {:>10}\n", g.tag, g.count, format_size(g.bytes));
    }

    // Medium requests land in the holes the frees left (TLSF merged neighbours).
    for (int i = 0; i < 6; ++i) {
        live.push_back(
            requests.allocate({.bytes = 3 * kMiB / 2, .kind = MemoryKind::Device, .tag = "tile.in"}));
    }
    heap.validate();
    print_heap("after 6 more allocations", heap);

    live.clear();
    heap.validate();
    print_heap("after freeing everything", heap);
    const std::uint64_t trimmed = heap.trim();
    print_heap(fmt::format("after trim ({} given back)", format_size(trimmed)), heap);
}

void pool_pattern(Device& device) {
    alloc::BufferPool pool(device, {.slot_bytes = 4 * kMiB,
                                    .kind = MemoryKind::HostPinned,
                                    .slots_per_chunk = 3,
                                    .max_slots = 3,
                                    .tag = "staging"});
    // A ring of three staging buffers: tile i fills one while tiles i-1 and i-2 are
    // still in flight; the oldest is given back before the next is taken.
    std::deque<alloc::PooledBuffer> in_flight;
    std::vector<std::uint64_t> order;
    for (int tile = 0; tile < 12; ++tile) {
        if (in_flight.size() == 3) in_flight.pop_front();
        in_flight.push_back(pool.acquire());
        order.push_back(in_flight.back().slot_index());
    }
    const alloc::BufferPoolStatistics s = pool.statistics();
    fmt::print(
        "\nbuffer pool: {} slots of {} ({} pinned in {} chunk{}), 12 tiles used slots [{}], peak {} in use\n",
        s.slots_total, format_size(pool.slot_bytes()), format_size(s.bytes_reserved), s.chunk_count,
        s.chunk_count == 1 ? "" : "s", fmt::join(order, " "), s.slots_peak);
}

void alias_pattern(Allocator& requests, std::uint64_t alignment) {
    // The buffers of a small tiled pipeline, by the steps at which each is live.
    const std::vector<alloc::AliasResource> resources{
        {.bytes = 24 * kMiB, .alignment = alignment, .first_use = 0, .last_use = 1, .tag = "input.a"},
        {.bytes = 24 * kMiB, .alignment = alignment, .first_use = 0, .last_use = 2, .tag = "input.b"},
        {.bytes = 8 * kMiB, .alignment = alignment, .first_use = 1, .last_use = 1, .tag = "workspace"},
        {.bytes = 16 * kMiB, .alignment = alignment, .first_use = 1, .last_use = 3, .tag = "partial"},
        {.bytes = 8 * kMiB + 100, .alignment = alignment, .first_use = 2, .last_use = 2, .tag = "im2col"},
        {.bytes = 16 * kMiB, .alignment = alignment, .first_use = 3, .last_use = 4, .tag = "activation"},
        {.bytes = 4 * kMiB, .alignment = alignment, .first_use = 4, .last_use = 5, .tag = "norm"},
        {.bytes = 12 * kMiB, .alignment = alignment, .first_use = 5, .last_use = 6, .tag = "output"},
    };
    const alloc::AliasPlan plan = alloc::plan_aliasing(resources);
    plan.validate();
    fmt::print("\nalias planner: {} resources over 7 steps\n", resources.size());
    fmt::print("    {:<12} {:>10}  {:>5}  {:>10}\n", "resource", "bytes", "steps", "offset");
    for (std::size_t i = 0; i < resources.size(); ++i) {
        const alloc::AliasResource& r = resources[i];
        fmt::print("    {:<12} {:>10}  {:>2}-{:<2}  {:>10}\n", r.tag, format_size(r.bytes), r.first_use,
                   r.last_use, format_size(plan.offsets_bytes[i]));
    }
    fmt::print("  arena {} instead of {} back to back ({} saved); no plan can need less than {}\n",
               format_size(plan.peak_bytes), format_size(plan.sum_bytes), format_size(plan.saved_bytes()),
               format_size(plan.live_lower_bound_bytes));
    // One allocation holds every resource at its planned offset.
    Block arena =
        requests.allocate({.bytes = plan.peak_bytes, .kind = MemoryKind::Device, .tag = "alias.arena"});
    fmt::print("  arena allocated from the heap: {} at offset {} of its native block\n",
               format_size(arena.bytes()), format_size(arena.raw().offset));
}

void over_budget(Allocator& requests, std::uint64_t budget_bytes) {
    const std::uint64_t request_bytes =
        checked_add(budget_bytes, std::max<std::uint64_t>(budget_bytes / 2, 1), "alloc-demo");
    fmt::print("\nover the budget: asking for {} ...\n", format_size(request_bytes));
    try {
        Block too_big =
            requests.allocate({.bytes = request_bytes, .kind = MemoryKind::Device, .tag = "too.big"});
        fmt::print("  unexpectedly granted {}\n", format_size(too_big.bytes()));
        throw InternalError("alloc-demo", "a request over the budget was granted");
    } catch (const OutOfMemory& e) {
        fmt::print("  OutOfMemory: {}\n", e.what());
        fmt::print("  requested {}, tier {}, budget {}, in use {}, largest free {}\n",
                   format_size(e.requested_bytes()), to_string(e.tier()), format_size(e.budget_bytes()),
                   format_size(e.in_use_bytes()), format_size(e.largest_free_bytes()));
    }
}

int run_alloc_demo(const GlobalOptions& globals) {
    const Config config = make_config(globals);
    const std::unique_ptr<Device> device = open_device(device_selector(globals), config);
    const DeviceInfo& info = device->info();
    const std::uint64_t budget_bytes =
        config.device_budget.resolve(info.total_memory_bytes, info.recommended_working_set_bytes);
    // The pattern below peaks near 100 MiB of device memory; a smaller budget would
    // only show the first OutOfMemory, so say what is needed instead.
    if (budget_bytes < kMinimumBudgetBytes) {
        throw UsageError("alloc-demo",
                         fmt::format("needs a device budget of at least {} (budget in effect: {})",
                                     format_size(kMinimumBudgetBytes), format_size(budget_bytes)));
    }
    fmt::print("device {} ({}): budget {} of {} (recommended working set {})\n", info.id(), info.name,
               format_size(budget_bytes), format_size(info.total_memory_bytes),
               format_size(info.recommended_working_set_bytes));
    fmt::print("stack: device -> Budget -> Statistics(native) -> Heap -> Tracking -> Statistics(requests)\n");

    alloc::Budget budget(*device, {.limit_bytes = budget_bytes, .kind = MemoryKind::Device});
    alloc::Statistics native(budget);
    alloc::Heap heap(native, info.min_offset_alignment,
                     {.kind = MemoryKind::Device, .block_bytes = kHeapBlockBytes, .tag = "heap.block"});
    alloc::Tracking tracking(heap, {.capture_stack_traces = false});
    alloc::Statistics requests(tracking);

    heap_pattern(requests, heap, tracking);
    pool_pattern(*device);
    // The pool's pinned chunks are gone with it; the device counted them separately.
    alias_pattern(requests, info.min_offset_alignment);
    heap.trim();
    over_budget(requests, budget_bytes);
    heap.trim();

    const alloc::StatisticsSnapshot by_request = requests.snapshot();
    fmt::print("\nstatistics by tag (requests to the heap):\n");
    for (const auto& [tag, counters] : by_request.by_tag) print_counters(tag, counters);
    print_counters("all", by_request.total);
    fmt::print("statistics of native blocks (heap to device):\n");
    print_counters("all", native.total());
    fmt::print("device: {} allocated now, budget {} used\n", format_size(device->allocated_bytes()),
               format_size(budget.bytes_used()));
    if (by_request.total.current_bytes != 0 || native.total().current_bytes != 0 ||
        !tracking.leak_report().empty()) {
        throw InternalError("alloc-demo", "statistics do not balance after freeing everything");
    }
    fmt::print("balanced: every byte handed out was given back\n");
    return 0;
}

}  // namespace

void add_alloc_demo_command(CLI::App& app, const GlobalOptions& globals, CommandList& commands) {
    auto* sub = app.add_subcommand(
        "alloc-demo",
        "Show heaps, budgets, statistics, buffer pools and alias planning on the default device");
    commands.push_back({sub, [&globals] { return run_alloc_demo(globals); }});
}

}  // namespace outcore::cli
