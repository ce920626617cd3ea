#include "outcore/alloc/statistics.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>

#include "alloc/block_key.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"

namespace outcore::alloc {
namespace {

void count_allocation(AllocationCounters& c, std::uint64_t bytes) noexcept {
    c.current_bytes += bytes;
    c.peak_bytes = std::max(c.peak_bytes, c.current_bytes);
    c.current_count += 1;
    c.allocation_count += 1;
    c.total_allocated_bytes += bytes;
}

void count_deallocation(AllocationCounters& c, std::uint64_t bytes) noexcept {
    c.current_bytes -= bytes;
    c.current_count -= 1;
}

}  // namespace

struct Statistics::State {
    std::mutex mutex;
    AllocationCounters total;
    std::array<AllocationCounters, kMemoryKindCount> by_kind{};
    // Tags are string_views into literals (AllocationRequest::tag's contract), so
    // they key the map without copies.
    std::map<std::string_view, AllocationCounters> by_tag;
    // Tag of each live block: deallocate sees only the RawBlock.
    std::unordered_map<detail::BlockKey, std::string_view, detail::BlockKeyHash> live_tags;
};

Statistics::Statistics(Allocator& upstream) : upstream_(upstream), state_(std::make_unique<State>()) {}

Statistics::~Statistics() = default;

RawBlock Statistics::do_allocate(const AllocationRequest& request) {
    const RawBlock raw = upstream_.allocate_raw(request);
    try {
        std::lock_guard lock(state_->mutex);
        // Insert first: the only step that can throw (bad_alloc), before any counter moves.
        AllocationCounters& tag = state_->by_tag[request.tag];
        if (!state_->live_tags.emplace(detail::BlockKey::of(raw), request.tag).second) {
            throw InternalError("statistics", "upstream handed out a block that is already live");
        }
        count_allocation(tag, raw.bytes);
        count_allocation(state_->total, raw.bytes);
        count_allocation(state_->by_kind[static_cast<std::size_t>(raw.kind)], raw.bytes);
    } catch (...) {
        upstream_.deallocate_raw(raw);
        throw;
    }
    return raw;
}

void Statistics::do_deallocate(const RawBlock& block) noexcept {
    {
        // Forget the block before upstream frees it: once freed, another thread may be
        // handed the same address and record it under the same key.
        std::lock_guard lock(state_->mutex);
        auto it = state_->live_tags.find(detail::BlockKey::of(block));
        if (it == state_->live_tags.end()) {
            try {
                log::error("statistics", "deallocate of a block of {} bytes this allocator did not hand out",
                           block.bytes);
            } catch (...) {  // formatting can throw bad_alloc; this path must not
            }
        } else {
            // The tag's entry was made when the block was allocated and is never erased.
            count_deallocation(state_->by_tag.find(it->second)->second, block.bytes);
            count_deallocation(state_->total, block.bytes);
            count_deallocation(state_->by_kind[static_cast<std::size_t>(block.kind)], block.bytes);
            state_->live_tags.erase(it);
        }
    }
    upstream_.deallocate_raw(block);
}

StatisticsSnapshot Statistics::snapshot() const {
    StatisticsSnapshot s;
    std::lock_guard lock(state_->mutex);
    s.total = state_->total;
    s.by_kind = state_->by_kind;
    for (const auto& [tag, counters] : state_->by_tag) s.by_tag.emplace(std::string(tag), counters);
    return s;
}

AllocationCounters Statistics::total() const {
    std::lock_guard lock(state_->mutex);
    return state_->total;
}

void Statistics::reset_peak() {
    std::lock_guard lock(state_->mutex);
    auto reset = [](AllocationCounters& c) { c.peak_bytes = c.current_bytes; };
    reset(state_->total);
    for (auto& c : state_->by_kind) reset(c);
    for (auto& [tag, c] : state_->by_tag) reset(c);
}

}  // namespace outcore::alloc
